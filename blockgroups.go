package ext4go

import (
	"fmt"
	"slices"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/super"
)

// This file is the public view of where blocks are used: per group
// (BlockGroups) and as runs of free blocks (FreeExtents). Free-space
// reports, allocation-map pictures and benchmarks are built on it.

// BlockKind names what a BlockRange of fixed metadata holds.
type BlockKind uint8

const (
	// KindSuperblock is the primary superblock (group 0) or a backup copy.
	KindSuperblock BlockKind = iota + 1
	// KindGroupDescriptors is a copy of the group descriptor table (with
	// meta_bg, of the one descriptor block of the group's meta group).
	KindGroupDescriptors
	// KindReservedGDT is blocks reserved for growing the descriptor table
	// (resize_inode).
	KindReservedGDT
	KindBlockBitmap
	KindInodeBitmap
	KindInodeTable
	// KindJournal is blocks of the internal journal's inode (data and
	// block-map blocks).
	KindJournal
)

func (k BlockKind) String() string {
	switch k {
	case KindSuperblock:
		return "superblock"
	case KindGroupDescriptors:
		return "group descriptors"
	case KindReservedGDT:
		return "reserved GDT blocks"
	case KindBlockBitmap:
		return "block bitmap"
	case KindInodeBitmap:
		return "inode bitmap"
	case KindInodeTable:
		return "inode table"
	case KindJournal:
		return "journal"
	}
	return fmt.Sprintf("BlockKind(%d)", uint8(k))
}

// BlockRange is a run of blocks holding one kind of fixed metadata.
type BlockRange struct {
	Start, Length uint64 // filesystem blocks
	Kind          BlockKind
	// Owner is the group the metadata belongs to: the group whose bitmap
	// or inode table this is, which flex_bg places in another group's
	// blocks; for superblock and descriptor copies, the group holding
	// them. Unused for KindJournal.
	Owner uint32
}

// GroupFlags are a group descriptor's bg_flags.
type GroupFlags uint16

const (
	GroupInodeUninit  = GroupFlags(super.BGInodeUninit)  // inode bitmap and table not initialised (INODE_UNINIT)
	GroupBlockUninit  = GroupFlags(super.BGBlockUninit)  // block bitmap not initialised (BLOCK_UNINIT)
	GroupItableZeroed = GroupFlags(super.BGItableZeroed) // inode table zeroed (ITABLE_ZEROED)
)

// BlockGroup describes one block group.
type BlockGroup struct {
	Index      uint32
	FirstBlock uint64
	Blocks     uint32 // blocks in the group; fewer in a short last group
	// FreeBlocks counts the group's free blocks from its block bitmap
	// (as FreeExtents sees it); with bigalloc a free cluster counts its
	// blocks.
	FreeBlocks uint32
	// DescFreeBlocks is what the descriptor records (bg_free_blocks_count,
	// clusters converted to blocks); it differs from FreeBlocks only on an
	// inconsistent filesystem.
	DescFreeBlocks uint32
	FreeInodes     uint32 // the descriptor's bg_free_inodes_count
	Flags          GroupFlags
	// Metadata lists the fixed metadata lying in the group's blocks,
	// sorted by Start: the group's own superblock and descriptor copies,
	// and the bitmaps and inode tables of whichever groups put them here,
	// and the journal's blocks here.
	Metadata []BlockRange
}

// BlockGroups describes every block group: its extent, free blocks and
// flags, and the fixed metadata in it. The free counts come from the block
// bitmaps, read as FreeExtents reads them (same consistency and errors).
func (f *FS) BlockGroups() ([]BlockGroup, error) {
	if err := f.checkClosed("blockgroups", ""); err != nil {
		return nil, err
	}
	sb := f.sb
	n := uint32(len(f.groups))
	out := make([]BlockGroup, n)
	ratio := uint64(sb.ClusterRatio())
	for g := uint32(0); g < n; g++ {
		flags, descFree, freeInodes := f.groupCounts(g)
		out[g] = BlockGroup{
			Index: g, FirstBlock: sb.GroupFirstBlock(g), Blocks: sb.GroupBlocks(g),
			DescFreeBlocks: uint32(min(uint64(descFree)*ratio, uint64(sb.GroupBlocks(g)))),
			FreeInodes:     freeInodes, Flags: GroupFlags(flags),
		}
	}
	place := func(r BlockRange) {
		// A range may cross groups (a flex_bg inode table, the journal):
		// each group gets its part.
		for r.Length > 0 {
			if r.Start < uint64(sb.FirstDataBlock) || r.Start >= sb.BlocksCount() {
				return
			}
			g, off := sb.GroupOfBlock(r.Start)
			if g >= n {
				return
			}
			part := r
			part.Length = min(r.Length, uint64(sb.GroupBlocks(g)-off))
			out[g].Metadata = append(out[g].Metadata, part)
			r.Start += part.Length
			r.Length -= part.Length
		}
	}
	itb := uint64(sb.InodeTableBlocks())
	for g := uint32(0); g < n; g++ {
		o := sb.GroupOverhead(g)
		if o.HasSuper {
			place(BlockRange{Start: o.SuperBlock, Length: 1, Kind: KindSuperblock, Owner: g})
		}
		if o.GDTBlocks > 0 {
			place(BlockRange{Start: o.GDT, Length: uint64(o.GDTBlocks), Kind: KindGroupDescriptors, Owner: g})
			if o.ReservedGDT > 0 {
				place(BlockRange{Start: o.GDT + uint64(o.GDTBlocks), Length: uint64(o.ReservedGDT), Kind: KindReservedGDT, Owner: g})
			}
		}
		gd := f.groups[g] // locations never change after open
		place(BlockRange{Start: gd.BlockBitmap, Length: 1, Kind: KindBlockBitmap, Owner: g})
		place(BlockRange{Start: gd.InodeBitmap, Length: 1, Kind: KindInodeBitmap, Owner: g})
		if itb > 0 {
			place(BlockRange{Start: gd.InodeTable, Length: itb, Kind: KindInodeTable, Owner: g})
		}
	}
	if sb.HasCompat(super.CompatHasJournal) && sb.JournalInum != 0 {
		runs, err := f.journalBlocks()
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			place(BlockRange{Start: r[0], Length: r[1], Kind: KindJournal})
		}
	}
	for g := range out {
		slices.SortStableFunc(out[g].Metadata, func(a, b BlockRange) int {
			switch {
			case a.Start < b.Start:
				return -1
			case a.Start > b.Start:
				return 1
			}
			return 0
		})
	}
	err := f.scanFree(func(g uint32, start, length uint64) error {
		out[g].FreeBlocks += uint32(length)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// groupCounts returns group g's flags and descriptor free counts, under
// the descriptor's lock when the filesystem is writable.
func (f *FS) groupCounts(g uint32) (flags uint16, freeClusters, freeInodes uint32) {
	if f.w != nil {
		f.w.gdMu[g].Lock()
		defer f.w.gdMu[g].Unlock()
	}
	gd := f.groups[g]
	freeClusters = gd.FreeBlocksCount
	if f.w != nil && f.w.bitmapsBatched {
		// The descriptor takes the allocator's count at commit.
		freeClusters = f.w.balloc.GroupFreeClusters(g)
	}
	return gd.Flags, freeClusters, gd.FreeInodesCount
}

// journalBlocks returns the blocks of the internal journal's inode as
// [start, length] pairs: data runs and the blocks of its block map.
func (f *FS) journalBlocks() ([][2]uint64, error) {
	ino := f.sb.JournalInum
	n, err := f.inode(ino)
	if err != nil {
		return nil, fmt.Errorf("journal inode: %w", err)
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	lay, err := f.layout(n)
	if err != nil {
		return nil, fmt.Errorf("journal inode %d: %w", ino, err)
	}
	return lay.blocks, nil
}

// FreeExtents calls fn for every maximal run of free blocks, in block
// order, as the block bitmaps record them: a run may cross group
// boundaries; blocks before the first data block and past the end of the
// filesystem are never free. A BLOCK_UNINIT group (on a filesystem with
// group descriptor checksums) counts as free except for the metadata
// initialising it would mark, as e2fsprogs and the kernel read it. With
// bigalloc a free cluster is free blocks (the last one cut at the end of
// the filesystem).
//
// Each group's bitmap is read whole under the locks the allocator changes
// it under (on a writable filesystem, the bitmap buffer and the group
// descriptor), so a group is seen before or after any allocation or free
// in it, never halfway. Groups are read one after another: allocations
// running meanwhile may show in some groups and not in others. A writable
// filesystem shows its current state, committed or not, as it will be on
// disk (blocks freed by a transaction not yet committed are free; the
// allocator's preallocations, which are not in the bitmaps, are free too).
// fn is called with no lock held and may use the filesystem.
//
// A bitmap that cannot be read, or (unless Options.IgnoreChecksums) whose
// checksum does not match, stops the walk with an error naming the group
// (a *ChecksumError matches ErrChecksum; e2freefrag refuses such a
// filesystem too). An error from fn stops the walk and is returned.
func (f *FS) FreeExtents(fn func(start, length uint64) error) error {
	if err := f.checkClosed("freeextents", ""); err != nil {
		return err
	}
	var start, length uint64
	err := f.scanFree(func(_ uint32, s, l uint64) error {
		if length > 0 && start+length == s {
			length += l
			return nil
		}
		if length > 0 {
			if err := fn(start, length); err != nil {
				return err
			}
		}
		start, length = s, l
		return nil
	})
	if err != nil {
		return err
	}
	if length > 0 {
		return fn(start, length)
	}
	return nil
}

// scanFree calls fn for every run of free blocks of each group, groups in
// order, runs in block order within a group.
func (f *FS) scanFree(fn func(g uint32, start, length uint64) error) error {
	sb := f.sb
	ratio := uint64(sb.ClusterRatio())
	for g := uint32(0); g < uint32(len(f.groups)); g++ {
		bitmap, err := f.blockBitmapCopy(g)
		if err != nil {
			return err
		}
		first := sb.GroupFirstBlock(g)
		blocks := uint64(sb.GroupBlocks(g))
		clusters := min((blocks+ratio-1)/ratio, uint64(len(bitmap))*8)
		var c uint64
		for c < clusters {
			// Skip used clusters a byte at a time where possible.
			if c%8 == 0 && c+8 <= clusters && bitmap[c/8] == 0xff {
				c += 8
				continue
			}
			if bitmap[c/8]&(1<<(c%8)) != 0 {
				c++
				continue
			}
			run := c
			for c < clusters {
				if c%8 == 0 && c+8 <= clusters && bitmap[c/8] == 0 {
					c += 8
					continue
				}
				if bitmap[c/8]&(1<<(c%8)) != 0 {
					break
				}
				c++
			}
			s := run * ratio
			e := min(c*ratio, blocks)
			if err := fn(g, first+s, e-s); err != nil {
				return err
			}
		}
	}
	return nil
}

// blockBitmapCopy returns a copy of group g's block bitmap (one bit per
// cluster, set when in use): for a BLOCK_UNINIT group the bitmap
// initialising it would write, else the current block, its checksum
// verified. On a writable filesystem the copy is taken under the bitmap
// buffer's lock and the descriptor's (the order UpdateBlockBitmap takes
// them in), so it is one state of the group, and the clusters of a group
// the block allocator has loaded are the allocator's copy, which the
// running transaction's commit writes into the buffer.
func (f *FS) blockBitmapCopy(g uint32) ([]byte, error) {
	sb := f.sb
	b := make([]byte, f.blockSize)
	lock := func() {
		if f.w != nil {
			f.w.gdMu[g].Lock()
		}
	}
	unlock := func() {
		if f.w != nil {
			f.w.gdMu[g].Unlock()
		}
	}
	lock()
	gd := f.groups[g]
	if gd.Flags&super.BGBlockUninit != 0 && sb.HasGroupDescCsum() {
		// An initialisation clears the flag under this lock, so the
		// group is still uninitialised as a whole. The bitmap is the
		// kernel's (ext4_init_block_bitmap). e2fsprogs
		// (mark_uninit_bg_group_blocks) also marks the group's own
		// bitmaps and inode table where flex_bg put them in another
		// group, whose bitmap marks them already unless the filesystem is
		// inconsistent.
		f.initBlockBitmap(g, b)
		unlock()
		return b, nil
	}
	blk := gd.BlockBitmap
	unlock()
	what := fmt.Sprintf("block bitmap of group %d", g)
	if blk >= sb.BlocksCount() {
		return nil, &CorruptError{What: what, Block: int64(blk), Detail: "outside the filesystem"}
	}
	var verr error
	err := f.tm.View(blk, func(data []byte) error {
		lock()
		defer unlock()
		copy(b, data)
		if f.csum && !f.opts.IgnoreChecksums {
			verr = super.VerifyBlockBitmap(sb, gd, g, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	if f.w != nil && f.w.bitmapsBatched {
		// The running transaction's later changes of a loaded group are
		// in the allocator's copy until its commit writes them into the
		// buffer (writeDirtyBlockBitmaps); the buffer's checksum was
		// verified when the allocator loaded the group.
		if _, ok := f.w.balloc.CopyDiskBitmap(g, b); ok {
			return b, nil
		}
	}
	if verr != nil {
		return nil, fserr.At(verr, int64(blk), 0)
	}
	return b, nil
}
