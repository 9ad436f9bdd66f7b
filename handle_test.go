//go:build linux

package ext4go_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

func statOf(t *testing.T, f *ext4go.File) *ext4go.Stat {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*ext4go.Stat)
}

// TestOpenInode: a file handle (inode and generation) opens the file it
// was made from while that file is linked, and ESTALE otherwise.
func TestOpenInode(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	fsys := openRW(t, image)
	if err := fsys.WriteFile("a", []byte("contents of a"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("a", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	st := statOf(t, f)
	f.Close()
	stale := func(what string, ino, gen uint32) {
		t.Helper()
		if g, err := fsys.OpenInode(ino, gen); !errors.Is(err, syscall.ESTALE) {
			if g != nil {
				g.Close()
			}
			t.Errorf("%s: OpenInode(%d, %d): %v, want ESTALE", what, ino, gen, err)
		}
	}
	for _, gen := range []uint32{st.Generation, 0} {
		h, err := fsys.OpenInode(st.Ino, gen)
		if err != nil {
			t.Fatalf("OpenInode(%d, %d): %v", st.Ino, gen, err)
		}
		if got := statOf(t, h); got.Ino != st.Ino || got.Generation != st.Generation {
			t.Errorf("OpenInode gave inode %d generation %d, want %d %d", got.Ino, got.Generation, st.Ino, st.Generation)
		}
		r, err := h.Reopen(os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		if n, _ := r.ReadAt(buf, 0); string(buf[:n]) != "contents of a" {
			t.Errorf("read through the handle: %q", buf[:n])
		}
		r.Close()
		h.Close()
	}
	root, err := fsys.OpenInode(2, 0)
	if err != nil {
		t.Fatalf("OpenInode(root): %v", err)
	}
	root.Close()
	stale("other generation", st.Ino, st.Generation+1)
	stale("reserved inode", 1, 0)
	stale("journal inode", 8, 0)
	stale("inode 0", 0, 0)
	stale("past the last inode", 1<<30, 0)
	stale("never used", st.Ino+100, 0)
	if err := fsys.Remove("a"); err != nil {
		t.Fatal(err)
	}
	stale("unlinked", st.Ino, st.Generation)
	closeChecked(t, fsys, image)
	if _, err := fsys.OpenInode(2, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("OpenInode after Close: %v", err)
	}
}

// TestOpenInodeRacingCreate: handles opened by number while files are
// created, renamed over, truncated and removed under the same numbers
// never yield a second node of
// a live inode: changes through them reach no other file (no stale write
// is refused, bystanders keep their contents, e2fsck finds nothing).
func TestOpenInodeRacingCreate(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	fsys := openRW(t, image)
	for i := range 20 {
		if err := fsys.WriteFile(fmt.Sprintf("bystander%d", i), []byte(fmt.Sprintf("bystander %d", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.OpenFile("bystander0", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := statOf(t, f).Ino
	f.Close()
	dur := time.Second
	if !testing.Short() {
		dur = 3 * time.Second
	}
	var stop atomic.Bool
	var opened, changed atomic.Int64
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				name := fmt.Sprintf("churn%d-%d", w, i%8)
				other := fmt.Sprintf("churn%d-%d", w, (i+3)%8)
				fsys.WriteFile(name, []byte(name), 0o644)
				switch i % 3 {
				case 0:
					fsys.Remove(name)
				case 1: // over another churn file, which is freed
					fsys.Rename(name, other)
				case 2:
					if f, err := fsys.OpenFile(name, os.O_RDWR, 0); err == nil {
						f.Truncate(0)
						f.Close()
					}
					fsys.Remove(name)
				}
			}
		}()
	}
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				ino := base + 20 + uint32(rng.IntN(24))
				h, err := fsys.OpenInode(ino, 0)
				if err != nil {
					if !errors.Is(err, syscall.ESTALE) {
						t.Errorf("OpenInode(%d): %v", ino, err)
						return
					}
					continue
				}
				opened.Add(1)
				if err := h.Chmod(0o600); err == nil {
					changed.Add(1)
				}
				if wf, err := h.Reopen(os.O_WRONLY); err == nil { // data too
					wf.WriteAt([]byte("through a handle"), 4096)
					wf.Close()
				}
				h.Close()
			}
		}()
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	t.Logf("%d handles opened, %d changed through", opened.Load(), changed.Load())
	if opened.Load() == 0 {
		t.Error("no handle was ever opened: the race was not tried")
	}
	for i := range 20 {
		name := fmt.Sprintf("bystander%d", i)
		if got, err := fsys.ReadFile(name); err != nil || string(got) != fmt.Sprintf("bystander %d", i) {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	closeChecked(t, fsys, image)
}

// TestUsageWhileWriting: statfs (Usage) and Info read the counts writers
// change while files come and go (go test -race judges), and Usage's free
// counts stay within the filesystem.
func TestUsageWhileWriting(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	fsys := openRW(t, image)
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			name := fmt.Sprintf("f%d", i%16)
			fsys.WriteFile(name, make([]byte, 64<<10), 0o644)
			fsys.Remove(name)
			if i%50 == 0 {
				fsys.Sync()
			}
		}
	}()
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		u := fsys.Usage()
		if u.FreeBlocks > u.Blocks || u.FreeInodes > u.Inodes {
			t.Fatalf("Usage %+v: more free than there is", u)
		}
		if in := fsys.Info(); in.FreeBlocks > in.BlocksCount {
			t.Fatalf("Info: %d free of %d blocks", in.FreeBlocks, in.BlocksCount)
		}
	}
	stop.Store(true)
	wg.Wait()
	closeChecked(t, fsys, image)
}
