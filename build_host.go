package ext4go

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"

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
	typ        fs.FileMode // the type the directory gave (d_type)
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
	fed            chan struct{} // closed when no more loads will start
	loading        sync.WaitGroup
	i              int
}

// start begins reading the entries ents (in that order) of host directory
// dir, open as dirfd: entries are stat'ed and opened relative to it, not
// by a path walked from the root each time. The caller takes them with
// next and must call stop before closing dirfd.
func (s *hostScan) start(dir string, dirfd int, ents []fs.DirEntry) *dirScan {
	d := &dirScan{
		toLoad: make([]*hostEntry, len(ents)),
		toTake: make([]*hostEntry, len(ents)),
		window: make(chan struct{}, scanWindow),
		done:   make(chan struct{}),
		fed:    make(chan struct{}),
	}
	for i, de := range ents {
		n := de.Name()
		d.toLoad[i] = &hostEntry{name: n, path: filepath.Join(dir, n), typ: de.Type(), ready: make(chan struct{})}
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
				e.load(dirfd)
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

// stop ends the read-ahead and waits for the entries being read, which
// use the directory's descriptor.
func (d *dirScan) stop() {
	close(d.done)
	<-d.fed
	d.loading.Wait()
}

// load reads everything the builder will ask of the entry, in the
// directory dirfd. A regular file (as the directory says) is opened
// first and everything read through its descriptor: one name lookup.
func (e *hostEntry) load(dirfd int) {
	if e.typ.IsRegular() && e.loadRegular(dirfd) {
		return
	}
	if err := unix.Fstatat(dirfd, e.name, &e.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
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

// loadRegular loads a regular file through one descriptor. It reports
// false, leaving the entry to load's by-name path, when the name cannot
// be opened as a regular file (it changed since the directory was read,
// or it cannot be read: the by-name path reports that as before).
func (e *hostEntry) loadRegular(dirfd int) bool {
	// O_NONBLOCK: should the name be a FIFO by now, opening must not wait.
	fd, err := unix.Openat(dirfd, e.name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &e.st); err != nil || e.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	e.xattrs = readXattrs(
		func(buf []byte) (int, error) { return unix.Flistxattr(fd, buf) },
		func(name string, buf []byte) (int, error) { return unix.Fgetxattr(fd, name, buf) })
	if e.st.Size > 0 {
		e.err = e.readData(fd)
	}
	return true
}

// loadData finds a regular file's data ranges and, for a small file, reads
// its data.
func (e *hostEntry) loadData() error {
	fd, err := unix.Open(e.path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return e.readData(fd)
}

// readData finds the data ranges of the regular file open as fd and, for
// a small file, reads its data.
func (e *hostEntry) readData(fd int) error {
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
	return readXattrs(
		func(buf []byte) (int, error) { return unix.Llistxattr(p, buf) },
		func(name string, buf []byte) (int, error) { return unix.Lgetxattr(p, name, buf) })
}

// readXattrs reads extended attributes with the list and get calls given
// (by path or by descriptor).
func readXattrs(list func([]byte) (int, error), get func(string, []byte) (int, error)) []hostXattr {
	size, err := list(nil)
	if err != nil || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	size, err = list(buf)
	if err != nil {
		return nil
	}
	names := splitNul(buf[:size])
	sort.Strings(names)
	var out []hostXattr
	for _, nm := range names {
		vs, err := get(nm, nil)
		if err != nil {
			continue
		}
		v := make([]byte, vs)
		vs, err = get(nm, v)
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
