package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/xattr"
)

// Remove removes the named file or empty directory, as os.Remove.
func (f *FS) Remove(name string) (err error) {
	defer f.noteError("FS.Remove", &err)
	parent, base, err := f.parentOf("remove", name)
	if err != nil {
		return err
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if err := f.removeEntry(parent, base, removeAny); err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	return nil
}

// What removeEntry may remove.
const (
	removeAny    = iota // os.Remove: a file or an empty directory
	removeNotDir        // unlink(2): EISDIR for a directory
	removeDir           // rmdir(2): ENOTDIR for anything else
)

// removeEntry unlinks (or rmdirs) base from parent, whose mu is held.
func (f *FS) removeEntry(parent *node, base string, kind int) (err error) {
	if err := f.checkDirWritable(parent); err != nil {
		return err
	}
	ino, err := f.lookup(parent, base)
	if err != nil {
		return err
	}
	if parent.in().HasFlag(inode.FlagAppend) {
		return syscall.EPERM
	}
	child, err := f.inode(ino)
	if err != nil {
		return err
	}
	if child == parent {
		return &CorruptError{What: "directory entry", Block: -1, Ino: parent.ino, Detail: fmt.Sprintf("%q names its own directory", base)}
	}
	child.mu.Lock()
	defer child.mu.Unlock()
	cin := child.in()
	if cin.HasFlag(inode.FlagImmutable) || cin.HasFlag(inode.FlagAppend) {
		return syscall.EPERM
	}
	isDir := cin.IsDir()
	switch {
	case kind == removeNotDir && isDir:
		return syscall.EISDIR
	case kind == removeDir && !isDir:
		return syscall.ENOTDIR
	}
	if isDir {
		empty, err := f.dirIsEmpty(child)
		if err != nil {
			return err
		}
		if !empty {
			return syscall.ENOTEMPTY
		}
	}
	if isDir || cin.LinksCount <= 1 {
		if err := f.checkFreeable(child); err != nil {
			return err
		}
	}
	if parent.in().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineDir(parent); err != nil {
			return err
		}
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	u := newUndo(f, h)
	defer u.release()
	defer func() {
		if err != nil {
			u.undo()
		}
	}()
	pin := editInode(parent)
	ds := f.newDirStore(h, parent, pin, u)
	defer ds.release()
	ed := f.dirEditor(ds)
	if _, err := ed.Remove([]byte(base)); err != nil {
		return err
	}
	if isDir {
		decLinks(pin)
	}
	now := inode.FromTime(f.now())
	pin.Mtime, pin.Ctime = now, now
	if err := u.setInode(parent, pin); err != nil {
		return err
	}
	return f.dropLink(h, child, isDir)
}

// dirIsEmpty reports whether directory n holds only "." and "..".
func (f *FS) dirIsEmpty(n *node) (bool, error) {
	ents, err := f.dirEntries(n)
	if err != nil {
		return false, err
	}
	return len(ents) == 0, nil
}

// RemoveAll removes name and everything under it, as os.RemoveAll: a
// missing name is not an error.
func (f *FS) RemoveAll(name string) (err error) {
	defer f.noteError("FS.RemoveAll", &err)
	// Like os.RemoveAll, which refuses "." (and names ending in it) before
	// removing anything.
	if name == "." || name == "" {
		return &fs.PathError{Op: "removeall", Path: name, Err: syscall.EINVAL}
	}
	return f.removeAll(name)
}

// removeAll is RemoveAll. Directories are read through the one above
// (File.OpenAt, which refuses a directory with a second name, so a loop
// in a corrupt image stops the removal before it reaches anything outside
// name), and each is emptied before it is removed.
func (f *FS) removeAll(name string) error {
	fi, err := f.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		// Through the directory above, as the entries below: a name that
		// is a second name of a directory elsewhere (a corrupt image:
		// maybe of the root) is refused before anything in it is removed.
		parent, err := f.OpenFile(path.Dir(name), os.O_RDONLY, 0)
		if err != nil {
			return err
		}
		d, err := parent.OpenAt(path.Base(name))
		parent.Close()
		if err != nil {
			return err
		}
		err = f.emptyDir(d, name, map[uint32]bool{})
		d.Close()
		if err != nil {
			return err
		}
	}
	err = f.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// emptyDir removes everything in directory d (found at name); above holds
// the directories being emptied.
func (f *FS) emptyDir(d *File, name string, above map[uint32]bool) error {
	if above[d.Ino()] {
		return &fs.PathError{Op: "removeall", Path: name, Err: loopError(d.Ino(), name)}
	}
	above[d.Ino()] = true
	defer delete(above, d.Ino())
	ents, err := d.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := path.Join(name, e.Name())
		if e.IsDir() {
			c, err := d.OpenAt(e.Name())
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			err = f.emptyDir(c, p, above)
			c.Close()
			if err != nil {
				return err
			}
		}
		// Through d's node, not the path: removing a deep tree costs what
		// it holds.
		d.n.mu.Lock()
		err := f.removeEntry(d.n, e.Name(), removeAny)
		d.n.mu.Unlock()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &fs.PathError{Op: "remove", Path: p, Err: err}
		}
	}
	return nil
}

// Link creates newname as a hard link to the file oldname.
func (f *FS) Link(oldname, newname string) (err error) {
	defer f.noteError("FS.Link", &err)
	return f.retryAlloc(func() error { return f.link(oldname, newname) })
}

func (f *FS) link(oldname, newname string) (err error) {
	old, err := f.resolve("link", oldname, false)
	if err != nil {
		return err
	}
	parent, base, err := f.parentOf("link", newname)
	if err != nil {
		return err
	}
	if err := f.linkIn(old, parent, base); err != nil {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// linkIn adds name base in directory parent for old; it takes the locks.
func (f *FS) linkIn(old, parent *node, base string) (err error) {
	fail := func(err error) error { return err }
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if old.isDir() {
		// Linux reports an existing new name before refusing to link a
		// directory (vfs_link). The directory is not locked: it may be an
		// ancestor of parent, locked before it elsewhere.
		if err := f.checkDirWritable(parent); err != nil {
			return fail(err)
		}
		if _, err := f.lookup(parent, base); err == nil {
			return fail(fs.ErrExist)
		}
		return fail(syscall.EPERM)
	}
	if old != parent {
		old.mu.Lock()
		defer old.mu.Unlock()
	}
	if err := f.named(old); err != nil {
		return fail(err)
	}
	oin := old.in()
	switch {
	case oin.LinksCount >= linkMax:
		return fail(syscall.EMLINK)
	case oin.HasFlag(inode.FlagImmutable) || oin.HasFlag(inode.FlagAppend):
		return fail(syscall.EPERM)
	}
	if err := f.checkDirWritable(parent); err != nil {
		return fail(err)
	}
	if _, err := f.lookup(parent, base); err == nil {
		return fail(fs.ErrExist)
	}
	if parent.in().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineDir(parent); err != nil {
			return fail(err)
		}
	}
	h, err := f.begin()
	if err != nil {
		return fail(err)
	}
	defer h.End()
	u := newUndo(f, h)
	defer u.release()
	defer func() {
		if err != nil {
			u.undo()
		}
	}()
	pin := editInode(parent)
	ds := f.newDirStore(h, parent, pin, u)
	defer ds.release()
	ed := f.dirEditor(ds)
	if err := ed.Add(dir.Entry{Inode: old.ino, Name: []byte(base), FileType: f.fileType(oin.Mode)}); err != nil {
		return fail(err)
	}
	f.finishDir(ed, pin)
	now := inode.FromTime(f.now())
	pin.Mtime, pin.Ctime = now, now
	if err := u.setInode(parent, pin); err != nil {
		return fail(err)
	}
	nin := editInode(old)
	nin.LinksCount++
	nin.Ctime = now
	if err := u.setInode(old, nin); err != nil {
		return fail(err)
	}
	return nil
}

// setAttr changes the named file's inode with fn, under its lock.
func (f *FS) setAttr(op, name string, follow bool, fn func(in *inode.Inode) error) (err error) {
	defer f.noteError("FS."+op, &err)
	if f.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: name, Err: f.refuseChange()}
	}
	n, err := f.resolve(op, name, follow)
	if err != nil {
		return err
	}
	if err := f.setAttrNode(n, true, fn); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// setAttrNode changes n's inode with fn under its lock and sets its
// ctime; named says n must still have a name (else an open file's inode
// may be changed too, as fchmod can).
func (f *FS) setAttrNode(n *node, named bool, fn func(in *inode.Inode) error) (err error) {
	return f.changeAttrNode(n, named, frozenNone, fn)
}

// What a change may do to an immutable or append-only inode.
const (
	frozenNone   = iota // nothing (chmod, chown, explicit times)
	frozenAppend        // change an append-only one (times set to now)
	frozenAll           // change either (the inode flags themselves)
)

// changeAttrNode is setAttrNode, with what it may change of an immutable
// or append-only inode (the VFS's notify_change checks).
func (f *FS) changeAttrNode(n *node, named bool, frozenOK int, fn func(in *inode.Inode) error) (err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if named {
		if err := f.named(n); err != nil {
			return err
		}
	} else if n.freed.Load() {
		return fs.ErrNotExist
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer func() {
		if e := h.End(); err == nil {
			err = e
		}
	}()
	switch in := n.in(); {
	case frozenOK == frozenAll:
	case in.HasFlag(inode.FlagImmutable), frozenOK == frozenNone && in.HasFlag(inode.FlagAppend):
		return syscall.EPERM
	}
	in := editInode(n)
	oldPerm := in.Mode & 0o777
	if err := fn(in); err != nil {
		return err
	}
	in.Ctime = inode.FromTime(f.now())
	if err := f.setInode(h, n, in); err != nil {
		return err
	}
	if in.Mode&0o777 != oldPerm {
		return f.chmodACL(h, n, uint32(in.Mode))
	}
	return nil
}

// chmodACL makes n's access ACL, if it has one, say what its new mode
// does (kernel: posix_acl_chmod): the owner's, the mask's (or the owning
// group's) and the others' entries take the mode's bits. n.mu must be
// held.
func (f *FS) chmodACL(h handle, n *node, mode uint32) error {
	if f.sb.DefaultMountOpts&super.DefmACL == 0 || n.isSymlink() {
		return nil
	}
	es, err := f.xattrEntries(n)
	if err != nil {
		return err
	}
	for _, x := range es {
		if x.Index != xattr.IndexPosixACLAccess || len(x.Name) != 0 {
			continue
		}
		acl, err := xattr.DecodeACL(x.Value)
		if err != nil {
			return fserr.At(err, -1, n.ino)
		}
		if len(acl) == 0 {
			return nil
		}
		xattr.ACLChmod(acl, mode)
		v, err := xattr.EncodeXattrACL(acl)
		if err != nil {
			return err
		}
		return f.changeXattr(h, n, xattrChange{name: xattr.NamePosixACLAccess, value: v})
	}
	return nil
}

// Chmod sets the permission and special bits of the named file (following
// symlinks).
func (f *FS) Chmod(name string, mode fs.FileMode) error {
	return f.setAttr("chmod", name, true, func(in *inode.Inode) error {
		in.Mode = in.Mode&0xF000 | unixPerm(mode)
		return nil
	})
}

// Chown sets the owner of the named file (following symlinks); -1 keeps a
// value. Any other value is taken as chown(2) takes it, as a 32-bit uid_t:
// on a 32-bit system an owner past 2^31-1 is a negative int.
func (f *FS) Chown(name string, uid, gid int) error {
	return f.chown("chown", name, true, uid, gid)
}

// Lchown is Chown on a symlink itself.
func (f *FS) Lchown(name string, uid, gid int) error {
	return f.chown("lchown", name, false, uid, gid)
}

func (f *FS) chown(op, name string, follow bool, uid, gid int) error {
	return f.setAttr(op, name, follow, func(in *inode.Inode) error {
		if uid != -1 {
			in.UID = uint32(uid)
		}
		if gid != -1 {
			in.GID = uint32(gid)
		}
		return nil
	})
}

// Chtimes sets the access and modification times of the named file
// (following symlinks); a zero time.Time keeps a value.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	return f.chtimes("chtimes", name, true, atime, mtime)
}

// Lchtimes is Chtimes on a symlink itself.
func (f *FS) Lchtimes(name string, atime, mtime time.Time) error {
	return f.chtimes("lchtimes", name, false, atime, mtime)
}

func (f *FS) chtimes(op, name string, follow bool, atime, mtime time.Time) error {
	return f.setAttr(op, name, follow, func(in *inode.Inode) error {
		if !atime.IsZero() {
			in.Atime = inode.FromTime(f.clampTime(atime))
		}
		if !mtime.IsZero() {
			in.Mtime = inode.FromTime(f.clampTime(mtime))
		}
		return nil
	})
}

// clampTime limits t to the times the inodes can hold, as Linux does
// (timestamp_truncate with s_time_min and s_time_max): signed 32-bit
// seconds in 128-byte inodes, up to 2446-05-10 with the extra epoch bits
// of larger ones. Without this, times out of range would wrap around.
func (f *FS) clampTime(t time.Time) time.Time {
	lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
	if f.inodeSize > inode.GoodOldSize {
		hi = 1<<34 - 1 + math.MinInt32
	}
	// Unlike the kernel (which also zeroes the nanoseconds at the limits),
	// a representable time is kept exactly: copies must keep their source's.
	switch s := t.Unix(); {
	case s < lo:
		return time.Unix(lo, 0)
	case s > hi:
		return time.Unix(hi, 0)
	}
	return t
}
