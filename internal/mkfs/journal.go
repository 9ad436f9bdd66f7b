package mkfs

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/orphan"
	"github.com/ext4go/ext4go/internal/super"
)

// createJournal is ext2fs_add_journal_inode3 for an internal journal in
// inode 8: blocks near the middle of the filesystem with extents (a
// block-mapped journal goes where ext2fs_bmap2 allocates, from group 0),
// the jbd2 superblock in its first block and the inode's i_block copied
// into s_jnl_blocks.
func (f *builder) createJournal() error {
	p := f.p
	if p.journal == 0 {
		return nil
	}
	in := f.inode(super.JournalIno)
	in.Mode = modeFile | 0o600
	in.LinksCount = 1
	in.Size = uint64(p.journal) * uint64(p.blockSize)

	var data []extentRange
	var err error
	if p.extents() {
		data, err = f.journalExtents(in)
	} else {
		data, err = f.journalBlockMapped(in)
	}
	if err != nil {
		return err
	}
	f.newFileInode(in)
	if !f.zeroed {
		// Without lazy_journal_init the whole journal is zeroed.
		f.zero = append(f.zero, data...)
	}
	first := data[0].start

	jsb := &jbd2.Superblock{
		Header:    jbd2.Header{Magic: jbd2.Magic, BlockType: jbd2.BlockSuperV2},
		BlockSize: p.blockSize,
		MaxLen:    p.journal,
		First:     1,
		Sequence:  1,
		NrUsers:   1,
		UUID:      p.uuid,
	}
	blk := make([]byte, p.blockSize)
	copy(blk, jsb.Encode())
	f.blocks[first] = blk
	f.sb.JnlBackupType = jnlBackupBlocks

	for i := 0; i < 15; i++ {
		f.jnlBlocks[i] = binary.LittleEndian.Uint32(in.Block[4*i:])
	}
	f.jnlBlocks[15] = uint32(in.Size >> 32)
	f.jnlBlocks[16] = uint32(in.Size)
	return nil
}

// midpointGoal is get_midpoint_journal_block.
func (f *builder) midpointGoal() uint64 {
	p := f.p
	g := p.groupOfBlock((p.blocks - uint64(p.firstData)) / 2)
	logFlex := uint32(1) << p.logFlex
	var start uint32
	if p.logFlex != 0 && g > logFlex {
		g &^= logFlex - 1
		for g < p.groups && f.gd[g].FreeBlocksCount == 0 {
			g++
		}
		if g == p.groups {
			g = 0
		}
		start = g
	} else if g > 0 {
		start = g - 1
	} else {
		start = g
	}
	end := g
	if g+1 < p.groups {
		end = g + 1
	}
	best := start
	for i := start + 1; i <= end; i++ {
		if f.gd[i].FreeBlocksCount > f.gd[best].FreeBlocksCount {
			best = i
		}
	}
	return p.groupFirstBlock(best)
}

// journalExtents is ext2fs_fallocate (extent_fallocate and the
// ext_falloc_helper loop) for an empty extent-mapped file: runs of free
// blocks from the goal, each at most 32768 blocks long. A fifth extent moves
// the tree into a leaf block, allocated like extent_node_split does (as
// close before the first extent as possible).
func (f *builder) journalExtents(in *inode.Inode) ([]extentRange, error) {
	p := f.p
	goal := f.midpointGoal()
	if z, ok := f.bmap.firstZero(goal, p.blocks-1); ok {
		goal = z
	}
	var exts []extent.Extent
	var leaf uint64
	blocks := uint64(0)
	pblk := goal
	for logical, left := uint64(0), uint64(p.journal); left > 0; {
		start, n, err := f.newRange(pblk, min(left, extent.InitMaxLen))
		if err != nil {
			return nil, err
		}
		f.allocStats(start, n)
		blocks += n
		exts = append(exts, extent.Extent{Logical: uint32(logical), Len: uint32(n), Start: start})
		if len(exts) == 5 && leaf == 0 {
			// The root is full: extent_node_split moves the extents to a
			// new leaf, which it tries to put just before the first extent.
			if leaf, err = f.allocBlock(exts[0].Start - 1); err != nil {
				return nil, err
			}
			blocks++
		}
		if max := extent.MaxEntries(int(p.blockSize)); len(exts) > max {
			return nil, fmt.Errorf("needs more than %d extents: free space too fragmented", max)
		}
		logical += n
		left -= n
		pblk = start + n
		if pblk >= p.blocks {
			pblk = uint64(p.firstData)
		}
	}
	in.Flags |= inode.FlagExtents
	if leaf == 0 {
		if err := setExtents(in, exts); err != nil {
			return nil, err
		}
	} else {
		node := &extent.Node{Header: extent.Header{Magic: extent.Magic, Max: uint16(extent.MaxEntries(int(p.blockSize)))}, Extents: exts}
		b := make([]byte, p.blockSize)
		if err := node.Encode(b); err != nil {
			return nil, err
		}
		if p.csum() {
			if err := extent.SetChecksum(b, f.seed(super.JournalIno)); err != nil {
				return nil, err
			}
		}
		f.blocks[leaf] = b
		// The split rewrites the root's header and first entry in place:
		// the other three extents stay behind in i_block, unused.
		if err := setExtents(in, exts[:4]); err != nil {
			return nil, err
		}
		root := &extent.Node{Header: extent.Header{Magic: extent.Magic, Max: 4, Depth: 1},
			Indexes: []extent.Index{{Logical: 0, Child: leaf}}}
		if err := root.Encode(in.Block[:]); err != nil {
			return nil, err
		}
	}
	if err := f.setBlocks(in, blocks); err != nil {
		return nil, err
	}
	var runs []extentRange
	for _, e := range exts {
		runs = append(runs, extentRange{e.Start, uint64(e.Len)})
	}
	return runs, nil
}

// journalBlockMapped allocates a block-mapped journal as ext2fs_fallocate's
// slow path does, one ext2fs_bmap2(BMAP_ALLOC) per block: each block, and
// each indirect block when first needed, is the first free block after the
// previous allocation, starting from the inode's group.
func (f *builder) journalBlockMapped(in *inode.Inode) ([]extentRange, error) {
	m := f.newBlockMap(f.inodeGoal(super.JournalIno))
	for i := uint64(0); i < uint64(f.p.journal); i++ {
		if _, err := m.add(i); err != nil {
			return nil, err
		}
	}
	if err := m.finish(in); err != nil {
		return nil, err
	}
	var runs []extentRange
	for _, b := range m.data {
		if k := len(runs) - 1; k >= 0 && runs[k].start+runs[k].n == b {
			runs[k].n++
			continue
		}
		runs = append(runs, extentRange{b, 1})
	}
	return runs, nil
}

// blockMap builds an indirect-mapped file whose blocks are allocated in
// order, each at the first free block after the previous allocation.
type blockMap struct {
	f      *builder
	goal   uint64
	direct [ndirBlocks]uint32
	// ind[level] are the indirect blocks being filled at each depth
	// (0: single, 1: double, 2: triple), with their block numbers.
	top   [3]uint64 // IND, DIND, TIND in i_block
	bufs  map[uint64][]uint32
	data  []uint64
	count uint64 // blocks allocated, metadata included
}

func (f *builder) newBlockMap(goal uint64) *blockMap {
	return &blockMap{f: f, goal: goal, bufs: map[uint64][]uint32{}}
}

func (m *blockMap) alloc() (uint64, error) {
	b, err := m.f.allocBlock(m.goal)
	if err != nil {
		return 0, err
	}
	m.goal = b
	m.count++
	return b, nil
}

// child returns the indirect block in slot idx of the indirect block
// parent, allocating it when missing (block_ind_bmap with BMAP_ALLOC).
func (m *blockMap) child(parent uint64, idx uint64) (uint64, error) {
	buf := m.bufs[parent]
	if buf[idx] != 0 {
		return uint64(buf[idx]), nil
	}
	b, err := m.alloc()
	if err != nil {
		return 0, err
	}
	buf[idx] = uint32(b)
	m.bufs[b] = make([]uint32, m.f.p.addrPerBlock())
	return b, nil
}

// add allocates file block i (blocks are added in order).
func (m *blockMap) add(i uint64) (uint64, error) {
	apb := uint64(m.f.p.addrPerBlock())
	if i < ndirBlocks {
		b, err := m.alloc()
		if err != nil {
			return 0, err
		}
		m.direct[i] = uint32(b)
		m.data = append(m.data, b)
		return b, nil
	}
	i -= ndirBlocks
	level, span := 0, apb
	for i >= span {
		i -= span
		level++
		if level == 3 {
			return 0, fmt.Errorf("file too large for indirect blocks")
		}
		span *= apb
	}
	if m.top[level] == 0 {
		b, err := m.alloc()
		if err != nil {
			return 0, err
		}
		m.top[level] = b
		m.bufs[b] = make([]uint32, apb)
	}
	node := m.top[level]
	for l := level; l > 0; l-- {
		span /= apb
		var err error
		if node, err = m.child(node, i/span); err != nil {
			return 0, err
		}
		i %= span
	}
	b, err := m.alloc()
	if err != nil {
		return 0, err
	}
	m.bufs[node][i] = uint32(b)
	m.data = append(m.data, b)
	return b, nil
}

// finish writes the indirect blocks and fills in i_block and i_blocks.
func (m *blockMap) finish(in *inode.Inode) error {
	for b, words := range m.bufs {
		m.f.blocks[b] = m.f.putU32s(words)
	}
	for i, b := range m.direct {
		binary.LittleEndian.PutUint32(in.Block[4*i:], b)
	}
	for l, b := range m.top {
		binary.LittleEndian.PutUint32(in.Block[4*(indBlock+l):], uint32(b))
	}
	return m.f.setBlocks(in, m.count)
}

// createOrphanFile is ext2fs_create_orphan_file: a new inode (12 in a new
// filesystem) whose blocks are empty orphan blocks, each ending in the
// orphan block tail (magic and, with metadata_csum, a checksum).
func (f *builder) createOrphanFile() error {
	p := f.p
	if p.orphan == 0 {
		return nil
	}
	ino, err := f.newInode(super.RootIno)
	if err != nil {
		return err
	}
	f.inodeAllocStats(ino, false)
	f.orphanIno = ino
	in := f.inode(ino)
	in.Mode = modeFile | 0o600
	in.LinksCount = 1
	in.Size = uint64(p.orphan) * uint64(p.blockSize)

	// ext2fs_block_iterate3(BLOCK_FLAG_APPEND) with goal 0: the first free
	// blocks of the filesystem, in order.
	var data []uint64
	if p.extents() {
		goal := uint64(0)
		for i := uint32(0); i < p.orphan; i++ {
			b, err := f.allocBlock(goal)
			if err != nil {
				return err
			}
			data = append(data, b)
			goal = b
		}
		if err := f.mapBlocks(in, data); err != nil {
			return err
		}
		if err := f.setBlocks(in, uint64(len(data))); err != nil {
			return err
		}
	} else {
		m := f.newBlockMap(0)
		for i := uint64(0); i < uint64(p.orphan); i++ {
			if _, err := m.add(i); err != nil {
				return err
			}
		}
		if err := m.finish(in); err != nil {
			return err
		}
		data = m.data
	}
	seed := inode.Seed(f.csumSeed, ino, 0)
	for _, b := range data {
		f.blocks[b] = orphan.NewBlock(int(p.blockSize), p.csum(), seed, b)
	}
	f.newFileInode(in)
	return nil
}
