package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/xattr"
)

// linkMax is the most links an inode may have (kernel: EXT4_LINK_MAX).
const linkMax = 65000

// fileType is the dirent file type of a mode (0 without the filetype
// feature).
func (f *FS) fileType(mode uint16) uint8 {
	if !f.sb.HasIncompat(super.IncompatFiletype) {
		return 0
	}
	switch mode & 0xF000 {
	case 0x8000:
		return 1
	case 0x4000:
		return 2
	case 0x2000:
		return 3
	case 0x6000:
		return 4
	case 0x1000:
		return 5
	case 0xC000:
		return 6
	case 0xA000:
		return 7
	}
	return 0
}

// checkDirWritable refuses changes to directories ext4go cannot edit.
func (f *FS) checkDirWritable(n *node) error {
	in := n.in()
	switch {
	case !in.IsDir():
		return syscall.ENOTDIR
	case in.LinksCount == 0:
		return syscall.ENOENT // removed while we waited
	case in.HasFlag(inode.FlagImmutable):
		// An append-only directory takes new entries: removals check
		// for it (the VFS's may_delete).
		return syscall.EPERM
	case in.HasFlag(inode.FlagEncrypt) || in.HasFlag(inode.FlagCasefold):
		return &UnsupportedError{Feature: "changing encrypted or case-folded directories"}
	}
	if in.HasFlag(inode.FlagInlineData) {
		return nil
	}
	// The editor walks every block below i_size: a directory the readers
	// refuse for its holes, or whose size runs far past its last block
	// (a corrupt i_size), would take it through millions of holes.
	d, err := f.dirOf(n)
	if err != nil {
		return err
	}
	if tail := in.Size/uint64(f.blockSize) - uint64(d.NBlocks); tail > 1024 {
		return &CorruptError{What: "directory", Block: -1, Ino: n.ino,
			Detail: fmt.Sprintf("its size runs %d blocks past its last block", tail)}
	}
	// A block mapped past i_size is where the next directory block would go.
	runs, err := f.mapping(n)
	if err != nil {
		return err
	}
	if k := len(runs); k > 0 && runs[k-1].logical+runs[k-1].length > in.Size/uint64(f.blockSize) {
		return &CorruptError{What: "directory", Block: -1, Ino: n.ino,
			Detail: fmt.Sprintf("blocks are mapped up to block %d, past its size of %d bytes", runs[k-1].logical+runs[k-1].length, in.Size)}
	}
	return nil
}

// parentOf resolves the directory holding name and returns it with the
// last element.
func (f *FS) parentOf(op, name string) (*node, string, error) {
	if f.refuseChange() != nil {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: f.refuseChange()}
	}
	if !validPath(name) || name == "." {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if len(path.Base(name)) > 255 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENAMETOOLONG}
	}
	parent, err := f.resolve(op, path.Dir(name), true)
	if err != nil {
		return nil, "", err
	}
	if !parent.isDir() {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: syscall.ENOTDIR}
	}
	return parent, path.Base(name), nil
}

// newEntry is what create makes.
type newEntry struct {
	mode     uint16 // S_IF* and permission bits
	uid, gid uint32
	rdev     uint64 // device nodes
	target   string // symlinks
	// inheritACL applies the directory's default POSIX ACL, as the
	// kernel does for every create (kernel: ext4_init_acl); where there
	// is none, umask clears permission bits instead. A copy (build,
	// put) leaves both off: it sets the source's own xattrs.
	inheritACL bool
	umask      uint16
	// absent tells that the caller knows name is not in the directory (a
	// build filling a directory it made): create skips looking it up.
	absent bool
}

// create makes a new inode called name in parent (whose mu is held) and
// links it there. It returns the new node.
func (f *FS) create(parent *node, name string, e newEntry) (*node, error) {
	if err := f.checkDirWritable(parent); err != nil {
		return nil, err
	}
	if !e.absent {
		if _, err := f.lookup(parent, name); err == nil {
			return nil, fs.ErrExist
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	isDir := e.mode&0xF000 == 0x4000
	if isDir && parent.in().LinksCount >= linkMax && !(f.sb.HasROCompat(super.ROCompatDirNlink) && parent.in().HasFlag(inode.FlagIndex)) {
		return nil, syscall.EMLINK
	}
	if parent.in().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineDir(parent); err != nil {
			return nil, err
		}
	}
	if e.mode&0xF000 == 0xA000 && len(e.target) >= int(f.blockSize) {
		return nil, syscall.ENAMETOOLONG
	}
	var acl inheritedACL
	if e.inheritACL {
		var err error
		if acl, err = f.inheritACL(parent, &e); err != nil {
			return nil, err
		}
	}
	h, err := f.begin()
	if err != nil {
		return nil, err
	}
	defer h.End()
	// On failure every step is undone: the parent's blocks, then the
	// child (its blocks, then the inode itself).
	pu := newUndo(f, h)
	defer pu.release()
	pin := editInode(parent)
	ds := f.newDirStore(h, parent, pin, pu)
	defer ds.release()
	ed := f.dirEditor(ds)
	ed.NameChecked = true // looked up above (or known absent), under parent.mu
	// A directory that cannot take the name (a corrupt block or index on
	// the way) is refused before an inode is made for it, which its undo
	// would free but not unwrite.
	nameb := []byte(name)
	if err := ed.CheckAdd(nameb); err != nil {
		return nil, err
	}
	child, err := f.newInode(h, parent, name, e.mode, e.uid, e.gid)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return nil, syscall.ENOSPC
		}
		return nil, err
	}
	child.mu.Lock()
	defer child.mu.Unlock()
	undo := func(err error) (*node, error) {
		pu.undo()
		in := editInode(child)
		in.LinksCount = 0
		f.setInode(h, child, in)
		if ferr := f.freeInodeIn(h, child); ferr != nil {
			f.setError(ferr)
		}
		return nil, err
	}
	cu := newUndo(f, h)
	defer cu.release()
	if err := f.initInode(h, parent, child, e, cu); err != nil {
		cu.undo()
		return undo(err)
	}
	for _, x := range acl.set() {
		if err := f.changeXattr(h, child, x); err != nil {
			cu.undo()
			return undo(err)
		}
	}
	if err := ed.Add(dir.Entry{Inode: child.ino, Name: nameb, FileType: f.fileType(e.mode)}); err != nil {
		return undo(err)
	}
	f.finishDir(ed, pin)
	if isDir {
		f.incLinks(pin)
	}
	now := inode.FromTime(f.now())
	pin.Mtime, pin.Ctime = now, now
	if err := pu.setInode(parent, pin); err != nil {
		return undo(err)
	}
	return child, nil
}

// inheritedACL is what a directory's default ACL gives a new inode.
type inheritedACL struct {
	access, def []byte // VFS forms; nil: none
}

func (a inheritedACL) set() []xattrChange {
	var out []xattrChange
	if a.access != nil {
		out = append(out, xattrChange{name: xattr.NamePosixACLAccess, value: a.access})
	}
	if a.def != nil {
		out = append(out, xattrChange{name: xattr.NamePosixACLDefault, value: a.def})
	}
	return out
}

// inheritACL applies parent's default ACL to e (kernel: posix_acl_create):
// with one, e's mode keeps only what the ACL grants, the new inode gets
// an access ACL where the mode cannot say it all, and a directory the
// default ACL too; without one, e.umask clears bits. Symbolic links take
// neither. parent.mu must be held.
func (f *FS) inheritACL(parent *node, e *newEntry) (inheritedACL, error) {
	if e.mode&0xF000 == 0xA000 {
		return inheritedACL{}, nil
	}
	var def []xattr.ACLEntry
	if f.sb.DefaultMountOpts&super.DefmACL != 0 && f.sb.HasCompat(0x0008) {
		es, err := f.xattrEntries(parent)
		if err != nil {
			return inheritedACL{}, err
		}
		for _, x := range es {
			if x.Index != xattr.IndexPosixACLDefault || len(x.Name) != 0 {
				continue
			}
			if def, err = xattr.DecodeACL(x.Value); err != nil {
				return inheritedACL{}, fserr.At(err, -1, parent.ino)
			}
			if len(def) > 0 {
				if err := xattr.ValidACL(def); err != nil {
					return inheritedACL{}, &CorruptError{What: "default ACL", Block: -1, Ino: parent.ino, Detail: err.Error()}
				}
			}
		}
	}
	if len(def) == 0 {
		e.mode &^= e.umask & 0o777
		return inheritedACL{}, nil
	}
	var out inheritedACL
	access, mode, equiv := xattr.ACLCreate(def, uint32(e.mode))
	e.mode = uint16(mode)
	var err error
	if !equiv {
		if out.access, err = xattr.EncodeXattrACL(access); err != nil {
			return inheritedACL{}, err
		}
	}
	if e.mode&0xF000 == 0x4000 {
		if out.def, err = xattr.EncodeXattrACL(def); err != nil {
			return inheritedACL{}, err
		}
	}
	return out, nil
}

// initInode gives a new inode its content: a directory its first block, a
// symlink its target, a device node its number.
func (f *FS) initInode(h handle, parent, child *node, e newEntry, u *undoLog) error {
	switch e.mode & 0xF000 {
	case 0x4000, 0xA000, 0x2000, 0x6000:
	default:
		// A regular file, FIFO or socket is complete as newInode wrote
		// it: writing the same inode again cost a copy, an encode and
		// a checksum on every create.
		return nil
	}
	in := editInode(child)
	switch e.mode & 0xF000 {
	case 0x4000:
		ds := f.newDirStore(h, child, in, u)
		defer ds.release()
		lblk, err := ds.AppendBlock()
		if err != nil {
			return err
		}
		b, err := dir.NewDirBlock(f.dirFormat(), child.ino, parent.ino, inode.Seed(f.seed, child.ino, in.Generation))
		if err != nil {
			return err
		}
		if err := ds.WriteBlock(lblk, b); err != nil {
			return err
		}
	case 0xA000:
		if len(e.target) < len(in.Block) {
			// A fast symlink keeps its target in i_block, without an
			// extent tree (kernel: ext4_symlink).
			in.Flags &^= inode.FlagExtents
			in.Block = [60]byte{}
			copy(in.Block[:], e.target)
			in.Size = uint64(len(e.target))
		} else {
			// Slow symlink: the target goes in a data block.
			if err := f.writeSmall(h, child, in, []byte(e.target), u); err != nil {
				return err
			}
		}
	case 0x2000, 0x6000:
		in.SetDevice(uint32((e.rdev>>8)&0xfff)|uint32((e.rdev>>32)&^0xfff), uint32(e.rdev&0xff)|uint32((e.rdev>>12)&^0xff))
	}
	return f.setInode(h, child, in)
}

// incLinks adds a link to directory inode in for a new subdirectory
// (kernel: ext4_inc_count: an indexed directory past the limit counts 1).
func (f *FS) incLinks(in *inode.Inode) {
	in.LinksCount++
	if in.HasFlag(inode.FlagIndex) && (in.LinksCount > linkMax || in.LinksCount == 2) && f.sb.HasROCompat(super.ROCompatDirNlink) {
		in.LinksCount = 1
	}
}

// decLinks drops the link of a removed subdirectory (kernel:
// ext4_dec_count).
func decLinks(in *inode.Inode) {
	if !in.IsDir() || in.LinksCount > 2 {
		in.LinksCount--
	}
}

// writeSmall gives a new, empty inode its first bytes (less than a block)
// inside h: one block is allocated and written directly.
func (f *FS) writeSmall(h handle, n *node, in *inode.Inode, data []byte, u *undoLog) error {
	s := &extStore{f: f, h: h, ino: n.ino, undo: u}
	ed := f.editor(n, in, s)
	// As the kernel maps a symlink's block (ext4_ext_map_blocks): not as
	// data (no preallocation, no locality group) and at the inode goal,
	// which for anything but a regular file is the first group of the
	// inode's flex group, where its directory blocks go too
	// (ext4_inode_to_goal_block).
	req := mballoc.Request{Inode: n.ino, Len: 1, Goal: f.w.balloc.InodeGoal(n.ino, in.IsRegular()), FileSize: uint64(len(data))}
	if in.IsRegular() {
		req.Flags |= mballoc.FlagData
	}
	ext, err := f.allocData(h, req)
	if err != nil {
		return err
	}
	if err := f.writeData(ext.Start, 0, data, 0, true); err != nil {
		f.freeBlocks(h, ext.Start, 1, 0)
		return err
	}
	if err := ed.Insert(extent.Extent{Logical: 0, Len: 1, Start: ext.Start}); err != nil {
		f.freeBlocks(h, ext.Start, 1, 0)
		return err
	}
	u.allocated(ext.Start)
	in.Size = uint64(len(data))
	return f.addBlocks(in, s.delta+1)
}

// dropLink removes one link of child (mu held) after its entry went away:
// an inode without links is freed, or put on the orphan list while open.
func (f *FS) dropLink(h handle, child *node, isDir bool) error {
	in := editInode(child)
	if isDir {
		in.LinksCount = 0
	} else if in.LinksCount > 0 {
		in.LinksCount--
	}
	in.Ctime = inode.FromTime(f.now())
	if err := f.setInode(h, child, in); err != nil {
		return err
	}
	if in.LinksCount > 0 {
		return nil
	}
	if child.opens.Load() > 0 {
		return f.addOrphan(h, child)
	}
	return f.freeInodeIn(h, child)
}

// unixPerm converts the permission and special bits of an fs.FileMode.
func unixPerm(m fs.FileMode) uint16 {
	p := uint16(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

// mknodAt is the common part of Mkdir, Symlink and Mknod.
func (f *FS) mknodAt(op, name string, e newEntry) error {
	parent, base, err := f.parentOf(op, name)
	if err != nil {
		return err
	}
	parent.mu.Lock()
	defer parent.mu.Unlock()
	if err := f.retryAlloc(func() error { _, err := f.create(parent, base, e); return err }); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// Mkdir creates a directory with mode perm (no umask), owned by 0:0.
func (f *FS) Mkdir(name string, perm fs.FileMode) (err error) {
	defer f.noteError("FS.Mkdir", &err)
	return f.mknodAt("mkdir", name, newEntry{mode: 0x4000 | unixPerm(perm), uid: f.opts.UID, gid: f.opts.GID, inheritACL: true})
}

// MkdirAll creates a directory and any missing parents, as os.MkdirAll.
func (f *FS) MkdirAll(name string, perm fs.FileMode) (err error) {
	defer f.noteError("FS.MkdirAll", &err)
	if fi, err := f.Stat(name); err == nil {
		if fi.IsDir() {
			return nil
		}
		return &fs.PathError{Op: "mkdir", Path: name, Err: syscall.ENOTDIR}
	}
	if d := path.Dir(name); d != "." {
		if err := f.MkdirAll(d, perm); err != nil {
			return err
		}
	}
	err = f.Mkdir(name, perm)
	if err != nil && errors.Is(err, fs.ErrExist) {
		if fi, serr := f.Stat(name); serr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

// Symlink creates name as a symbolic link to target.
func (f *FS) Symlink(target, name string) (err error) {
	defer f.noteError("FS.Symlink", &err)
	if target == "" {
		return &fs.PathError{Op: "symlink", Path: name, Err: syscall.ENOENT}
	}
	if strings.IndexByte(target, 0) >= 0 {
		// A target is a C string in the kernel's interface; e2fsck
		// rejects one holding NUL.
		return &fs.PathError{Op: "symlink", Path: name, Err: syscall.EINVAL}
	}
	return f.mknodAt("symlink", name, newEntry{mode: 0xA000 | 0o777, target: target, uid: f.opts.UID, gid: f.opts.GID})
}

// Mknod creates a device node, fifo or socket: mode holds the S_IF* type
// and permission bits as in mknod(2), dev the device number (Mkdev).
func (f *FS) Mknod(name string, mode uint32, dev uint64) (err error) {
	defer f.noteError("FS.Mknod", &err)
	switch mode & 0xF000 {
	case 0x2000, 0x6000, 0x1000, 0xC000:
	case 0x8000, 0:
		mode = mode&0o7777 | 0x8000
	default:
		return &fs.PathError{Op: "mknod", Path: name, Err: syscall.EINVAL}
	}
	return f.mknodAt("mknod", name, newEntry{mode: uint16(mode), rdev: dev, uid: f.opts.UID, gid: f.opts.GID, inheritACL: true})
}
