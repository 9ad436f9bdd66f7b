// Package dev opens the storage an ext4 filesystem lives on: an image file
// or a block device. It gives positioned reads and writes and nothing more;
// caching and block arithmetic belong to the filesystem.
//
// Opening for writing takes an exclusive claim so two writers never share an
// image: an advisory flock on image files (released on Close), O_EXCL on
// block devices (which the kernel refuses while the device is mounted).
// A Device is safe for concurrent use: ReadAt and WriteAt are pread/pwrite.
package dev

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrBusy reports that another program holds the image open for writing.
var ErrBusy = errors.New("image is in use by another writer")

// Device is storage that holds a filesystem: an opened image file or
// block device (File), or the caller's own (ext4go.OpenDevice: an image in
// memory, a disk image format's layer, a wrapper that records or fails
// writes). ReadAt and WriteAt are called from many goroutines at once, on
// different ranges and sometimes on the same one (a file read while it is
// written), as on an *os.File. Sync makes what was written durable; the
// journal's commit order rests on it. Size is the length in bytes.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Size() int64
	Sync() error
	Close() error
}

// File is a Device backed by an *os.File.
type File struct {
	f        *os.File
	size     int64
	writable bool
	block    bool // a block device
}

// Open opens path for reading, or for reading and writing when writable.
func Open(path string, writable bool) (*File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	isBlock := fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
	if isBlock && writable {
		flag |= unix.O_EXCL
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		if isBlock && writable && errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("%s: %w (mounted or opened exclusively)", path, ErrBusy)
		}
		return nil, err
	}
	d := &File{f: f, writable: writable, block: isBlock}
	switch {
	case isBlock:
		n, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: size of block device: %w", path, err)
		}
		d.size = int64(n)
	case fi.Mode().IsRegular():
		d.size = fi.Size()
	default:
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file or block device", path)
	}
	if !isBlock {
		how := unix.LOCK_SH
		if writable {
			how = unix.LOCK_EX
		}
		if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s: %w", path, ErrBusy)
			}
			return nil, fmt.Errorf("%s: lock: %w", path, err)
		}
	}
	return d, nil
}

func (d *File) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }

func (d *File) WriteAt(p []byte, off int64) (int, error) {
	if !d.writable {
		return 0, fmt.Errorf("%s: opened read-only", d.f.Name())
	}
	return d.f.WriteAt(p, off)
}

// WriteVAt writes bufs one after another from off: one pwritev for many
// small pieces that lie end to end on the device (it loops over short
// writes).
func (d *File) WriteVAt(bufs [][]byte, off int64) (int, error) {
	if !d.writable {
		return 0, fmt.Errorf("%s: opened read-only", d.f.Name())
	}
	fd := int(d.f.Fd())
	total := 0
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := unix.Pwritev(fd, bufs[:min(len(bufs), MaxIovecs)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: d.f.Name(), Err: err}
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		total += n
		off += int64(n)
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return total, nil
}

// MaxIovecs is the most pieces one pwritev takes (IOV_MAX).
const MaxIovecs = 1024

// StartWriteback asks the kernel to start writing the dirty pages of an
// image file to its disk, without waiting (sync_file_range
// SYNC_FILE_RANGE_WRITE). A build calls it as it goes, so the disk works
// while the CPU does, and the final fsync finds little left to write.
func (d *File) StartWriteback() error {
	if d.block || !d.writable {
		return nil // a block device's writeback is the kernel's business
	}
	return unix.SyncFileRange(int(d.f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// SyncData waits until what was written to the image is durable, the
// disk's own cache flushed too (fdatasync). A build calls it as it goes,
// from a worker, so that the final fsync has little left to wait for.
func (d *File) SyncData() error {
	if !d.writable {
		return nil
	}
	return unix.Fdatasync(int(d.f.Fd()))
}

func (d *File) Size() int64 { return d.size }
func (d *File) Sync() error { return d.f.Sync() }

// Close releases the image. The flock is dropped explicitly first: a child
// process forked meanwhile (by any goroutine of the program) shares the
// open file description until it execs, and close(2) alone would leave the
// lock held through that copy, making an immediate reopen fail with ErrBusy.
func (d *File) Close() error {
	if !d.block {
		unix.Flock(int(d.f.Fd()), unix.LOCK_UN)
	}
	return d.f.Close()
}

// Name returns the path the device was opened with.
func (d *File) Name() string { return d.f.Name() }

// ReaderAt adapts any io.ReaderAt of known size to a read-only Device.
type ReaderAt struct {
	R io.ReaderAt
	N int64
}

func (r ReaderAt) ReadAt(p []byte, off int64) (int, error) { return r.R.ReadAt(p, off) }
func (r ReaderAt) WriteAt([]byte, int64) (int, error) {
	return 0, errors.New("device is read-only")
}
func (r ReaderAt) Size() int64  { return r.N }
func (r ReaderAt) Sync() error  { return nil }
func (r ReaderAt) Close() error { return nil }
