package ext4go

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
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
	st         unix.Stat_t
	target     string      // symlinks
	xattrs     []hostXattr // sorted by name
	ranges     []Range     // regular files: the data ranges (SEEK_DATA/SEEK_HOLE)
	data       []byte      // regular files up to smallFile: the whole content
	err        error
	ready      chan struct{} // closed when the fields are set
}

type hostXattr struct {
	name  string
	value []byte
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
	toLoad, toTake []*hostEntry
	window         chan struct{}
	done           chan struct{}
	i              int
}

// start begins reading the entries names (in that order) of host directory
// dir. The caller takes them with next and must call stop.
func (s *hostScan) start(dir string, names []string) *dirScan {
	d := &dirScan{
		toLoad: make([]*hostEntry, len(names)),
		toTake: make([]*hostEntry, len(names)),
		window: make(chan struct{}, scanWindow),
		done:   make(chan struct{}),
	}
	for i, n := range names {
		d.toLoad[i] = &hostEntry{name: n, path: filepath.Join(dir, n), ready: make(chan struct{})}
		d.toTake[i] = d.toLoad[i]
	}
	go func() {
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
			go func() {
				defer func() { <-s.sem }()
				e.load()
				close(e.ready)
			}()
		}
	}()
	return d
}

// next returns the next entry once read.
func (d *dirScan) next() *hostEntry {
	e := d.toTake[d.i]
	d.toTake[d.i] = nil
	d.i++
	<-e.ready
	<-d.window
	return e
}

// stop ends the read-ahead; entries being read finish on their own.
func (d *dirScan) stop() { close(d.done) }

// load reads everything the builder will ask of the entry.
func (e *hostEntry) load() {
	if err := unix.Lstat(e.path, &e.st); err != nil {
		e.err = err
		return
	}
	e.xattrs = readHostXattrs(e.path)
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		e.target, e.err = os.Readlink(e.path)
	case unix.S_IFREG:
		if e.st.Size > 0 {
			e.err = e.loadData()
		}
	}
}

// loadData finds a regular file's data ranges and, for a small file, reads
// its data.
func (e *hostEntry) loadData() error {
	fd, err := unix.Open(e.path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	size := e.st.Size
	e.ranges = dataRanges(fd, size)
	if size > smallFile || len(e.ranges) == 0 {
		return nil
	}
	data := make([]byte, size)
	for off := 0; off < len(data); {
		n, err := unix.Pread(fd, data[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("changed while being copied (shorter than %d bytes)", size)
		}
		off += n
	}
	e.data = data
	return nil
}

// dataRanges returns the data ranges of the open host file fd (SEEK_DATA
// and SEEK_HOLE), or one range for the whole file where the host cannot
// tell.
func dataRanges(fd int, size int64) []Range {
	var out []Range
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return []Range{{0, size}}
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return []Range{{0, size}}
		}
		hole = min(hole, size)
		if hole > data {
			out = append(out, Range{data, hole - data})
		}
		off = hole
	}
	return out
}

// readHostXattrs returns the extended attributes of host file p, sorted by
// name; a host that cannot list or read them gives none (as mke2fs -d).
func readHostXattrs(p string) []hostXattr {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil
	}
	names := splitNul(buf[:size])
	sort.Strings(names)
	var out []hostXattr
	for _, nm := range names {
		vs, err := unix.Lgetxattr(p, nm, nil)
		if err != nil {
			continue
		}
		v := make([]byte, vs)
		vs, err = unix.Lgetxattr(p, nm, v)
		if err != nil {
			continue
		}
		out = append(out, hostXattr{nm, v[:vs]})
	}
	return out
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

// hostDataRanges returns the data ranges of host file p of size bytes.
func hostDataRanges(p string, size int64) ([]Range, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return dataRanges(fd, size), nil
}
