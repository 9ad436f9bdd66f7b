package ext4go

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// openHostDir opens host directory dir and reads its entries but "." and
// "..", sorted by name. It uses the system calls directly: an os.File
// costs a poller registration at open and two fcntl calls at each Fd, some
// 17,000 system calls for the 3,400 directories of /usr/local/go, on the
// goroutine every entry waits for. The caller closes hd.
func openHostDir(dir string) (hd *hostDir, ents []hostDirent, err error) {
	var fd int
	for {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return nil, nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			break
		}
		if ents, err = appendDirents(ents, buf[:n]); err != nil {
			unix.Close(fd)
			return nil, nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
	}
	slices.SortFunc(ents, func(a, b hostDirent) int { return strings.Compare(a.name, b.name) })
	return &hostDir{fd}, ents, nil
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
