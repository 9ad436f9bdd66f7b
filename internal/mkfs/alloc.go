package mkfs

import (
	"errors"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
)

// builder holds the filesystem while it is being made: the plan, the group
// descriptors, the in-memory block bitmap and the blocks and inodes to write.
// Its allocation methods mirror libext2fs's so that blocks land where
// mke2fs's do.
type builder struct {
	p      *plan
	gd     []super.GroupDesc
	bmap   *bitmap
	inoMap map[uint32]bool // allocated inodes (only a handful)

	freeBlocks uint64 // s_free_blocks_count
	freeInodes uint32 // s_free_inodes_count

	inodes map[uint32]*inode.Inode // inodes to write (all others stay zero)
	blocks map[uint64][]byte       // block -> contents to write
	zero   []extentRange           // block ranges to zero before writing
	zeroed bool                    // the device reads back zeros

	sb        *super.Superblock
	rootBlk   uint64 // the root directory's block
	overhead  uint64
	jnlBlocks [17]uint32
	orphanIno uint32
	csumSeed  uint32
}

type extentRange struct{ start, n uint64 }

var errNoSpace = errors.New("no free blocks left")

// getFreeBlocks is ext2fs_get_free_blocks2: the first position b tested by
// the C loop — start, start+1, ... stopping before finish, wrapping to the
// first data block only when finish <= start — such that [b, b+num) is free.
// It jumps over positions that cannot succeed instead of testing each.
func (f *builder) getFreeBlocks(start, finish uint64, num uint64) (uint64, bool) {
	p := f.p
	fdb := uint64(p.firstData)
	b := start
	if b == 0 {
		b = fdb
	}
	if finish == 0 {
		finish = start
	}
	if num == 0 {
		num = 1
	}
	wrapped := false
	for {
		if b+num-1 >= p.blocks {
			if finish > start || wrapped {
				return 0, false // the C loop fails (or would spin forever)
			}
			wrapped = true
			b = fdb
			if b+num-1 >= p.blocks {
				return 0, false // no run that long at all
			}
		}
		var next uint64
		if !f.bmap.test(b) {
			s, used := f.bmap.firstSet(b, b+num-1)
			if !used {
				return b, true
			}
			next = s + 1
		} else if z, ok := f.bmap.firstZero(b+1, p.blocks-1); ok {
			next = z
		} else {
			next = p.blocks
		}
		if b < finish && next >= finish {
			return 0, false // the loop reaches finish before a free run
		}
		b = next
	}
}

// newBlock is ext2fs_new_block2: the first free block at or after goal,
// wrapping around once.
func (f *builder) newBlock(goal uint64) (uint64, error) {
	p := f.p
	if goal == 0 || goal >= p.blocks {
		goal = uint64(p.firstData)
	}
	b, ok := f.bmap.firstZero(goal, p.blocks-1)
	if !ok && goal != uint64(p.firstData) {
		b, ok = f.bmap.firstZero(uint64(p.firstData), goal-1)
	}
	if !ok {
		return 0, errNoSpace
	}
	f.clearBlockUninit(p.groupOfBlock(b))
	return b, nil
}

// newRange is ext2fs_new_range without flags: the first free run at or after
// goal (wrapping once), at most n blocks long.
func (f *builder) newRange(goal, n uint64) (uint64, uint64, error) {
	p := f.p
	if goal == 0 || goal >= p.blocks {
		goal = uint64(p.firstData)
	}
	start, ok := f.bmap.firstZero(goal, p.blocks-1)
	if !ok && goal != uint64(p.firstData) {
		start, ok = f.bmap.firstZero(uint64(p.firstData), p.blocks-1)
	}
	if !ok {
		return 0, 0, errNoSpace
	}
	last := min(start+n-1, p.blocks-1)
	end, used := f.bmap.firstSet(start, last)
	if !used {
		end = last + 1
	}
	for b := start; b < end; b += uint64(p.bpg) {
		f.clearBlockUninit(p.groupOfBlock(b))
	}
	return start, end - start, nil
}

// clearBlockUninit is ext2fs_clear_block_uninit.
func (f *builder) clearBlockUninit(g uint32) {
	if g >= f.p.groups || !f.p.gdCsum() {
		return
	}
	f.gd[g].Flags &^= super.BGBlockUninit
}

// allocStats is ext2fs_block_alloc_stats_range(+1) (and, for one block,
// ext2fs_block_alloc_stats2): mark the blocks, charge them to their groups.
func (f *builder) allocStats(b, n uint64) {
	p := f.p
	f.bmap.setRange(b, n)
	for n > 0 {
		g := p.groupOfBlock(b)
		k := min(n, p.groupLastBlock(g)-b+1)
		f.gd[g].FreeBlocksCount -= uint32(k)
		f.gd[g].Flags &^= super.BGBlockUninit
		f.freeBlocks -= k
		b += k
		n -= k
	}
}

// allocBlock is ext2fs_alloc_block2 without a buffer: a new zeroed block,
// charged.
func (f *builder) allocBlock(goal uint64) (uint64, error) {
	b, err := f.newBlock(goal)
	if err != nil {
		return 0, err
	}
	f.allocStats(b, 1)
	return b, nil
}

// inodeAllocStats is ext2fs_inode_alloc_stats2(+1).
func (f *builder) inodeAllocStats(ino uint32, dir bool) {
	p := f.p
	g := (ino - 1) / p.ipg
	f.inoMap[ino] = true
	gd := &f.gd[g]
	gd.FreeInodesCount--
	if dir {
		gd.UsedDirsCount++
	}
	gd.Flags &^= super.BGInodeUninit
	if p.gdCsum() {
		firstUnused := p.ipg - gd.ItableUnused + g*p.ipg + 1
		if ino >= firstUnused {
			gd.ItableUnused = g*p.ipg + p.ipg - ino
		}
	}
	f.freeInodes--
}

// newInode is ext2fs_new_inode: the first free inode from the parent's group
// on, never below the first non-reserved inode.
func (f *builder) newInode(dir uint32) (uint32, error) {
	p := f.p
	start := uint32(0)
	if dir > 0 {
		start = (dir-1)/p.ipg*p.ipg + 1
	}
	start = max(start, p.firstIno)
	if start > p.inodes {
		return 0, errors.New("no free inodes left")
	}
	for i := start; ; {
		g := (i - 1) / p.ipg
		if f.gd[g].Flags&super.BGInodeUninit != 0 && p.gdCsum() {
			// check_inode_uninit: the group's inodes become usable.
			f.gd[g].Flags &^= super.BGInodeUninit | super.BGBlockUninit
		}
		if !f.inoMap[i] {
			return i, nil
		}
		i++
		if i > p.inodes {
			i = p.firstIno
		}
		if i == start {
			return 0, errors.New("no free inodes left")
		}
	}
}
