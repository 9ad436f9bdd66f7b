//go:build linux

package ext4go_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestFallocateTimesMatchKernel: every fallocate mode (allocating past
// the end, with KEEP_SIZE, inside data, punching, zeroing) moves mtime and
// ctime, or not, as the kernel's ext4 does on a loop mount (a growing
// fallocate left both as they were).
func TestFallocateTimesMatchKernel(t *testing.T) {
	type step struct {
		name      string
		mode      int
		off, size int64
	}
	steps := []step{
		{"grow", 0, 0, 1 << 20},
		{"keep-size past the end", ext4go.FallocKeepSize, 1 << 20, 64 << 10},
		{"inside data", 0, 0, 4096},
		{"punch", ext4go.FallocPunchHole | ext4go.FallocKeepSize, 0, 4096},
		{"zero range", ext4go.FallocZeroRange, 8192, 4096},
		{"zero range keep-size", ext4go.FallocZeroRange | ext4go.FallocKeepSize, 2 << 20, 4096},
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	type moved struct{ mtime, ctime bool }
	ours := map[string]moved{}
	img := filepath.Join(t.TempDir(), "f.img")
	testutil.Mke2fs(t, img, 32<<20, "-t", "ext4")
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.OpenFile("f", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	for _, s := range steps {
		if err := fsys.Chtimes("f", old, old); err != nil {
			t.Fatal(err)
		}
		st, _ := fsys.Stat("f")
		before := st.Sys().(*ext4go.Stat)
		bc := before.Ctime
		time.Sleep(10 * time.Millisecond)
		if err := f.Fallocate(s.mode, s.off, s.size); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		st, _ = fsys.Stat("f")
		after := st.Sys().(*ext4go.Stat)
		ours[s.name] = moved{!after.Mtime.Equal(old), !after.Ctime.Equal(bc)}
	}
	f.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)

	if ok, why := testutil.CanMount(); !ok {
		t.Skipf("no kernel to compare with: %s (ours: %v)", why, ours)
	}
	kimg := filepath.Join(t.TempDir(), "k.img")
	testutil.Mke2fs(t, kimg, 32<<20, "-t", "ext4")
	mp := testutil.Mount(t, kimg, false)
	defer testutil.Unmount(t, mp)
	p := filepath.Join(mp, "f")
	kf, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	kf.Write([]byte("x"))
	for _, s := range steps {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		var b unix.Stat_t
		unix.Stat(p, &b)
		time.Sleep(10 * time.Millisecond)
		if err := unix.Fallocate(int(kf.Fd()), uint32(s.mode), s.off, s.size); err != nil {
			t.Fatalf("kernel %s: %v", s.name, err)
		}
		var a unix.Stat_t
		unix.Stat(p, &a)
		kernel := moved{a.Mtim != b.Mtim, a.Ctim != b.Ctim}
		if ours[s.name] != kernel {
			t.Errorf("fallocate %s: mtime, ctime moved %v; the kernel's %v", s.name, ours[s.name], kernel)
		}
	}
}
