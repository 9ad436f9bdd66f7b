package main

// The filesystem the workload benchmarks (age, appenders) run on: ext4go's
// library on a fresh image, or a mounted directory through system calls
// (the kernel's ext4, Linux only: bench_target_linux.go), behind one
// interface so that both run the very same operations.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
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
