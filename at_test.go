//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// atOp is one step of the *At test, made with ext4go's File calls and,
// on the kernel's mount, with the *at system calls.
type atOp struct {
	desc   string
	ours   func(root, d *ext4go.File) error
	kernel func(root, d int) error
}

// TestAtCalls: the directory-relative calls give the kernel's errno for
// each step of a script (creates of every type, EEXIST, unlink of a
// directory, rmdir of a file and of a non-empty directory, links,
// renames with both flags, xattrs, attribute changes) made on an image
// by ext4go and on a copy by the kernel's ext4 with the *at system calls;
// the trees are the same after, e2fsck is clean and the kernel reads
// ext4go's image as it shows its own.
func TestAtCalls(t *testing.T) {
	testutil.RequireMount(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	kimage := filepath.Join(t.TempDir(), "kimg")
	copyFile(t, image, kimage)

	mtime := time.Unix(1700000000, 123456789)
	ops := []atOp{
		{"mkdir d", func(r, d *ext4go.File) error {
			return closeMade(r.MakeAt("d", ext4go.NewInode{Mode: unix.S_IFDIR | 0o755}, 0))
		},
			func(r, d int) error { return unix.Mkdirat(r, "d", 0o755) }},
		{"mkdir d again", func(r, d *ext4go.File) error {
			return closeMade(r.MakeAt("d", ext4go.NewInode{Mode: unix.S_IFDIR | 0o755}, 0))
		},
			func(r, d int) error { return unix.Mkdirat(r, "d", 0o755) }},
		{"create d/f", func(r, d *ext4go.File) error {
			f, err := d.MakeAt("f", ext4go.NewInode{Mode: unix.S_IFREG | 0o640, UID: 7, GID: 8}, os.O_RDWR)
			if err != nil {
				return err
			}
			_, err = f.WriteAt([]byte("hello, at"), 0)
			return errors.Join(err, f.Close())
		}, func(r, d int) error {
			fd, err := unix.Openat(d, "f", unix.O_CREAT|unix.O_EXCL|unix.O_RDWR, 0o640)
			if err != nil {
				return err
			}
			_, err = unix.Pwrite(fd, []byte("hello, at"), 0)
			return errors.Join(err, unix.Fchownat(d, "f", 7, 8, 0), unix.Close(fd))
		}},
		{"symlink d/l", func(r, d *ext4go.File) error {
			return closeMade(d.MakeAt("l", ext4go.NewInode{Mode: unix.S_IFLNK | 0o777, Target: "f"}, 0))
		}, func(r, d int) error { return unix.Symlinkat("f", d, "l") }},
		{"fifo d/p", func(r, d *ext4go.File) error {
			return closeMade(d.MakeAt("p", ext4go.NewInode{Mode: unix.S_IFIFO | 0o600}, 0))
		},
			func(r, d int) error { return unix.Mkfifoat(d, "p", 0o600) }},
		{"char device d/c", func(r, d *ext4go.File) error {
			return closeMade(d.MakeAt("c", ext4go.NewInode{Mode: unix.S_IFCHR | 0o600, Rdev: unix.Mkdev(1, 3)}, 0))
		}, func(r, d int) error { return unix.Mknodat(d, "c", unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))) }},
		{"unlink d (a directory)", func(r, d *ext4go.File) error { return r.UnlinkAt("d", false) },
			func(r, d int) error { return unix.Unlinkat(r, "d", 0) }},
		{"rmdir d/f (a file)", func(r, d *ext4go.File) error { return d.UnlinkAt("f", true) },
			func(r, d int) error { return unix.Unlinkat(d, "f", unix.AT_REMOVEDIR) }},
		{"rmdir d (not empty)", func(r, d *ext4go.File) error { return r.UnlinkAt("d", true) },
			func(r, d int) error { return unix.Unlinkat(r, "d", unix.AT_REMOVEDIR) }},
		{"unlink d/missing", func(r, d *ext4go.File) error { return d.UnlinkAt("missing", false) },
			func(r, d int) error { return unix.Unlinkat(d, "missing", 0) }},
		{"link d/f as g", func(r, d *ext4go.File) error { return linkAt(d, "f", r, "g") },
			func(r, d int) error { return unix.Linkat(d, "f", r, "g", 0) }},
		{"link d (a directory) as e", func(r, d *ext4go.File) error { return linkAt(r, "d", r, "e") },
			func(r, d int) error { return unix.Linkat(r, "d", r, "e", 0) }},
		{"rename g over d/f (same inode)", func(r, d *ext4go.File) error { return r.RenameAt("g", d, "f", 0) },
			func(r, d int) error { return unix.Renameat2(r, "g", d, "f", 0) }},
		{"rename noreplace d/l to d/f", func(r, d *ext4go.File) error { return d.RenameAt("l", d, "f", ext4go.RenameNoReplace) },
			func(r, d int) error { return unix.Renameat2(d, "l", d, "f", unix.RENAME_NOREPLACE) }},
		{"exchange d/l and d/p", func(r, d *ext4go.File) error { return d.RenameAt("l", d, "p", ext4go.RenameExchange) },
			func(r, d int) error { return unix.Renameat2(d, "l", d, "p", unix.RENAME_EXCHANGE) }},
		{"rename d into itself", func(r, d *ext4go.File) error { return r.RenameAt("d", d, "sub", 0) },
			func(r, d int) error { return unix.Renameat2(r, "d", d, "sub", 0) }},
		{"rename d/c to top", func(r, d *ext4go.File) error { return d.RenameAt("c", r, "c2", 0) },
			func(r, d int) error { return unix.Renameat2(d, "c", r, "c2", 0) }},
		{"setxattr d/f", func(r, d *ext4go.File) error {
			return withLookup(d, "f", func(f *ext4go.File) error { return f.SetXattr("user.k", []byte("v"), 0) })
		}, func(r, d int) error { return unix.Setxattr(fdPath(d, "f"), "user.k", []byte("v"), 0) }},
		{"setxattr create again", func(r, d *ext4go.File) error {
			return withLookup(d, "f", func(f *ext4go.File) error { return f.SetXattr("user.k", []byte("w"), ext4go.XattrCreate) })
		}, func(r, d int) error { return unix.Setxattr(fdPath(d, "f"), "user.k", []byte("w"), unix.XATTR_CREATE) }},
		{"removexattr missing", func(r, d *ext4go.File) error {
			return withLookup(d, "f", func(f *ext4go.File) error { return f.RemoveXattr("user.none") })
		}, func(r, d int) error { return unix.Removexattr(fdPath(d, "f"), "user.none") }},
		{"chmod, chown, chtimes d/f", func(r, d *ext4go.File) error {
			return withLookup(d, "f", func(f *ext4go.File) error {
				return errors.Join(f.Chmod(0o604|fs.ModeSetgid), f.Chown(9, -1), f.Chtimes(mtime, mtime))
			})
		}, func(r, d int) error {
			ts := []unix.Timespec{unix.NsecToTimespec(mtime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
			return errors.Join(unix.Fchmodat(d, "f", 0o2604, 0), unix.Fchownat(d, "f", 9, -1, 0), unix.UtimesNanoAt(d, "f", ts, 0))
		}},
	}
	// ext4go.
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	root, err := fsys.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var ours []error
	for _, op := range ops {
		d, _ := root.LookupAt("d")
		ours = append(ours, op.ours(root, d))
		if d != nil {
			d.Close()
		}
	}
	root.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	// The kernel.
	mp := testutil.Mount(t, kimage, false)
	rfd, err := unix.Open(mp, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, op := range ops {
		dfd, derr := unix.Openat(rfd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		kerr := op.kernel(rfd, dfd)
		if derr == nil {
			unix.Close(dfd)
		}
		if got, want := errnoOf(ours[i]), errnoOf(kerr); got != want {
			t.Errorf("%s: ext4go %v (%v), kernel %v", op.desc, got, ours[i], want)
		}
	}
	unix.Close(rfd)
	opts := testutil.MountCompareOptions()
	opts.Meta = meta
	// Times are the runs' own, but those set by the script.
	opts.Checks = opts.Checks&^testutil.CheckMtime | testutil.CheckNlink | testutil.CheckRdev | testutil.CheckXattrs
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(mp, "d/f"), &st); err != nil || st.Mtim.Nano() != mtime.UnixNano() {
		t.Errorf("kernel: d/f mtime %v, %v", st.Mtim, err)
	}
	after := openImage(t, image)
	if fi, err := after.Lstat("d/f"); err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("ext4go: d/f mtime %v, %v", fi, err)
	}
	testutil.CompareFS(t, after, mp, opts)
	after.Close()
	testutil.CompareDirs(t, testutil.Mount(t, image, true), mp, opts)
}

func closeMade(f *ext4go.File, err error) error {
	if err != nil {
		return err
	}
	return f.Close()
}

func withLookup(d *ext4go.File, name string, fn func(*ext4go.File) error) error {
	if d == nil {
		return syscall.ENOENT
	}
	f, err := d.LookupAt(name)
	if err != nil {
		return err
	}
	return errors.Join(fn(f), f.Close())
}

func linkAt(from *ext4go.File, name string, to *ext4go.File, newName string) error {
	return withLookup(from, name, func(f *ext4go.File) error { return to.LinkAt(f, newName) })
}

func fdPath(dirfd int, name string) string { return fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name) }

// TestAtHeldInode: a File holds its inode whatever happens to its names:
// a directory renamed away still takes *At calls (nothing is resolved
// from the root), an unlinked file still reads, writes, changes and
// reopens, and is freed at its last Close; the image is e2fsck-clean.
func TestAtHeldInode(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	root, err := fsys.OpenFile(".", os.O_RDONLY, 0)
	must(err)
	d, err := root.MakeAt("a", ext4go.NewInode{Mode: unix.S_IFDIR | 0o755}, 0)
	must(err)
	must(fsys.Rename("a", "b"))
	f, err := d.MakeAt("f", ext4go.NewInode{Mode: unix.S_IFREG | 0o644}, os.O_RDWR)
	must(err)
	if _, err := fsys.Stat("b/f"); err != nil {
		t.Fatalf("the file made in the renamed directory: %v", err)
	}
	_, err = f.WriteAt(bytes.Repeat([]byte("x"), 100000), 0)
	must(err)
	must(d.UnlinkAt("f", false))
	if _, err := f.WriteAt([]byte("after"), 100000); err != nil {
		t.Fatalf("write after unlink: %v", err)
	}
	must(f.SetXattr("user.a", []byte("1"), 0))
	must(f.Chmod(0o600))
	r, err := f.Reopen(os.O_RDONLY)
	must(err)
	b := make([]byte, 5)
	if _, err := r.ReadAt(b, 100000); err != nil || string(b) != "after" {
		t.Fatalf("reopened unlinked file reads %q, %v", b, err)
	}
	must(f.Close())
	must(r.Close())
	if _, err := d.LookupAt("f"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lookup of the unlinked name: %v", err)
	}
	// Use after close is refused.
	must(d.Close())
	if _, err := d.LookupAt("x"); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("LookupAt after Close: %v", err)
	}
	if err := d.UnlinkAt("x", false); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("UnlinkAt after Close: %v", err)
	}
	must(root.Close())
	must(fsys.Close())
	testutil.RequireFsckClean(t, image)
	// Read-only: every change is refused.
	ro := openImage(t, image)
	defer ro.Close()
	rr, err := ro.OpenFile(".", os.O_RDONLY, 0)
	must(err)
	defer rr.Close()
	if _, err := rr.MakeAt("n", ext4go.NewInode{Mode: unix.S_IFREG | 0o644}, 0); !errors.Is(err, ext4go.ErrReadOnly) {
		t.Errorf("MakeAt on a read-only filesystem: %v", err)
	}
}

// TestAtRaces: goroutines racing the *At calls on the same few names of
// one directory (creates of files and directories, unlinks, rmdirs,
// renames with every flag, links, writes through looked-up Files, xattrs)
// get only the errors those races allow; bystander files beside them keep
// their content, and the image is e2fsck-clean and reads the same through
// the kernel after.
func TestAtRaces(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	staleBefore := ext4go.StaleWrites()
	root, err := fsys.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := root.MakeAt("race", ext4go.NewInode{Mode: unix.S_IFDIR | 0o755}, 0)
	if err != nil {
		t.Fatal(err)
	}
	bystanders := map[string][]byte{}
	for i := range 10 {
		name := fmt.Sprintf("bystander%d", i)
		data := bytes.Repeat([]byte{byte(i + 1)}, 5000*(i+1))
		f, err := d.MakeAt(name, ext4go.NewInode{Mode: unix.S_IFREG | 0o644}, os.O_RDWR)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(data, 0); err != nil {
			t.Fatal(err)
		}
		f.Close()
		bystanders[name] = data
	}
	names := []string{"a", "b", "c", "d"}
	allowed := func(err error) bool {
		switch errnoOf(err) {
		case 0, syscall.ENOENT, syscall.EEXIST, syscall.ENOTEMPTY, syscall.EISDIR, syscall.ENOTDIR, syscall.EINVAL, syscall.EPERM:
			return true
		}
		return errors.Is(err, fs.ErrClosed)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			pick := func() string { return names[rng.IntN(len(names))] }
			for range 400 {
				var err error
				switch rng.IntN(8) {
				case 0:
					err = closeMade(d.MakeAt(pick(), ext4go.NewInode{Mode: unix.S_IFREG | 0o644}, os.O_RDWR))
				case 1:
					err = closeMade(d.MakeAt(pick(), ext4go.NewInode{Mode: unix.S_IFDIR | 0o755}, 0))
				case 2:
					err = d.UnlinkAt(pick(), false)
				case 3:
					err = d.UnlinkAt(pick(), true)
				case 4:
					err = d.RenameAt(pick(), d, pick(), []int{0, ext4go.RenameNoReplace, ext4go.RenameExchange}[rng.IntN(3)])
				case 5:
					err = linkAt(d, pick(), d, pick())
				case 6:
					err = withLookup(d, pick(), func(f *ext4go.File) error {
						w, err := f.Reopen(os.O_RDWR)
						if err != nil {
							return err
						}
						_, err = w.WriteAt(bytes.Repeat([]byte("w"), rng.IntN(20000)), int64(rng.IntN(10000)))
						return errors.Join(err, w.Close())
					})
				case 7:
					err = withLookup(d, pick(), func(f *ext4go.File) error { return f.SetXattr("user.r", []byte("x"), 0) })
				}
				if !allowed(err) {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("race: %v", err)
	}
	check := func(how string, read func(name string) ([]byte, error)) {
		for name, data := range bystanders {
			got, err := read(name)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: bystander %s: %d bytes, %v", how, name, len(got), err)
			}
		}
	}
	check("ext4go", func(name string) ([]byte, error) { return fsys.ReadFile("race/" + name) })
	d.Close()
	root.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ext4go.StaleWrites() - staleBefore; n != 0 {
		t.Errorf("%d changes reached nodes that no longer owned their inode", n)
	}
	testutil.RequireFsckClean(t, image)
	if ok, _ := testutil.CanMount(); ok {
		mp := testutil.Mount(t, image, true)
		check("kernel", func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(mp, "race", name)) })
	}
}
