//go:build linux || darwin || freebsd

package ext4go

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/host"
)

// Reading a source tree where the host has stat(2), *at calls and
// extended attributes (Linux, macOS, FreeBSD). How a directory is listed
// differs: build_host_linux.go (getdents64), build_host_bsd.go.

// hostDir is a host directory being copied, open as fd.
type hostDir struct{ fd int }

func (d *hostDir) close() { unix.Close(d.fd) }

// id is the directory's identity (device, inode), to find loops.
func (d *hostDir) id() (key [2]uint64, known bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return key, false, err
	}
	hs := host.FromUnix(&st)
	return [2]uint64{hs.Dev, hs.Ino}, true, nil
}

// load reads everything the builder will ask of the entry, in the
// directory d. A regular file (as the directory says) is opened first and
// everything read through its descriptor: one name lookup.
func (e *hostEntry) load(d *hostDir) {
	if e.typ.IsRegular() && e.loadRegular(d.fd) {
		return
	}
	st, err := host.StatAt(d.fd, e.name)
	if err != nil {
		e.err = err
		return
	}
	e.st = st
	// A host that cannot list or read them gives none (as mke2fs -d).
	e.xattrs, _ = host.LinkXattrs(e.path)
	switch e.st.Type() {
	case host.IFLNK:
		e.target, e.err = os.Readlink(e.path)
	case host.IFREG:
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
	st, err := host.StatAt(fd, "")
	if err != nil || st.Type() != host.IFREG {
		return false
	}
	e.st = st
	e.xattrs, _ = host.FdXattrs(fd)
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
	if bs := e.st.Blksize; bs > 0 && e.st.Blocks*512 == (size+bs-1)/bs*bs {
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

// hostDataRanges returns the data ranges of host file p of size bytes.
func hostDataRanges(p string, size int64) ([]Range, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	return dataRanges(fd, size), nil
}

// lstatHost is lstat(2) of host file p.
func lstatHost(p string) (host.Stat, error) {
	return host.StatAt(unix.AT_FDCWD, p)
}

// xattrListSize is the length of host file p's list of attribute names.
func xattrListSize(p string) int { return host.XattrListSize(p) }
