package ext4go

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"sync"
	"syscall"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/xattr"
)

// Flags of SetXattr (Linux XATTR_CREATE, XATTR_REPLACE).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// xattrRefcountMax is the most inodes one xattr block is shared by
// (kernel: EXT4_XATTR_REFCOUNT_MAX).
const xattrRefcountMax = 1024

// xattrBlockCache finds xattr blocks with a given content hash so that
// inodes with identical attributes share one block (kernel: mbcache).
//
// mu also serialises the decisions about a cached block's references:
// taking one (shareXattrBlock), dropping the last one (releaseXattrBlock)
// and rewriting a block in place. Each reads and changes the block's
// refcount under mu (and the buffer lock, taken inside mu), so a block is
// never shared while it is being freed or rewritten (kernel: the buffer
// lock with mb_cache_entry_delete_or_get).
type xattrBlockCache struct {
	mu     sync.Mutex // protects byHash; see above
	byHash map[uint32][]uint64
}

func (c *xattrBlockCache) add(hash uint32, blk uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addLocked(hash, blk)
}

func (c *xattrBlockCache) addLocked(hash uint32, blk uint64) {
	if c.byHash == nil {
		c.byHash = map[uint32][]uint64{}
	}
	c.byHash[hash] = append(c.byHash[hash], blk)
}

func (c *xattrBlockCache) candidates(hash uint32) []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]uint64(nil), c.byHash[hash]...)
}

// hasLocked reports whether blk is still cached under hash; c.mu held.
func (c *xattrBlockCache) hasLocked(hash uint32, blk uint64) bool {
	for _, b := range c.byHash[hash] {
		if b == blk {
			return true
		}
	}
	return false
}

func (c *xattrBlockCache) removeLocked(blk uint64) {
	for h, bs := range c.byHash {
		for i, b := range bs {
			if b == blk {
				c.byHash[h] = append(bs[:i], bs[i+1:]...)
				return
			}
		}
	}
}

// xattrChange is one change: set name to value, or remove it (value nil
// and remove set).
type xattrChange struct {
	name   string
	value  []byte
	remove bool
	flags  int
}

// changeXattr applies c to n's attributes in h. n.mu must be held.
func (f *FS) changeXattr(h handle, n *node, c xattrChange) error {
	if !f.sb.HasCompat(0x0008) { // ext_attr
		return syscall.EOPNOTSUPP
	}
	index, suffix, err := xattr.SplitName(c.name)
	if err != nil {
		return syscall.EOPNOTSUPP
	}
	if index == xattr.IndexSystem && string(suffix) == "data" {
		return syscall.EPERM // system.data belongs to inline data
	}
	value := c.value
	// aclPerm, when not -1, are the permission bits an access ACL gives
	// the mode; aclRemove is an ACL set to what the mode says, or to
	// nothing: the entry goes, if there is one.
	aclPerm, aclRemove := -1, false
	if index == xattr.IndexPosixACLAccess || index == xattr.IndexPosixACLDefault {
		c.flags = 0 // the VFS's set_acl takes no flags
		if !c.remove {
			if value, aclPerm, aclRemove, err = f.aclValue(n, index, c.value); err != nil {
				return err
			}
			if aclRemove {
				c.remove = true
			}
		}
	}
	in := editInode(n)
	opts := f.xattrOptions()
	var ibody, block []xattr.Entry
	var area []byte
	if f.inodeSize > inode.GoodOldSize {
		area, _ = xattr.IBodyArea(in.Raw, int(in.ExtraIsize))
		if area != nil {
			if ibody, err = xattr.DecodeIBody(area, opts); err != nil {
				return err
			}
		}
	}
	oldBlk := in.ACLBlock(f.is64)
	var oldRef uint32
	if oldBlk != 0 {
		b, err := f.readXattrBlock(n.ino, oldBlk)
		if err != nil {
			return err
		}
		var hdr xattr.Header
		if hdr, block, err = xattr.DecodeBlock(b, opts); err != nil {
			return err
		}
		oldRef = hdr.RefCount
	}
	match := func(e xattr.Entry) bool { return e.Index == index && bytes.Equal(e.Name, suffix) }
	found := false
	// droppedInIbody is an in-inode entry removed: its EA inode, if it
	// has one, loses the inode's reference (a block's references change
	// with the block, in replaceXattrBlock).
	var droppedInIbody []xattr.Entry
	// eaBlocksDropped is the size, in blocks, of the EA inode values the
	// inode no longer refers to: the kernel charges them to its i_blocks
	// (and e2fsck counts them there).
	var eaBlocksDropped int64
	drop := func(es []xattr.Entry, inIbody bool) []xattr.Entry {
		out := es[:0:0]
		for _, e := range es {
			if match(e) {
				found = true
				if inIbody {
					droppedInIbody = append(droppedInIbody, e)
				}
				if e.ValueInum != 0 {
					eaBlocksDropped += (int64(e.ValueSize) + f.blockSize - 1) / f.blockSize
				}
				continue
			}
			out = append(out, e)
		}
		return out
	}
	newIbody := drop(ibody, true)
	newBlock := drop(block, false)
	switch {
	case c.remove && !found && !aclRemove:
		return ErrNoXattr
	case c.flags&XattrCreate != 0 && found:
		return syscall.EEXIST
	case c.flags&XattrReplace != 0 && !found:
		return ErrNoXattr
	}
	// addedInIbody is a new in-inode entry whose value is in an EA inode:
	// it takes the inode's reference (a block's are taken with the block).
	var addedInIbody []xattr.Entry
	var eaBlocksAdded int64
	if !c.remove {
		e := xattr.Entry{Index: index, Name: suffix, Value: value, ValueSize: uint32(len(value))}
		inIbody, err := f.placeXattr(area, &newIbody, &newBlock, e)
		if errors.Is(err, syscall.ENOSPC) && f.sb.HasIncompat(super.IncompatEAInode) && len(value) > 0 {
			// Too big for the inode and one block: the value goes in an
			// EA inode of its own, the entry in the inode or the block
			// (kernel: ext4_xattr_set_handle's retry with in_inode).
			hash := eaValueHash(f, value)
			ea := f.findEAInode(value, hash)
			fresh := ea == nil
			if fresh {
				if ea, err = f.newEAInode(h, n, value); err != nil {
					return err
				}
			}
			e = xattr.Entry{Index: index, Name: suffix, ValueInum: ea.ino, ValueSize: uint32(len(value)),
				Hash: xattr.HashEntryEAInode(suffix, hash)}
			if inIbody, err = f.placeXattr(area, &newIbody, &newBlock, e); err != nil {
				if fresh {
					f.dropEAInode(h, ea)
				}
				return err
			}
			if fresh {
				f.eaValues.add(hash, ea.ino)
			}
			if inIbody {
				addedInIbody = append(addedInIbody, e)
			}
			eaBlocksAdded = (int64(len(value)) + f.blockSize - 1) / f.blockSize
		}
		if err != nil {
			return err
		}
	}
	if area != nil {
		enc, err := xattr.EncodeIBody(len(area), newIbody)
		if err != nil {
			return err
		}
		copy(area, enc)
	}
	if !entriesEqual(block, newBlock) || (oldBlk == 0) != (len(newBlock) == 0) {
		if err := f.replaceXattrBlock(h, n, in, oldBlk, oldRef, block, newBlock); err != nil {
			return err
		}
	}
	if err := f.eaInodeRefs(h, droppedInIbody, -1); err != nil {
		return err
	}
	if err := f.eaInodeRefs(h, addedInIbody, +1); err != nil {
		return err
	}
	if eaBlocksAdded > 0 {
		if err := f.addBlocks(in, eaBlocksAdded); err != nil {
			return err
		}
	}
	if eaBlocksDropped > 0 {
		if err := f.addBlocks(in, -eaBlocksDropped); err != nil {
			return err
		}
	}
	if aclPerm >= 0 {
		in.Mode = in.Mode&^0o777 | uint16(aclPerm)
	}
	in.Ctime = inode.FromTime(f.now())
	return f.setInode(h, n, in)
}

// aclValue checks a POSIX ACL being set on n (its VFS form v) as the
// kernel's set_posix_acl and ext4_set_acl do, and returns its on-disk
// form. An access ACL also gives the mode's permission bits (perm; -1
// for a default ACL); remove is an ACL the mode says all of, or an empty
// one: the entry is removed instead.
func (f *FS) aclValue(n *node, index uint8, v []byte) (disk []byte, perm int, remove bool, err error) {
	perm = -1
	es, err := xattr.DecodeXattrACL(v)
	if err != nil {
		return nil, -1, false, syscall.EINVAL
	}
	if len(es) > 0 {
		if err := xattr.ValidACL(es); err != nil {
			return nil, -1, false, syscall.EINVAL
		}
	}
	if index == xattr.IndexPosixACLDefault && !n.isDir() {
		if len(es) == 0 {
			return nil, -1, true, nil
		}
		return nil, -1, false, syscall.EACCES
	}
	if index == xattr.IndexPosixACLAccess && len(es) > 0 {
		p, equiv := xattr.ACLMode(es)
		perm = int(p)
		if equiv {
			es = nil
		}
	}
	if len(es) == 0 {
		return nil, perm, true, nil
	}
	if disk, err = xattr.EncodeACL(es); err != nil {
		return nil, -1, false, syscall.EINVAL
	}
	return disk, perm, false, nil
}

func entriesEqual(a, b []xattr.Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Index != b[i].Index || !bytes.Equal(a[i].Name, b[i].Name) || !bytes.Equal(a[i].Value, b[i].Value) || a[i].ValueInum != b[i].ValueInum {
			return false
		}
	}
	return true
}

// replaceXattrBlock gives in the block holding es (none if es is empty),
// sharing an identical block where one exists, and releases the old block
// oldBlk (with refcount oldRef).
func (f *FS) replaceXattrBlock(h handle, n *node, in *inode.Inode, oldBlk uint64, oldRef uint32, old, es []xattr.Entry) error {
	var newBlk uint64
	if len(es) > 0 {
		content, err := xattr.EncodeBlock(es, xattr.BlockParams{Size: int(f.blockSize)})
		if err != nil {
			return err
		}
		hash := xattr.BlockHash(es)
		newBlk, err = f.shareXattrBlock(h, hash, content)
		if err != nil {
			return err
		}
		if newBlk == 0 && oldBlk != 0 && oldRef <= 1 {
			// Sole owner: rewrite in place, unless another inode took a
			// reference since oldRef was read (then fall through to a
			// new block and drop ours).
			c := &f.xattrCache
			c.mu.Lock()
			inPlace := false
			err := h.Modify(oldBlk, func(b []byte) error {
				if binary.LittleEndian.Uint32(b[4:]) > 1 {
					return nil
				}
				copy(b, content)
				if f.csum {
					xattr.SetBlockChecksum(b, oldBlk, f.seed)
				}
				inPlace = true
				return nil
			})
			if inPlace {
				c.removeLocked(oldBlk)
				c.addLocked(hash, oldBlk)
			}
			c.mu.Unlock()
			if err != nil {
				return err
			}
			if inPlace {
				// The entries dropped from the block drop its
				// references to their EA inodes, the entries added
				// take one.
				if err := f.eaInodeRefs(h, missingFrom(old, es), -1); err != nil {
					return err
				}
				return f.eaInodeRefs(h, missingFrom(es, old), +1)
			}
		}
		if newBlk == 0 {
			group, _, _ := f.sb.GroupOfInode(n.ino)
			ext, err := f.allocBlocks(h, mballoc.Request{Inode: n.ino, Len: 1, Goal: f.sb.GroupFirstBlock(group)})
			if err != nil {
				var ns *mballoc.NoSpaceError
				if errors.As(err, &ns) {
					return syscall.ENOSPC
				}
				return err
			}
			newBlk = ext.Start
			err = h.Create(newBlk, func(b []byte) error {
				copy(b, content)
				if f.csum {
					xattr.SetBlockChecksum(b, newBlk, f.seed)
				}
				return nil
			})
			if err != nil {
				return err
			}
			f.xattrCache.add(hash, newBlk)
			// A new block holds references of its own to the EA
			// inodes of its entries.
			if err := f.eaInodeRefs(h, es, +1); err != nil {
				return err
			}
		}
		if err := f.addBlocks(in, 1); err != nil {
			return err
		}
	}
	if oldBlk != 0 {
		if err := f.releaseXattrBlock(h, n.ino, oldBlk); err != nil {
			return err
		}
		if err := f.addBlocks(in, -1); err != nil {
			return err
		}
	}
	in.FileACL = newBlk
	return nil
}

// shareXattrBlock looks for a block holding exactly content (ignoring the
// header's refcount and checksum) and takes a reference to it. It returns
// 0 if there is none with room for another reference.
func (f *FS) shareXattrBlock(h handle, hash uint32, content []byte) (uint64, error) {
	c := &f.xattrCache
	for _, blk := range c.candidates(hash) {
		shared := false
		c.mu.Lock()
		if !c.hasLocked(hash, blk) {
			c.mu.Unlock() // released (or rewritten) since the lookup
			continue
		}
		err := h.Modify(blk, func(b []byte) error {
			// Compare everything but h_refcount (4..8) and h_checksum (16..20).
			if !bytes.Equal(b[:4], content[:4]) || !bytes.Equal(b[8:16], content[8:16]) || !bytes.Equal(b[20:], content[20:]) {
				return nil
			}
			ref := binary.LittleEndian.Uint32(b[4:])
			if ref >= xattrRefcountMax {
				return nil
			}
			binary.LittleEndian.PutUint32(b[4:], ref+1)
			if f.csum {
				xattr.SetBlockChecksum(b, blk, f.seed)
			}
			shared = true
			return nil
		})
		c.mu.Unlock()
		if err != nil {
			return 0, err
		}
		if shared {
			return blk, nil
		}
	}
	return 0, nil
}

// SetXattr sets the extended attribute attr of the named file (without
// following a final symlink) to value. flags may be XattrCreate (fail if
// it exists) or XattrReplace (fail if it does not).
func (f *FS) SetXattr(name, attr string, value []byte, flags int) error {
	return f.xattrOp("setxattr", name, xattrChange{name: attr, value: value, flags: flags})
}

// RemoveXattr removes the extended attribute attr of the named file.
func (f *FS) RemoveXattr(name, attr string) error {
	return f.xattrOp("removexattr", name, xattrChange{name: attr, remove: true})
}

// xattrArgs makes the checks Linux's VFS makes before a filesystem sees a
// setxattr or removexattr (fs/xattr.c): the whole name is 1..255 bytes
// (ERANGE), a value at most XATTR_SIZE_MAX (E2BIG), and a namespace prefix
// needs a name after it (EINVAL).
func xattrArgs(c xattrChange) error {
	if c.name == "" || len(c.name) > 255 {
		return syscall.ERANGE
	}
	if !c.remove && len(c.value) > 1<<16 {
		return syscall.E2BIG
	}
	for _, p := range []string{"user.", "trusted.", "security.", "system.", "lustre.", "gnu."} {
		if c.name == p {
			return syscall.EINVAL
		}
	}
	return nil
}

func (f *FS) xattrOp(op, name string, c xattrChange) (err error) {
	defer f.noteError("FS."+op, &err)
	if f.refuseChange() != nil {
		return &fs.PathError{Op: op, Path: name, Err: f.refuseChange()}
	}
	if err := xattrArgs(c); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	n, err := f.resolve(op, name, false)
	if err != nil {
		return err
	}
	if err := f.xattrOpNode(n, true, c); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

// xattrOpNode makes change c to n's xattrs under its lock (named: as in
// setAttrNode).
func (f *FS) xattrOpNode(n *node, named bool, c xattrChange) error {
	if err := xattrArgs(c); err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if named {
		if err := f.named(n); err != nil {
			return err
		}
	} else if n.freed.Load() {
		return fs.ErrNotExist
	}
	if frozen(n.in()) {
		return syscall.EPERM // the VFS's xattr_permission
	}
	return f.retryAlloc(func() error {
		h, err := f.begin()
		if err != nil {
			return err
		}
		err = f.changeXattr(h, n, c)
		if e := h.End(); err == nil {
			err = e
		}
		return err
	})
}

// missingFrom returns the entries of old that are not in cur.
func missingFrom(old, cur []xattr.Entry) []xattr.Entry {
	var out []xattr.Entry
	for _, o := range old {
		kept := false
		for _, c := range cur {
			if c.Index == o.Index && bytes.Equal(c.Name, o.Name) && c.ValueInum == o.ValueInum {
				kept = true
				break
			}
		}
		if !kept {
			out = append(out, o)
		}
	}
	return out
}

// placeXattr adds e to the in-inode entries if they have room (area is
// the in-inode xattr space, nil if there is none), else to the block's.
// It reports where e went, or ENOSPC when neither has room.
func (f *FS) placeXattr(area []byte, ibody, block *[]xattr.Entry, e xattr.Entry) (inIbody bool, err error) {
	if area != nil {
		if _, err := xattr.EncodeIBody(len(area), append(*ibody, e)); err == nil {
			*ibody = append(*ibody, e)
			return true, nil
		}
	}
	if _, err := xattr.EncodeBlock(append(*block, e), xattr.BlockParams{Size: int(f.blockSize)}); err != nil {
		return false, syscall.ENOSPC
	}
	*block = append(*block, e)
	return false, nil
}
