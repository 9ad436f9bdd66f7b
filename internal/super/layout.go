package super

// Layout arithmetic. Everything here is a pure function of the superblock;
// group and block arguments must be below GroupCount and BlocksCount (the
// results are otherwise meaningless but never panic).

// GroupFirstBlock returns the first block of group g.
func (sb *Superblock) GroupFirstBlock(g uint32) uint64 {
	return uint64(sb.FirstDataBlock) + uint64(g)*uint64(sb.BlocksPerGroup)
}

// GroupBlocks returns the number of blocks in group g: BlocksPerGroup, less
// for a short last group.
func (sb *Superblock) GroupBlocks(g uint32) uint32 {
	start, end := sb.GroupFirstBlock(g), sb.BlocksCount()
	if start >= end {
		return 0
	}
	return uint32(min(end-start, uint64(sb.BlocksPerGroup)))
}

// GroupOfBlock returns the group holding block b and b's offset in blocks
// from the group's start (kernel: ext4_get_group_no_and_offset, which
// counts clusters instead). Blocks before FirstDataBlock — block 0 of a
// 1 KiB filesystem — report group 0, offset 0.
func (sb *Superblock) GroupOfBlock(b uint64) (group, offset uint32) {
	if b < uint64(sb.FirstDataBlock) || sb.BlocksPerGroup == 0 {
		return 0, 0
	}
	rel := b - uint64(sb.FirstDataBlock)
	return uint32(rel / uint64(sb.BlocksPerGroup)), uint32(rel % uint64(sb.BlocksPerGroup))
}

// GroupOfInode returns the group holding inode ino and its index in that
// group's inode table; ok is false for 0 and numbers past InodesCount.
func (sb *Superblock) GroupOfInode(ino uint32) (group, index uint32, ok bool) {
	if ino == 0 || ino > sb.InodesCount || sb.InodesPerGroup == 0 {
		return 0, 0, false
	}
	return (ino - 1) / sb.InodesPerGroup, (ino - 1) % sb.InodesPerGroup, true
}

// HasSuperBackup reports whether group g holds a copy of the superblock (the
// primary one for group 0; kernel: ext4_bg_has_super): with sparse_super2
// only the (up to) two groups in BackupBGs, with sparse_super groups 0, 1
// and powers of 3, 5 and 7, otherwise every group.
func (sb *Superblock) HasSuperBackup(g uint32) bool {
	switch {
	case g == 0:
		return true
	case sb.HasCompat(CompatSparseSuper2):
		return g == sb.BackupBGs[0] || g == sb.BackupBGs[1]
	case g == 1 || !sb.HasROCompat(ROCompatSparseSuper):
		return true
	case g&1 == 0:
		return false
	}
	return isPower(g, 3) || isPower(g, 5) || isPower(g, 7)
}

func isPower(n, base uint32) bool {
	p := uint64(base)
	for p < uint64(n) {
		p *= uint64(base)
	}
	return p == uint64(n)
}

// SuperBlockLocation returns the block holding group g's superblock copy
// (meaningful when HasSuperBackup(g)). The primary superblock is at byte
// 1024: block 1 with 1 KiB blocks — even with bigalloc, where group 0
// starts at block 0 — else block 0.
func (sb *Superblock) SuperBlockLocation(g uint32) uint64 {
	if g == 0 {
		return Offset / uint64(sb.BlockSize())
	}
	return sb.GroupFirstBlock(g)
}

// SuperBlockByteOffset returns the device byte offset of group g's
// superblock copy.
func (sb *Superblock) SuperBlockByteOffset(g uint32) uint64 {
	if g == 0 {
		return Offset
	}
	return sb.GroupFirstBlock(g) * uint64(sb.BlockSize())
}

// metaBG reports whether group g's descriptor block is placed meta_bg style
// (in its own meta group) rather than in the contiguous table after the
// superblock.
func (sb *Superblock) metaBG(g uint32) bool {
	return sb.HasIncompat(IncompatMetaBG) && g/sb.DescPerBlock() >= sb.FirstMetaBG
}

// oldGDTBlocks is the length of the contiguous descriptor table that
// follows each superblock copy (kernel: ext4_bg_num_gdb_nometa).
func (sb *Superblock) oldGDTBlocks() uint32 {
	if sb.HasIncompat(IncompatMetaBG) {
		return sb.FirstMetaBG
	}
	return sb.GDTBlocks()
}

// GDTBlockLocation returns the block of the primary copy of descriptor block
// i (kernel: descriptor_loc). Blocks before s_first_meta_bg, and all of them
// without meta_bg, follow the primary superblock; with meta_bg block i is
// the first block after the superblock copy (if any) of group
// i*DescPerBlock.
func (sb *Superblock) GDTBlockLocation(i uint32) uint64 {
	if !sb.HasIncompat(IncompatMetaBG) || i < sb.FirstMetaBG {
		return sb.SuperBlockLocation(0) + 1 + uint64(i)
	}
	return sb.metaGDTLocation(uint32(min(uint64(i)*uint64(sb.DescPerBlock()), 1<<32-1)))
}

// metaGDTLocation is where a meta_bg descriptor block sits in group h.
func (sb *Superblock) metaGDTLocation(h uint32) uint64 {
	if sb.HasSuperBackup(h) {
		return sb.SuperBlockLocation(h) + 1
	}
	return sb.GroupFirstBlock(h)
}

// GDTBlockLocationIn returns where group g holds a copy of descriptor block
// i, if it does: after each superblock copy for the contiguous table, and
// in the first, second and last group of meta group i for meta_bg blocks.
func (sb *Superblock) GDTBlockLocationIn(i, g uint32) (uint64, bool) {
	if i >= sb.GDTBlocks() || g >= sb.GroupCount() {
		return 0, false
	}
	if !sb.HasIncompat(IncompatMetaBG) || i < sb.FirstMetaBG {
		if !sb.HasSuperBackup(g) {
			return 0, false
		}
		return sb.SuperBlockLocation(g) + 1 + uint64(i), true
	}
	dpb := sb.DescPerBlock()
	if g/dpb != i {
		return 0, false
	}
	if r := g % dpb; r != 0 && r != 1 && r != dpb-1 {
		return 0, false
	}
	return sb.metaGDTLocation(g), true
}

// GroupDescLocation returns the block holding the primary descriptor of
// group g and the descriptor's byte offset in that block.
func (sb *Superblock) GroupDescLocation(g uint32) (block uint64, offset uint32) {
	dpb := sb.DescPerBlock()
	return sb.GDTBlockLocation(g / dpb), (g % dpb) * sb.DescSize()
}

// Overhead describes the superblock and descriptor blocks at the start of a
// group (kernel: ext4_num_base_meta_clusters). They are contiguous: the
// superblock copy, then the descriptor copy, then reserved GDT blocks.
type Overhead struct {
	HasSuper    bool
	SuperBlock  uint64 // superblock copy, if HasSuper
	GDT         uint64 // first descriptor block, if GDTBlocks > 0
	GDTBlocks   uint32 // descriptor blocks: the whole table, or one meta_bg block
	ReservedGDT uint32 // reserved GDT blocks (resize_inode) after the table
}

// Blocks returns the number of blocks the overhead takes.
func (o Overhead) Blocks() uint32 {
	n := o.GDTBlocks + o.ReservedGDT
	if o.HasSuper {
		n++
	}
	return n
}

// GroupOverhead returns the superblock and descriptor copies group g holds.
func (sb *Superblock) GroupOverhead(g uint32) Overhead {
	o := Overhead{HasSuper: sb.HasSuperBackup(g)}
	start := sb.GroupFirstBlock(g)
	if o.HasSuper {
		o.SuperBlock = sb.SuperBlockLocation(g)
		start = o.SuperBlock + 1
	}
	if !sb.metaBG(g) {
		if o.HasSuper {
			o.GDT, o.GDTBlocks = start, sb.oldGDTBlocks()
			o.ReservedGDT = uint32(sb.ReservedGDTBlocks)
		}
		return o
	}
	if dpb := sb.DescPerBlock(); g%dpb <= 1 || g%dpb == dpb-1 {
		o.GDT, o.GDTBlocks = start, 1
	}
	return o
}
