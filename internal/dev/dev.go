// Package dev opens the storage an ext4 filesystem lives on: an image file
// or a block device. It gives positioned reads and writes and nothing more;
// caching and block arithmetic belong to the filesystem.
//
// Opening for writing takes an exclusive claim so two writers never share an
// image: a lock on image files (released on Close: flock on Linux, macOS
// and FreeBSD, LockFileEx on Windows, none on WASI, which has no locks;
// lock_*.go), O_EXCL on Linux block devices (which the kernel refuses
// while the device is mounted), and for a loop device the lock of the
// image file behind it too (backing_linux.go). A Device is safe for concurrent use:
// ReadAt and WriteAt are pread/pwrite.
//
// What differs between systems lives in small files per system and
// concern: device_*.go (what a device is, its size), lock_*.go,
// sync_*.go (writeback hints), writev_*.go, inuse_*.go.
package dev

import (
	"errors"
	"fmt"
	"io"
	"os"
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
	// backing is the image file behind a loop device, open and locked as
	// an image file opened directly is (backing_*.go), or nil.
	backing *os.File
}

// Open opens path for reading, or for reading and writing when writable.
func Open(path string, writable bool) (*File, error) {
	size, isDevice, err := statDevice(path)
	if err != nil {
		return nil, err
	}
	if isDevice {
		return openDevice(path, writable)
	}
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, err
	}
	if err := LockImage(f, writable); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &File{f: f, size: size, writable: writable}, nil
}

// openDevice opens the block device at path and reads its size.
func openDevice(path string, writable bool) (*File, error) {
	f, err := openDeviceFile(path, writable)
	if err != nil {
		return nil, err
	}
	n, err := deviceSize(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: size of block device: %w", path, err)
	}
	backing, err := lockBacking(f, writable)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, size: n, writable: writable, block: true, backing: backing}, nil
}

// statDevice says what path is: a regular file (of size bytes) or a
// device, or an error for anything else. (A device's size is read once it
// is open: deviceSize.)
func statDevice(path string) (size int64, isDevice bool, err error) {
	if IsDevicePath(path) {
		return 0, true, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return 0, false, err
	}
	switch {
	case isDeviceMode(fi.Mode()):
		return 0, true, nil
	case fi.Mode().IsRegular():
		return fi.Size(), false, nil
	}
	return 0, false, fmt.Errorf("%s: not a regular file or block device", path)
}

func (d *File) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }

func (d *File) WriteAt(p []byte, off int64) (int, error) {
	if !d.writable {
		return 0, fmt.Errorf("%s: opened read-only", d.f.Name())
	}
	return d.f.WriteAt(p, off)
}

// WriteVAt writes bufs one after another from off: one pwritev for many
// small pieces that lie end to end on the device where the system has it
// (writev_*.go), a pwrite each elsewhere. It loops over short writes.
func (d *File) WriteVAt(bufs [][]byte, off int64) (int, error) {
	if !d.writable {
		return 0, fmt.Errorf("%s: opened read-only", d.f.Name())
	}
	return writeVAt(d.f, bufs, off)
}

// MaxIovecs is the most pieces one pwritev takes (IOV_MAX on Linux, macOS
// and FreeBSD).
const MaxIovecs = 1024

// StartWriteback asks the kernel to start writing the dirty pages of an
// image file to its disk, without waiting (sync_file_range
// SYNC_FILE_RANGE_WRITE on Linux; elsewhere nothing, as it is only a
// hint: sync_*.go). A build calls it as it goes, so the disk works while
// the CPU does, and the final fsync finds little left to write.
func (d *File) StartWriteback() error {
	if d.block || !d.writable {
		return nil // a block device's writeback is the kernel's business
	}
	return startWriteback(d.f)
}

// SyncData waits until what was written to the image is durable, the
// disk's own cache flushed too (fdatasync on Linux, fsync elsewhere). A
// build calls it as it goes, from a worker, so that the final fsync has
// little left to wait for.
func (d *File) SyncData() error {
	if !d.writable {
		return nil
	}
	return syncData(d.f)
}

func (d *File) Size() int64 { return d.size }
func (d *File) Sync() error { return d.f.Sync() }

// Close releases the image. The lock is dropped explicitly first: a child
// process forked meanwhile (by any goroutine of the program) shares the
// open file description until it execs, and close(2) alone would leave a
// flock held through that copy, making an immediate reopen fail with
// ErrBusy.
func (d *File) Close() error {
	if !d.block {
		UnlockImage(d.f)
	}
	if d.backing != nil {
		UnlockImage(d.backing)
		d.backing.Close()
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
