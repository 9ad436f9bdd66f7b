package main

// The filesystem the workload benchmarks (age, appenders) run on: ext4go's
// library on a fresh image, or a mounted directory through system calls,
// behind one interface so that both run the very same operations.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/mountinfo"
)

// benchTarget is the filesystem a workload runs on. Names are slash
// separated and relative to the filesystem's root (or the -dir directory).
type benchTarget interface {
	// config names the target in reports: "ext4go" or "kernel".
	config() string
	mkdir(name string) error
	// create creates or truncates a file for writing.
	create(name string) (benchFile, error)
	// openWrite opens an existing file for writing.
	openWrite(name string) (benchFile, error)
	remove(name string) error
	// sync writes everything back (FS.Sync, syncfs).
	sync() error
	// freeBlocks is the filesystem's free space now, in blocks, and its
	// block size.
	freeBlocks() (free uint64, blockSize uint32, err error)
	// extents is the file's physical layout, in blocks, after everything
	// written is allocated (the kernel's delayed allocation flushed).
	extents(name string) ([]physExtent, error)
	// finish ends the workload (files closed, everything written back)
	// and returns what the layout is measured against: the geometry and
	// the free extents of the filesystem as it is on the device now.
	finish() (*freeSpace, error)
}

// benchFile is one file open for writing.
type benchFile interface {
	writeAt(p []byte, off int64) error
	fallocate(off, n int64) error
	truncate(size int64) error
	sync() error
	close() error
}

// physExtent is a run of a file's blocks: logical and physical first
// block and length, all in blocks.
type physExtent struct{ logical, physical, length uint64 }

// libTarget runs the workload through ext4go on an image file.
type libTarget struct {
	fsys  *ext4go.FS
	image string
	// tmp is the directory holding image when the bench made it up (and
	// removes it at cleanup); empty when the user asked to keep the image.
	tmp string
	// mem, if set, holds the image in memory (newMemTarget); image is
	// then where finish writes it out, if anywhere.
	mem *memDevice
}

// newLibTarget makes a fresh filesystem of size bytes with ext4go's mkfs
// defaults (those of mkfs.ext4) and opens it for writing. With keep the
// image is written there (a path that must not exist yet) and left after
// the bench; otherwise it lives in a temporary directory that cleanup
// removes.
func newLibTarget(size int64, keep string) (*libTarget, error) {
	t := &libTarget{image: keep}
	if keep == "" {
		tmp, err := os.MkdirTemp("", "ext4go-bench-")
		if err != nil {
			return nil, err
		}
		t.tmp, t.image = tmp, filepath.Join(tmp, "bench.img")
	} else if _, err := os.Lstat(keep); !errors.Is(err, fs.ErrNotExist) {
		// Never overwrite what is there: it may be someone's image.
		return nil, fmt.Errorf("-keep %s: the file exists (give a new path)", keep)
	}
	if err := mkfs.Format(t.image, mkfs.Options{Size: size}); err != nil {
		t.cleanup()
		return nil, fmt.Errorf("mkfs: %w", err)
	}
	fsys, err := ext4go.Open(t.image, &ext4go.Options{Writable: true})
	if err != nil {
		t.cleanup()
		return nil, err
	}
	t.fsys = fsys
	return t, nil
}

// openLibTarget opens the filesystem the caller made on path (a block
// device or an image file) for writing; cleanup leaves path in place. The
// bench writes files there (and --ceiling then overwrites the device), so
// it takes only a fresh filesystem: nothing in its root but lost+found.
// Anything else is refused before a byte is written.
func openLibTarget(path string) (*libTarget, error) {
	ro, err := ext4go.Open(path, nil)
	if err != nil {
		return nil, err
	}
	ents, err := ro.ReadDir(".")
	ro.Close()
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Name() != "lost+found" {
			return nil, fmt.Errorf("%s: not a fresh filesystem (its root holds %q): the bench writes there and would change it", path, e.Name())
		}
	}
	fsys, err := ext4go.Open(path, &ext4go.Options{Writable: true})
	if err != nil {
		return nil, err
	}
	return &libTarget{fsys: fsys, image: path}, nil
}

// deviceSize is the size in bytes of a block device or a file.
func deviceSize(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

// cleanup closes the filesystem if finish did not, and removes a
// temporary image.
func (t *libTarget) cleanup() {
	if t.fsys != nil {
		t.fsys.Close()
		t.fsys = nil
	}
	if t.mem != nil {
		t.mem.free()
		t.mem = nil
	}
	if t.tmp != "" {
		os.RemoveAll(t.tmp)
	}
}

func (t *libTarget) config() string          { return "ext4go" }
func (t *libTarget) mkdir(name string) error { return t.fsys.Mkdir(name, 0o755) }
func (t *libTarget) remove(name string) error {
	return t.fsys.Remove(name)
}
func (t *libTarget) sync() error { return t.fsys.Sync() }

func (t *libTarget) create(name string) (benchFile, error) {
	f, err := t.fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return libFile{f}, nil
}

func (t *libTarget) openWrite(name string) (benchFile, error) {
	f, err := t.fsys.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return libFile{f}, nil
}

func (t *libTarget) freeBlocks() (uint64, uint32, error) {
	u := t.fsys.Usage()
	return u.FreeBlocks, u.BlockSize, nil
}

func (t *libTarget) extents(name string) ([]physExtent, error) {
	es, err := t.fsys.Extents(name)
	if err != nil {
		return nil, err
	}
	out := make([]physExtent, len(es))
	for i, e := range es {
		out[i] = physExtent{e.Logical, e.Physical, e.Length}
	}
	return out, nil
}

// finish closes the filesystem (everything written back, the image clean)
// and reads its free space from the closed image.
func (t *libTarget) finish() (*freeSpace, error) {
	err := t.fsys.Close()
	t.fsys = nil
	if err != nil {
		return nil, err
	}
	if t.mem != nil {
		return memFreeSpace(t.mem, t.image)
	}
	return measureFreeSpace(t.image)
}

type libFile struct{ f *ext4go.File }

func (l libFile) writeAt(p []byte, off int64) error {
	_, err := l.f.WriteAt(p, off)
	return err
}
func (l libFile) fallocate(off, n int64) error { return l.f.Fallocate(0, off, n) }
func (l libFile) truncate(size int64) error    { return l.f.Truncate(size) }
func (l libFile) sync() error                  { return l.f.Sync() }
func (l libFile) close() error                 { return l.f.Close() }

// dirTarget runs the workload with system calls in a directory of a
// mounted filesystem (the kernel's ext4 on a loop mount).
type dirTarget struct {
	dir    string
	device string // the block device the filesystem is mounted from
	root   *os.File
}

// newDirTarget checks that dir is the root of a mounted ext4 filesystem
// (its free space and layout are the whole filesystem's, so the bench must
// have it to itself) and finds the device it is mounted from.
func newDirTarget(dir string) (*dirTarget, error) {
	root, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(root.Fd()), &st); err != nil {
		root.Close()
		return nil, err
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		root.Close()
		return nil, fmt.Errorf("reading the mount table: %w", err)
	}
	abs, _ := filepath.Abs(dir)
	t := &dirTarget{dir: dir, root: root}
	for _, m := range mounts {
		if m.Point == abs && m.Dev == st.Dev && st.Ino == 2 { // 2: the root directory's inode
			if m.FSType != "ext4" {
				root.Close()
				return nil, fmt.Errorf("%s: a %s filesystem, not ext4", dir, m.FSType)
			}
			t.device = m.Source
		}
	}
	if t.device == "" {
		root.Close()
		return nil, fmt.Errorf("%s is not the root of a mounted filesystem (the bench measures the whole filesystem: give it the mount point of a fresh one)", dir)
	}
	return t, nil
}

func (t *dirTarget) config() string           { return "kernel" }
func (t *dirTarget) path(name string) string  { return filepath.Join(t.dir, filepath.FromSlash(name)) }
func (t *dirTarget) mkdir(name string) error  { return os.Mkdir(t.path(name), 0o755) }
func (t *dirTarget) remove(name string) error { return os.Remove(t.path(name)) }
func (t *dirTarget) sync() error              { return unix.Syncfs(int(t.root.Fd())) }
func (t *dirTarget) cleanup()                 { t.root.Close() }

func (t *dirTarget) create(name string) (benchFile, error) {
	f, err := os.OpenFile(t.path(name), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osBenchFile{f}, nil
}

func (t *dirTarget) openWrite(name string) (benchFile, error) {
	f, err := os.OpenFile(t.path(name), os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	return osBenchFile{f}, nil
}

func (t *dirTarget) freeBlocks() (uint64, uint32, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(t.root.Fd()), &st); err != nil {
		return 0, 0, err
	}
	return st.Bfree, uint32(st.Bsize), nil
}

func (t *dirTarget) extents(name string) ([]physExtent, error) {
	f, err := os.Open(t.path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(f.Fd()), &st); err != nil {
		return nil, err
	}
	return fiemap(f, uint64(st.Bsize))
}

// finish writes everything back and freezes the filesystem, which makes
// the kernel checkpoint its journal: the bitmaps on the device are then
// the filesystem's current ones, read through the block device (whose
// page cache the kernel's metadata writes go through) while nothing can
// change them. The filesystem is thawed before finish returns.
func (t *dirTarget) finish() (*freeSpace, error) {
	if err := t.sync(); err != nil {
		return nil, fmt.Errorf("syncfs: %w", err)
	}
	if err := unix.IoctlSetInt(int(t.root.Fd()), ioctlFIFREEZE, 0); err != nil {
		return nil, fmt.Errorf("freezing %s (FIFREEZE) to read its free space: %w", t.dir, err)
	}
	fsp, err := measureFreeSpace(t.device)
	if terr := unix.IoctlSetInt(int(t.root.Fd()), ioctlFITHAW, 0); terr != nil && err == nil {
		err = fmt.Errorf("thawing %s (FITHAW): %w", t.dir, terr)
	}
	return fsp, err
}

type osBenchFile struct{ f *os.File }

func (o osBenchFile) writeAt(p []byte, off int64) error {
	_, err := o.f.WriteAt(p, off)
	return err
}
func (o osBenchFile) fallocate(off, n int64) error {
	return unix.Fallocate(int(o.f.Fd()), 0, off, n)
}
func (o osBenchFile) truncate(size int64) error { return o.f.Truncate(size) }
func (o osBenchFile) sync() error               { return o.f.Sync() }
func (o osBenchFile) close() error              { return o.f.Close() }

// Linux ioctl numbers x/sys/unix does not define: _IOWR('X', 119, int),
// _IOWR('X', 120, int) and _IOWR('f', 11, struct fiemap).
const (
	ioctlFIFREEZE     = 0xc0045877
	ioctlFITHAW       = 0xc0045878
	ioctlFSIOCFIEMAP  = 0xc020660b
	fiemapFlagSync    = 0x1 // FIEMAP_FLAG_SYNC: write dirty data back (allocate it) first
	fiemapExtentLast  = 0x1 // FIEMAP_EXTENT_LAST
	fiemapExtentBatch = 256
)

// fiemapHeader is struct fiemap without its trailing array of extents.
type fiemapHeader struct {
	start, length                        uint64
	flags, mappedExtents, extentCount, _ uint32
}

// fiemapExtent is struct fiemap_extent.
type fiemapExtent struct {
	logical, physical, length uint64
	_                         [2]uint64
	flags                     uint32
	_                         [3]uint32
}

// fiemap returns the file's extents, in blocks of blockSize bytes, asking
// the kernel (FS_IOC_FIEMAP with FIEMAP_FLAG_SYNC, so delayed allocations
// are made first) in batches until the last one.
func fiemap(f *os.File, blockSize uint64) ([]physExtent, error) {
	type request struct {
		h fiemapHeader
		e [fiemapExtentBatch]fiemapExtent
	}
	var out []physExtent
	var start uint64
	for {
		var r request
		r.h = fiemapHeader{start: start, length: ^uint64(0) - start, flags: fiemapFlagSync, extentCount: fiemapExtentBatch}
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), ioctlFSIOCFIEMAP, uintptr(unsafe.Pointer(&r))); errno != 0 {
			return nil, &fs.PathError{Op: "fiemap", Path: f.Name(), Err: errno}
		}
		n := int(r.h.mappedExtents)
		if n == 0 {
			return out, nil
		}
		for _, e := range r.e[:n] {
			out = append(out, physExtent{e.logical / blockSize, e.physical / blockSize, (e.length + blockSize - 1) / blockSize})
		}
		last := r.e[n-1]
		if last.flags&fiemapExtentLast != 0 {
			return out, nil
		}
		start = last.logical + last.length
	}
}
