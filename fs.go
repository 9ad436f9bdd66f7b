package ext4go

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/ext4go/ext4go/internal/inode"
)

// maxSymlinkHops bounds symlink expansion during a path walk (Linux: 40).
const maxSymlinkHops = 40

const rootIno = 2

var (
	_ fs.FS         = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadLinkFS = (*FS)(nil)
)

// Open opens the named file or directory for reading, following symbolic
// links. The result is a *File.
func (f *FS) Open(name string) (fs.File, error) {
	n, err := f.resolve("open", name, true)
	if err != nil {
		return nil, err
	}
	return f.newFile(n, name, true, false, false)
}

// newFile returns an open File of n, which must still be named (an unlink
// that raced the lookup makes it fs.ErrNotExist).
func (f *FS) newFile(n *node, name string, readable, writable, appendOnly bool) (*File, error) {
	if err := f.openRef(n); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	if writable {
		n.writers.Add(1)
	}
	return &File{fsys: f, n: n, name: name, readable: readable, writable: writable, append: appendOnly}, nil
}

// Stat returns the FileInfo of the named file, following symbolic links.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	n, err := f.resolve("stat", name, true)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: path.Base(name), st: n.stat(f)}, nil
}

// Lstat returns the FileInfo of the named file without following a final
// symbolic link.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	n, err := f.resolve("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: path.Base(name), st: n.stat(f)}, nil
}

// ReadLink returns the target of the named symbolic link.
func (f *FS) ReadLink(name string) (string, error) {
	n, err := f.resolve("readlink", name, false)
	if err != nil {
		return "", err
	}
	if !n.isSymlink() {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: syscall.EINVAL}
	}
	t, err := f.readLink(n)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: err}
	}
	return t, nil
}

// ReadDir reads the named directory and returns its entries sorted by name,
// without "." and "..". Entries it cannot read are left out and named by
// a *SkippedEntriesError (in an *fs.PathError) returned with the rest.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	n, err := f.resolve("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !n.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: syscall.ENOTDIR}
	}
	n.mu.RLock()
	var ents []fs.DirEntry
	if n.freed.Load() {
		err = fs.ErrNotExist
	} else {
		ents, err = f.readDir(n)
	}
	n.mu.RUnlock()
	sortEntries(ents)
	if err != nil {
		return ents, &fs.PathError{Op: "readdir", Path: name, Err: err}
	}
	return ents, nil
}

// ReadFile reads the whole named file.
func (f *FS) ReadFile(name string) ([]byte, error) {
	n, err := f.resolve("read", name, true)
	if err != nil {
		return nil, err
	}
	if n.isDir() {
		return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.EISDIR}
	}
	size := n.size()
	if size > int64(^uint(0)>>1) || size < 0 {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("file too large")}
	}
	buf := make([]byte, size)
	m, err := f.readLocked(n, buf, 0)
	if err != nil && err != io.EOF {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	return buf[:m], nil
}

// resolve walks name from the root. Symbolic links in the middle of the
// path are always followed, the last one only when followLast; an absolute
// link target restarts at the image root and ".." stops at it, so a walk
// never leaves the image.
func (f *FS) resolve(op, name string, followLast bool) (*node, error) {
	if err := f.checkClosed(op, name); err != nil {
		return nil, err
	}
	if !validPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	fail := func(err error) (*node, error) {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	root, err := f.inode(rootIno)
	if err != nil {
		return fail(err)
	}
	if name == "." {
		return root, nil
	}
	// stack holds the directories from the root to the current one.
	stack := []*node{root}
	rest := strings.Split(name, "/")
	hops := 0
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		cur := stack[len(stack)-1]
		if elem == "" {
			continue // "a//b" or a trailing slash in a link target
		}
		if !cur.isDir() {
			return fail(syscall.ENOTDIR)
		}
		switch elem {
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		// The node is taken while the entry cannot vanish (see lifetime.go).
		cur.mu.RLock()
		ino, err := f.lookup(cur, elem)
		var next *node
		if err == nil {
			next, err = f.inode(ino)
		}
		cur.mu.RUnlock()
		if err == nil {
			err = next.checkNamed()
		}
		if err != nil {
			return fail(err)
		}
		if next.isSymlink() && (len(rest) > 0 || followLast) {
			if hops++; hops > maxSymlinkHops {
				return fail(syscall.ELOOP)
			}
			target, err := f.readLink(next)
			if err != nil {
				return fail(err)
			}
			if target == "" {
				return fail(fs.ErrNotExist)
			}
			if strings.HasPrefix(target, "/") {
				stack = stack[:1]
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		stack = append(stack, next)
	}
	return stack[len(stack)-1], nil
}

// validPath is fs.ValidPath without its UTF-8 rule: ext4 names are any
// bytes but NUL and '/', and an image's files must all be reachable.
func validPath(name string) bool {
	if name == "." {
		return true
	}
	for {
		i := strings.IndexByte(name, '/')
		elem := name
		if i >= 0 {
			elem = name[:i]
		}
		if elem == "" || elem == "." || elem == ".." || strings.IndexByte(elem, 0) >= 0 {
			return false
		}
		if i < 0 {
			return true
		}
		name = name[i+1:]
	}
}

// checkNamed refuses an inode that no directory entry may name, as the
// kernel does when a lookup finds one (check_igot_inode): an EA inode holds
// an extended attribute value, not a file.
func (n *node) checkNamed() error {
	if n.in().HasFlag(inode.FlagEAInode) {
		return &CorruptError{What: "directory entry", Block: -1, Ino: n.ino, Detail: "names an EA inode (an xattr value)"}
	}
	return nil
}
