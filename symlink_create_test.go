//go:build linux

package ext4go_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestCreateThroughDanglingSymlink: OpenFile with O_CREATE through a
// symlink whose target does not exist creates the target, as open(2) does;
// O_EXCL refuses, loops give ELOOP, a missing directory ENOENT. The kernel
// answers the same on a mount of the same image.
func TestCreateThroughDanglingSymlink(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	links := [][2]string{
		{"t1", "l1"}, {"../t2", "d/l2"}, {"/d/t3", "l3"}, {"l5", "l4"}, {"t4", "l5"},
		{"lb", "la"}, {"la", "lb"}, {"nodir/x", "l6"}, {"../../../t7", "d/l7"},
	}
	cases := []struct {
		name string
		excl bool
	}{
		{"l1", false}, {"d/l2", false}, {"l3", false}, {"l4", false}, {"la", false},
		{"l6", false}, {"d/l7", false}, {"l1", true},
	}
	setup := func(mkdir func(string) error, symlink func(string, string) error) {
		if err := mkdir("d"); err != nil {
			t.Fatal(err)
		}
		for _, l := range links {
			if err := symlink(l[0], l[1]); err != nil {
				t.Fatal(err)
			}
		}
	}

	var kernelErrs []syscall.Errno
	if ok, reason := testutil.CanMount(); ok {
		kimage := filepath.Join(t.TempDir(), "kimg")
		testutil.Mke2fs(t, kimage, 32<<20, "-t", "ext4")
		t.Run("kernel", func(t *testing.T) {
			mnt := testutil.Mount(t, kimage, false)
			p := func(s string) string { return filepath.Join(mnt, s) }
			setup(func(s string) error { return os.Mkdir(p(s), 0o755) },
				func(o, n string) error {
					if filepath.IsAbs(o) {
						o = mnt + o // the image's root is the mount point there
					}
					return os.Symlink(o, p(n))
				})
			for _, c := range cases {
				flag := os.O_RDWR | os.O_CREATE
				if c.excl {
					flag |= os.O_EXCL
				}
				f, err := os.OpenFile(p(c.name), flag, 0o644)
				if err == nil {
					f.Close()
				}
				kernelErrs = append(kernelErrs, errnoOf(err))
			}
		})
	} else {
		t.Logf("no kernel comparison: %s", reason)
	}

	fsys := openRW(t, image)
	setup(func(s string) error { return fsys.Mkdir(s, 0o755) }, fsys.Symlink)
	for i, c := range cases {
		flag := os.O_RDWR | os.O_CREATE
		if c.excl {
			flag |= os.O_EXCL
		}
		f, err := fsys.OpenFile(c.name, flag, 0o644)
		if err == nil {
			f.Close()
		}
		got := errnoOf(err)
		if kernelErrs != nil && got != kernelErrs[i] {
			t.Errorf("open %s (excl %v): %v, the kernel: %v", c.name, c.excl, err, kernelErrs[i])
		}
	}
	for _, made := range []string{"t1", "t2", "d/t3", "t4", "t7"} {
		if fi, err := fsys.Stat(made); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s not created: %v", made, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}
