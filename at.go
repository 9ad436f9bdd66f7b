package ext4go

import (
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/inode"
)

// Operations on a directory's entries and on open inodes, the way the
// *at system calls (and os.Root) work: name is one path element of the
// directory File, found in it, never resolved from the root again, so a
// rename elsewhere cannot redirect it. They are what a server holding
// inodes needs (a FUSE daemon answers lookups, creates and renames by
// parent inode and name), and they apply to open files whatever their
// name has become since (fchmod, fsetxattr).
//
// A File from LookupAt holds the inode like an open file (an unlinked
// inode is freed only when its last File closes) but can only be stat'ed,
// changed (Chmod, Chown, Chtimes, xattrs), read as a link, used as the
// directory of the *At calls or reopened (O_PATH in Linux's terms).

// oPath is Linux's O_PATH.
const oPath = 0x200000

// NewInode says what MakeAt creates.
type NewInode struct {
	Mode     uint32 // S_IF* file type and permission bits, as st_mode (0o100644)
	UID, GID uint32 // owner (a setgid directory gives its group, as on Linux)
	Rdev     uint64 // device number of a device node (Mkdev)
	Target   string // the target of a symbolic link
	// Umask clears permission bits where the directory has no default
	// POSIX ACL; where it has one, the ACL decides instead (as a
	// process's umask on Linux).
	Umask uint32
}

// atName checks that d is a directory File and name one entry name.
func (d *File) atName(op, name string) (*node, error) {
	if err := d.checkOpen(op); err != nil {
		return nil, err
	}
	if name == "" || name == "." || name == ".." || len(name) > 255 || containsSlash(name) || !validPath(name) {
		if len(name) > 255 {
			return nil, syscall.ENAMETOOLONG
		}
		return nil, fs.ErrInvalid
	}
	if !d.n.isDir() {
		return nil, syscall.ENOTDIR
	}
	return d.n, nil
}

func (d *File) atErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: d.name + "/" + name, Err: err}
}

// LookupAt returns a File for the entry name of directory d, of any type,
// without following a symbolic link or opening it for reading or writing
// (O_PATH|O_NOFOLLOW). Its Name is name.
func (d *File) LookupAt(name string) (*File, error) {
	f := d.fsys
	n, err := d.atName("lookupat", name)
	if err != nil {
		return nil, d.atErr("lookupat", name, err)
	}
	n.mu.RLock()
	var c *node
	err = f.named(n)
	if err == nil {
		var ino uint32
		if ino, err = f.lookup(n, name); err == nil {
			c, err = f.inode(ino) // under the directory's lock: see lifetime.go
		}
	}
	var file *File
	if err == nil {
		file, err = f.newFile(c, name, false, false, false)
	}
	n.mu.RUnlock()
	if err != nil {
		return nil, d.atErr("lookupat", name, err)
	}
	return file, nil
}

// Reopen opens the inode of f again with the access mode and O_APPEND and
// O_TRUNC of flag, as opening /proc/self/fd/N does: for a File from
// LookupAt, or to read a file open only for writing. With O_PATH
// (unix.O_PATH) the File is one as LookupAt gives.
func (f *File) Reopen(flag int) (_ *File, err error) {
	defer f.fsys.noteError("File.Reopen", &err)
	if err := f.checkOpen("reopen"); err != nil {
		return nil, err
	}
	fsys := f.fsys
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	readable := acc == os.O_RDONLY || acc == os.O_RDWR
	writable := acc == os.O_WRONLY || acc == os.O_RDWR
	if flag&oPath != 0 {
		readable, writable, flag = false, false, 0
	}
	if (writable || flag&os.O_TRUNC != 0) && fsys.refuseChange() != nil {
		return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: fsys.refuseChange()}
	}
	n := f.n
	if n.isSymlink() && (readable || writable) {
		return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: syscall.ELOOP}
	}
	if writable && n.isDir() {
		return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: syscall.EISDIR}
	}
	// f holds the inode: it may have lost its names, but it is not
	// freed before f closes, so the new File may hold it too.
	n.mu.RLock()
	if n.freed.Load() {
		n.mu.RUnlock()
		return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: fs.ErrClosed}
	}
	if err := checkOpenFlags(n.in(), flag, writable); err != nil {
		n.mu.RUnlock()
		return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: err}
	}
	n.opens.Add(1)
	if writable {
		n.writers.Add(1)
	}
	n.mu.RUnlock()
	file := &File{fsys: fsys, n: n, name: f.name, readable: readable, writable: writable, append: flag&os.O_APPEND != 0}
	if flag&os.O_TRUNC != 0 && n.isRegular() {
		n.mu.Lock()
		err := fsys.truncate(n, 0, libraryCaller)
		n.mu.Unlock()
		if err != nil {
			file.Close()
			return nil, &fs.PathError{Op: "reopen", Path: f.name, Err: err}
		}
	}
	return file, nil
}

// MakeAt creates the entry name in directory d: a regular file,
// directory, symbolic link, device node, FIFO or socket as ni.Mode says
// (mknod, mkdir, symlink, open with O_CREAT|O_EXCL). A regular file is
// opened with flag's access mode (and O_APPEND); anything else is
// returned as LookupAt returns it. An existing name is fs.ErrExist.
func (d *File) MakeAt(name string, ni NewInode, flag int) (_ *File, err error) {
	defer d.fsys.noteError("File.MakeAt", &err)
	f := d.fsys
	const op = "makeat"
	if f.refuseChange() != nil {
		return nil, d.atErr(op, name, f.refuseChange())
	}
	parent, err := d.atName(op, name)
	if err != nil {
		return nil, d.atErr(op, name, err)
	}
	e := newEntry{mode: uint16(ni.Mode & 0xFFFF), uid: ni.UID, gid: ni.GID, rdev: ni.Rdev, target: ni.Target, inheritACL: true, umask: uint16(ni.Umask & 0o777)}
	switch ni.Mode & 0xF000 {
	case 0x8000, 0x4000, 0x2000, 0x6000, 0x1000, 0xC000:
	case 0xA000:
		if ni.Target == "" {
			return nil, d.atErr(op, name, syscall.ENOENT)
		}
		if len(ni.Target) >= int(f.blockSize) || len(ni.Target) > 4095 {
			return nil, d.atErr(op, name, syscall.ENAMETOOLONG)
		}
	default:
		return nil, d.atErr(op, name, syscall.EINVAL)
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if err := f.named(parent); err != nil {
		return nil, d.atErr(op, name, err)
	}
	var n *node
	err = f.retryAlloc(func() (err error) {
		n, err = f.create(parent, name, e)
		return err
	})
	if err != nil {
		return nil, d.atErr(op, name, err)
	}
	readable, writable := false, false
	if ni.Mode&0xF000 == 0x8000 {
		acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
		readable = acc == os.O_RDONLY || acc == os.O_RDWR
		writable = acc == os.O_WRONLY || acc == os.O_RDWR
	}
	file, err := f.newFile(n, name, readable, writable, flag&os.O_APPEND != 0)
	if err != nil {
		return nil, d.atErr(op, name, err)
	}
	return file, nil
}

// UnlinkAt removes the entry name of directory d: as unlink(2) (EISDIR
// for a directory), or with dir as rmdir(2) (ENOTDIR for anything but a
// directory, ENOTEMPTY for one with entries).
func (d *File) UnlinkAt(name string, dir bool) (err error) {
	defer d.fsys.noteError("File.UnlinkAt", &err)
	f := d.fsys
	op := "unlinkat"
	if f.refuseChange() != nil {
		return d.atErr(op, name, f.refuseChange())
	}
	parent, err := d.atName(op, name)
	if err != nil {
		return d.atErr(op, name, err)
	}
	kind := removeNotDir
	if dir {
		kind = removeDir
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if err := f.named(parent); err != nil {
		return d.atErr(op, name, err)
	}
	if err := f.removeEntry(parent, name, kind); err != nil {
		return d.atErr(op, name, err)
	}
	return nil
}

// LinkAt adds the entry name in directory d for the inode of target, as
// linkat(2) of an open file; a directory cannot be linked (EPERM).
func (d *File) LinkAt(target *File, name string) (err error) {
	defer d.fsys.noteError("File.LinkAt", &err)
	f := d.fsys
	op := "linkat"
	if f.refuseChange() != nil {
		return d.atErr(op, name, f.refuseChange())
	}
	if err := target.checkOpen(op); err != nil {
		return err
	}
	parent, err := d.atName(op, name)
	if err != nil {
		return d.atErr(op, name, err)
	}
	if target.fsys != f {
		return d.atErr(op, name, syscall.EXDEV)
	}
	err = f.retryAlloc(func() error { return f.linkIn(target.n, parent, name) })
	if err != nil {
		return d.atErr(op, name, err)
	}
	return nil
}

// RenameAt moves the entry oldName of directory d to newName of directory
// newDir, as renameat2(2) with flags RenameNoReplace or RenameExchange.
func (d *File) RenameAt(oldName string, newDir *File, newName string, flags int) (err error) {
	defer d.fsys.noteError("File.RenameAt", &err)
	f := d.fsys
	op := "renameat"
	fail := func(err error) error {
		return &os.LinkError{Op: op, Old: d.name + "/" + oldName, New: newDir.name + "/" + newName, Err: err}
	}
	if f.refuseChange() != nil {
		return fail(f.refuseChange())
	}
	if err := newDir.checkOpen(op); err != nil {
		return err
	}
	if newDir.fsys != f {
		return fail(syscall.EXDEV)
	}
	oldParent, err := d.atName(op, oldName)
	if err != nil {
		return fail(err)
	}
	newParent, err := newDir.atName(op, newName)
	if err != nil {
		return fail(err)
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return fail(syscall.EINVAL)
	}
	err = f.retryAlloc(func() error { return f.renameIn(oldParent, oldName, newParent, newName, flags) })
	if err != nil {
		return fail(err)
	}
	return nil
}

// Usage is what statfs(2) reports of a filesystem, in blocks of
// BlockSize bytes.
type Usage struct {
	BlockSize                     uint32
	Blocks, FreeBlocks, Available uint64 // Available: free to users other than root (the reserved blocks kept)
	Inodes, FreeInodes            uint64
	NameMax                       uint32
}

// Usage returns the filesystem's size and free space now (with changes not
// yet written back counted).
func (f *FS) Usage() Usage {
	sb := f.sb
	u := Usage{BlockSize: uint32(f.blockSize), Blocks: sb.BlocksCount(), Inodes: uint64(sb.InodesCount), NameMax: 255}
	if f.w != nil {
		// The allocators' counts: the superblock's are rewritten under
		// w.sbMu as changes commit.
		// Less what delayed data has reserved (kernel: ext4_statfs
		// subtracts s_dirtyclusters_counter).
		free := f.w.balloc.FreeClusters() - f.w.balloc.PendingFrees() - f.w.daReserved.Load()
		u.FreeBlocks = uint64(max(free, 0)) * uint64(sb.ClusterRatio())
		u.FreeInodes = uint64(max(f.w.ialloc.FreeInodes(), 0))
	} else {
		u.FreeBlocks, u.FreeInodes = sb.FreeBlocksCount(), uint64(sb.FreeInodesCount)
	}
	if r := sb.RBlocksCount(); u.FreeBlocks > r {
		u.Available = u.FreeBlocks - r
	}
	return u
}

// setAttr changes f's inode with fn, as the f* calls do: the inode is
// changed whatever names it has (an unlinked open file included).
func (f *File) setAttr(op string, fn func(in *inode.Inode) error) (err error) {
	defer f.fsys.noteError("File."+op, &err)
	if err := f.checkOpen(op); err != nil {
		return err
	}
	if f.fsys.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: f.fsys.refuseChange()}
	}
	if err := f.fsys.setAttrNode(f.n, false, fn); err != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: err}
	}
	return nil
}

// setAttrFlags is setAttr for a change of the inode flags.
func (f *File) setAttrFlags(op string, fn func(in *inode.Inode) error) (err error) {
	defer f.fsys.noteError("File."+op, &err)
	if err := f.checkOpen(op); err != nil {
		return err
	}
	if f.fsys.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: f.fsys.refuseChange()}
	}
	if err := f.fsys.changeAttrNode(f.n, false, frozenAll, fn); err != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: err}
	}
	return nil
}

// Chmod sets the permission and special bits of the file, as os.File's.
func (f *File) Chmod(mode fs.FileMode) error {
	return f.setAttr("chmod", func(in *inode.Inode) error {
		in.Mode = in.Mode&0xF000 | unixPerm(mode)
		return nil
	})
}

// Chown sets the owner of the file, as os.File's; -1 keeps a value.
func (f *File) Chown(uid, gid int) error {
	return f.setAttr("chown", func(in *inode.Inode) error {
		if uid != -1 {
			in.UID = uint32(uid)
		}
		if gid != -1 {
			in.GID = uint32(gid)
		}
		return nil
	})
}

// Chtimes sets the access and modification times of the file; a zero
// time.Time keeps a value.
func (f *File) Chtimes(atime, mtime time.Time) error {
	fsys := f.fsys
	return f.setAttr("chtimes", func(in *inode.Inode) error {
		if !atime.IsZero() {
			in.Atime = inode.FromTime(fsys.clampTime(atime))
		}
		if !mtime.IsZero() {
			in.Mtime = inode.FromTime(fsys.clampTime(mtime))
		}
		return nil
	})
}

// Touch is Chtimes for a time update that names no time of its own:
// utimes(2) with NULL or UTIME_NOW, or the kernel's write-back of the
// times it kept. Unlike Chtimes it may change an append-only file (as on
// Linux, where only explicit times are refused there); an immutable one
// is still refused.
func (f *File) Touch(atime, mtime time.Time) (err error) {
	defer f.fsys.noteError("File.Touch", &err)
	if err := f.checkOpen("touch"); err != nil {
		return err
	}
	if f.fsys.refuseChange() != nil {
		return &fs.PathError{Op: "touch", Path: f.name, Err: f.fsys.refuseChange()}
	}
	fsys := f.fsys
	err = fsys.changeAttrNode(f.n, false, frozenAppend, func(in *inode.Inode) error {
		if !atime.IsZero() {
			in.Atime = inode.FromTime(fsys.clampTime(atime))
		}
		if !mtime.IsZero() {
			in.Mtime = inode.FromTime(fsys.clampTime(mtime))
		}
		return nil
	})
	if err != nil {
		return &fs.PathError{Op: "touch", Path: f.name, Err: err}
	}
	return nil
}

// ReadLink returns the target of the symbolic link f.
func (f *File) ReadLink() (string, error) {
	if err := f.checkOpen("readlink"); err != nil {
		return "", err
	}
	if !f.n.isSymlink() {
		return "", &fs.PathError{Op: "readlink", Path: f.name, Err: syscall.EINVAL}
	}
	t, err := f.fsys.readLink(f.n)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: f.name, Err: err}
	}
	return t, nil
}

// ListXattr returns the names of the file's extended attributes, sorted.
func (f *File) ListXattr() ([]string, error) {
	if err := f.checkOpen("listxattr"); err != nil {
		return nil, err
	}
	m, err := f.fsys.visibleXattrs(f.n)
	if err != nil {
		return nil, &fs.PathError{Op: "listxattr", Path: f.name, Err: err}
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// GetXattr returns the value of the file's attribute attr; a missing one
// is ErrNoXattr (syscall.ENODATA on Linux).
func (f *File) GetXattr(attr string) ([]byte, error) {
	if err := f.checkOpen("getxattr"); err != nil {
		return nil, err
	}
	m, err := f.fsys.visibleXattrs(f.n)
	if err != nil {
		return nil, &fs.PathError{Op: "getxattr", Path: f.name, Err: err}
	}
	v, ok := m[attr]
	if !ok {
		return nil, &fs.PathError{Op: "getxattr", Path: f.name, Err: ErrNoXattr}
	}
	return v, nil
}

// SetXattr sets the file's attribute attr to value (flags: XattrCreate,
// XattrReplace), as fsetxattr(2).
func (f *File) SetXattr(attr string, value []byte, flags int) error {
	return f.xattrOp("setxattr", xattrChange{name: attr, value: value, flags: flags})
}

// RemoveXattr removes the file's attribute attr, as fremovexattr(2).
func (f *File) RemoveXattr(attr string) error {
	return f.xattrOp("removexattr", xattrChange{name: attr, remove: true})
}

func (f *File) xattrOp(op string, c xattrChange) (err error) {
	defer f.fsys.noteError("File."+op, &err)
	if err := f.checkOpen(op); err != nil {
		return err
	}
	if f.fsys.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: f.fsys.refuseChange()}
	}
	if err := f.fsys.xattrOpNode(f.n, false, c); err != nil {
		return &fs.PathError{Op: op, Path: f.name, Err: err}
	}
	return nil
}

// Parent returns the inode number the directory's ".." entry names (its
// own for the root), as readdir shows it.
func (f *File) Parent() (uint32, error) {
	if err := f.checkOpen("parent"); err != nil {
		return 0, err
	}
	n := f.n
	if !n.isDir() {
		return 0, &fs.PathError{Op: "parent", Path: f.name, Err: syscall.ENOTDIR}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	ino, err := f.fsys.lookup(n, "..")
	if err != nil {
		return 0, &fs.PathError{Op: "parent", Path: f.name, Err: err}
	}
	return ino, nil
}
