//go:build linux

package ext4go_test

// Round trips between ext4go and the Linux kernel through loop mounts:
//
//	(a) the kernel writes a tree, we change it, e2fsck is clean and the
//	    kernel reads exactly what we expect;
//	(b) we write a tree, the kernel reads it exactly, changes it, e2fsck is
//	    clean and we read exactly the final state.
//
// Every change is made twice: on the image (through ext4go or the mount)
// and on a host mirror directory, which is what both must equal in the
// end, metadata included. Needs root and loop devices; skipped otherwise.

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
	"golang.org/x/sys/unix"
)

// rtTarget is where a round trip's changes go: ext4go or a host directory
// (a kernel mount or the mirror).
type rtTarget interface {
	mkdir(p string, perm os.FileMode) error
	writeFile(p string, data []byte, perm os.FileMode) error
	writeAt(p string, off int64, data []byte) error
	truncate(p string, size int64) error
	fallocate(p string, mode int, off, n int64) error
	rename(a, b string, flags int) error
	remove(p string) error
	removeAll(p string) error
	link(a, b string) error
	symlink(target, p string) error
	mknod(p string, mode uint32, dev uint64) error
	setxattr(p, name string, value []byte) error
	removexattr(p, name string) error
	chmod(p string, mode os.FileMode) error
	lchown(p string, uid, gid int) error
	lchtimes(p string, at, mt time.Time) error
}

// extTarget changes an image through ext4go.
type extTarget struct{ fs *ext4go.FS }

func (e extTarget) mkdir(p string, perm os.FileMode) error { return e.fs.Mkdir(p, perm) }
func (e extTarget) writeFile(p string, data []byte, perm os.FileMode) error {
	f, err := e.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
func (e extTarget) withFile(p string, fn func(*ext4go.File) error) error {
	return withOpen(func() (*ext4go.File, error) { return e.fs.OpenFile(p, os.O_RDWR, 0) }, fn)
}

// withOpen runs fn on the file open returns and closes it; fn's error wins
// over Close's.
func withOpen[F io.Closer](open func() (F, error), fn func(F) error) error {
	f, err := open()
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
func (e extTarget) writeAt(p string, off int64, data []byte) error {
	return e.withFile(p, func(f *ext4go.File) error { _, err := f.WriteAt(data, off); return err })
}
func (e extTarget) truncate(p string, size int64) error {
	return e.withFile(p, func(f *ext4go.File) error { return f.Truncate(size) })
}
func (e extTarget) fallocate(p string, mode int, off, n int64) error {
	return e.withFile(p, func(f *ext4go.File) error { return f.Fallocate(mode, off, n) })
}
func (e extTarget) rename(a, b string, flags int) error { return e.fs.RenameWith(a, b, flags) }
func (e extTarget) remove(p string) error               { return e.fs.Remove(p) }
func (e extTarget) removeAll(p string) error            { return e.fs.RemoveAll(p) }
func (e extTarget) link(a, b string) error              { return e.fs.Link(a, b) }
func (e extTarget) symlink(t, p string) error           { return e.fs.Symlink(t, p) }
func (e extTarget) mknod(p string, mode uint32, dev uint64) error {
	return e.fs.Mknod(p, mode, dev)
}
func (e extTarget) setxattr(p, n string, v []byte) error { return e.fs.SetXattr(p, n, v, 0) }
func (e extTarget) removexattr(p, n string) error        { return e.fs.RemoveXattr(p, n) }
func (e extTarget) chmod(p string, m os.FileMode) error  { return e.fs.Chmod(p, m) }
func (e extTarget) lchown(p string, u, g int) error      { return e.fs.Lchown(p, u, g) }
func (e extTarget) lchtimes(p string, at, mt time.Time) error {
	return e.fs.Lchtimes(p, at, mt)
}

// hostTarget changes a host directory with system calls.
type hostTarget struct{ root string }

func (h hostTarget) p(p string) string { return filepath.Join(h.root, p) }
func (h hostTarget) mkdir(p string, perm os.FileMode) error {
	if err := os.Mkdir(h.p(p), perm); err != nil {
		return err
	}
	return os.Chmod(h.p(p), perm) // no umask
}
func (h hostTarget) writeFile(p string, data []byte, perm os.FileMode) error {
	if err := os.WriteFile(h.p(p), data, perm); err != nil {
		return err
	}
	return os.Chmod(h.p(p), perm)
}
func (h hostTarget) withFile(p string, fn func(*os.File) error) error {
	return withOpen(func() (*os.File, error) { return os.OpenFile(h.p(p), os.O_RDWR, 0) }, fn)
}
func (h hostTarget) writeAt(p string, off int64, data []byte) error {
	return h.withFile(p, func(f *os.File) error { _, err := f.WriteAt(data, off); return err })
}
func (h hostTarget) truncate(p string, size int64) error {
	return h.withFile(p, func(f *os.File) error { return f.Truncate(size) })
}
func (h hostTarget) fallocate(p string, mode int, off, n int64) error {
	return h.withFile(p, func(f *os.File) error {
		err := unix.Fallocate(int(f.Fd()), uint32(mode), off, n)
		if errors.Is(err, unix.EOPNOTSUPP) && mode&ext4go.FallocZeroRange != 0 {
			// tmpfs (the mirror) has no ZERO_RANGE: write the zeros.
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			end := off + n
			if mode&ext4go.FallocKeepSize != 0 {
				end = min(end, fi.Size())
			}
			if end > off {
				_, err = f.WriteAt(make([]byte, end-off), off)
			}
			return err
		}
		return err
	})
}
func (h hostTarget) rename(a, b string, flags int) error {
	return unix.Renameat2(unix.AT_FDCWD, h.p(a), unix.AT_FDCWD, h.p(b), uint(flags))
}
func (h hostTarget) remove(p string) error     { return os.Remove(h.p(p)) }
func (h hostTarget) removeAll(p string) error  { return os.RemoveAll(h.p(p)) }
func (h hostTarget) link(a, b string) error    { return os.Link(h.p(a), h.p(b)) }
func (h hostTarget) symlink(t, p string) error { return os.Symlink(t, h.p(p)) }
func (h hostTarget) mknod(p string, mode uint32, dev uint64) error {
	if err := unix.Mknod(h.p(p), mode, int(dev)); err != nil {
		return err
	}
	return os.Chmod(h.p(p), os.FileMode(mode&0o777))
}
func (h hostTarget) setxattr(p, n string, v []byte) error { return unix.Lsetxattr(h.p(p), n, v, 0) }
func (h hostTarget) removexattr(p, n string) error        { return unix.Lremovexattr(h.p(p), n) }
func (h hostTarget) chmod(p string, m os.FileMode) error  { return os.Chmod(h.p(p), m) }
func (h hostTarget) lchown(p string, u, g int) error      { return os.Lchown(h.p(p), u, g) }
func (h hostTarget) lchtimes(p string, at, mt time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, h.p(p), ts, unix.AT_SYMLINK_NOFOLLOW)
}

// rtPair applies every change to the image side and the mirror.
type rtPair struct {
	t           *testing.T
	img, mirror rtTarget
	who         string
	bs          int
}

func (p *rtPair) do(what string, fn func(rtTarget) error) {
	p.t.Helper()
	if err := fn(p.img); err != nil {
		p.t.Fatalf("%s: %s: %v", p.who, what, err)
	}
	if err := fn(p.mirror); err != nil {
		p.t.Fatalf("mirror: %s: %v", what, err)
	}
}

func rtData(seed string, n int) []byte {
	h := fnv.New64a()
	h.Write([]byte(seed))
	x := h.Sum64() | 1
	p := make([]byte, n)
	for i := range p {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i] = byte(x)
	}
	return p
}

// populate writes the first tree: small files (inline data where the
// image has it), large, sparse and preallocated files, links, symlinks,
// special files, xattrs small, large and shared, a big (htree) directory
// and a deep one.
func (p *rtPair) populate() {
	bs := p.bs
	p.do("mkdir", func(x rtTarget) error {
		for _, d := range []string{"a", "a/b", "a/b/c", "big", "deep", "x", "inl"} {
			if err := x.mkdir(d, 0o755); err != nil {
				return err
			}
		}
		d := "deep"
		for i := 0; i < 30; i++ {
			d += fmt.Sprintf("/d%d", i)
			if err := x.mkdir(d, 0o750); err != nil {
				return err
			}
		}
		return x.writeFile(d+"/leaf", []byte("at the bottom"), 0o644)
	})
	p.do("files", func(x rtTarget) error {
		files := []struct {
			name string
			size int
		}{
			{"empty", 0}, {"tiny", 10}, {"inl/s40", 40}, {"inl/s59", 59}, {"inl/s100", 100},
			{"one-block", bs}, {"block-plus", bs + 1}, {"a/medium", 300000}, {"a/b/large", 3 << 20},
			{"x/ninety", 90},
		}
		for _, f := range files {
			if err := x.writeFile(f.name, rtData(f.name, f.size), 0o644); err != nil {
				return err
			}
		}
		for i := 0; i < 40; i++ {
			if err := x.writeFile(fmt.Sprintf("inl/f%02d", i), rtData(fmt.Sprint(i), i*3), 0o600); err != nil {
				return err
			}
		}
		return nil
	})
	p.do("sparse", func(x rtTarget) error {
		if err := x.writeFile("sparse", nil, 0o644); err != nil {
			return err
		}
		for _, off := range []int64{0, 1 << 20, 700 << 20, 3<<30 + 5} {
			if err := x.writeAt("sparse", off, rtData(fmt.Sprint(off), 5000)); err != nil {
				return err
			}
		}
		if err := x.writeFile("prealloc", rtData("pre", 1000), 0o644); err != nil {
			return err
		}
		if err := x.fallocate("prealloc", 0, 0, 256<<10); err != nil {
			return err
		}
		return x.fallocate("prealloc", ext4go.FallocKeepSize, 256<<10, 128<<10)
	})
	p.do("links", func(x rtTarget) error {
		for _, l := range [][2]string{{"a/medium", "hard1"}, {"a/medium", "x/hard2"}, {"tiny", "a/b/c/tiny-link"}} {
			if err := x.link(l[0], l[1]); err != nil {
				return err
			}
		}
		for _, s := range [][2]string{{"a/medium", "fast"}, {strings.Repeat("long/", 30) + "target", "slow"},
			{"../../tiny", "a/b/up"}, {"dangling", "x/dangle"}} {
			if err := x.symlink(s[0], s[1]); err != nil {
				return err
			}
		}
		if err := x.mknod("fifo", unix.S_IFIFO|0o644, 0); err != nil {
			return err
		}
		return x.mknod("x/chr", unix.S_IFCHR|0o600, unix.Mkdev(10, 300))
	})
	p.do("xattrs", func(x rtTarget) error {
		shared := rtData("shared", bs/3)
		for _, f := range []string{"one-block", "block-plus", "a/medium", "x/ninety", "inl/s40"} {
			if err := x.setxattr(f, "user.shared", shared); err != nil {
				return err
			}
		}
		for _, a := range []struct{ f, n, v string }{
			{"tiny", "user.small", "v"}, {"tiny", "trusted.t", "trusted value"}, {"a", "user.dir", "on a dir"},
			{"a/b/large", "user.big", string(rtData("big", bs/2))}, {"inl/s59", "user.i", "inline and xattr"},
			{"fast", "trusted.link", "on a symlink"},
		} {
			if err := x.setxattr(a.f, a.n, []byte(a.v)); err != nil {
				return err
			}
		}
		return nil
	})
	p.do("big directory", func(x rtTarget) error {
		for i := 0; i < 2000; i++ {
			if err := x.writeFile(fmt.Sprintf("big/entry-%05d-%s", i, strings.Repeat("z", i%50)), nil, 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	p.do("owners and modes", func(x rtTarget) error {
		if err := x.lchown("a/b", 1000, 1000); err != nil {
			return err
		}
		if err := x.lchown("fast", 7, 8); err != nil {
			return err
		}
		return x.chmod("x", 0o777|os.ModeSticky)
	})
}

// mutate changes most of what populate made, in every way the API allows.
func (p *rtPair) mutate(round string) {
	bs := int64(p.bs)
	p.do("write", func(x rtTarget) error {
		if err := x.writeAt("a/medium", 1000, rtData(round+"m", 5000)); err != nil { // through two links
			return err
		}
		if err := x.writeAt("inl/s40", 20, rtData(round+"i", 30)); err != nil { // grows inline data
			return err
		}
		if err := x.writeAt("inl/s100", 5000, []byte(round)); err != nil { // inline to extents
			return err
		}
		if err := x.writeAt("sparse", 2<<30, rtData(round+"s", 100000)); err != nil {
			return err
		}
		if err := x.writeAt("prealloc", 100000, rtData(round+"p", 3000)); err != nil { // into unwritten
			return err
		}
		return x.writeAt("tiny", 10, []byte(" appended "+round))
	})
	p.do("truncate", func(x rtTarget) error {
		if err := x.truncate("a/b/large", 1<<20+123); err != nil {
			return err
		}
		if err := x.truncate("one-block", 5*bs+7); err != nil {
			return err
		}
		return x.truncate("inl/s59", 3)
	})
	p.do("fallocate", func(x rtTarget) error {
		if err := x.fallocate("a/b/large", ext4go.FallocPunchHole|ext4go.FallocKeepSize, 4096+17, 200000); err != nil {
			return err
		}
		if err := x.fallocate("sparse", ext4go.FallocZeroRange|ext4go.FallocKeepSize, 1<<20+100, 3000); err != nil {
			return err
		}
		return x.fallocate("block-plus", ext4go.FallocZeroRange, 10, 3*bs)
	})
	p.do("namespace", func(x rtTarget) error {
		steps := []func() error{
			func() error { return x.rename("a/b/c", "x/c-moved", 0) },
			func() error { return x.rename("hard1", "x/hard2", 0) }, // same inode: nothing happens
			func() error { return x.rename("tiny", "block-plus", ext4go.RenameExchange) },
			func() error { return x.rename("x/ninety", "inl/f05", 0) }, // over a file
			func() error { return x.rename("inl/f06", "a/f06", 0) },
			func() error { return x.remove("inl/f07") },
			func() error { return x.remove("empty") },
			func() error { return x.removeAll("deep/d0/d1/d2/d3") },
			func() error { return x.mkdir("inl/newdir", 0o700) },
			func() error { return x.writeFile("inl/newfile-"+round, rtData(round, 77), 0o640) },
			func() error { return x.link("a/b/large", "inl/large-link") },
			func() error { return x.symlink("../a/b/large", "inl/large-sym") },
			func() error { return x.rename("x/dangle", "x/dangle2", ext4go.RenameNoReplace) },
		}
		for i := 0; i < 2000; i += 3 {
			name := fmt.Sprintf("big/entry-%05d-%s", i, strings.Repeat("z", i%50))
			steps = append(steps, func() error { return x.remove(name) })
		}
		for i := 0; i < 300; i++ {
			name := fmt.Sprintf("big/%s-new-%04d", round, i)
			steps = append(steps, func() error { return x.writeFile(name, rtData(name, i), 0o644) })
		}
		steps = append(steps, func() error { return x.rename("big/entry-00001-z", "a/from-big", 0) })
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	})
	p.do("xattrs", func(x rtTarget) error {
		if err := x.setxattr("a/medium", "user.shared", rtData(round+"unshare", int(bs)/3)); err != nil {
			return err
		}
		if err := x.removexattr("x/hard2", "user.shared"); err != nil { // same inode as a/medium
			if !errors.Is(err, syscall.ENODATA) {
				return err
			}
		}
		if err := x.removexattr("block-plus", "user.shared"); err != nil && !errors.Is(err, syscall.ENODATA) {
			return err
		}
		if err := x.setxattr("tiny", "user.more-"+round, bytes.Repeat([]byte("y"), int(bs)/4)); err != nil {
			return err
		}
		if err := x.removexattr("a", "user.dir"); err != nil {
			return err
		}
		return x.setxattr("inl/f10", "security.s", []byte("sec"))
	})
	p.do("attributes", func(x rtTarget) error {
		if err := x.chmod("a/medium", 0o755|os.ModeSetuid); err != nil {
			return err
		}
		if err := x.lchown("sparse", 65534, 12345); err != nil {
			return err
		}
		return x.chmod("inl", 0o775|os.ModeSetgid)
	})
}

// settleTimes gives every entry of the mirror, on both sides, a mtime and
// atime derived from its path, so that mtimes can be compared exactly.
func (p *rtPair) settleTimes(mirrorRoot string) {
	p.t.Helper()
	var paths []string
	filepath.WalkDir(mirrorRoot, func(hp string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(mirrorRoot, hp)
		if rel != "." && rel != "lost+found" {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	p.do("times", func(x rtTarget) error {
		for _, rel := range paths {
			h := fnv.New64a()
			h.Write([]byte(rel))
			sec := int64(h.Sum64()%(1<<32)) - 1<<30
			mt := time.Unix(sec, int64(h.Sum64()%1e9))
			if err := x.lchtimes(rel, mt.Add(time.Hour), mt); err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
		}
		return nil
	})
}

// rtCompareImage compares the image, read by ext4go, with the mirror.
func rtCompareImage(t *testing.T, image, mirror string) {
	t.Helper()
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	testutil.CompareFS(t, ro, mirror, rtCompareOptions())
}

// countInline counts the files and directories with inline data.
func countInline(t *testing.T, image string) (files, dirs int) {
	t.Helper()
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	fs.WalkDir(ro, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, err := d.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Sys().(*ext4go.Stat).Flags&0x10000000 != 0 { // EXT4_INLINE_DATA_FL
			if d.IsDir() {
				dirs++
			} else {
				files++
			}
		}
		return nil
	})
	return files, dirs
}

func rtCompareOptions() testutil.CompareOptions {
	return testutil.CompareOptions{Checks: testutil.CheckAll, SkipPaths: []string{"lost+found"}, Meta: meta}
}

var rtConfigs = []struct {
	name string
	args []string
	bs   int
}{
	{"4k", []string{"-t", "ext4", "-b", "4096"}, 4096},
	{"1k-inline", []string{"-t", "ext4", "-b", "1024", "-O", "inline_data"}, 1024},
	{"4k-nocsum-inline", []string{"-t", "ext4", "-b", "4096", "-O", "^metadata_csum,inline_data"}, 4096},
}

// TestRoundTripKernelFirst: the kernel writes, ext4go changes, the kernel
// and ext4go read.
func TestRoundTripKernelFirst(t *testing.T) {
	testutil.RequireMount(t)
	for _, cfg := range rtConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 256<<20, cfg.args...)
			mirror := testutil.SourceDir(t)
			t.Run("kernel-writes", func(t *testing.T) {
				mp := testutil.Mount(t, image, false)
				p := &rtPair{t: t, img: hostTarget{mp}, mirror: hostTarget{mirror}, who: "kernel", bs: cfg.bs}
				p.populate()
				p.settleTimes(mirror)
				testutil.CompareDirs(t, mp, mirror, rtCompareOptions())
			})
			if t.Failed() {
				return
			}
			testutil.RequireFsckClean(t, image)
			if strings.Contains(strings.Join(cfg.args, " "), "inline_data") {
				// Our changes must meet inline files and directories.
				files, dirs := countInline(t, image)
				if files == 0 || dirs == 0 {
					t.Fatalf("the kernel made %d inline files and %d inline directories; want some of each", files, dirs)
				}
			}

			fsys := openRW(t, image)
			p := &rtPair{t: t, img: extTarget{fsys}, mirror: hostTarget{mirror}, who: "ext4go", bs: cfg.bs}
			testutil.CompareFS(t, fsys, mirror, rtCompareOptions())
			p.mutate("us")
			p.settleTimes(mirror)
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
			rtCompareImage(t, image, mirror)
			t.Run("kernel-reads", func(t *testing.T) {
				mp := testutil.Mount(t, image, true)
				testutil.CompareDirs(t, mp, mirror, rtCompareOptions())
			})
		})
	}
}

// TestRoundTripUsFirst: ext4go writes, the kernel reads and changes, and
// ext4go reads the result (and changes it once more).
func TestRoundTripUsFirst(t *testing.T) {
	testutil.RequireMount(t)
	for _, cfg := range rtConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 256<<20, cfg.args...)
			mirror := testutil.SourceDir(t)
			fsys := openRW(t, image)
			p := &rtPair{t: t, img: extTarget{fsys}, mirror: hostTarget{mirror}, who: "ext4go", bs: cfg.bs}
			p.populate()
			p.settleTimes(mirror)
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
			rtCompareImage(t, image, mirror)

			t.Run("kernel-reads-and-changes", func(t *testing.T) {
				mp := testutil.Mount(t, image, false)
				testutil.CompareDirs(t, mp, mirror, rtCompareOptions())
				if t.Failed() {
					return
				}
				p := &rtPair{t: t, img: hostTarget{mp}, mirror: hostTarget{mirror}, who: "kernel", bs: cfg.bs}
				p.mutate("kernel")
				p.settleTimes(mirror)
			})
			if t.Failed() {
				return
			}
			testutil.RequireFsckClean(t, image)
			rtCompareImage(t, image, mirror)

			// And once more: our changes on top of the kernel's.
			fsys = openRW(t, image)
			p = &rtPair{t: t, img: extTarget{fsys}, mirror: hostTarget{mirror}, who: "ext4go", bs: cfg.bs}
			p.do("more", func(x rtTarget) error {
				if err := x.removeAll("big"); err != nil {
					return err
				}
				if err := x.writeAt("inl/newfile-kernel", 0, rtData("again", 5000)); err != nil {
					return err
				}
				return x.rename("inl", "a/b/inl-moved", 0)
			})
			p.settleTimes(mirror)
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
			t.Run("kernel-reads-again", func(t *testing.T) {
				mp := testutil.Mount(t, image, true)
				testutil.CompareDirs(t, mp, mirror, rtCompareOptions())
			})
		})
	}
}
