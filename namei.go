package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
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

// dirStore is a directory's blocks as the directory editor sees them,
// inside one handle. in is the directory inode being edited.
type dirStore struct {
	f     *FS
	h     handle
	n     *node
	in    *inode.Inode
	es    *extStore
	fresh map[uint32]bool // blocks appended in this change: written without reading
}

// newDirStore returns the store of directory n (in is the copy of its
// inode being changed) in h; u, if not nil, records the changes for undo.
// Its extent store is pooled: a caller done with the store and its editors
// may give it back with release (create, link and unlink do: once per
// name).
func (f *FS) newDirStore(h handle, n *node, in *inode.Inode, u *undoLog) *dirStore {
	es := pooledExtStore(f, h, n.ino)
	es.undo = u
	return &dirStore{f: f, h: h, n: n, in: in, es: es}
}

// release gives the store's extent store back to its pool; s and the
// editors made over it must not be used after.
func (s *dirStore) release() {
	putExtStore(s.es)
	s.es = nil
}

// physical maps a directory block, 0 for a hole.
func (s *dirStore) physical(lblk uint32) (uint64, error) {
	if !s.in.HasFlag(inode.FlagExtents) {
		runs, err := s.f.buildMapping(s.n, s.in)
		if err != nil {
			return 0, err
		}
		i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > uint64(lblk) })
		if i == len(runs) || runs[i].logical > uint64(lblk) {
			return 0, nil
		}
		return runs[i].physical + uint64(lblk) - runs[i].logical, nil
	}
	mp, err := s.f.editor(s.n, s.in, s.es).Lookup(lblk)
	if err != nil || mp.Hole() || mp.Unwritten {
		return 0, err
	}
	return mp.Physical, nil
}

func (s *dirStore) ReadBlock(lblk uint32) ([]byte, error) {
	p, err := s.physical(lblk)
	if err != nil || p == 0 {
		return nil, err
	}
	return s.f.readBlock(p, "directory block")
}

// ViewBlock shows block lblk without copying it (dir.Viewer).
func (s *dirStore) ViewBlock(lblk uint32, fn func(b []byte) error) error {
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return fn(nil)
	}
	return s.f.viewDirBlock(p, fn)
}

// ModifyBlock changes block lblk in place (dir.Modifier), recorded as
// WriteBlock records a change. A block appended in this change has no
// content to change yet: it goes through ReadBlock and WriteBlock.
func (s *dirStore) ModifyBlock(lblk uint32, fn func(b []byte) error) error {
	if s.fresh[lblk] {
		b, err := s.ReadBlock(lblk)
		if err == nil && b == nil {
			err = &CorruptError{What: "directory block", Block: int64(lblk), Ino: s.n.ino, Detail: "directory hole"}
		}
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
		return s.WriteBlock(lblk, b)
	}
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return &CorruptError{What: "directory block", Block: int64(lblk), Ino: s.n.ino, Detail: "directory hole"}
	}
	if p >= s.f.sb.BlocksCount() {
		return &CorruptError{What: "directory block", Block: int64(p), Detail: fmt.Sprintf("block number outside the filesystem (%d blocks)", s.f.sb.BlocksCount())}
	}
	if s.es.undo != nil {
		return s.es.undo.modify(p, fn)
	}
	return s.h.Modify(p, fn)
}

func (s *dirStore) WriteBlock(lblk uint32, b []byte) error {
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return &CorruptError{What: "directory", Block: -1, Ino: s.n.ino, Detail: fmt.Sprintf("write to hole at block %d", lblk)}
	}
	put := func(dst []byte) error { copy(dst, b); return nil }
	if s.fresh[lblk] {
		return s.h.Create(p, put)
	}
	if s.es.undo != nil {
		return s.es.undo.modify(p, put)
	}
	return s.h.Modify(p, put)
}

func (s *dirStore) AppendBlock() (uint32, error) {
	f := s.f
	lblk := uint32(s.in.Size / uint64(f.blockSize))
	ed := f.editor(s.n, s.in, s.es)
	req := mballoc.Request{Inode: s.n.ino, Logical: uint64(lblk), Len: 1}
	f.setNeighbours(ed, &req)
	if req.LeftPhysical != 0 {
		req.Goal = req.LeftPhysical + 1
	}
	// Otherwise the allocator's inode goal: the first group of the
	// directory's flex group, where the flex group's directory blocks
	// gather, not the group of the inode (kernel:
	// ext4_inode_to_goal_block).
	ext, err := f.allocBlocks(s.h, req)
	if err != nil {
		var ns *mballoc.NoSpaceError
		if errors.As(err, &ns) {
			return 0, syscall.ENOSPC
		}
		return 0, err
	}
	if err := ed.Insert(extent.Extent{Logical: lblk, Len: 1, Start: ext.Start}); err != nil {
		f.freeBlocks(s.h, ext.Start, 1, 0)
		return 0, err
	}
	s.es.undo.allocated(ext.Start)
	s.es.undo.touched(s.n)
	if err := f.addBlocks(s.in, s.es.delta+1); err != nil {
		return 0, err
	}
	s.es.delta = 0
	s.in.Size += uint64(f.blockSize)
	if s.fresh == nil {
		s.fresh = map[uint32]bool{}
	}
	s.fresh[lblk] = true
	return lblk, nil
}

// dirEditor returns an editor of directory n (whose inode copy in is being
// changed) in h.
func (f *FS) dirEditor(s *dirStore) *dir.Editor {
	in := s.in
	return &dir.Editor{
		Format:         f.dirFormat(),
		Store:          s,
		NBlocks:        uint32(in.Size / uint64(f.blockSize)),
		Indexed:        in.HasFlag(inode.FlagIndex) && f.sb.HasCompat(super.CompatDirIndex),
		CsumSeed:       inode.Seed(f.seed, s.n.ino, in.Generation),
		Ino:            s.n.ino,
		DirIndex:       f.sb.HasCompat(super.CompatDirIndex),
		DefHashVersion: f.sb.DefHashVersion,
	}
}

// finishDir records what the editor changed about the directory inode.
func (f *FS) finishDir(ed *dir.Editor, in *inode.Inode) {
	if ed.Indexed {
		in.Flags |= inode.FlagIndex
	}
}

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
