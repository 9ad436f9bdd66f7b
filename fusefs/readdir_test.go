//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// direntInos reads dir with getdents64 and returns each name's d_ino.
func direntInos(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]uint64{}
	buf := make([]byte, 8192)
	for {
		n, err := syscall.ReadDirent(int(f.Fd()), buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 19; {
			reclen := int(binary.LittleEndian.Uint16(b[16:]))
			name := b[19:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			out[string(name)] = binary.LittleEndian.Uint64(b)
			b = b[reclen:]
		}
	}
}

// TestMountReaddirInodes: readdir gives every entry, "." and ".."
// included, the inode number stat gives it.
func TestMountReaddirInodes(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	dir, _, _ := mount(t, image)
	if err := os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a/b/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".", "a", "a/b", "a/b/c"} {
		for name, ino := range direntInos(t, filepath.Join(dir, d)) {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(dir, d, name), &st); err != nil {
				t.Fatal(err)
			}
			if d == "." && name == ".." {
				continue // the mount's parent is not ours
			}
			if st.Ino != ino {
				t.Errorf("%s/%s: d_ino %d, stat %d", d, name, ino, st.Ino)
			}
		}
	}
}

// TestMountSeekDataFresh: SEEK_DATA right after a write past a hole finds
// the written data, whether the kernel keeps the pages (writeback cache)
// or not.
func TestMountSeekDataFresh(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	dir, _, _ := mount(t, image)
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("data"), 1<<20); err != nil {
		t.Fatal(err)
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if err != nil || off > 1<<20 {
		t.Errorf("SEEK_DATA from 0: %d, %v; want at most %d", off, err, 1<<20)
	}
}

// TestMountSeekDataWalk: a SEEK_DATA/SEEK_HOLE walk through the mount of
// a file of many extents (every other block written) finds each of them,
// and leaves the descriptor's offset where the walk put it.
func TestMountSeekDataWalk(t *testing.T) {
	requireFUSE(t)
	if writeback {
		t.Skip("with the writeback cache the kernel answers lseek itself")
	}
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096")
	dir, fsys, srv := mount(t, image)
	const extents = 300
	blk := bytes.Repeat([]byte{'x'}, 4096)
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range extents {
		if _, err := f.WriteAt(blk, int64(2*i)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	fd := int(f.Fd())
	n := 0
	for off := int64(0); ; n++ {
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			t.Fatal(err)
		}
		if d != int64(2*n)*4096 || h != d+4096 {
			t.Fatalf("range %d: [%d, %d), want [%d, %d)", n, d, h, int64(2*n)*4096, int64(2*n+1)*4096)
		}
		off = h
	}
	if n != extents {
		t.Fatalf("walk found %d data ranges, want %d", n, extents)
	}
	if cur, err := unix.Seek(fd, 0, io.SeekCurrent); err != nil || cur != int64(2*extents-1)*4096 {
		t.Errorf("offset after the walk: %d, %v; want %d", cur, err, int64(2*extents-1)*4096)
	}
	f.Close()
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
}

// TestMountReaddirBadEntries: a directory holding entries whose inodes
// cannot be read lists all its entries through the mount, with READDIR
// and READDIRPLUS, as the kernel's ext4 lists them: a stat of a bad one
// fails with EUCLEAN, the others work (one bad entry does not fail the
// whole batch of a READDIRPLUS).
func TestMountReaddirBadEntries(t *testing.T) {
	requireFUSE(t)
	fx := testutil.BadEntriesImage(t)
	for _, plus := range []bool{true, false} {
		fsys, err := ext4go.Open(fx.Image, nil)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		srv, err := fusefs.Mount(fsys, dir, &fusefs.Options{FsName: fx.Image, ReadOnly: true, UID: -1, GID: -1,
			NoReaddirPlus: !plus, Logger: log.New(&logs, "", 0)})
		if err != nil {
			fsys.Close()
			t.Fatal(err)
		}
		unmounted := false
		t.Cleanup(func() { // after a failure half way
			if !unmounted && srv.Unmount() == nil {
				srv.Wait()
				fsys.Close()
			}
		})
		for _, d := range []string{"d", "h"} {
			listed := direntInos(t, filepath.Join(dir, d))
			want := map[string]bool{".": true, "..": true}
			for _, n := range fx.Good[d] {
				want[n] = true
			}
			for _, b := range fx.Bad {
				if b.Dir == d {
					want[b.Name] = true
				}
			}
			if len(listed) != len(want) {
				t.Errorf("plus=%v: %s lists %d entries, want %d", plus, d, len(listed), len(want))
			}
			for n := range want {
				if _, ok := listed[n]; !ok {
					t.Errorf("plus=%v: %s does not list %s", plus, d, n)
				}
			}
			for _, n := range fx.Good[d] {
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dir, d, n), &st); err != nil {
					t.Errorf("plus=%v: lstat %s/%s: %v", plus, d, n, err)
				}
			}
			for _, b := range fx.Bad {
				if b.Dir != d {
					continue
				}
				var st syscall.Stat_t
				if err := syscall.Lstat(filepath.Join(dir, d, b.Name), &st); err != syscall.EUCLEAN {
					t.Errorf("plus=%v: lstat %s/%s: %v, want EUCLEAN", plus, d, b.Name, err)
				}
			}
		}
		if err := srv.Unmount(); err != nil {
			t.Fatal(err)
		}
		unmounted = true
		srv.Wait()
		fsys.Close()
		for _, b := range fx.Bad {
			if !b.Listed && !strings.Contains(logs.String(), `"`+b.Name+`"`) {
				t.Errorf("plus=%v: %s/%s left out without a log line:\n%s", plus, b.Dir, b.Name, logs.String())
			}
		}
	}
}

// TestMountForgetReleasesNodes: the nodes a listing with attributes made
// the kernel look up are released when the kernel forgets them
// (drop_caches), and a listing without attributes (READDIRPLUS only for
// its first batch, as the kernel asks) holds few.
func TestMountForgetReleasesNodes(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("drop_caches needs root")
	}
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-N", "8192")
	const files = 3000
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Mkdir("big", 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range files {
		f, err := fsys.Create(fmt.Sprintf("big/file-%05d", i))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	dir, fsys, srv := mountWith(t, image, func(o *fusefs.Options) { o.ReleaseMemory = true })
	dropCaches := func() {
		t.Helper()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Fatal(err)
		}
	}
	waitHeld := func(what string, most int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for fusefs.HeldNodes(srv) > most && time.Now().Before(deadline) {
			dropCaches()
			time.Sleep(50 * time.Millisecond)
		}
		if n := fusefs.HeldNodes(srv); n > most {
			t.Fatalf("%s: %d nodes held, want at most %d", what, n, most)
		}
	}
	waitHeld("at the start", 10)
	names, err := os.ReadDir(filepath.Join(dir, "big"))
	if err != nil || len(names) != files {
		t.Fatalf("listing: %d entries, %v", len(names), err)
	}
	if n := fusefs.HeldNodes(srv); n > files/2 {
		t.Errorf("a listing without stats holds %d nodes", n)
	}
	for _, e := range names {
		if _, err := e.Info(); err != nil {
			t.Fatal(err)
		}
	}
	if n := fusefs.HeldNodes(srv); n < files {
		t.Fatalf("after stat of every entry %d nodes held, want %d", n, files)
	}
	waitHeld("after drop_caches", 10)
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
}
