package ext4go

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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
	atime      time.Time // st's, or statx's where st holds only 32-bit seconds
	mtime      time.Time
	target     string      // symlinks
	xattrs     []hostXattr // sorted by name
	ranges     []Range     // regular files: the data ranges (SEEK_DATA/SEEK_HOLE)
	data       []byte      // regular files up to smallFile: the whole content
	buf        *dataBuf    // what data lies in: given back once written
	err        error
	ready      chan struct{} // closed when the fields are set
	claimed    atomic.Bool   // set by whoever loads it: a reader, or next
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
	dirfd          int
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
func (s *hostScan) start(dir string, dirfd int, ents []hostDirent) *dirScan {
	d := &dirScan{
		dirfd:  dirfd,
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
					e.load(dirfd)
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
		e.load(d.dirfd)
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

// hostTimes returns the access and modification times of the file that
// st describes, name in dirfd (flags as statx's). Where struct stat holds
// 32-bit seconds (386, arm) the kernel cuts times past 2038 to fit, and
// statx(2), whose seconds have 64 bits, reads them again.
func hostTimes(st *unix.Stat_t, dirfd int, name string, flags int) (atime, mtime time.Time) {
	if unsafe.Sizeof(st.Mtim.Sec) < 8 {
		var sx unix.Statx_t
		if unix.Statx(dirfd, name, flags, unix.STATX_ATIME|unix.STATX_MTIME, &sx) == nil && sx.Mask&(unix.STATX_ATIME|unix.STATX_MTIME) == unix.STATX_ATIME|unix.STATX_MTIME {
			return time.Unix(sx.Atime.Sec, int64(sx.Atime.Nsec)), time.Unix(sx.Mtime.Sec, int64(sx.Mtime.Nsec))
		}
	}
	return time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix())
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
	e.atime, e.mtime = hostTimes(&e.st, dirfd, e.name, unix.AT_SYMLINK_NOFOLLOW)
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

// hostDirent is an entry of a host directory: its name and the type the
// directory gives (d_type; ModeIrregular where the host does not say).
type hostDirent struct {
	name string
	typ  fs.FileMode
}

// openHostDir opens host directory dir and reads its entries but "." and
// "..", sorted by name. It uses the system calls directly: an os.File
// costs a poller registration at open and two fcntl calls at each Fd, some
// 17,000 system calls for the 3,400 directories of /usr/local/go, on the
// goroutine every entry waits for. The caller closes fd.
func openHostDir(dir string) (fd int, ents []hostDirent, err error) {
	for {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return -1, nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return -1, nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		if ents, err = appendDirents(ents, buf[:n]); err != nil {
			unix.Close(fd)
			return -1, nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
	}
	slices.SortFunc(ents, func(a, b hostDirent) int { return strings.Compare(a.name, b.name) })
	return fd, ents, nil
}

// appendDirents appends the entries of buf, as getdents64 fills it
// (struct linux_dirent64: d_ino, d_off, d_reclen, d_type, a NUL-ended
// name), leaving out "." and "..".
func appendDirents(ents []hostDirent, buf []byte) ([]hostDirent, error) {
	const nameOff = 19
	for len(buf) > 0 {
		if len(buf) < nameOff {
			return ents, fmt.Errorf("directory record of %d bytes", len(buf))
		}
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < nameOff || reclen > len(buf) {
			return ents, fmt.Errorf("directory record length %d of %d bytes left", reclen, len(buf))
		}
		rec := buf[:reclen]
		buf = buf[reclen:]
		if binary.NativeEndian.Uint64(rec[0:8]) == 0 {
			continue // a deleted entry some hosts still list
		}
		name := rec[nameOff:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if len(name) == 0 || string(name) == "." || string(name) == ".." {
			continue
		}
		ents = append(ents, hostDirent{name: string(name), typ: hostDirentType(rec[18])})
	}
	return ents, nil
}

// hostDirentType is the file type of a d_type value, as os.ReadDir gives it;
// ModeIrregular for DT_UNKNOWN and anything else, which makes the entry
// go by lstat.
func hostDirentType(t byte) fs.FileMode {
	switch t {
	case unix.DT_REG:
		return 0
	case unix.DT_DIR:
		return fs.ModeDir
	case unix.DT_LNK:
		return fs.ModeSymlink
	case unix.DT_FIFO:
		return fs.ModeNamedPipe
	case unix.DT_SOCK:
		return fs.ModeSocket
	case unix.DT_CHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case unix.DT_BLK:
		return fs.ModeDevice
	}
	return fs.ModeIrregular
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
	e.atime, e.mtime = hostTimes(&e.st, fd, "", unix.AT_EMPTY_PATH)
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
	if bs := int64(e.st.Blksize); bs > 0 && e.st.Blocks*512 == (size+bs-1)/bs*bs {
		// Exactly the blocks its size needs: no hole to find, and two
		// lseeks a file saved. Blocks past the end or an xattr block
		// counted in st_blocks make the count differ, and the holes are
		// searched for; only a hole whose block such extras exactly
		// make up for is copied as the zeros it reads as.
		e.ranges = []Range{{0, size}}
	} else {
		e.ranges = dataRanges(fd, size)
	}
	if size > smallFile || len(e.ranges) == 0 {
		return nil
	}
	buf := getDataBuf(int(size))
	data := buf.b[:size]
	for off := 0; off < len(data); {
		n, err := unix.Pread(fd, data[off:], int64(off))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			buf.release()
			return err
		}
		if n == 0 {
			buf.release()
			return fmt.Errorf("changed while being copied (shorter than %d bytes)", size)
		}
		off += n
	}
	e.data, e.buf = data, buf
	return nil
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

// warmParallel is how many goroutines warmTree reads with.
const warmParallel = 32

// warmTree reads ahead, on a cold cache, what AddDir will read of the host
// tree src: the scan reads ahead only within the directory being copied,
// and most directories are small, so it seldom has many reads in flight.
// warmTree walks the whole tree out of order from warmParallel goroutines,
// reading every directory and opening every regular file (which reads its
// inode) to ask the kernel to read it in (POSIX_FADV_WILLNEED), so the
// disk has many requests at once and the build then finds it all cached.
// On a warm cache that would cost a tenth of the build: it probes the
// first files it opens (a read that must not wait for the disk,
// RWF_NOWAIT) and stops if they are all cached. Closing stop ends it
// early; the returned wait returns once its goroutines have ended.
func warmTree(src string, stop <-chan struct{}) (wait func()) {
	w := &warmer{dirs: []string{src}, stop: stop}
	w.cond = sync.NewCond(&w.mu)
	var wg sync.WaitGroup
	for range warmParallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				dir, ok := w.next()
				if !ok {
					return
				}
				w.warmDir(dir)
				w.done()
			}
		}()
	}
	return wg.Wait
}

// warmer is warmTree's queue of directories to read.
type warmer struct {
	mu     sync.Mutex
	cond   *sync.Cond
	dirs   []string // to read
	active int      // being read (they may add more)
	stop   <-chan struct{}
	// probed counts files found cached, uncached whether any was not;
	// warm is set once warmProbes were cached and none was not.
	probed   atomic.Int32
	uncached atomic.Bool
	warm     atomic.Bool
}

// warmProbes cached files, and none uncached, make warmTree stop.
const warmProbes = 64

// next takes a directory to read; false when there is none left, or when
// stopped.
func (w *warmer) next() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.dirs) == 0 && w.active > 0 && !w.stopped() {
		w.cond.Wait()
	}
	if len(w.dirs) == 0 || w.stopped() {
		w.cond.Broadcast() // the others end too
		return "", false
	}
	dir := w.dirs[len(w.dirs)-1]
	w.dirs = w.dirs[:len(w.dirs)-1]
	w.active++
	return dir, true
}

func (w *warmer) done() {
	w.mu.Lock()
	w.active--
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *warmer) stopped() bool {
	if w.warm.Load() {
		return true
	}
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// cached reports whether the start of the open file fd is in the page
// cache, while the first files are being probed (afterwards: false).
func (w *warmer) cached(fd int) bool {
	if w.uncached.Load() || w.probed.Load() >= warmProbes {
		return false
	}
	var one [1]byte
	n, err := unix.Preadv2(fd, [][]byte{one[:]}, 0, unix.RWF_NOWAIT)
	switch {
	case err != nil: // EAGAIN: not cached (or no RWF_NOWAIT: warm anyway)
		w.uncached.Store(true)
		return false
	case n == 0:
		return true // empty: nothing to read in
	}
	if w.probed.Add(1) >= warmProbes && !w.uncached.Load() {
		w.warm.Store(true)
		w.cond.Broadcast()
	}
	return true
}

func (w *warmer) warmDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return // the build reports it
	}
	defer d.Close()
	ents, err := d.ReadDir(-1)
	if err != nil {
		return
	}
	var sub []string
	for _, e := range ents {
		if w.stopped() {
			return
		}
		switch {
		case e.IsDir():
			sub = append(sub, filepath.Join(dir, e.Name()))
		case e.Type().IsRegular():
			fd, err := unix.Openat(int(d.Fd()), e.Name(), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
			if err == nil {
				if !w.cached(fd) {
					unix.Fadvise(fd, 0, 0, unix.FADV_WILLNEED)
				}
				unix.Close(fd)
			}
		}
	}
	if len(sub) > 0 {
		w.mu.Lock()
		w.dirs = append(w.dirs, sub...)
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}
