package ext4go

import (
	"io"
	"io/fs"
	"math/bits"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ext4go/ext4go/internal/host"
)

// Reading a source tree is mostly waiting: on a cold cache every lstat,
// xattr listing and small file costs a disk read, and mke2fs -d does them
// one at a time. The builder keeps entries in name order (allocation order
// makes images reproducible), so a hostScan reads ahead instead: while the
// builder adds entry i of a directory, up to scanWindow later entries of it
// are being stat'ed and read by at most scanParallel goroutines in all.
const (
	scanWindow   = 128
	scanParallel = 16
	// smallFile is the size up to which a regular file's data is read
	// while scanning (one open instead of two) and handed to the fill
	// workers in memory.
	smallFile = 64 << 10
)

// hostEntry is what the builder needs of one source entry.
type hostEntry struct {
	name, path string
	typ        fs.FileMode // the type the directory gave (d_type)
	st         host.Stat
	target     string       // symlinks
	xattrs     []host.Xattr // sorted by name
	ranges     []Range      // regular files: the data ranges (SEEK_DATA/SEEK_HOLE)
	data       []byte       // regular files up to smallFile: the whole content
	buf        *dataBuf     // what data lies in: given back once written
	err        error
	ready      chan struct{} // closed when the fields are set
	claimed    atomic.Bool   // set by whoever loads it: a reader, or next
}

// hostScan reads entries ahead of the builder. sem bounds the goroutines
// doing host I/O across all directories being read.
type hostScan struct {
	sem chan struct{}
}

func newHostScan() *hostScan { return &hostScan{sem: make(chan struct{}, scanParallel)} }

// dirScan reads ahead in one directory. window holds a token for each
// entry started and not yet taken by next. The reader and the builder each
// have their list of the entries and drop an entry from it when done with
// it, so memory is held only for entries in the window.
type dirScan struct {
	dir            *hostDir
	toLoad, toTake []*hostEntry
	window         chan struct{}
	done           chan struct{}
	fed            chan struct{} // closed when no more loads will start
	loading        sync.WaitGroup
	i              int
}

// start begins reading the entries ents (in that order) of host directory
// dir, open as hd: where the host has descriptors, entries are stat'ed and
// opened relative to it, not by a path walked from the root each time.
// The caller takes them with next and must call stop before closing hd.
func (s *hostScan) start(dir string, hd *hostDir, ents []hostDirent) *dirScan {
	d := &dirScan{
		dir:    hd,
		toLoad: make([]*hostEntry, len(ents)),
		toTake: make([]*hostEntry, len(ents)),
		window: make(chan struct{}, scanWindow),
		done:   make(chan struct{}),
		fed:    make(chan struct{}),
	}
	for i, de := range ents {
		d.toLoad[i] = &hostEntry{name: de.name, path: filepath.Join(dir, de.name), typ: de.typ, ready: make(chan struct{})}
		d.toTake[i] = d.toLoad[i]
	}
	go func() {
		defer close(d.fed)
		for i, e := range d.toLoad {
			d.toLoad[i] = nil
			select {
			case d.window <- struct{}{}:
			case <-d.done:
				return
			}
			select {
			case s.sem <- struct{}{}:
			case <-d.done:
				return
			}
			d.loading.Add(1)
			go func() {
				defer d.loading.Done()
				defer func() { <-s.sem }()
				if e.claimed.CompareAndSwap(false, true) {
					e.load(hd)
					close(e.ready)
				}
			}()
		}
	}()
	return d
}

// next returns the next entry once read. An entry no reader has started
// yet is read here rather than waited for: mostly the first ones of a
// directory, before the readers get going (most directories are small, so
// that wait added up to a fifth of a warm build).
func (d *dirScan) next() *hostEntry {
	e := d.toTake[d.i]
	d.toTake[d.i] = nil
	d.i++
	if e.claimed.CompareAndSwap(false, true) {
		e.load(d.dir)
		close(e.ready)
	}
	<-e.ready
	<-d.window
	return e
}

// stop ends the read-ahead and waits for the entries being read, which
// use the directory's descriptor.
func (d *dirScan) stop() {
	close(d.done)
	<-d.fed
	d.loading.Wait()
}

// hostDirent is an entry of a host directory: its name and the type the
// directory gives (d_type; ModeIrregular where the host does not say).
type hostDirent struct {
	name string
	typ  fs.FileMode
}

// dataBuf is recycled memory for one small file's data. A build reads tens
// of MiB of small files; reading each into new memory grew the heap by as
// much between collections, and on a VM every fresh 4 KiB page costs a
// fault (a fifth of a warm mkfs -d). refs counts the holders: the entry
// until its job is queued, and each gathered batch or job its data is in.
type dataBuf struct {
	b     []byte
	refs  atomic.Int32
	class int
}

// The buffer sizes are minDataBuf<<i for i < dataBufClasses, the last
// smallFile (TestDataBufClasses).
const (
	minDataBuf     = 512
	dataBufClasses = 8
)

var dataBufs [dataBufClasses]sync.Pool

// getDataBuf returns a buffer of at least n ≤ smallFile bytes, with one
// reference.
func getDataBuf(n int) *dataBuf {
	class := 0
	if n > minDataBuf {
		class = bits.Len(uint((n - 1) / minDataBuf))
	}
	d, _ := dataBufs[class].Get().(*dataBuf)
	if d == nil {
		d = &dataBuf{b: make([]byte, minDataBuf<<class), class: class}
	}
	d.refs.Store(1)
	return d
}

// hold adds a reference.
func (d *dataBuf) hold() { d.refs.Add(1) }

// release drops a reference; the last gives the buffer back. Nil is a
// buffer not pooled (data from elsewhere): nothing to do.
func (d *dataBuf) release() {
	if d != nil && d.refs.Add(-1) == 0 {
		dataBufs[d.class].Put(d)
	}
}

// bytesReaderAt serves file data already read: bytes base… of the file.
type bytesReaderAt struct {
	data []byte
	base int64
}

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	off -= b.base
	if off < 0 || off >= int64(len(b.data)) {
		return 0, io.EOF
	}
	n := copy(p, b.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
