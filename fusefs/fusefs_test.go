//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// requireFUSE skips (saying why) where no FUSE mount can be made.
func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		if _, err := exec.LookPath("fusermount"); err != nil {
			t.Skip("no fusermount3 (package fuse3)")
		}
	}
}

// writeback runs the mount tests with the kernel's writeback cache
// (EXT4GO_TEST_WRITEBACK=1).
var writeback = os.Getenv("EXT4GO_TEST_WRITEBACK") == "1"

// uring runs the mount tests over FUSE-over-io_uring
// (EXT4GO_TEST_URING=1; the fuse module's enable_uring must be Y).
var uring = os.Getenv("EXT4GO_TEST_URING") == "1"

// mount mounts image through fusefs on a fresh directory; the cleanup
// unmounts and closes the FS if the test has not.
func mount(t *testing.T, image string) (dir string, fsys *ext4go.FS, srv *fusefs.Server) {
	t.Helper()
	return mountWith(t, image, nil)
}

// mountWith is mount with the Options changed by opt first.
func mountWith(t *testing.T, image string, opt func(*fusefs.Options)) (dir string, fsys *ext4go.FS, srv *fusefs.Server) {
	t.Helper()
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o := &fusefs.Options{FsName: image, DefaultPermissions: true, AllowOther: true, UID: -1, GID: -1,
		WritebackCache: writeback, Uring: uring}
	if opt != nil {
		opt(o)
	}
	srv, err = fusefs.Mount(fsys, dir, o)
	if err != nil {
		fsys.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if srv.Unmount() == nil {
			srv.Wait()
		}
		fsys.Close()
	})
	return dir, fsys, srv
}

// unmount ends the serving and closes the FS.
func unmount(t *testing.T, srv *fusefs.Server, fsys *ext4go.FS) {
	t.Helper()
	if err := srv.Unmount(); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	srv.Wait()
	if err := fsys.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

// hostOp is one system call of the scripted workload.
type hostOp func(root string) error

// script is a fixed workload of every kind of call, with errors on the
// way (EEXIST, ENOTEMPTY, EISDIR, ENOTDIR, ENOENT, EXDEV-free renames).
func script(seed uint64) []struct {
	desc string
	op   hostOp
} {
	rng := rand.New(rand.NewPCG(seed, 3))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return b
	}
	type op = struct {
		desc string
		op   hostOp
	}
	p := filepath.Join
	ops := []op{
		{"mkdir d", func(r string) error { return os.Mkdir(p(r, "d"), 0o755) }},
		{"mkdir d again", func(r string) error { return os.Mkdir(p(r, "d"), 0o755) }},
		{"mkdir d/e", func(r string) error { return os.Mkdir(p(r, "d/e"), 0o700) }},
	}
	for i := range 20 {
		name := fmt.Sprintf("d/f%d", i)
		b := data(rng.IntN(300000))
		ops = append(ops, op{"write " + name, func(r string) error { return os.WriteFile(p(r, name), b, 0o644) }})
	}
	more := []op{
		{"append d/f1", func(r string) error {
			f, err := os.OpenFile(p(r, "d/f1"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("appended"))
			return errors.Join(err, f.Close())
		}},
		{"truncate d/f2", func(r string) error { return os.Truncate(p(r, "d/f2"), 1000) }},
		{"truncate d/f3 up", func(r string) error { return os.Truncate(p(r, "d/f3"), 5<<20) }},
		{"rename d/f4 to top", func(r string) error { return os.Rename(p(r, "d/f4"), p(r, "f4")) }},
		{"rename over d/f5", func(r string) error { return os.Rename(p(r, "d/f6"), p(r, "d/f5")) }},
		{"link d/f7", func(r string) error { return os.Link(p(r, "d/f7"), p(r, "d/e/l7")) }},
		{"symlink", func(r string) error { return os.Symlink("../f4", p(r, "d/s")) }},
		{"long symlink", func(r string) error { return os.Symlink(string(bytes.Repeat([]byte("x"), 300)), p(r, "d/ls")) }},
		{"mkfifo", func(r string) error { return unix.Mkfifo(p(r, "d/fifo"), 0o600) }},
		{"mknod", func(r string) error { return unix.Mknod(p(r, "d/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))) }},
		{"xattr", func(r string) error { return unix.Setxattr(p(r, "d/f8"), "user.k", []byte("value"), 0) }},
		{"xattr create again", func(r string) error { return unix.Setxattr(p(r, "d/f8"), "user.k", []byte("v"), unix.XATTR_CREATE) }},
		{"chmod", func(r string) error { return os.Chmod(p(r, "d/f9"), 0o4751) }},
		{"chown", func(r string) error { return os.Lchown(p(r, "d/f10"), 1234, 5678) }},
		{"rmdir d (not empty)", func(r string) error { return unix.Rmdir(p(r, "d")) }},
		{"unlink d/e (a directory)", func(r string) error { return unix.Unlink(p(r, "d/e")) }},
		{"rmdir d/f11 (a file)", func(r string) error { return unix.Rmdir(p(r, "d/f11")) }},
		{"remove missing", func(r string) error { return os.Remove(p(r, "d/none")) }},
		{"exchange", func(r string) error {
			return unix.Renameat2(unix.AT_FDCWD, p(r, "d/f12"), unix.AT_FDCWD, p(r, "d/f13"), unix.RENAME_EXCHANGE)
		}},
		{"noreplace", func(r string) error {
			return unix.Renameat2(unix.AT_FDCWD, p(r, "d/f14"), unix.AT_FDCWD, p(r, "d/f15"), unix.RENAME_NOREPLACE)
		}},
		{"unlink while open, then write and read", func(r string) error {
			f, err := os.OpenFile(p(r, "d/f16"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := os.Remove(p(r, "d/f16")); err != nil {
				return err
			}
			if _, err := f.WriteAt([]byte("still here"), 10); err != nil {
				return err
			}
			b := make([]byte, 10)
			if _, err := f.ReadAt(b, 10); err != nil || string(b) != "still here" {
				return fmt.Errorf("read back %q, %v", b, err)
			}
			return nil
		}},
		{"fallocate", func(r string) error {
			f, err := os.OpenFile(p(r, "d/f17"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return unix.Fallocate(int(f.Fd()), 0, 0, 1<<20)
		}},
		{"punch", func(r string) error {
			f, err := os.OpenFile(p(r, "d/f18"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 4096, 8192)
		}},
		{"fsync", func(r string) error {
			f, err := os.OpenFile(p(r, "d/f19"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			_, err = f.Write([]byte("synced"))
			return errors.Join(err, f.Sync(), f.Close())
		}},
		{"copy_file_range", func(r string) error {
			in, err := os.Open(p(r, "d/f1"))
			if err != nil {
				return err
			}
			defer in.Close()
			out, err := os.OpenFile(p(r, "d/copy"), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return err
			}
			defer out.Close()
			offIn, offOut := int64(100), int64(5000)
			for {
				n, err := unix.CopyFileRange(int(in.Fd()), &offIn, int(out.Fd()), &offOut, 1<<30, 0)
				if err != nil {
					return err
				}
				if n == 0 {
					return nil
				}
			}
		}},
		{"copy_file_range overlapping", func(r string) error {
			f, err := os.OpenFile(p(r, "d/copy"), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			a, b := int64(0), int64(10)
			_, err = unix.CopyFileRange(int(f.Fd()), &a, int(f.Fd()), &b, 100, 0)
			return err
		}},
		{"many entries", func(r string) error {
			if err := os.Mkdir(p(r, "big"), 0o755); err != nil {
				return err
			}
			for i := range 500 {
				if err := os.WriteFile(p(r, fmt.Sprintf("big/entry-%03d", i)), nil, 0o644); err != nil {
					return err
				}
			}
			for i := 0; i < 500; i += 3 {
				if err := os.Remove(p(r, fmt.Sprintf("big/entry-%03d", i))); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	return append(ops, more...)
}

// TestMountMatchesKernel: a scripted workload of every call gives, on an
// ext4go FUSE mount, the errno of each step and the tree it gives on the
// kernel's own loop mount of the same image; after the unmount e2fsck is
// clean and the kernel reads the image as it shows its own.
func TestMountMatchesKernel(t *testing.T) {
	tw := newTwin(t, 64<<20, 0)
	tw.sameScript(t, 1)
	tw.finishScript(t)
}

// sameScript runs script(seed) on both mounts and reports every step whose
// errno differs; it returns the number of steps.
func (tw *twin) sameScript(t *testing.T, seed uint64) int {
	t.Helper()
	ops := script(seed)
	var ours []error
	for _, op := range ops {
		ours = append(ours, op.op(tw.dir))
	}
	for i, op := range ops {
		kerr := op.op(tw.kmp)
		if errno(ours[i]) != errno(kerr) {
			t.Errorf("%s: ext4go mount: %v; kernel: %v", op.desc, ours[i], kerr)
		}
	}
	return len(ops)
}

// finishScript is finish with what a script's trees are compared on
// (everything but mtimes, which the two mounts set at other moments).
func (tw *twin) finishScript(t *testing.T) {
	t.Helper()
	opts := testutil.MountCompareOptions()
	opts.Checks &^= testutil.CheckMtime
	opts.Checks |= testutil.CheckNlink | testutil.CheckRdev | testutil.CheckXattrs | testutil.CheckOwner | testutil.CheckSpecialBits
	tw.finish(t, opts)
}

// twin is an ext4go mount of a fresh image beside the kernel's loop mount
// of a copy of it: a workload run on both must give the same results.
type twin struct {
	image, dir, kmp string
	fsys            *ext4go.FS
	srv             *fusefs.Server
}

// newTwin makes the image (size bytes, mke2fs -t ext4), its copy and both
// mounts; rootMode, if not 0, is given to both roots (so that strangers
// get in).
func newTwin(t *testing.T, size int64, rootMode os.FileMode) *twin {
	t.Helper()
	requireFUSE(t)
	testutil.RequireMount(t)
	tw := &twin{image: filepath.Join(t.TempDir(), "img")}
	testutil.Mke2fs(t, tw.image, size, "-t", "ext4")
	kimage := filepath.Join(t.TempDir(), "kimg")
	b, err := os.ReadFile(tw.image)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kimage, b, 0o644); err != nil {
		t.Fatal(err)
	}
	tw.dir, tw.fsys, tw.srv = mount(t, tw.image)
	tw.kmp = testutil.Mount(t, kimage, false)
	if rootMode != 0 {
		for _, root := range []string{tw.dir, tw.kmp} {
			if err := os.Chmod(root, rootMode); err != nil {
				t.Fatal(err)
			}
		}
	}
	return tw
}

// sameSteps runs the shell steps on both mounts and reports every one
// whose output or exit status differs.
func (tw *twin) sameSteps(t *testing.T, steps []string) {
	t.Helper()
	ours, theirs := runSteps(t, tw.dir, steps), runSteps(t, tw.kmp, steps)
	for i, s := range steps {
		if ours[i] != theirs[i] {
			t.Errorf("%s:\next4go mount:\n%s\nkernel:\n%s", s, ours[i], theirs[i])
		}
	}
}

// finish compares both trees with opts, unmounts ext4go's, requires
// e2fsck to be clean, and compares the kernel's read of the image with
// its own tree. It returns the kernel's (read-only) mount of the image.
func (tw *twin) finish(t *testing.T, opts testutil.CompareOptions) string {
	t.Helper()
	testutil.CompareDirs(t, tw.dir, tw.kmp, opts)
	unmount(t, tw.srv, tw.fsys)
	testutil.RequireFsckClean(t, tw.image)
	mp := testutil.Mount(t, tw.image, true)
	testutil.CompareDirs(t, mp, tw.kmp, opts)
	return mp
}

// errno is the errno inside err (0 for nil).
func errno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.Errno(^uintptr(0))
}

// TestMountParallel: goroutines creating, writing, renaming and removing
// files of their own in one directory and in directories of their own,
// at once, through the mount: every file has its content at the end,
// e2fsck is clean.
func TestMountParallel(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 128<<20, "-t", "ext4")
	dir, fsys, srv := mount(t, image)
	const workers, files = 8, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := filepath.Join(dir, fmt.Sprintf("w%d", w))
			if err := os.Mkdir(own, 0o755); err != nil {
				errs <- err
				return
			}
			for i := range files {
				shared := filepath.Join(dir, fmt.Sprintf("s-%d-%d", w, i))
				data := bytes.Repeat([]byte{byte(w), byte(i)}, 1000*(i%7+1))
				if err := os.WriteFile(shared, data, 0o644); err != nil {
					errs <- err
					return
				}
				to := filepath.Join(own, fmt.Sprintf("f%d", i))
				if err := os.Rename(shared, to); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if err := os.Remove(to); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range workers {
		for i := range files {
			got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("w%d/f%d", w, i)))
			want := bytes.Repeat([]byte{byte(w), byte(i)}, 1000*(i%7+1))
			if i%3 == 0 {
				if !errors.Is(err, os.ErrNotExist) {
					t.Errorf("w%d/f%d: removed, but %v", w, i, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("w%d/f%d: %d bytes, %v", w, i, len(got), err)
			}
		}
	}
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
}
