package ext4go

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/ialloc"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/xattr"
)

// dirState returns the inode allocator's state for directory n, made on
// first use. n.mu must be held.
func (f *FS) dirState(n *node) *ialloc.Dir {
	if d := n.allocDir.Load(); d != nil {
		return d
	}
	group, _, _ := f.sb.GroupOfInode(n.ino)
	d := ialloc.NewDir(n.ino, group, n.ino == rootIno, n.in().HasFlag(inode.FlagTopDir))
	if n.allocDir.CompareAndSwap(nil, d) {
		return d
	}
	return n.allocDir.Load()
}

// newInode allocates and initialises an inode of the given mode in h, for
// an entry called name in directory parent (whose mu is held). The new
// node is returned with one link for files and two for directories.
func (f *FS) newInode(h handle, parent *node, name string, mode uint16, uid, gid uint32) (*node, error) {
	isDir := mode&0xF000 == 0x4000
	if err := f.inject("inode"); err != nil {
		return nil, err
	}
	ino, err := f.w.ialloc.Allocate(h, f.dirState(parent), isDir, []byte(name))
	if err != nil {
		return nil, err
	}
	now := inode.FromTime(f.now())
	// The inode and its bytes in one object, the bytes its own: setInode
	// encodes into them instead of allocating (editInode's layout).
	c := new(inodeCopy)
	c.in = inode.Inode{
		Mode: mode, UID: uid, GID: gid,
		Atime: now, Ctime: now, Mtime: now, Crtime: now,
		LinksCount: 1,
		Generation: f.generation(ino),
		RawOwned:   true,
	}
	if f.inodeSize <= inodeCopyRaw {
		c.in.Raw = c.raw[:f.inodeSize]
	} else {
		c.in.Raw = make([]byte, f.inodeSize)
	}
	in := &c.in
	if isDir {
		in.LinksCount = 2
	}
	if f.inodeSize > inode.GoodOldSize {
		in.ExtraIsize = max(f.sb.WantExtraIsize, inode.ExtraSize)
		if int(in.ExtraIsize) > f.inodeSize-inode.GoodOldSize {
			in.ExtraIsize = uint16(f.inodeSize - inode.GoodOldSize)
		}
	}
	// Inherit the flags the kernel passes down (ext4_mask_flags).
	const inherited = inode.FlagSync | inode.FlagNoDump | inode.FlagNoAtime | inode.FlagDirSync |
		inode.FlagJournalData | inode.FlagProjInherit | inode.FlagDAX
	in.Flags = parent.in().Flags & inherited
	if !isDir {
		in.Flags &^= inode.FlagDirSync
	}
	if parent.in().Mode&0o2000 != 0 { // setgid directory: group and (for dirs) the bit
		in.GID = parent.in().GID
		if isDir {
			in.Mode |= 0o2000
		}
	}
	kind := mode & 0xF000
	if (kind == 0x8000 || kind == 0x4000 || kind == 0xA000) && f.sb.HasIncompat(super.IncompatExtents) {
		in.Flags |= inode.FlagExtents
		if err := extent.NewRoot().Encode(in.Block[:]); err != nil {
			return nil, err
		}
	}
	// The node is the inode's before the inode table says it is in use:
	// a load by number (OpenInode) in between would otherwise make a
	// second node of it. Until setInode it has no inode, which the cache
	// reports as not there yet.
	n := newNode(ino, nil)
	f.cache.put(n)
	if err := f.setInode(h, n, in); err != nil {
		n.freed.Store(true)
		f.cache.forget(n)
		if ferr := f.w.ialloc.Free(h, ino, isDir); ferr != nil {
			f.setError(ferr)
		}
		return nil, err
	}
	return n, nil
}

// generation returns i_generation for a new inode: random, or derived from
// the inode number and UUID when building reproducibly.
func (f *FS) generation(ino uint32) uint32 {
	if f.reproducible {
		return csum.CRC32C(binary.LittleEndian.Uint32(f.sb.UUID[:]), binary.LittleEndian.AppendUint32(nil, ino))
	}
	return randomUint32()
}

func randomUint32() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint32(b[:])
}

// checkFreeable reads what freeing n will go through — its extent tree or
// block map, its xattrs and the EA inodes they name — so that a corrupt
// structure stops the unlink that would free n before anything changes,
// instead of failing half way through the free (kernel: the checks
// ext4_ext_remove_space and ext4_xattr_delete_inode make, which there mark
// the filesystem as having errors). n.mu is held.
func (f *FS) checkFreeable(n *node) error {
	in := n.in()
	if !in.HasFlag(inode.FlagInlineData) && (in.HasFlag(inode.FlagExtents) || f.hasBlockMap(n, in)) {
		if _, err := f.mapping(n); err != nil {
			return err
		}
	}
	var es []xattr.Entry
	if f.inodeSize > inode.GoodOldSize {
		if area, _ := xattr.IBodyArea(in.Raw, int(in.ExtraIsize)); area != nil {
			ibody, err := xattr.DecodeIBody(area, f.xattrOptions())
			if err != nil {
				return fserr.At(err, -1, n.ino)
			}
			es = ibody
		}
	}
	if blk := in.ACLBlock(f.is64); blk != 0 {
		b, err := f.readXattrBlock(n.ino, blk)
		if err != nil {
			return err
		}
		if f.csum && !f.opts.IgnoreChecksums {
			if err := xattr.VerifyBlockChecksum(b, blk, f.seed); err != nil {
				return fserr.At(err, int64(blk), n.ino)
			}
		}
		_, block, err := xattr.DecodeBlock(b, f.xattrOptions())
		if err != nil {
			return fserr.At(err, int64(blk), n.ino)
		}
		es = append(es, block...)
	}
	for _, e := range es {
		if e.ValueInum == 0 {
			continue
		}
		ea, err := f.inode(e.ValueInum)
		if err != nil {
			return err
		}
		if !ea.in().HasFlag(inode.FlagEAInode) {
			return &CorruptError{What: "EA inode", Block: -1, Ino: e.ValueInum, Detail: fmt.Sprintf("xattr of inode %d refers to it but it lacks the EA_INODE flag", n.ino)}
		}
	}
	return f.prepareFree(n, 0, true)
}

// prepareFree loads what freeing n's blocks from file block from on (and,
// with whole, n's xattr block and the inode itself) will read: the tree,
// the bitmaps of the groups those blocks are in, the inode bitmap and the
// inode's table block. A read error then fails the operation before it
// changes anything, instead of half way through the free (kernel: there
// it would be ext4_error, a filesystem marked as having errors). n.mu is
// held.
func (f *FS) prepareFree(n *node, from uint64, whole bool) error {
	in := n.inLocked() // not marked: a truncate's copy may reuse the version it replaces
	groups := map[uint32]bool{}
	// frees are the blocks the change may free, as [start, count]: on
	// the stack for the hot paths' small trees.
	var buf [8][2]uint64
	frees := buf[:0]
	add := func(start, count uint64) {
		if count == 0 || start >= f.sb.BlocksCount() {
			return
		}
		frees = append(frees, [2]uint64{start, count})
		last := min(start+count-1, f.sb.BlocksCount()-1)
		for g := f.w.balloc.GroupOf(start); g <= f.w.balloc.GroupOf(last); g++ {
			groups[g] = true
		}
	}
	// addFrom adds the part of a run from file block from on.
	addFrom := func(logical, physical, length uint64) {
		if logical+length <= from {
			return
		}
		skip := from - min(from, logical)
		add(physical+skip, length-skip)
	}
	leaf := false
	if !in.HasFlag(inode.FlagInlineData) && in.HasFlag(inode.FlagExtents) {
		// A tree that is only its root (up to four extents, a
		// fallocate2 file's): its extents straight from i_block, without
		// building and caching the node's block map (a dozen objects).
		t := extent.Tree{Root: in.Block[:], BlockSize: int(f.blockSize), FirstDataBlock: uint64(f.sb.FirstDataBlock), BlocksCount: f.sb.BlocksCount(), Zone: f.zone.Load(), Ino: n.ino}
		var ebuf [4]extent.Extent
		exts, ok, err := t.RootLeaf(&ebuf)
		if err != nil {
			return err
		}
		if ok {
			for _, e := range exts {
				addFrom(uint64(e.Logical), e.Start, uint64(e.Len))
			}
		}
		leaf = ok
	}
	if !leaf && !in.HasFlag(inode.FlagInlineData) && (in.HasFlag(inode.FlagExtents) || f.hasBlockMap(n, in)) {
		runs, err := f.mapping(n)
		if err != nil {
			return err
		}
		for _, r := range runs {
			addFrom(r.logical, r.physical, r.length)
		}
		var nodes []uint64
		if in.HasFlag(inode.FlagExtents) {
			nodes, err = f.extentTree(n, in).Blocks()
		} else {
			nodes, err = f.blockMap(n, in).IndirectBlocks()
		}
		if err != nil {
			return err
		}
		for _, b := range nodes {
			add(b, 1)
		}
	}
	if whole {
		if blk := in.ACLBlock(f.is64); blk != 0 {
			add(blk, 1)
			if err := f.checkXattrBlock(n.ino, blk); err != nil {
				return err
			}
			if err := f.touchBlock(blk, "xattr block"); err != nil {
				return err
			}
		}
	}
	for g := range groups {
		if err := f.w.balloc.Load(g); err != nil {
			return err
		}
	}
	if err := f.checkFrees(n, in, frees); err != nil {
		return err
	}
	if whole {
		group, _, _ := f.sb.GroupOfInode(n.ino)
		if err := f.w.ialloc.Load(group); err != nil {
			return err
		}
	}
	blk, _, err := f.inodeLocation(n.ino)
	if err == nil {
		err = f.touchBlock(blk, "inode table")
	}
	return err
}

// checkFrees refuses, before anything changes, a free the change could
// not finish: a block in use by n that its group's bitmap has free, a
// block n names twice, or more blocks than n's i_blocks counts (its
// count would go below zero). Each would stop the change half way
// through, after it had unlinked or unmapped what it frees (kernel:
// ext4_free_blocks finds the bit already cleared and marks the
// filesystem in error). frees ([start, count]) is sorted in place.
func (f *FS) checkFrees(n *node, in *inode.Inode, frees [][2]uint64) error {
	var total uint64
	for i := 1; i < len(frees); i++ { // insertion sort: few, and no allocation
		for j := i; j > 0 && frees[j][0] < frees[j-1][0]; j-- {
			frees[j], frees[j-1] = frees[j-1], frees[j]
		}
	}
	for i, r := range frees {
		total += r[1]
		if i > 0 && frees[i-1][0]+frees[i-1][1] > r[0] {
			return &CorruptError{What: "inode", Block: int64(r[0]), Ino: n.ino,
				Detail: fmt.Sprintf("block %d is mapped twice (blocks %d+%d and %d+%d)", r[0], frees[i-1][0], frees[i-1][1], r[0], r[1])}
		}
		if err := f.w.balloc.CheckInUse(r[0], r[1]); err != nil {
			return fserr.At(err, int64(r[0]), n.ino)
		}
	}
	if counted := in.Sectors(uint32(f.blockSize), f.hugeFile) / uint64(f.blockSize/512); total > counted {
		return &CorruptError{What: "inode", Block: -1, Ino: n.ino,
			Detail: fmt.Sprintf("i_blocks counts %d blocks, fewer than the %d to be freed", counted, total)}
	}
	return nil
}

// freeInodeIn releases an inode with no links and no open files, in h:
// its blocks, its xattr block and the inode itself. n.mu must be held.
func (f *FS) freeInodeIn(h handle, n *node) error {
	f.w.balloc.DiscardInodePrealloc(n.ino)
	in := editInode(n)
	s := &extStore{f: f, h: h, ino: n.ino}
	if !in.HasFlag(inode.FlagInlineData) && (in.HasFlag(inode.FlagExtents) || f.hasBlockMap(n, in)) {
		if err := f.editor(n, in, s).Remove(0, extent.MaxLogical); err != nil {
			return err
		}
	}
	if f.inodeSize > inode.GoodOldSize {
		// The in-inode xattrs' references to EA inodes.
		if area, _ := xattr.IBodyArea(in.Raw, int(in.ExtraIsize)); area != nil {
			if es, err := xattr.DecodeIBody(area, f.xattrOptions()); err == nil {
				if err := f.eaInodeRefs(h, es, -1); err != nil {
					return err
				}
			}
		}
	}
	if blk := in.ACLBlock(f.is64); blk != 0 {
		if err := f.releaseXattrBlock(h, n.ino, blk); err != nil {
			return err
		}
		in.FileACL = 0
	}
	in.LinksCount = 0
	in.Size = 0
	in.Dtime = uint32(f.now().Unix())
	in.SetSectors(0, uint32(f.blockSize), f.hugeFile)
	if err := f.setInode(h, n, in); err != nil {
		return err
	}
	n.freed.Store(true)
	// Its delayed data, never written, goes with it (kernel: eviction
	// truncates the page cache and releases the reservation).
	f.daTruncate(n, 0)
	// Out of the cache before the number is free for reuse: a new inode
	// with this number gets a node of its own, which forget must not drop
	// (two nodes of one inode would lose each other's changes).
	f.cache.forget(n)
	if err := f.w.ialloc.Free(h, n.ino, in.IsDir()); err != nil {
		return err
	}
	return nil
}

// hasBlockMap reports whether a block-mapped inode maps any block (device
// nodes and fast symlinks keep other things in i_block).
func (f *FS) hasBlockMap(n *node, in *inode.Inode) bool {
	switch in.FileType() {
	case inode.TypeRegular, inode.TypeDir:
		return in.Blocks != 0
	case inode.TypeSymlink:
		return !f.isFastSymlink(n)
	}
	return false
}

// releaseXattrBlock drops inode ino's reference to a shared xattr block,
// freeing it with the last (kernel: ext4_xattr_release_block).
func (f *FS) releaseXattrBlock(h handle, ino uint32, blk uint64) error {
	if err := f.checkXattrBlock(ino, blk); err != nil {
		return err
	}
	free := false
	var entries []xattr.Entry
	// Under the cache's lock, so that no other inode takes a reference
	// between our decision to free the block and its leaving the cache.
	c := &f.xattrCache
	c.mu.Lock()
	err := h.Modify(blk, func(b []byte) error {
		if f.csum && !f.opts.IgnoreChecksums {
			if err := xattr.VerifyBlockChecksum(b, blk, f.seed); err != nil {
				return err
			}
		}
		hdr, es, err := xattr.DecodeBlock(b, f.xattrOptions())
		if err != nil {
			return err
		}
		if hdr.RefCount <= 1 {
			free, entries = true, es
			return nil
		}
		binary.LittleEndian.PutUint32(b[4:], hdr.RefCount-1)
		if f.csum {
			xattr.SetBlockChecksum(b, blk, f.seed)
		}
		return nil
	})
	if err == nil && free {
		c.removeLocked(blk)
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if free {
		if err := f.freeBlocks(h, blk, 1, mballoc.FreeMetadata); err != nil {
			return err
		}
		// The block's references to EA inodes go with it.
		return f.eaInodeRefs(h, entries, -1)
	}
	return nil
}

// eaInodeRefs adds delta to the reference count of the EA inode of each
// entry stored in one (kernel: ext4_xattr_inode_inc_ref_all and
// dec_ref_all). Each xattr block, and each inode's in-inode area, holds one
// reference per entry.
func (f *FS) eaInodeRefs(h handle, es []xattr.Entry, delta int64) error {
	for _, e := range es {
		if e.ValueInum == 0 {
			continue
		}
		if err := f.eaInodeRef(h, e.ValueInum, delta); err != nil {
			return err
		}
	}
	return nil
}

// eaInodeRef adds delta to EA inode ino's reference count, kept in
// i_ctime's seconds (high half) and i_version's low 32 bits (low half),
// and frees the inode when no reference is left (kernel:
// ext4_xattr_inode_update_ref). Callers hold the owning inode's lock; EA
// inodes are locked after their owners.
func (f *FS) eaInodeRef(h handle, ino uint32, delta int64) error {
	n, err := f.inode(ino)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	in := editInode(n)
	if !in.HasFlag(inode.FlagEAInode) {
		return &CorruptError{What: "EA inode", Block: -1, Ino: ino, Detail: "an xattr refers to it but it lacks the EA_INODE flag"}
	}
	ref := int64(uint32(in.Ctime.Sec))<<32 | int64(uint32(in.Version))
	ref += delta
	switch {
	case ref < 0:
		return &CorruptError{What: "EA inode", Block: -1, Ino: ino, Detail: "reference count below zero"}
	case ref == 0:
		return f.freeInodeIn(h, n)
	}
	in.Ctime = inode.Timestamp{Sec: int64(uint32(ref >> 32))}
	in.Version = in.Version&^0xffffffff | uint64(uint32(ref))
	return f.setInode(h, n, in)
}

// release ends one use of n by an open File; the last use of an inode
// unlinked while open frees it.
func (f *FS) release(n *node, wrote bool) error {
	if f.w == nil {
		n.opens.Add(-1)
		return nil
	}
	// Under mu, as opens is raised (see lifetime.go): an unlink sees
	// either this open or none.
	n.mu.Lock()
	defer n.mu.Unlock()
	lastWriter := wrote && n.writers.Add(-1) == 0
	last := n.opens.Add(-1) == 0
	if n.freed.Load() {
		return nil
	}
	if last && n.orphan {
		// Freed now: its delayed data is dropped, not written.
		return f.removeOrphan(n, func(h handle) error { return f.freeInodeIn(h, n) })
	}
	var err error
	if wrote {
		// The closing writer's delayed data goes now, the size known;
		// open is false once no writer is left, so that a small closed
		// file goes to a locality group (kernel: writeback after the
		// last close, with inode_is_open_for_write false).
		err = f.daSync(n, n.writers.Load() > 0)
	}
	if lastWriter && err == nil {
		// The last writer's close ends the file's stream: its unused
		// preallocation goes back and it no longer counts among the
		// streams, though readers (or the mount's reference to the
		// node) keep it open (kernel: ext4_release_file discarding on
		// the last writer, when no delayed blocks are left reserved).
		f.w.balloc.DiscardInodePrealloc(n.ino)
	}
	return err
}

// addOrphan puts n, which has lost its last link while open, on the
// orphan list, so that a crash before its last close frees it at the next
// mount or fsck (kernel: ext4_orphan_add). n.mu must be held.
func (f *FS) addOrphan(h handle, n *node) error {
	w := f.w
	if of := w.orphanFile; of != nil {
		idx, err := of.add(f, h, n.ino)
		if err != nil {
			return err
		}
		if idx >= 0 {
			w.orphanMu.Lock()
			w.fileOrphans[n] = struct{}{}
			w.orphanMu.Unlock()
			n.orphan, n.orphanAt = true, idx+1
			return nil
		}
		// Every slot is taken: the list, as the kernel falls back to.
	}
	w.orphanMu.Lock()
	defer w.orphanMu.Unlock()
	in := editInode(n)
	w.sbMu.Lock()
	in.Dtime = f.sb.LastOrphan
	f.sb.LastOrphan = n.ino
	w.sbMu.Unlock()
	if err := f.setInode(h, n, in); err != nil {
		return err
	}
	f.orphans = append([]*node{n}, f.orphans...)
	n.orphan = true
	return f.writeSuper(h)
}

// removeOrphan takes n off the orphan list (kernel: ext4_orphan_del) and,
// when then is not nil, runs then in the same handle (freeing the inode
// there, as ext4_evict_inode does: a crash never finds an unlinked inode
// that is on no list and not free). n.mu must be held.
//
// Unlinking n from the middle of the list rewrites its predecessor's
// i_dtime, so the predecessor's inode is changed under its lock too: the
// predecessor's owner may be changing that inode (writing to the open
// file), and two unlocked copy-and-replace updates would lose one of them.
// Locks are taken in the usual order: inodes (n, then its predecessor,
// which is never waiting for n: list predecessors only wait for their own
// predecessors), then the handle, then orphanMu; the predecessor is
// checked again once everything is held.
func (f *FS) removeOrphan(n *node, then func(h handle) error) error {
	w := f.w
	if n.orphanAt > 0 {
		h, err := f.begin()
		if err != nil {
			return err
		}
		err = w.orphanFile.remove(h, n.orphanAt-1, n.ino)
		if err == nil {
			w.orphanMu.Lock()
			delete(w.fileOrphans, n)
			w.orphanMu.Unlock()
			n.orphan, n.orphanAt = false, 0
			if then != nil {
				err = then(h)
			}
		}
		if e := h.End(); err == nil {
			err = e
		}
		return err
	}
	for {
		w.orphanMu.Lock()
		prev, err := f.orphanPrev(n)
		w.orphanMu.Unlock()
		if err != nil {
			return err
		}
		if prev != nil {
			prev.mu.Lock()
		}
		done, err := f.removeOrphanLocked(n, prev, then)
		if prev != nil {
			prev.mu.Unlock()
		}
		if done || err != nil {
			return err
		}
	}
}

// orphanPrev returns the orphan before n on the list (nil if n is the
// head); w.orphanMu must be held.
func (f *FS) orphanPrev(n *node) (*node, error) {
	for i, o := range f.orphans {
		if o == n {
			if i == 0 {
				return nil, nil
			}
			return f.orphans[i-1], nil
		}
	}
	return nil, fmt.Errorf("inode %d not on the orphan list", n.ino)
}

// removeOrphanLocked is removeOrphan with the locks of n and of prev (its
// predecessor when the caller looked) held. It reports false if prev is
// no longer n's predecessor.
func (f *FS) removeOrphanLocked(n, prev *node, then func(h handle) error) (bool, error) {
	// The handle before orphanMu, as in addOrphan (which runs inside a
	// handle): waiting in begin for a commit while holding orphanMu
	// deadlocks with a handle waiting for orphanMu, which the commit
	// waits for.
	h, err := f.begin()
	if err != nil {
		return false, err
	}
	done, err := f.unlinkOrphanLocked(h, n, prev)
	if done && err == nil && then != nil {
		err = then(h)
	}
	if e := h.End(); err == nil {
		err = e
	}
	return done, err
}

// unlinkOrphanLocked is removeOrphanLocked's change to the list, in h.
func (f *FS) unlinkOrphanLocked(h handle, n, prev *node) (bool, error) {
	w := f.w
	w.orphanMu.Lock()
	defer w.orphanMu.Unlock()
	if cur, err := f.orphanPrev(n); err != nil || cur != prev {
		return false, err
	}
	next := n.in().Dtime
	if prev == nil {
		w.sbMu.Lock()
		f.sb.LastOrphan = next
		w.sbMu.Unlock()
		if err := f.writeSuper(h); err != nil {
			return false, err
		}
	} else {
		in := editInode(prev)
		in.Dtime = next
		if err := f.setInode(h, prev, in); err != nil {
			return false, err
		}
	}
	for i, o := range f.orphans {
		if o == n {
			f.orphans = append(f.orphans[:i], f.orphans[i+1:]...)
			break
		}
	}
	n.orphan = false
	// Off the list, i_dtime is no longer a link (kernel: ext4_orphan_del
	// clears NEXT_ORPHAN); an inode that lives on must not keep it.
	if in := n.in(); in.Dtime != 0 && in.LinksCount > 0 {
		ed := editInode(n)
		ed.Dtime = 0
		if err := f.setInode(h, n, ed); err != nil {
			return false, err
		}
	}
	return true, nil
}

// releaseOrphans frees every inode still on the orphan list (files
// unlinked and still open when the filesystem is closed).
func (f *FS) releaseOrphans() error {
	for {
		f.w.orphanMu.Lock()
		var n *node
		for o := range f.w.fileOrphans {
			n = o
			break
		}
		if n == nil && len(f.orphans) > 0 {
			n = f.orphans[0]
		}
		f.w.orphanMu.Unlock()
		if n == nil {
			return nil
		}
		n.mu.Lock()
		err := f.removeOrphan(n, func(h handle) error { return f.freeInodeIn(h, n) })
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// newExtentRoot makes in's i_block an empty extent tree.
func newExtentRoot(in *inode.Inode) error {
	return extent.NewRoot().Encode(in.Block[:])
}
