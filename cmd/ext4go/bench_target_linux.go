package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

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
