package mkfs

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
)

// build replays mke2fs's main(): initialize, allocate the group tables,
// create the root directory, lost+found, the reserved and resize inodes, the
// journal and the orphan file. zeroed says the device reads back zeros (so
// inode tables count as zeroed, like mke2fs after a discard that zeroes).
func build(p *plan, zeroed bool) (*builder, error) {
	f := &builder{
		p:      p,
		gd:     make([]super.GroupDesc, p.groups),
		bmap:   newBitmap(p.blocks),
		inoMap: map[uint32]bool{},
		inodes: map[uint32]*inode.Inode{},
		blocks: map[uint64][]byte{},
		zeroed: zeroed,
	}
	f.sb = p.superblock()
	f.csumSeed = f.sb.ChecksumSeed()

	f.initGroups()
	if err := f.allocateTables(); err != nil {
		return nil, err
	}
	// s_overhead_clusters: everything allocated so far (mke2fs counts it
	// right after the group tables, then adds the journal and block 0).
	f.overhead = f.bmap.count(uint64(p.firstData), p.blocks-1)

	// write_inode_tables: the kernel need not zero tables that are known to
	// be zero, either because we zero them or because the device does.
	if p.zeroInit || zeroed {
		for g := range f.gd {
			f.gd[g].Flags |= super.BGItableZeroed
		}
	}
	if !zeroed {
		f.zeroInodeTables()
	}
	if p.csum() {
		// write_reserved_inodes: reserved inodes always carry a checksum.
		for ino := uint32(1); ino < p.firstIno; ino++ {
			f.inode(ino)
		}
	}

	steps := []struct {
		what string
		do   func() error
	}{
		{"the root directory", f.createRoot},
		{"lost+found", f.createLostFound},
		{"the reserved inodes", f.reserveInodes},
		{"the bad blocks inode", f.createBadBlockInode},
		{"the resize inode", f.createResizeInode},
		{"the journal", f.createJournal},
		{"the orphan file", f.createOrphanFile},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return nil, fmt.Errorf("mkfs: creating %s: %w", s.what, err)
		}
	}
	f.overhead += uint64(p.journal) + uint64(p.firstData)
	return f, nil
}

// initGroups is the per-group loop of ext2fs_initialize: uninit flags,
// unused inode counts and free block counts net of superblock, descriptor
// and (without flex_bg) bitmap and inode table blocks.
func (f *builder) initGroups() {
	p := f.p
	reserved := p.firstIno
	for g := uint32(0); g < p.groups; g++ {
		gd := &f.gd[g]
		if p.gdCsum() {
			if g != p.groups-1 {
				gd.Flags |= super.BGBlockUninit
			}
			gd.Flags |= super.BGInodeUninit
			n := p.ipg
			if reserved > 0 {
				if n > reserved {
					n -= reserved
					reserved = 0
				} else {
					reserved -= n
					n = 0
				}
			}
			gd.ItableUnused = n
		}
		l := p.groupMeta(g)
		f.reserveSuperAndBGD(g, l)
		free := p.groupBlocks(g) - 2 - p.itb - l.used
		if p.logFlex != 0 {
			free += 2 + p.itb
		}
		gd.FreeBlocksCount = free
		gd.FreeInodesCount = p.ipg
		f.freeBlocks += uint64(free)
	}
	f.freeInodes = p.inodes
}

// reserveSuperAndBGD is ext2fs_reserve_super_and_bgd: mark a group's
// superblock and descriptor blocks in the block bitmap.
func (f *builder) reserveSuperAndBGD(g uint32, l groupMetaLoc) {
	p := f.p
	if l.super != 0 || g == 0 {
		f.bmap.set(l.super)
	}
	if l.oldDesc != 0 {
		n := uint64(p.oldDescBlocks())
		if l.oldDesc+n >= p.blocks {
			n = p.blocks - l.oldDesc
		}
		f.bmap.setRange(l.oldDesc, n)
	}
	if l.newDesc != 0 {
		f.bmap.set(l.newDesc)
	}
}

// allocateTables is ext2fs_allocate_tables.
func (f *builder) allocateTables() error {
	for g := uint32(0); g < f.p.groups; g++ {
		if err := f.allocateGroupTable(g); err != nil {
			return err
		}
	}
	return nil
}

// flexbgOffset is flexbg_offset in lib/ext2fs/alloc_tables.c: where the
// bitmaps or inode tables of a flex group start so that they stay packed.
func (f *builder) flexbgOffset(g uint32, start uint64, remGrp, elem uint32) uint64 {
	p := f.p
	flexSize := uint32(1) << p.logFlex
	flexbg := g / flexSize
	size := uint64(remGrp) * uint64(elem)
	if size > uint64(p.bpg/4) {
		size = uint64(p.bpg / 4)
	}
	// Don't do a long search if the previous block search is still valid,
	// but skip minor obstructions such as group descriptor backups.
	if start != 0 && start < p.blocks {
		if b, ok := f.getFreeBlocks(start, start+size, uint64(elem)); ok {
			return b
		}
	}
	start = p.groupFirstBlock(flexSize * flexbg)
	lastGrp := min(g|(flexSize-1), p.groups-1)
	last := p.groupLastBlock(lastGrp)
	if b, ok := f.getFreeBlocks(start, last, size); ok {
		return b
	}
	if b, ok := f.getFreeBlocks(start, last, uint64(elem)); ok {
		return b
	}
	if b, ok := f.getFreeBlocks(0, last, uint64(elem)); ok {
		return b
	}
	return 0
}

// allocateGroupTable is ext2fs_allocate_group_table: block bitmap, inode
// bitmap and inode table of group g, packed per flex group with flex_bg.
func (f *builder) allocateGroupTable(g uint32) error {
	p := f.p
	groupBlk := p.groupFirstBlock(g)
	lastBlk := p.groupLastBlock(g)
	var flexSize, lastGrp, remGrps, tableOffset uint32
	if p.has(super.KindIncompat, super.IncompatFlexBG) && p.logFlex != 0 {
		flexSize = 1 << p.logFlex
		lastGrp = min(g|(flexSize-1), p.groups-1)
		remGrps = lastGrp - g + 1
	}
	gd := &f.gd[g]
	// chargeFlex charges n blocks from b to the groups holding them, as the
	// flex_bg branch does (without flex_bg initialize already counted them).
	chargeFlex := func(b, n uint64) {
		if flexSize == 0 {
			return
		}
		for n > 0 {
			gr := p.groupOfBlock(b)
			k := min(n, p.groupLastBlock(gr)-b+1)
			f.gd[gr].FreeBlocksCount -= uint32(k)
			f.gd[gr].Flags &^= super.BGBlockUninit
			f.freeBlocks -= k
			b += k
			n -= k
		}
	}
	one := func(start uint64) (uint64, error) {
		b, ok := f.getFreeBlocks(start, lastBlk, 1)
		if !ok {
			b, ok = f.getFreeBlocks(groupBlk, lastBlk, 1)
		}
		if !ok {
			return 0, fmt.Errorf("mkfs: no room for the bitmaps of group %d", g)
		}
		f.bmap.set(b)
		chargeFlex(b, 1)
		return b, nil
	}

	start := groupBlk
	if flexSize != 0 {
		var prev uint64
		tableOffset = flexSize
		if g%flexSize != 0 {
			prev = f.gd[g-1].BlockBitmap + 1
		} else if lastGrp == p.groups-1 {
			// The last flex group keeps its tables contiguous.
			tableOffset = lastGrp & (flexSize - 1)
			if tableOffset == 0 {
				tableOffset = flexSize
			} else {
				tableOffset++
			}
		}
		start = f.flexbgOffset(g, prev, remGrps, 1)
		lastBlk = p.groupLastBlock(lastGrp)
	}
	b, err := one(start)
	if err != nil {
		return err
	}
	gd.BlockBitmap = b

	if flexSize != 0 {
		prev := gd.BlockBitmap + uint64(tableOffset)
		if g%flexSize != 0 {
			prev = f.gd[g-1].InodeBitmap + 1
		}
		start = f.flexbgOffset(g, prev, remGrps, 1)
		lastBlk = p.groupLastBlock(lastGrp)
	}
	if b, err = one(start); err != nil {
		return err
	}
	gd.InodeBitmap = b

	if flexSize != 0 {
		prev := gd.InodeBitmap + uint64(tableOffset)
		if g%flexSize != 0 {
			prev = f.gd[g-1].InodeTable + uint64(p.itb)
		}
		groupBlk = f.flexbgOffset(g, prev, remGrps, p.itb)
		lastBlk = p.groupLastBlock(lastGrp)
	}
	b, ok := f.getFreeBlocks(groupBlk, lastBlk, uint64(p.itb))
	if !ok {
		return optErr("InodeCount", "no room for the inode table of group %d (%d blocks)", g, p.itb)
	}
	f.bmap.setRange(b, uint64(p.itb))
	chargeFlex(b, uint64(p.itb))
	gd.InodeTable = b
	return nil
}

// zeroInodeTables records the inode table blocks mke2fs zeroes when the
// device may hold old data: the used part of each table with lazy init
// (write_inode_tables counts it from bg_itable_unused), all of it without.
func (f *builder) zeroInodeTables() {
	p := f.p
	for g := range f.gd {
		n := uint64(p.itb)
		if !p.zeroInit {
			n = ceilDiv(uint64(p.ipg-f.gd[g].ItableUnused)*uint64(p.inodeSize), uint64(p.blockSize))
		}
		if n > 0 {
			f.zero = append(f.zero, extentRange{f.gd[g].InodeTable, n})
		}
	}
}

// putU32s stores little-endian words in a new block.
func (f *builder) putU32s(words []uint32) []byte {
	b := make([]byte, f.p.blockSize)
	for i, w := range words {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	return b
}
