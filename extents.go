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
)

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

// extStores recycles the stores of the hot paths (a write or fallocate
// chunk): with its editor's scratch a store is a kilobyte of pointers,
// which allocating per call made the largest cost of the loop.
var extStores = sync.Pool{New: func() any { return new(extStore) }}
