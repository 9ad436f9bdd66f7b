package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// OpenAt opens the entry called name of directory d for reading, as
// openat(2) with O_NOFOLLOW: name is one path element, found in d itself
// (not by walking from the root again, so walks cost what they visit), and
// a symbolic link is not followed (ELOOP). The File's Name is name.
func (d *File) OpenAt(name string) (*File, error) {
	if err := d.checkOpen("openat"); err != nil {
		return nil, err
	}
	fail := func(err error) (*File, error) {
		return nil, &fs.PathError{Op: "openat", Path: d.name + "/" + name, Err: err}
	}
	if !validPath(name) || name == "." || len(name) > 255 || containsSlash(name) {
		return fail(fs.ErrInvalid)
	}
	f, n := d.fsys, d.n
	if !n.isDir() {
		return fail(syscall.ENOTDIR)
	}
	n.mu.RLock()
	var c *node
	err := f.named(n)
	if err == nil {
		var ino uint32
		if ino, err = f.lookup(n, name); err == nil {
			c, err = f.inode(ino) // under the directory's lock: see lifetime.go
		}
	}
	n.mu.RUnlock()
	if err == nil {
		err = c.checkNamed()
	}
	if err != nil {
		return fail(err)
	}
	if c.isSymlink() {
		return fail(syscall.ELOOP)
	}
	if err := f.checkFoundIn(c, n); err != nil {
		return fail(err)
	}
	// Named as given (as os.Root names what it opens): a chain of OpenAt
	// calls holds no path longer than its elements.
	return f.newFile(c, name, true, false, false)
}

// OpenEntry opens the entry e of directory d, as d's ReadDir returned it,
// by the inode number the entry holds: no search of the directory by
// name, so a walk that opens every entry costs one read of each directory
// (OpenAt searches it once per entry). Unlike OpenAt it opens any type
// and follows nothing: a regular file or directory is open for reading,
// anything else is a File as LookupAt gives (for Stat, ReadLink and the
// xattrs). On a writable filesystem the entry may have gone since ReadDir,
// its number even given to another file: there the name is looked up
// again and must still name that inode (fs.ErrNotExist otherwise).
func (d *File) OpenEntry(e fs.DirEntry) (*File, error) {
	if err := d.checkOpen("openentry"); err != nil {
		return nil, err
	}
	de, ok := e.(*dirEntry)
	fail := func(err error) (*File, error) {
		return nil, &fs.PathError{Op: "openentry", Path: d.name + "/" + e.Name(), Err: err}
	}
	if !ok || de.fsys != d.fsys {
		return fail(fs.ErrInvalid) // not an entry this filesystem read
	}
	f, n := d.fsys, d.n
	if !n.isDir() {
		return fail(syscall.ENOTDIR)
	}
	n.mu.RLock()
	var c *node
	err := f.named(n)
	if err == nil && f.w != nil {
		var ino uint32
		if ino, err = f.lookup(n, de.name); err == nil && ino != de.ino {
			err = fs.ErrNotExist
		}
	}
	if err == nil {
		c, err = f.inode(de.ino) // under the directory's lock: see lifetime.go
	}
	n.mu.RUnlock()
	if err == nil {
		err = c.checkNamed()
	}
	if err != nil {
		return fail(err)
	}
	if err := f.checkFoundIn(c, n); err != nil {
		return fail(err)
	}
	return f.newFile(c, de.name, c.isDir() || c.isRegular(), false, false)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}

// ErrLoop reports a directory entry that names a directory above it: a
// loop in the tree, which only a corrupt filesystem has. Walks report it
// (as a *CorruptError matching ErrCorrupt) instead of descending forever.
func loopError(ino uint32, p string) error {
	return &CorruptError{What: "directory", Block: -1, Ino: ino,
		Detail: fmt.Sprintf("%q names a directory above it (a loop)", p)}
}

// WalkDir walks the tree rooted at root as fs.WalkDir does (root first,
// then each directory's entries in name order; fn may return fs.SkipDir
// or fs.SkipAll), but by inode: every directory is read through the one
// above it rather than by resolving its path from the root again, so a
// walk costs time in proportion to what it visits and memory in
// proportion to its depth. A directory naming a directory above it (a
// loop in a corrupt image) is passed to fn with a *CorruptError instead of
// being entered. root is followed if it is a symbolic link, as in
// fs.WalkDir.
func (f *FS) WalkDir(root string, fn fs.WalkDirFunc) error {
	file, err := f.OpenFile(root, 0, 0)
	var info fs.FileInfo
	if err == nil {
		defer file.Close()
		info, err = file.Stat()
	}
	if err != nil {
		err = fn(root, nil, err)
	} else {
		w := &walker{fn: fn, above: map[uint32]bool{}, path: []byte(root)}
		if root == "." {
			w.path, w.dot = nil, true
		}
		err = w.walk(file, fs.FileInfoToDirEntry(info))
	}
	if errors.Is(err, fs.SkipDir) || errors.Is(err, fs.SkipAll) {
		return nil
	}
	return err
}

type walker struct {
	fn    fs.WalkDirFunc
	above map[uint32]bool // the directories being walked, by inode
	path  []byte          // the path of the current entry (shared by all levels)
	dot   bool            // the root is ".", and w.path empty there
}

// walk visits the entry at w.path (d, opened as file when a directory).
func (w *walker) walk(file *File, d fs.DirEntry) error {
	p := string(w.path)
	if len(w.path) == 0 && w.dot {
		p = "."
	}
	if err := w.fn(p, d, nil); err != nil || file == nil || !d.IsDir() {
		if errors.Is(err, fs.SkipDir) && d.IsDir() {
			err = nil
		}
		return err
	}
	ino := file.Ino()
	if w.above[ino] {
		if err := w.fn(p, d, loopError(ino, p)); err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
		return nil
	}
	w.above[ino] = true
	defer delete(w.above, ino)
	ents, err := file.ReadDir(-1)
	if err != nil {
		if err := w.fn(p, d, err); err != nil {
			if errors.Is(err, fs.SkipDir) {
				err = nil
			}
			return err
		}
	}
	base := len(w.path)
	for _, e := range ents {
		w.path = w.path[:base]
		if base > 0 {
			w.path = append(w.path, '/')
		}
		w.path = append(w.path, e.Name()...)
		var child *File
		if e.IsDir() {
			c, err := file.OpenAt(e.Name())
			if err != nil {
				if err := w.fn(string(w.path), e, err); err != nil && !errors.Is(err, fs.SkipDir) {
					w.path = w.path[:base]
					return err
				}
				continue
			}
			child = c
		}
		err := w.walk(child, e)
		if child != nil {
			child.Close()
		}
		if err != nil {
			w.path = w.path[:base]
			if errors.Is(err, fs.SkipDir) {
				return nil // skip the rest of this directory
			}
			return err
		}
	}
	w.path = w.path[:base]
	return nil
}

// checkFoundIn refuses a directory c found in directory n whose ".." is
// not n: it has a second name (a hard link to a directory: a corrupt
// image, maybe a loop back to an ancestor), and the kernel refuses to
// enter it too (d_splice_alias). Anything but a directory passes.
func (f *FS) checkFoundIn(c, n *node) error {
	if !c.isDir() {
		return nil
	}
	c.mu.RLock()
	up, err := f.lookup(c, "..")
	c.mu.RUnlock()
	if err == nil && up != n.ino {
		err = &CorruptError{What: "directory", Block: -1, Ino: c.ino,
			Detail: fmt.Sprintf("its \"..\" is inode %d, not %d where it was found (a directory with two names, maybe a loop)", up, n.ino)}
	}
	return err
}
