package ext4go

import (
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/ext4go/ext4go/internal/inode"
)

// Write writes p at the current offset (at the end with O_APPEND).
func (f *File) Write(p []byte) (_ int, err error) {
	defer f.fsys.noteError("File.Write", &err)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.fsys.closed.Load() {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrClosed}
	}
	if err := f.checkWrite("write"); err != nil {
		return 0, err
	}
	fsys, n := f.fsys, f.n
	if err := f.lockNode("write"); err != nil {
		return 0, err
	}
	defer n.mu.Unlock()
	if f.append {
		f.off = n.size()
	}
	if err := f.removePrivsForWrite(p); err != nil {
		return 0, err
	}
	m, err := fsys.writeAt(n, p, f.off, true, true)
	f.off += int64(m)
	if err != nil {
		return m, &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	return m, nil
}

// WriteAt writes p at off. It is not allowed on a file opened with
// O_APPEND, as with os.File.
func (f *File) WriteAt(p []byte, off int64) (_ int, err error) {
	defer f.fsys.noteError("File.WriteAt", &err)
	if err := f.checkOpen("write"); err != nil {
		return 0, err
	}
	if err := f.checkWrite("write"); err != nil {
		return 0, err
	}
	if f.append {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: syscall.EINVAL}
	}
	n := f.n
	if err := f.lockNode("write"); err != nil {
		return 0, err
	}
	defer n.mu.Unlock()
	if err := f.removePrivsForWrite(p); err != nil {
		return 0, err
	}
	m, err := f.fsys.writeAt(n, p, off, true, true)
	if err != nil {
		return m, &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	return m, nil
}

// removePrivsForWrite drops the file's privileges before a write of p
// (kernel: file_remove_privs, after generic_write_checks, which ends an
// empty write first). f.n.mu is held exclusively.
func (f *File) removePrivsForWrite(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := f.fsys.removePrivs(f.n, libraryCaller); err != nil {
		return &fs.PathError{Op: "write", Path: f.name, Err: err}
	}
	return nil
}

// WriteString is Write of a string.
func (f *File) WriteString(s string) (int, error) { return f.Write([]byte(s)) }

// ReadFrom copies r into the file at the current offset, in large writes.
func (f *File) ReadFrom(r io.Reader) (int64, error) {
	if err := f.checkOpen("write"); err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var total int64
	for {
		m, err := io.ReadFull(r, buf)
		if m > 0 {
			w, werr := f.Write(buf[:m])
			total += int64(w)
			if werr != nil {
				return total, werr
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// lockNode locks the file's node for a change. A File whose node was
// freed can only be one that was closed meanwhile (an open File keeps its
// inode), so that is ErrClosed.
func (f *File) lockNode(op string) error {
	f.n.mu.Lock()
	if f.n.freed.Load() {
		f.n.mu.Unlock()
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	}
	return nil
}

func (f *File) checkWrite(op string) error {
	if f.fsys.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: f.fsys.refuseChange()}
	}
	if !f.writable {
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

// Truncate changes the file's size, freeing the blocks past a smaller size;
// a larger size reads as zeros.
func (f *File) Truncate(size int64) (err error) {
	defer f.fsys.noteError("File.Truncate", &err)
	if err := f.checkOpen("truncate"); err != nil {
		return err
	}
	if err := f.checkWrite("truncate"); err != nil {
		return err
	}
	n := f.n
	if err := f.lockNode("truncate"); err != nil {
		return err
	}
	defer n.mu.Unlock()
	if frozen(n.inLocked()) {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: syscall.EPERM}
	}
	// Removing part of an extent may split it and need a tree block.
	if err := f.fsys.retryAlloc(func() error { return f.fsys.truncate(n, size, libraryCaller) }); err != nil {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: err}
	}
	return nil
}

// Fallocate changes the space of [off, off+length) as fallocate(2): mode 0
// allocates (reads as zeros, size grows), FallocKeepSize allocates without
// changing the size, FallocPunchHole|FallocKeepSize frees the range, and
// FallocZeroRange (optionally with FallocKeepSize) makes it read as zeros
// keeping it allocated.
func (f *File) Fallocate(mode int, off, length int64) (err error) {
	defer f.fsys.noteError("File.Fallocate", &err)
	if err := f.checkOpen("fallocate"); err != nil {
		return err
	}
	if err := f.checkWrite("fallocate"); err != nil {
		return err
	}
	n := f.n
	if err := f.lockNode("fallocate"); err != nil {
		return err
	}
	defer n.mu.Unlock()
	// The VFS's vfs_fallocate: nothing on an immutable file, only
	// allocation on an append-only one.
	if in := n.inLocked(); in.HasFlag(inode.FlagImmutable) || in.HasFlag(inode.FlagAppend) && mode&^FallocKeepSize != 0 {
		return &fs.PathError{Op: "fallocate", Path: f.name, Err: syscall.EPERM}
	}
	if err := f.fsys.fallocate(n, mode, off, length, libraryCaller); err != nil {
		return &fs.PathError{Op: "fallocate", Path: f.name, Err: err}
	}
	return nil
}

// Sync writes the filesystem's changes to the device (all of them: ext4go
// commits whole transactions, like fsync on a journalled ext4).
func (f *File) Sync() (err error) {
	defer f.fsys.noteError("File.Sync", &err)
	if err := f.checkOpen("sync"); err != nil {
		return err
	}
	if err := f.fsys.syncFile(f.n); err != nil {
		return &fs.PathError{Op: "sync", Path: f.name, Err: err}
	}
	return nil
}

// Name returns the name the file was opened with.
func (f *File) Name() string { return f.name }

// WriteFile writes data to the named file, creating it with mode perm if
// needed and truncating it otherwise, as os.WriteFile.
func (f *FS) WriteFile(name string, data []byte, perm fs.FileMode) (err error) {
	defer f.noteError("FS.WriteFile", &err)
	file, err := f.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = file.Write(data)
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}
