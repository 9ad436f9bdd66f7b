package ext4go

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"sync"
	"syscall"

	"github.com/ext4go/ext4go/internal/pad"
)

// File is a file or directory opened from an *FS. ReadAt may be called
// from many goroutines at once; Read, Seek and ReadDir share an offset and
// are serialised by the File's lock.
type File struct {
	fsys *FS
	n    *node
	name string

	writable bool // opened with O_WRONLY or O_RDWR
	readable bool
	append   bool // O_APPEND: every Write goes to the end

	mu      sync.Mutex // protects off, dir and closed
	off     int64
	dir     []fs.DirEntry // directory entries not yet returned; nil until first ReadDir
	dirErr  error         // the listing's entries left out (*SkippedEntriesError), not yet returned
	dirRead bool
	closed  bool
	// 128 bytes in all, as node (files opened one after the other by
	// different goroutines take their own mu on every call).
	_ [24 * pad.On]byte
}

var (
	_ fs.ReadDirFile = (*File)(nil)
	_ io.ReaderAt    = (*File)(nil)
	_ io.Seeker      = (*File)(nil)
)

// Stat returns the file's FileInfo; its Sys is a *Stat.
func (f *File) Stat() (fs.FileInfo, error) {
	if err := f.checkOpen("stat"); err != nil {
		return nil, err
	}
	return &fileInfo{name: path.Base(f.name), st: f.n.stat(f.fsys)}, nil
}

// Ino returns the file's inode number.
func (f *File) Ino() uint32 { return f.n.ino }

func (f *File) checkOpen(op string) error {
	f.mu.Lock()
	closed := f.closed
	f.mu.Unlock()
	if closed || f.fsys.closed.Load() {
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

// Read reads from the current offset.
func (f *File) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.fsys.closed.Load() {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrClosed}
	}
	if f.n.isDir() {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EISDIR}
	}
	if !f.readable {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EBADF}
	}
	n, err := f.fsys.readLocked(f.n, p, f.off)
	f.off += int64(n)
	if err != nil && err != io.EOF {
		return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
	}
	f.fsys.touchAtime(f.n)
	return n, err
}

// ReadAt reads len(p) bytes at off; holes and unwritten extents read as
// zeros. It returns io.EOF when fewer bytes are left.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	if err := f.checkOpen("read"); err != nil {
		return 0, err
	}
	if f.n.isDir() {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EISDIR}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if !f.readable {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: syscall.EBADF}
	}
	n, err := f.fsys.readLocked(f.n, p, off)
	if err != nil && err != io.EOF {
		return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
	}
	f.fsys.touchAtime(f.n)
	return n, err
}

// Seek sets the offset for the next Read (io.SeekStart, SeekCurrent, SeekEnd).
func (f *File) Seek(offset int64, whence int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.fsys.closed.Load() {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrClosed}
	}
	var base int64
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		base = f.off
	case io.SeekEnd:
		base = f.n.size()
	case seekData, seekHole:
		off, err := f.seekData(offset, whence == seekData)
		if err != nil {
			return 0, &fs.PathError{Op: "seek", Path: f.name, Err: err}
		}
		f.off = off
		return off, nil
	default:
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	if base+offset < 0 {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	f.off = base + offset
	if f.n.isDir() && f.off == 0 {
		f.dir, f.dirRead = nil, false // rewinddir
	}
	return f.off, nil
}

// ReadDir reads the directory's entries in name order, as fs.ReadDirFile
// describes: n > 0 returns at most n entries and io.EOF at the end; n <= 0
// returns all that remain. Entries it cannot read are left out and named
// by a *SkippedEntriesError (in an *fs.PathError), returned once: with
// the entries by n <= 0, in place of the first io.EOF by n > 0.
func (f *File) ReadDir(count int) ([]fs.DirEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.fsys.closed.Load() {
		return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: fs.ErrClosed}
	}
	if !f.n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: syscall.ENOTDIR}
	}
	if !f.dirRead {
		f.n.mu.RLock()
		ents, err := f.fsys.readDir(f.n)
		f.n.mu.RUnlock()
		var skipped *SkippedEntriesError
		if err != nil && !errors.As(err, &skipped) {
			return nil, &fs.PathError{Op: "readdir", Path: f.name, Err: err}
		}
		sortEntries(ents)
		f.dir, f.dirRead, f.dirErr = ents, true, nil
		if skipped != nil {
			f.dirErr = &fs.PathError{Op: "readdir", Path: f.name, Err: skipped}
		}
		f.fsys.touchAtime(f.n)
	}
	if count <= 0 {
		ents, err := f.dir, f.dirErr
		f.dir, f.dirErr = nil, nil
		if ents == nil {
			ents = []fs.DirEntry{}
		}
		return ents, err
	}
	if len(f.dir) == 0 {
		if err := f.dirErr; err != nil {
			f.dirErr = nil
			return nil, err
		}
		return nil, io.EOF
	}
	count = min(count, len(f.dir))
	ents := f.dir[:count:count]
	f.dir = f.dir[count:]
	return ents, nil
}

// Close releases the file. Closing twice returns an error. The last close
// of a file that was unlinked while open frees it.
func (f *File) Close() (err error) {
	// The last close of an unlinked file frees it, and a writer's flushes
	// its delayed data: changes.
	defer f.fsys.noteError("File.Close", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	if f.fsys.closed.Load() {
		return nil // the filesystem's Close released everything
	}
	if err := f.fsys.release(f.n, f.writable); err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

var errIsDir = errors.New("is a directory")

// Linux's lseek whence values for sparse files.
const (
	seekData = 3
	seekHole = 4
)

// seekData finds the next data (or hole) offset at or after off, as
// lseek(SEEK_DATA / SEEK_HOLE) does: ENXIO when off is at or past the end,
// or (for data) no data follows. Unwritten extents count as holes.
func (f *File) seekData(off int64, data bool) (int64, error) {
	if off < 0 || off >= f.n.size() {
		return 0, syscall.ENXIO // kernel: iomap_seek_data, negative offsets too
	}
	return f.fsys.seekData(f.n, off, data)
}

// FindData answers lseek's SEEK_DATA (whence 3) or SEEK_HOLE (4) from off
// without moving the file's offset (a FUSE server answers for the
// kernel's file, whose offset is not this File's). Each call looks up the
// extent at off in the file's block map, cost logarithmic in its extents.
func (f *File) FindData(off int64, whence int) (int64, error) {
	if err := f.checkOpen("seek"); err != nil {
		return 0, err
	}
	if whence != seekData && whence != seekHole {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: fs.ErrInvalid}
	}
	off, err := f.seekData(off, whence == seekData)
	if err != nil {
		return 0, &fs.PathError{Op: "seek", Path: f.name, Err: err}
	}
	return off, nil
}
