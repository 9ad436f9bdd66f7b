package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"unsafe"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
)

// memDevice is an image held in memory (ext4go.Device), for benchmarks
// that measure ext4go without the host's storage: writes to an image
// file take the host's lock on that one file, which bounds every
// filesystem kept there (bench appenders --ceiling shows it). Regions of
// memRegion bytes have a lock each, so that writers of different regions
// copy in parallel and a read of a range never sees a write of it half
// done. Each lock has a cache line of its own: two appenders writing
// neighbouring regions would otherwise move one line between their cores
// on every write, a cost of the harness that the bench would time as
// ext4go's.
type memDevice struct {
	b     []byte
	locks []regionLock
}

type regionLock struct {
	sync.RWMutex
	_ [64 - unsafe.Sizeof(sync.RWMutex{})]byte
}

const memRegion = 1 << 20

func newMemDevice(b []byte) *memDevice {
	return &memDevice{b: b, locks: make([]regionLock, (len(b)+memRegion-1)/memRegion)}
}

// span returns the regions [first, last] that [off, off+n) touches, or
// an error for a range outside the device.
func (d *memDevice) span(off int64, n int) (int, int, error) {
	if off < 0 || off+int64(n) > int64(len(d.b)) {
		return 0, 0, fmt.Errorf("memory device: %d bytes at %d: outside its %d bytes", n, off, len(d.b))
	}
	if n == 0 {
		return 0, -1, nil
	}
	return int(off / memRegion), int((off + int64(n) - 1) / memRegion), nil
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("memory device: read at %d", off)
	}
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	var eof error
	if rest := int64(len(d.b)) - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	first, last, err := d.span(off, len(p))
	if err != nil {
		return 0, err
	}
	for i := first; i <= last; i++ {
		d.locks[i].RLock()
	}
	copy(p, d.b[off:])
	for i := first; i <= last; i++ {
		d.locks[i].RUnlock()
	}
	return len(p), eof
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	first, last, err := d.span(off, len(p))
	if err != nil {
		return 0, err
	}
	for i := first; i <= last; i++ {
		d.locks[i].Lock()
	}
	copy(d.b[off:], p)
	for i := first; i <= last; i++ {
		d.locks[i].Unlock()
	}
	return len(p), nil
}

func (d *memDevice) Size() int64 { return int64(len(d.b)) }
func (d *memDevice) Sync() error { return nil }

// Close keeps the memory: the bench reads the image after the filesystem
// is closed; free gives it back.
func (d *memDevice) Close() error { return nil }

func (d *memDevice) free() {
	freeMemory(d.b)
	d.b = nil
}

// newMemTarget makes a fresh filesystem of size bytes with ext4go's mkfs
// defaults, as newLibTarget, and opens it from memory; keep, if set, gets
// the image written out at finish.
func newMemTarget(size int64, keep string) (*libTarget, error) {
	tmp, err := os.CreateTemp("", "ext4go-bench-mem-")
	if err != nil {
		return nil, err
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	if err := mkfs.Format(name, mkfs.Options{Size: size}); err != nil {
		return nil, fmt.Errorf("mkfs: %w", err)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := anonMemory(size)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), b); err != nil {
		freeMemory(b)
		return nil, err
	}
	mem := newMemDevice(b)
	fsys, err := ext4go.OpenDevice(mem, &ext4go.Options{Writable: true})
	if err != nil {
		mem.free()
		return nil, err
	}
	return &libTarget{fsys: fsys, mem: mem, image: keep}, nil
}

// memFreeSpace measures the free space of the image in mem, and writes it
// to keep if set.
func memFreeSpace(mem *memDevice, keep string) (*freeSpace, error) {
	if keep != "" {
		if err := os.WriteFile(keep, mem.b, 0o644); err != nil {
			return nil, err
		}
	}
	fsys, err := ext4go.NewFS(bytes.NewReader(mem.b), int64(len(mem.b)), nil)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	return freeSpaceOf(fsys, "the memory image")
}
