package ext4go

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/ext4go/ext4go/internal/blockmap"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/super"
)

// maxAllocChunk bounds one allocation (and so one transaction handle) of a
// large write: an extent holds at most 32768 blocks anyway.
const maxAllocChunk = 32768

// extStore is the extent editor's view of the filesystem inside one
// handle. It counts the blocks the tree gains and loses, for i_blocks.
type extStore struct {
	f     *FS
	h     handle
	ino   uint32
	n     *node // set by FS.editor
	delta int64 // blocks allocated minus blocks freed
	// undo, when set, records the tree's block changes and allocations so
	// that a failing operation can revert them (see undoLog).
	undo *undoLog
	// fresh are the tree blocks AllocNode handed out: written whole,
	// without reading what was on disk.
	fresh map[uint64]bool
	// nodes are blocks allocated ahead for the indirect blocks a block
	// map insert will need (so they sit just before their data); AllocNode
	// hands them out first.
	nodes []uint64
	// replay, in a fast-commit replay, takes the data blocks a change
	// unmaps: they are freed at its end unless mapped again.
	replay *fcReplay
	// claimed: the allocations are paid for by delayed data's
	// reservation (a flush, delalloc.go).
	claimed bool
	// ext is the extent editor FS.editor sets up over this store: one
	// allocation for both, and its scratch serves the whole operation.
	ext extent.Editor
	// lent, in a pooled store, are the scratch buffers ReadNode copied
	// tree blocks into; putExtStore takes them back (a copy per level per
	// call was most of what a write to a file of many extents allocated).
	lent   [][]byte
	pooled bool
	// lentInline backs lent: grown from nil, lent's array was a small
	// object beside other goroutines' on one line, written by every read
	// of a tree block.
	lentInline [4][]byte
	// Pooled stores of different goroutines may be neighbours in the
	// heap: a line after the fields every call writes keeps them apart.
	_ [pad.Line * pad.On]byte
}

// extStores recycles the stores of the hot paths (a write or fallocate
// chunk): with its editor's scratch a store is a kilobyte of pointers,
// which allocating per call made the largest cost of the loop.
var extStores = sync.Pool{New: func() any { return new(extStore) }}

// pooledExtStore returns a store for one call; putExtStore must get it back
// when the call is done with it and with the editor made over it.
func pooledExtStore(f *FS, h handle, ino uint32) *extStore {
	s := extStores.Get().(*extStore)
	s.f, s.h, s.ino, s.pooled = f, h, ino, true
	if cap(s.lent) == 0 {
		s.lent = s.lentInline[:0]
	}
	return s
}

func putExtStore(s *extStore) {
	for i, b := range s.lent {
		putScratch(b)
		s.lent[i] = nil
	}
	// Drop what it points to; the editor keeps its scratch arrays
	// (zeroing them was a fifth of a fallocate's time in the store).
	s.ext.Clear()
	s.f, s.h, s.ino, s.n, s.delta, s.undo, s.fresh, s.nodes, s.replay, s.pooled, s.claimed = nil, handle{}, 0, nil, 0, nil, nil, nil, nil, false, false
	s.lent = s.lent[:0]
	extStores.Put(s)
}

// treeChanged notes that the extent tree of s.n changed outside i_block
// (a tree block written, or blocks freed), which setInode cannot see by
// comparing inodes: the node's cached block map must be rebuilt.
func (s *extStore) treeChanged() {
	if s.n != nil {
		s.n.mapping.Store(nil)
		s.n.treeChanged.Store(true)
	}
}

func (s *extStore) ReadNode(pblk uint64) ([]byte, error) {
	if !s.pooled {
		return s.f.readBlock(pblk, "extent tree block")
	}
	b := getScratch(int(s.f.blockSize))
	if err := s.f.readBlockInto(pblk, "extent tree block", b); err != nil {
		putScratch(b)
		return nil, err
	}
	s.lent = append(s.lent, b)
	return b, nil
}

// ReadNodeSealed is ReadNode that also says whether the block's tail
// checksum under seed is known good (extent.SealedStore): the buffer cache
// remembers a verification until the block changes.
func (s *extStore) ReadNodeSealed(pblk uint64, seed uint32) ([]byte, bool, error) {
	if !s.pooled {
		b, err := s.ReadNode(pblk)
		return b, false, err
	}
	b := getScratch(int(s.f.blockSize))
	known, err := s.f.readBlockSealed(pblk, "extent tree block", seed, b)
	if err != nil {
		putScratch(b)
		return nil, false, err
	}
	s.lent = append(s.lent, b)
	return b, known, nil
}

func (s *extStore) WriteNode(pblk uint64, b []byte) error {
	s.treeChanged()
	write := func(dst []byte) error {
		copy(dst, b)
		return nil
	}
	// The extent editor writes each block with its content checked: the
	// cache may take it as verified. Its tail checksum the editor leaves
	// to the cache (DeferSum), which computes it once, when the commit
	// freezes the block, unless an undo log must copy the block now.
	// (A block-map editor over this store writes indirect blocks, which
	// have no tail: s.ext is then not its editor.)
	sealed := s.ext.Csum && s.ext.Store == extent.Store(s)
	deferred := sealed && (s.fresh[pblk] || s.undo == nil)
	if sealed && s.ext.DeferSum && !deferred {
		if err := extent.SetChecksum(b, s.ext.Seed); err != nil {
			return err
		}
	}
	switch {
	case s.fresh[pblk] && sealed:
		return s.h.CreateDeferred(pblk, s.ext.Seed, extent.SetChecksum, write)
	case s.fresh[pblk]:
		// Allocated by this change: nothing on disk to read (or fail to).
		return s.h.Create(pblk, write)
	case s.undo != nil:
		s.undo.touched(s.n)
		return s.undo.modify(pblk, write)
	case sealed:
		return s.h.ModifyDeferred(pblk, s.ext.Seed, extent.SetChecksum, write)
	}
	return s.h.Modify(pblk, write)
}

func (s *extStore) AllocNode(goal uint64) (uint64, error) {
	if len(s.nodes) > 0 {
		p := s.nodes[0]
		s.nodes = s.nodes[1:]
		if s.fresh == nil {
			s.fresh = map[uint64]bool{}
		}
		s.fresh[p] = true
		return p, nil
	}
	e, err := s.f.allocBlocksFor(s.h, mballoc.Request{Inode: s.ino, Len: 1, Goal: goal}, s.claimed)
	if err != nil {
		return 0, err
	}
	s.undo.allocated(e.Start)
	if s.fresh == nil {
		s.fresh = map[uint64]bool{}
	}
	s.fresh[e.Start] = true
	s.delta++
	return e.Start, nil
}

func (s *extStore) FreeNode(pblk uint64) error {
	s.treeChanged()
	if err := s.f.freeBlocks(s.h, pblk, 1, mballoc.FreeMetadata); err != nil {
		return err
	}
	s.undo.freed(pblk)
	s.delta--
	return nil
}

func (s *extStore) FreeData(pblk uint64, n uint32) error {
	s.treeChanged()
	if s.replay != nil {
		s.replay.release(pblk, uint64(n))
		s.delta -= int64(n)
		return nil
	}
	var err error
	// s.n's mu is held (its tree is being edited): its inode unmarked,
	// so that the change's copy may reuse the version it replaces.
	var in *inode.Inode
	if s.n != nil {
		in = s.n.inLocked()
	}
	if in != nil && in.IsRegular() && !in.HasFlag(inode.FlagEAInode) {
		err = s.f.freeFileData(s.h, pblk, uint64(n))
	} else {
		err = s.f.freeBlocks(s.h, pblk, uint64(n), 0)
	}
	if err != nil {
		return err
	}
	s.delta -= int64(n)
	return nil
}

// fileMap is how the write path changes a file's (or directory's) block
// mapping: its extent tree, or the block map of an inode without
// EXTENTS_FL (ext2/ext3).
type fileMap interface {
	Lookup(lblk uint32) (extent.Mapping, error)
	// Insert maps a hole; Neighbours gives allocation goals.
	Insert(x extent.Extent) error
	Neighbours(lblk uint32) (left, right *extent.Extent, err error)
	// Remove unmaps [from, to) and frees the blocks.
	Remove(from, to uint32) error
	// Convert flips blocks between unwritten and written (extents only).
	Convert(from, n uint32, toWritten bool) error
}

type extentMap struct{ *extent.Editor }

// Lookup reads the tree lent the cached blocks: it changes nothing.
func (m extentMap) Lookup(lblk uint32) (extent.Mapping, error) {
	return m.Editor.Lookup(lblk)
}

// Insert maps a hole. The writers only insert where a lookup found a
// hole, so a mapped block there means the inode contradicts itself (say,
// blocks mapped past i_size): a corruption, reported as one.
func (m extentMap) Insert(x extent.Extent) error {
	return mappedIsCorrupt(m.Editor.Insert(x), m.Ino, x.Logical)
}

func mappedIsCorrupt(err error, ino, lblk uint32) error {
	if errors.Is(err, extent.ErrMapped) || errors.Is(err, blockmap.ErrMapped) {
		return &CorruptError{What: "inode", Block: -1, Ino: ino,
			Detail: fmt.Sprintf("file block %d is already mapped where the inode's size says it is not: %v", lblk, err)}
	}
	return err
}

// blockMap is a block-mapped inode's map as a fileMap. Block maps have no
// unwritten blocks: Insert of an unwritten extent and Convert are refused
// (fallocate refuses first, as the kernel's does).
type blockMap struct{ *blockmap.Editor }

func (m blockMap) Lookup(lblk uint32) (extent.Mapping, error) {
	mp, err := m.Editor.Lookup(lblk)
	if errors.Is(err, blockmap.ErrOutOfRange) {
		return extent.Mapping{}, syscall.EFBIG
	}
	return extent.Mapping{Logical: lblk, Len: mp.Len, Physical: mp.Physical}, err
}

func (m blockMap) Insert(x extent.Extent) error {
	if x.Unwritten {
		return syscall.EOPNOTSUPP
	}
	err := m.Editor.Insert(x.Logical, x.Start, uint32(x.Len))
	if errors.Is(err, blockmap.ErrOutOfRange) {
		return syscall.EFBIG
	}
	return mappedIsCorrupt(err, m.Ino, x.Logical)
}

func (m blockMap) Neighbours(lblk uint32) (left, right *extent.Extent, err error) {
	if p := m.Neighbour(lblk); p != 0 {
		left = &extent.Extent{Logical: lblk - 1, Len: 1, Start: p}
	}
	return left, nil, nil
}

func (m blockMap) Convert(from, n uint32, toWritten bool) error { return syscall.EOPNOTSUPP }

// editor returns the editor of in's block mapping.
func (f *FS) editor(n *node, in *inode.Inode, s *extStore) fileMap {
	s.n = n
	if !in.HasFlag(inode.FlagExtents) {
		return blockMap{&blockmap.Editor{
			Root: &in.Block, Store: s, BlockSize: int(f.blockSize), Ino: n.ino,
			FirstDataBlock: uint64(f.sb.FirstDataBlock), BlocksCount: f.sb.BlocksCount(), Zone: f.zone.Load(),
		}}
	}
	// Field by field: the editor's scratch, cleared of pointers by
	// putExtStore, is kept rather than zeroed.
	e := &s.ext
	e.Root, e.Store, e.BlockSize = &in.Block, s, int(f.blockSize)
	e.Csum, e.Seed, e.Ino = f.csum, inode.Seed(f.seed, n.ino, in.Generation), n.ino
	e.DeferSum = f.csum // extStore.WriteNode computes the tails
	e.FirstDataBlock, e.BlocksCount, e.Zone = uint64(f.sb.FirstDataBlock), f.sb.BlocksCount(), f.zone.Load()
	e.View, e.Sealed = f.viewExtentBlock, f.viewSealedExtentBlock
	return extentMap{e}
}

// addBlocks moves in's i_blocks by delta filesystem blocks.
func (f *FS) addBlocks(in *inode.Inode, delta int64) error {
	sectors := int64(in.Sectors(uint32(f.blockSize), f.hugeFile)) + delta*(f.blockSize/512)
	if sectors < 0 {
		return &CorruptError{What: "inode", Block: -1, Detail: "i_blocks below zero"}
	}
	return in.SetSectors(uint64(sectors), uint32(f.blockSize), f.hugeFile)
}

// maxFileSize is the largest size of a file (kernel: ext4_max_size): 2^32-1
// blocks with extents; with a block map, what the map can address and,
// without huge_file, what i_blocks can count (kernel:
// ext4_max_bitmap_size, here without its allowance for indirect blocks
// in i_blocks, which only matters for files of almost 2 TiB).
func (f *FS) maxFileSize(n *node) int64 {
	if n.inLocked().HasFlag(inode.FlagExtents) { // n.mu is held, as checkDataWritable
		return (1<<32 - 1) * f.blockSize
	}
	size := int64(blockmap.MaxBlocks(int(f.blockSize))) * f.blockSize
	if !f.hugeFile {
		size = min(size, (1<<32-1)*512-int64(blockmap.MaxBlocks(int(f.blockSize))/uint64(f.blockSize/4)+3)*f.blockSize)
	}
	return size
}

// checkDataWritable refuses data changes ext4go cannot make to n.
func (f *FS) checkDataWritable(n *node) error {
	in := n.inLocked() // n.mu is held: writeAt, truncate, fallocate, reserve
	switch {
	case !in.IsRegular():
		return syscall.EINVAL
	case in.HasFlag(inode.FlagImmutable):
		return syscall.EPERM
	case in.HasFlag(inode.FlagVerity) || in.HasFlag(inode.FlagEncrypt):
		return syscall.EPERM
	}
	return nil
}

// writeAt writes p at off into regular file n, allocating blocks for holes
// (or, with delay and a file that allows it, delaying them: delalloc.go)
// and converting unwritten extents it writes into. n.mu must be held
// exclusively. It returns the bytes written (all of p unless an error).
func (f *FS) writeAt(n *node, p []byte, off int64, openForWrite, delay bool) (int, error) {
	if err := f.checkDataWritable(n); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	end := off + int64(len(p))
	if end > f.maxFileSize(n) || end < off {
		return 0, syscall.EFBIG
	}
	if len(p) == 0 {
		return 0, nil
	}
	// inodeWritten: the write changed the inode beyond its times (the
	// mapping), so the times go with that change, not lazily.
	inodeWritten := false
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return 0, err
		}
		inodeWritten = true
	}
	delay = delay && f.delayable(n.inLocked())
	if !delay && n.hasDelayed() {
		// Writing past the delayed blocks would map their holes.
		if err := f.flushDelayed(n, openForWrite); err != nil {
			return 0, err
		}
	}
	done := 0
	retries := 0
	delayed := false
	// settle handles a step that wrote m bytes and failed: one that wrote
	// nothing for want of space is tried again once a commit released
	// some (retry); otherwise the size covers what was written and the
	// write ends.
	settle := func(m int, err error) (retry bool) {
		if m == 0 && f.retryAfterCommit(err, &retries) {
			return true
		}
		if done > 0 {
			f.extendSize(n, off+int64(done), false)
		}
		return false
	}
	// flushNow writes the delayed blocks out in the middle of the write:
	// the size first covers what it wrote, so that no block is mapped
	// past i_size.
	flushNow := func() error {
		if done > 0 {
			if err := f.extendSize(n, off+int64(done), false); err != nil {
				return err
			}
		}
		return f.flushDelayed(n, openForWrite)
	}
	for done < len(p) {
		pos := off + int64(done)
		if delay {
			m, handled, lowSpace, err := f.daWrite(n, p[done:], pos)
			if lowSpace {
				// Allocate at once from here on (delay stays off for
				// this write); what is delayed goes first, so that
				// writeChunk's holes are holes.
				delay = false
				if err := flushNow(); err != nil {
					return done, err
				}
				continue
			}
			if handled {
				done += m
				delayed = delayed || m > 0
				if err != nil {
					if settle(m, err) {
						continue
					}
					return done, err
				}
				if f.w.daBytes.Load() > f.w.daLimit && done < len(p) {
					// A write larger than the bound: its own blocks
					// go as it goes.
					if err := flushNow(); err != nil {
						return done, err
					}
				}
				continue
			}
		}
		m, wrote, err := f.writeChunk(n, p[done:], pos, openForWrite)
		inodeWritten = inodeWritten || wrote
		done += m
		if err != nil {
			if settle(m, err) {
				continue
			}
			return done, err
		}
	}
	if delayed {
		defer f.daPressure(n)
	}
	return done, f.extendSize(n, end, !inodeWritten)
}

// extendSize raises i_size to at least size and sets mtime and ctime.
// When timesOnly (the write only overwrote mapped, written blocks) and
// the size stays, that is a time-only change, which Options.Lazytime
// keeps in memory (kernel: file_update_time with SB_LAZYTIME).
func (f *FS) extendSize(n *node, size int64, timesOnly bool) error {
	now := inode.FromTime(f.now())
	if timesOnly && uint64(size) <= n.inLocked().Size && f.lazytime() {
		in := editInodeHot(n)
		in.Mtime, in.Ctime = now, now
		f.setTimesLazily(n, in)
		return nil
	}
	h, err := f.beginHot(n) // writeAt holds n.mu exclusively; writeChunk's handle has ended
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	if uint64(size) > in.Size {
		in.Size = uint64(size)
	}
	in.Mtime, in.Ctime = now, now
	return f.setInodeHot(h, n, in)
}

// writeChunk writes the part of p at pos that one mapping covers: an
// existing extent, or a hole it allocates blocks for. It returns the bytes
// written and whether it wrote the inode (the mapping changed): a plain
// overwrite of written blocks does not.
func (f *FS) writeChunk(n *node, p []byte, pos int64, openForWrite bool) (int, bool, error) {
	bs := f.blockSize
	lblk := uint64(pos / bs)
	lastBlk := uint64((pos + int64(len(p)) - 1) / bs)
	in := editInodeHot(n)
	h, err := f.beginHot(n)
	if err != nil {
		return 0, false, err
	}
	defer h.End()
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	mp, err := ed.Lookup(uint32(lblk))
	if err != nil {
		return 0, false, err
	}
	if !mp.Hole() {
		nblk := min(mp.Len, lastBlk-lblk+1)
		m := min(int64(len(p)), int64(lblk+nblk)*bs-pos)
		if err := f.writeData(mp.Physical, lblk, p[:m], pos, mp.Unwritten); err != nil {
			return 0, false, err
		}
		if mp.Unwritten {
			if err := ed.Convert(uint32(lblk), uint32(nblk), true); err != nil {
				return 0, true, err
			}
			if err := f.addBlocks(in, s.delta); err != nil {
				return 0, true, err
			}
			if err := f.setInodeHot(h, n, in); err != nil {
				return 0, true, err
			}
			return int(m), true, nil
		}
		// A plain overwrite leaves the inode to extendSize: the copy,
		// never published, is nobody's and becomes the spare again.
		n.spare = in
		return int(m), false, nil
	}
	want := min(mp.Len, lastBlk-lblk+1, maxAllocChunk)
	req := mballoc.Request{
		Inode: n.ino, Logical: lblk, Len: uint32(want), Flags: mballoc.FlagData,
		FileSize: in.Size, OpenForWrite: openForWrite,
	}
	var m int64
	_, err = f.mapNew(h, in, s, ed, req, &mp, false, func(ext mballoc.Extent) error {
		m = min(int64(len(p)), int64(lblk+uint64(ext.Len))*bs-pos)
		return f.writeData(ext.Start, lblk, p[:m], pos, true)
	})
	if err != nil {
		return 0, true, err
	}
	if uint64(pos+m) > in.Size {
		in.Size = uint64(pos + m)
	}
	return int(m), true, f.setInodeHot(h, n, in)
}

// mapNew allocates data blocks for req (a hole at req.Logical), lets fill
// write them (before they are mapped: data=ordered), maps them as one
// written or unwritten extent and counts them in in's i_blocks. On failure
// the blocks are given back. hole, if not nil, is ed's Lookup of the hole:
// the neighbours it found are the allocation's goal, without another walk
// of the tree.
func (f *FS) mapNew(h handle, in *inode.Inode, s *extStore, ed fileMap, req mballoc.Request, hole *extent.Mapping, unwritten bool, fill func(mballoc.Extent) error) (mballoc.Extent, error) {
	if hole != nil && hole.NearKnown {
		neighboursFrom(hole, &req)
	} else {
		f.setNeighbours(ed, &req)
	}
	if bm, ok := ed.(blockMap); ok {
		if err := f.placeIndirect(s, bm, &req); err != nil {
			return mballoc.Extent{}, err
		}
	}
	ext, err := f.allocDataFor(h, req, s.claimed)
	if err != nil {
		f.dropNodes(s)
		return ext, err
	}
	if fill != nil {
		err = fill(ext)
	}
	if err == nil {
		err = ed.Insert(extent.Extent{Logical: uint32(req.Logical), Len: ext.Len, Start: ext.Start, Unwritten: unwritten})
	}
	f.dropNodes(s)
	if err != nil {
		f.freeBlocks(h, ext.Start, uint64(ext.Len), 0)
		return ext, err
	}
	return ext, f.addBlocks(in, s.delta+int64(ext.Len))
}

// placeIndirect prepares a block-mapped allocation the way ext2/ext3 lay
// files out: the request stops where the pointer array holding its first
// block ends, and the indirect blocks that array still needs are allocated
// first, next to the data before them, so that the data follows them and
// the file reads (and e2fsck counts it) as contiguous. Block-mapped files
// get no preallocation.
func (f *FS) placeIndirect(s *extStore, bm blockMap, req *mballoc.Request) error {
	lblk := uint32(req.Logical)
	req.Len = uint32(min(uint64(req.Len), bm.ArrayEnd(lblk)-uint64(lblk)))
	// Preallocation would hold the blocks after the data for the file's
	// next data, where its indirect blocks belong.
	req.Flags |= mballoc.FlagNoPrealloc
	k, err := bm.NewNodes(lblk)
	if err != nil || k == 0 {
		return err
	}
	goal := req.Goal
	if req.LeftPhysical != 0 {
		goal = req.LeftPhysical + 1
	}
	for i := 0; i < k; i++ {
		e, err := f.allocBlocks(s.h, mballoc.Request{Inode: s.ino, Len: 1, Goal: goal, Flags: mballoc.FlagTryGoal})
		if err != nil {
			f.dropNodes(s)
			var ns *mballoc.NoSpaceError
			if errors.As(err, &ns) {
				return syscall.ENOSPC
			}
			return err
		}
		s.nodes = append(s.nodes, e.Start)
		s.delta++
		goal = e.Start + 1
	}
	// The data goes right after them.
	req.LeftLogical, req.LeftPhysical = uint64(lblk)-1, goal-1
	req.Goal = goal
	req.Flags |= mballoc.FlagTryGoal
	return nil
}

// dropNodes frees the indirect blocks allocated ahead and not used.
func (f *FS) dropNodes(s *extStore) {
	for _, p := range s.nodes {
		f.freeBlocks(s.h, p, 1, mballoc.FreeMetadata)
		s.delta--
	}
	s.nodes = nil
}

// neighboursFrom sets req's neighbour hints from a lookup that found them.
func neighboursFrom(m *extent.Mapping, req *mballoc.Request) {
	var left, right *extent.Extent
	if m.HasLeft {
		left = &m.Left
	}
	if m.HasRight {
		right = &m.Right
	}
	setHints(req, left, right)
}

// setNeighbours fills req's neighbour hints from the extent tree.
func (f *FS) setNeighbours(ed fileMap, req *mballoc.Request) {
	left, right, err := ed.Neighbours(uint32(req.Logical))
	if err != nil {
		return
	}
	setHints(req, left, right)
}

// setHints makes left's last block and right's first (either may be nil)
// req's allocation goals.
func setHints(req *mballoc.Request, left, right *extent.Extent) {
	if left != nil {
		req.LeftLogical = uint64(left.Logical) + uint64(left.Len) - 1
		req.LeftPhysical = left.Start + uint64(left.Len) - 1
	}
	if right != nil {
		req.RightLogical = uint64(right.Logical)
		req.RightPhysical = right.Start
	}
}

// allocData allocates data blocks, committing once to release blocks
// freed by uncommitted transactions when the disk looks full.
func (f *FS) allocData(h handle, req mballoc.Request) (mballoc.Extent, error) {
	return f.allocDataFor(h, req, false)
}

// allocDataFor is allocData; claimed as allocBlocksFor's.
func (f *FS) allocDataFor(h handle, req mballoc.Request, claimed bool) (mballoc.Extent, error) {
	ext, err := f.allocBlocksFor(h, req, claimed)
	if err != nil {
		// Inside the branch: errors.As's target escapes, an allocation.
		var ns *mballoc.NoSpaceError
		if errors.As(err, &ns) {
			return ext, syscall.ENOSPC
		}
	}
	return ext, err
}

// writeData writes p, the file bytes at pos, into the blocks from pblk
// (which maps logical block lblk). When fresh, the blocks hold no data
// yet: the parts of the first and last block that p does not cover are
// written as zeros.
func (f *FS) writeData(pblk, lblk uint64, p []byte, pos int64, fresh bool) error {
	if err := f.inject("write"); err != nil {
		return err
	}
	bs := f.blockSize
	start := int64(pblk)*bs + (pos - int64(lblk)*bs)
	if err := f.checkDataWrite(start, int64(len(p))); err != nil {
		return err
	}
	if !fresh {
		_, err := f.dev.WriteAt(p, start)
		return err
	}
	head := pos % bs
	tail := (bs - (pos+int64(len(p)))%bs) % bs
	if head == 0 && tail == 0 {
		_, err := f.dev.WriteAt(p, start)
		return err
	}
	buf := getScratch(int(head + int64(len(p)) + tail))
	clear(buf[:head])
	copy(buf[head:], p)
	clear(buf[head+int64(len(p)):])
	_, err := f.dev.WriteAt(buf, start-head)
	putScratch(buf)
	return err
}

// zeroData writes zeros over file bytes [from, to) where they are mapped
// and written (used for the partial blocks at the edges of truncates and
// punches).
func (f *FS) zeroData(n *node, in *inode.Inode, from, to int64) error {
	if from >= to {
		return nil
	}
	bs := f.blockSize
	s := &extStore{f: f}
	ed := f.editor(n, in, s)
	for pos := from; pos < to; {
		lblk := uint64(pos / bs)
		mp, err := ed.Lookup(uint32(lblk))
		if err != nil {
			return err
		}
		chunk := min(to-pos, int64(lblk+mp.Len)*bs-pos)
		if !mp.Hole() && !mp.Unwritten {
			if err := f.checkDataWrite(int64(mp.Physical)*bs+pos%bs, chunk); err != nil {
				return err
			}
			zeros := make([]byte, chunk)
			if _, err := f.dev.WriteAt(zeros, int64(mp.Physical)*bs+pos%bs); err != nil {
				return err
			}
		}
		pos += chunk
	}
	return nil
}

// zeroEdges zeros the parts of [off, end) that lie in partial blocks at
// its edges (all of it when it sits inside one block); whole blocks are
// left to the caller, which frees or converts them.
func (f *FS) zeroEdges(n *node, in *inode.Inode, off, end int64) error {
	bs := f.blockSize
	firstFull, endFull := (off+bs-1)/bs, end/bs
	if firstFull > endFull {
		return f.zeroData(n, in, off, end)
	}
	if err := f.zeroData(n, in, off, firstFull*bs); err != nil {
		return err
	}
	return f.zeroData(n, in, endFull*bs, end)
}

// truncate sets the size of regular file n, freeing blocks past it,
// for c, whose truncation drops n's privileges (kernel: do_truncate; a
// size refused drops nothing, the privileges going in the same setattr).
// n.mu must be held exclusively.
func (f *FS) truncate(n *node, size int64, c privCaller) error {
	if err := f.checkDataWritable(n); err != nil {
		return err
	}
	if size < 0 {
		return syscall.EINVAL
	}
	if size > f.maxFileSize(n) {
		return syscall.EFBIG
	}
	if _, err := f.removePrivs(n, c); err != nil {
		return err
	}
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return err
		}
	}
	f.w.balloc.DiscardInodePreallocOpen(n.ino)
	bs := f.blockSize
	first := uint64((size + bs - 1) / bs)
	if size < int64(n.inLocked().Size) {
		if err := f.prepareFree(n, first, false); err != nil {
			return err
		}
	}
	h, err := f.beginHot(n) // n.mu is held exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	if size < int64(in.Size) {
		if err := f.removeBlocksFrom(h, n, in, first); err != nil {
			return err
		}
		// Keep "bytes past i_size in the last block are zero" true; after
		// the removal, so that a failed one leaves the data as it was.
		if size%bs != 0 {
			if err := f.zeroData(n, in, size, min(int64(in.Size), (size/bs+1)*bs)); err != nil {
				return err
			}
		}
	}
	in.Size = uint64(size)
	now := inode.FromTime(f.now())
	in.Mtime, in.Ctime = now, now
	if err := f.setInodeHot(h, n, in); err != nil {
		return err
	}
	// Delayed blocks past the size go without being written, once the
	// truncate cannot fail any more.
	f.daTruncate(n, size)
	return nil
}

// removeBlocksFrom unmaps and frees n's blocks from logical block first
// to the end, in h, and takes them off in's block count. n.mu must be
// held exclusively, and prepareFree called for first.
func (f *FS) removeBlocksFrom(h handle, n *node, in *inode.Inode, first uint64) error {
	if first >= extent.MaxLogical {
		return nil
	}
	return f.removeBlocks(h, n, in, uint32(first), extent.MaxLogical)
}

// Fallocate modes (Linux FALLOC_FL_*).
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

// fallocate implements File.Fallocate for c, whose change drops n's
// privileges once the arguments passed (kernel: file_modified in
// ext4_fallocate and its modes); n.mu must be held exclusively.
func (f *FS) fallocate(n *node, mode int, off, length int64, c privCaller) error {
	if err := f.checkDataWritable(n); err != nil {
		return err
	}
	// Argument checks in the order of Linux's vfs_fallocate.
	if off < 0 || length <= 0 {
		return syscall.EINVAL
	}
	if mode&^(FallocKeepSize|FallocPunchHole|FallocZeroRange) != 0 {
		return &UnsupportedError{Feature: fmt.Sprintf("fallocate mode %#x", mode)}
	}
	if mode&FallocPunchHole != 0 && (mode&FallocKeepSize == 0 || mode&FallocZeroRange != 0) {
		return syscall.EOPNOTSUPP // as Linux: punch needs KEEP_SIZE, excludes ZERO_RANGE
	}
	end := off + length
	if end > f.maxFileSize(n) || end < off {
		return syscall.EFBIG
	}
	if !n.inLocked().HasFlag(inode.FlagExtents) && !n.inLocked().HasFlag(inode.FlagInlineData) && mode&FallocPunchHole == 0 {
		return syscall.EOPNOTSUPP // as Linux: preallocation needs extents; punching does not
	}
	if _, err := f.removePrivs(n, c); err != nil {
		return err
	}
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return err
		}
	}
	// Every mode reads or changes the mapping over the range: delayed
	// blocks get theirs first (preallocating over a delayed hole would map
	// it twice).
	if err := f.flushDelayed(n, true); err != nil {
		return err
	}
	if mode&(FallocPunchHole|FallocZeroRange) != 0 {
		// Their blocks change under the preallocation's window; a plain
		// allocation keeps it, so fallocate appends use it as the
		// kernel's do and grow the file in one run.
		f.w.balloc.DiscardInodePreallocOpen(n.ino)
	}
	bs := f.blockSize
	firstFull := uint64((off + bs - 1) / bs)
	endFull := uint64(end / bs) // whole blocks [firstFull, endFull)
	switch {
	case mode&FallocPunchHole != 0:
		if end > int64(n.inLocked().Size) {
			end = int64(n.inLocked().Size)
		}
		return f.punch(n, off, end)
	case mode&FallocZeroRange != 0:
		if err := f.zeroRange(n, off, end, firstFull, endFull); err != nil {
			return err
		}
	}
	// Allocate unwritten extents over every hole in the range.
	first, last := uint64(off/bs), uint64((end-1)/bs)
	// The size and times change with the chunk that reaches the end of
	// the range, in its transaction, as the kernel's
	// ext4_alloc_file_blocks updates the inode in each handle: one
	// transaction for the usual small fallocate.
	finish := func(in *inode.Inode) {
		if mode&FallocKeepSize == 0 && uint64(end) > in.Size {
			in.Size = uint64(end)
		}
		// Every mode moves both, whatever it allocated and with
		// FALLOC_FL_KEEP_SIZE too, as the kernel's ext4_fallocate does
		// (Linux 6.18: TestFallocateTimesMatchKernel).
		in.Ctime = inode.FromTime(f.now())
		in.Mtime = in.Ctime
	}
	retries, finished := 0, false
	for lblk := first; lblk <= last; {
		adv, done, err := f.fallocChunk(n, lblk, last, finish)
		if err != nil && f.retryAfterCommit(err, &retries) {
			continue
		}
		if err != nil {
			return err
		}
		lblk += adv
		finished = done
	}
	if finished {
		return nil
	}
	h, err := f.beginHot(n) // n.mu is held exclusively; fallocChunk's handle has ended
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	finish(in)
	return f.setInodeHot(h, n, in)
}

// fallocChunk maps the hole at lblk (up to last) with unwritten blocks, or
// skips the extent there. It returns how many blocks it advanced and
// whether it applied finish, which it does to the inode it writes when
// the new blocks reach last.
func (f *FS) fallocChunk(n *node, lblk, last uint64, finish func(*inode.Inode)) (uint64, bool, error) {
	in := editInodeHot(n)
	h, err := f.beginHot(n)
	if err != nil {
		return 0, false, err
	}
	defer h.End()
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	mp, err := ed.Lookup(uint32(lblk))
	if err != nil {
		return 0, false, err
	}
	want := min(mp.Len, last-lblk+1)
	if !mp.Hole() {
		// Mapped already: the copy, never published, is nobody's.
		n.spare = in
		return want, false, nil
	}
	// Open for write: fallocate needs a file opened for writing. Space
	// past the end is an append: the file is growing.
	flags := mballoc.FlagData
	if lblk*uint64(f.blockSize) >= in.Size {
		flags |= mballoc.FlagAppend
	}
	req := mballoc.Request{Inode: n.ino, Logical: lblk, Len: uint32(min(want, extent.UnwrittenMaxLen)), Flags: flags,
		FileSize: in.Size, OpenForWrite: true}
	ext, err := f.mapNew(h, in, s, ed, req, &mp, true, nil)
	if err != nil {
		return 0, false, err
	}
	done := lblk+uint64(ext.Len) > last
	if done {
		finish(in)
	}
	return uint64(ext.Len), done, f.setInodeHot(h, n, in)
}

// punch frees the blocks wholly inside [off, end) and zeros the partial
// blocks at its edges.
func (f *FS) punch(n *node, off, end int64) error {
	if off >= end {
		return nil
	}
	bs := f.blockSize
	firstFull := (off + bs - 1) / bs
	endFull := end / bs
	if firstFull < endFull {
		if err := f.prepareFree(n, uint64(firstFull), false); err != nil {
			return err
		}
	}
	h, err := f.beginHot(n) // fallocate holds n.mu exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	// The blocks first: a removal that fails (ENOSPC for the split of an
	// extent) changes nothing, and only then are the edges zeroed.
	if firstFull < endFull {
		if err := f.removeBlocks(h, n, in, uint32(firstFull), uint32(endFull)); err != nil {
			return err
		}
	}
	if err := f.zeroEdges(n, in, off, end); err != nil {
		return err
	}
	now := inode.FromTime(f.now())
	in.Mtime, in.Ctime = now, now
	return f.setInodeHot(h, n, in)
}

// removeBlocks unmaps and frees n's blocks [from, to) in h and takes them
// off in's block count; n.mu is held exclusively.
func (f *FS) removeBlocks(h handle, n *node, in *inode.Inode, from, to uint32) error {
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	if err := f.editor(n, in, s).Remove(from, to); err != nil {
		return err
	}
	return f.addBlocks(in, s.delta)
}

// zeroRange makes [off, end) read as zeros: whole written blocks become
// unwritten, partial edge blocks are zeroed in place.
func (f *FS) zeroRange(n *node, off, end int64, firstFull, endFull uint64) error {
	h, err := f.beginHot(n) // fallocate holds n.mu exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	// As in punch: the conversion (which may fail) before the zeroing.
	if firstFull < endFull {
		s := pooledExtStore(f, h, n.ino)
		defer putExtStore(s)
		if err := f.editor(n, in, s).Convert(uint32(firstFull), uint32(endFull-firstFull), false); err != nil {
			return err
		}
		if err := f.addBlocks(in, s.delta); err != nil {
			return err
		}
	}
	if err := f.zeroEdges(n, in, off, end); err != nil {
		return err
	}
	if firstFull < endFull {
		return f.setInodeHot(h, n, in)
	}
	// Only edges zeroed: the copy, never published, is nobody's.
	n.spare = in
	return nil
}

var _ = super.Size
