package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
)

// OpenFile opens the named file as os.OpenFile does, with the flags
// os.O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL, O_TRUNC and O_APPEND; a
// file it creates gets mode perm (no umask) and owner 0:0.
func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (_ *File, err error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		// A change (an open for reading finds what a read finds).
		defer f.noteError("FS.OpenFile", &err)
	}
	return f.openFile(name, flag, perm, 0)
}

// openFile is OpenFile; hops counts the dangling symlinks followed to
// create their targets.
func (f *FS) openFile(name string, flag int, perm fs.FileMode, hops int) (*File, error) {
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	readable := acc == os.O_RDONLY || acc == os.O_RDWR
	writable := acc == os.O_WRONLY || acc == os.O_RDWR
	if err := f.checkClosed("open", name); err != nil {
		return nil, err
	}
	if (writable || flag&(os.O_CREATE|os.O_TRUNC) != 0) && f.refuseChange() != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.refuseChange()}
	}
	if flag&os.O_CREATE == 0 {
		n, err := f.resolve("open", name, true)
		if err != nil {
			return nil, err
		}
		return f.openNode(n, name, flag, readable, writable)
	}
	// An unlink racing the open through a symlink sends it round again;
	// the name it follows is then gone or another file's.
	for tries := 0; ; tries++ {
		file, retry, err := f.openCreate(name, flag, perm, hops, readable, writable)
		if !retry || tries >= 16 {
			return file, err
		}
	}
}

// openCreate is one try of an O_CREATE open. An existing file is opened
// under its directory's lock (so no unlink comes between the lookup and
// the open); only a symlink is followed afterwards, and retry reports that
// its target vanished on the way.
func (f *FS) openCreate(name string, flag int, perm fs.FileMode, hops int, readable, writable bool) (file *File, retry bool, err error) {
	parent, base, err := f.parentOf("open", name)
	if err != nil {
		return nil, false, err
	}
	fail := func(err error) (*File, bool, error) {
		return nil, false, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	parent.mu.Lock()
	ino, err := f.lookup(parent, base)
	switch {
	case err == nil:
		if flag&os.O_EXCL != 0 {
			parent.mu.Unlock()
			return fail(fs.ErrExist)
		}
		n, err := f.inode(ino)
		if err == nil {
			err = n.checkNamed()
		}
		if err == nil && n == parent {
			// Locking it again below would wait for ourselves.
			err = &CorruptError{What: "directory entry", Block: -1, Ino: parent.ino, Detail: fmt.Sprintf("%q names its own directory", base)}
		}
		if err != nil {
			parent.mu.Unlock()
			return fail(err)
		}
		if !n.isSymlink() {
			file, err := f.openNode(n, name, flag, readable, writable)
			parent.mu.Unlock()
			return file, false, err
		}
		target, terr := f.linkTarget(n, name)
		parent.mu.Unlock()
		n, err = f.resolve("open", name, true)
		if errors.Is(err, fs.ErrNotExist) && terr == nil {
			// A dangling symlink: O_CREATE makes its target, as open(2)
			// does.
			if hops++; hops > maxSymlinkHops {
				return fail(syscall.ELOOP)
			}
			file, err := f.openFile(target, flag, perm, hops)
			return file, false, err
		}
		if err != nil {
			return nil, false, err
		}
		file, err := f.openNode(n, name, flag, readable, writable)
		return file, errors.Is(err, fs.ErrNotExist), err
	case !errors.Is(err, fs.ErrNotExist):
		parent.mu.Unlock()
		return fail(err)
	}
	defer parent.mu.Unlock()
	var n *node
	err = f.retryAlloc(func() (err error) {
		n, err = f.create(parent, base, newEntry{mode: 0x8000 | unixPerm(perm), uid: f.opts.UID, gid: f.opts.GID, inheritACL: true})
		return err
	})
	if err != nil {
		return fail(err)
	}
	file, err = f.newFile(n, name, readable, writable, flag&os.O_APPEND != 0)
	return file, false, err
}

// linkTarget returns the path that symlink n, found at name, points to,
// relative to the image root.
func (f *FS) linkTarget(n *node, name string) (string, error) {
	t, err := f.readLink(n)
	if err != nil {
		return "", err
	}
	if t == "" || strings.HasSuffix(t, "/") {
		return "", fs.ErrNotExist
	}
	if !path.IsAbs(t) {
		t = path.Join("/", path.Dir(name), t)
	}
	// ".." stops at the root, as in the kernel's lookup.
	t = strings.TrimPrefix(path.Clean(t), "/")
	if t == "" {
		return ".", nil
	}
	return t, nil
}

// openNode opens n, found at name: the File counts as an open from the
// start, so a concurrent unlink leaves the inode to its last Close.
func (f *FS) openNode(n *node, name string, flag int, readable, writable bool) (*File, error) {
	if writable && n.isDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.EISDIR}
	}
	n.mu.RLock()
	err := checkOpenFlags(n.in(), flag, writable)
	n.mu.RUnlock()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.newFile(n, name, readable, writable, flag&os.O_APPEND != 0)
	if err != nil {
		return nil, err
	}
	if flag&os.O_TRUNC != 0 && n.isRegular() {
		n.mu.Lock()
		err := f.truncate(n, 0, libraryCaller)
		n.mu.Unlock()
		if err != nil {
			file.Close()
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
	return file, nil
}

// Create creates or truncates the named file, as os.Create.
func (f *FS) Create(name string) (*File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}
