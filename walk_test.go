//go:build linux

package ext4go_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// deepChain makes an image holding a chain of depth directories, built
// from the top (each step moves the chain into a new directory, so no
// path is ever longer than two elements).
func deepChain(t *testing.T, depth int) string {
	t.Helper()
	image := filepath.Join(t.TempDir(), "deep")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-N", fmt.Sprint(depth+64))
	fsys := openRW(t, image)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("chain", 0o755))
	must(fsys.WriteFile("chain/leaf", []byte("bottom"), 0o644))
	for i := 1; i < depth; i++ {
		must(fsys.Mkdir("next", 0o755))
		must(fsys.Rename("chain", "next/d"))
		must(fsys.Rename("next", "chain"))
	}
	closeChecked(t, fsys, image)
	return image
}

// liveHeapAtBottom walks image and returns the live heap at the deepest
// entry, and the depth seen there.
func liveHeapAtBottom(t *testing.T, image string) (uint64, int) {
	fsys := openImage(t, image)
	defer fsys.Close()
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var live uint64
	depth := 0
	err := fsys.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == "leaf" {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			live = ms.HeapAlloc - min(ms.HeapAlloc, base.HeapAlloc)
			depth = strings.Count(p, "/")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return live, depth
}

// TestWalkMemoryLinear: the memory a walk holds grows with its depth, not
// with its square (paths rebuilt per level, or a walk from the root per
// directory, made it quadratic).
func TestWalkMemoryLinear(t *testing.T) {
	small, big := 600, 2400
	a, da := liveHeapAtBottom(t, deepChain(t, small))
	b, db := liveHeapAtBottom(t, deepChain(t, big))
	if da != small || db != big {
		t.Fatalf("walks reached depths %d and %d, want %d and %d", da, db, small, big)
	}
	t.Logf("live heap at depth %d: %d KiB; at depth %d: %d KiB", small, a>>10, big, b>>10)
	// Four times as deep: linear holds about 4x, quadratic 16x.
	if b > 6*max(a, 64<<10) {
		t.Errorf("live heap grew %.1fx for a 4x deeper walk", float64(b)/float64(max(a, 1)))
	}
}

// TestWalkDirLoop: WalkDir reports a directory loop as corruption and
// does not enter it.
func TestWalkDirLoop(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 8<<20, "-t", "ext4")
	testutil.DebugfsWrite(t, image, "mkdir a", "mkdir a/b", "ln <2> /a/b/up")
	fsys := openImage(t, image)
	var loops, visits int
	err := fsys.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		visits++
		if err != nil {
			if !errors.Is(err, ext4go.ErrCorrupt) {
				t.Errorf("%s: %v, want a corruption", p, err)
			}
			loops++
		}
		return nil
	})
	if err != nil || loops != 1 || visits > 10 {
		t.Errorf("walk: %v, %d loops reported, %d visits", err, loops, visits)
	}
}

// TestOpenEntry opens every entry of a directory from its ReadDir by the
// inode number the entry holds: each File is the entry's inode, of any
// type, readable where reading makes sense; on a writable filesystem an
// entry removed since ReadDir is gone, and so is one whose name now holds
// another inode.
func TestOpenEntry(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
	fsys := openRW(t, image)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("d", 0o755))
	must(fsys.Mkdir("d/sub", 0o755))
	must(fsys.WriteFile("d/file", []byte("data"), 0o644))
	must(fsys.Symlink("file", "d/link"))
	must(fsys.WriteFile("d/gone", nil, 0o644))
	must(fsys.WriteFile("d/swapped", nil, 0o644))
	df, err := fsys.Open("d")
	must(err)
	d := df.(*ext4go.File)
	ents, err := d.ReadDir(-1)
	must(err)
	must(fsys.Remove("d/gone"))
	must(fsys.Remove("d/swapped"))
	must(fsys.WriteFile("d/swapped", nil, 0o644)) // the same name, a new inode
	for _, e := range ents {
		f, err := d.OpenEntry(e)
		switch e.Name() {
		case "gone", "swapped":
			if !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: OpenEntry after the name changed: %v, want fs.ErrNotExist", e.Name(), err)
			}
			if err == nil {
				f.Close()
			}
			continue
		}
		must(err)
		want, err := fsys.Lstat("d/" + e.Name())
		must(err)
		got, err := f.Stat()
		must(err)
		if g, w := got.Sys().(*ext4go.Stat).Ino, want.Sys().(*ext4go.Stat).Ino; g != w || got.Mode() != want.Mode() {
			t.Errorf("%s: OpenEntry gives inode %d (%v), want %d (%v)", e.Name(), g, got.Mode(), w, want.Mode())
		}
		switch e.Name() {
		case "file":
			buf := make([]byte, 4)
			if n, err := f.ReadAt(buf, 0); n != 4 || string(buf) != "data" {
				t.Errorf("file: read %q, %v", buf[:n], err)
			}
		case "link":
			if target, err := f.ReadLink(); err != nil || target != "file" {
				t.Errorf("link: ReadLink = %q, %v", target, err)
			}
		case "sub":
			if _, err := f.ReadDir(-1); err != nil {
				t.Errorf("sub: ReadDir: %v", err)
			}
		}
		f.Close()
	}
	d.Close()
	closeChecked(t, fsys, image)
}
