package mkfs

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
)

const (
	modeDir    = 0o040000
	modeFile   = 0o100000
	ndirBlocks = 12 // EXT2_NDIR_BLOCKS
	indBlock   = 12 // EXT2_IND_BLOCK
	dindBlock  = 13 // EXT2_DIND_BLOCK
	lostFound  = "lost+found"
	xattrMagic = 0xEA020000 // EXT2_EXT_ATTR_MAGIC: in-inode xattr header
)

// inode returns the inode record for ino, creating an all-zero one: an
// inode that will be written (with its checksum) even if nothing is set.
func (f *builder) inode(ino uint32) *inode.Inode {
	in := f.inodes[ino]
	if in == nil {
		in = &inode.Inode{}
		f.inodes[ino] = in
	}
	return in
}

// newFileInode fills in what ext2fs_write_new_inode adds to a new inode:
// the three times when unset and, in large inodes, i_extra_isize and
// i_crtime.
func (f *builder) newFileInode(in *inode.Inode) {
	now := inode.FromTime(f.p.nowTime)
	in.Atime, in.Ctime, in.Mtime = now, now, now
	if f.p.inodeSize > super.GoodOldInodeSize {
		in.ExtraIsize = extraIsize
		in.Crtime = now
	}
}

// setBlocks stores n filesystem blocks in i_blocks (ext2fs_iblk_set).
func (f *builder) setBlocks(in *inode.Inode, n uint64) error {
	return in.SetSectors(n*uint64(f.p.blockSize/512), f.p.blockSize, f.p.has(super.KindROCompat, super.ROCompatHugeFile))
}

// seed is the checksum seed of inode ino (generation 0, as mke2fs leaves it).
func (f *builder) seed(ino uint32) uint32 { return inode.Seed(f.csumSeed, ino, 0) }

func (f *builder) dirFormat() dir.Format {
	return dir.Format{
		BlockSize: int(f.p.blockSize),
		FileType:  f.p.has(super.KindIncompat, super.IncompatFiletype),
		Csum:      f.p.csum(),
	}
}

func (f *builder) fileType() uint8 {
	if f.p.has(super.KindIncompat, super.IncompatFiletype) {
		return dir.FTDir
	}
	return 0
}

// setExtents stores a single-level extent tree in the inode's i_block.
func setExtents(in *inode.Inode, exts []extent.Extent) error {
	n := extent.NewRoot()
	n.Extents = exts
	in.Flags |= inode.FlagExtents
	return n.Encode(in.Block[:])
}

// mapBlocks records where a file's blocks live: an extent per contiguous
// run with extents, otherwise direct block pointers (callers keep to 12).
func (f *builder) mapBlocks(in *inode.Inode, blks []uint64) error {
	if f.p.extents() {
		var exts []extent.Extent
		for i, b := range blks {
			if k := len(exts) - 1; k >= 0 && exts[k].Start+uint64(exts[k].Len) == b && exts[k].Len < extent.InitMaxLen {
				exts[k].Len++
				continue
			}
			exts = append(exts, extent.Extent{Logical: uint32(i), Len: 1, Start: b})
		}
		if len(exts) > 4 {
			return fmt.Errorf("blocks not contiguous enough for the inode (%d extents)", len(exts))
		}
		return setExtents(in, exts)
	}
	if len(blks) > ndirBlocks {
		return fmt.Errorf("%d blocks need indirect blocks", len(blks))
	}
	for i, b := range blks {
		binary.LittleEndian.PutUint32(in.Block[4*i:], uint32(b))
	}
	return nil
}

// inodeGoal is ext2fs_find_inode_goal for an inode with no blocks yet: the
// first block of its (flex) group.
func (f *builder) inodeGoal(ino uint32) uint64 {
	g := (ino - 1) / f.p.ipg
	if f.p.logFlex != 0 {
		g &^= 1<<f.p.logFlex - 1
	}
	return f.p.groupFirstBlock(g)
}

// createRoot is create_root_dir: ext2fs_mkdir(fs, 2, 2, 0) and the
// root_owner fix-up.
func (f *builder) createRoot() error {
	const ino = super.RootIno
	blk, err := f.newBlock(f.inodeGoal(ino))
	if err != nil {
		return err
	}
	in := f.inode(ino)
	in.Mode = modeDir | 0o755
	in.UID, in.GID = f.p.rootUID, f.p.rootGID
	in.Size = uint64(f.p.blockSize)
	in.LinksCount = 2
	f.newFileInode(in)
	if err := f.setBlocks(in, 1); err != nil {
		return err
	}
	if err := f.mapBlocks(in, []uint64{blk}); err != nil {
		return err
	}
	f.allocStats(blk, 1)
	f.inodeAllocStats(ino, true)
	f.rootBlk = blk // written by createLostFound, which links into it
	return nil
}

// createLostFound is create_lost_and_found: mkdir /lost+found (mode 0700)
// and expand it until it spans 16 KiB, and at least two blocks, but no more
// than 12 blocks (so no indirect block is ever needed).
func (f *builder) createLostFound() error {
	p := f.p
	ino, err := f.newInode(super.RootIno)
	if err != nil {
		return err
	}
	inline := p.has(super.KindIncompat, super.IncompatInlineData)
	in := f.inode(ino)
	in.Mode = modeDir | 0o700
	in.LinksCount = 2
	f.newFileInode(in)

	var blks []uint64
	if !inline {
		blk, err := f.newBlock(f.inodeGoal(ino))
		if err != nil {
			return err
		}
		f.allocStats(blk, 1)
		blks = append(blks, blk)
	}
	f.inodeAllocStats(ino, true)

	// Link it into the root (ext2fs_link) and count the root's new link.
	ft := f.fileType()
	b, err := dir.EncodeBlock(f.dirFormat(), []dir.Entry{
		{Inode: super.RootIno, Name: []byte("."), FileType: ft},
		{Inode: super.RootIno, Name: []byte(".."), FileType: ft},
		{Inode: ino, Name: []byte(lostFound), FileType: ft},
	}, f.seed(super.RootIno))
	if err != nil {
		return err
	}
	f.blocks[f.rootBlk] = b
	f.inode(super.RootIno).LinksCount++

	// Expand: each step adds one block; with inline data the first step
	// moves the inline directory into its first block.
	n := 0
	for i, size := 1, uint32(0); i < ndirBlocks; i++ {
		size += p.blockSize
		if size >= 16*1024 && size >= 2*p.blockSize {
			break
		}
		n++
	}
	if !inline {
		n++ // the block ext2fs_mkdir allocated
	}
	goal := uint64(0)
	if len(blks) > 0 {
		goal = blks[0]
	}
	for len(blks) < n {
		blk, err := f.newBlock(goal)
		if err != nil {
			return err
		}
		f.allocStats(blk, 1)
		blks = append(blks, blk)
		goal = blk
	}

	seed := f.seed(ino)
	for i, blk := range blks {
		var b []byte
		switch {
		case i == 0 && inline:
			b = f.inlineExpandedBlock(ino)
		case i == 0:
			b, err = dir.EncodeBlock(f.dirFormat(), []dir.Entry{
				{Inode: ino, Name: []byte("."), FileType: ft},
				{Inode: super.RootIno, Name: []byte(".."), FileType: ft},
			}, seed)
		default:
			b, err = dir.EncodeBlock(f.dirFormat(), nil, seed)
		}
		if err != nil {
			return err
		}
		f.blocks[blk] = b
	}
	in.Size = uint64(len(blks)) * uint64(p.blockSize)
	if err := f.setBlocks(in, uint64(len(blks))); err != nil {
		return err
	}
	if inline {
		// ext2fs_inline_data_init gave it an empty system.data xattr, which
		// the expansion removed again, leaving the in-inode xattr header.
		raw := make([]byte, p.inodeSize)
		binary.LittleEndian.PutUint32(raw[super.GoodOldInodeSize+extraIsize:], xattrMagic)
		in.Raw = raw
	}
	return f.mapBlocks(in, blks)
}

// inlineExpandedBlock is the first block of an inline directory holding
// only "." and "..", as ext2fs_inline_data_dir_expand writes it: the
// empty 56-byte inline area becomes an unused dirent covering the rest.
func (f *builder) inlineExpandedBlock(ino uint32) []byte {
	p := f.p
	b := make([]byte, p.blockSize)
	ft := f.fileType()
	put := func(off int, ino uint32, recLen int, name string) {
		binary.LittleEndian.PutUint32(b[off:], ino)
		binary.LittleEndian.PutUint16(b[off+4:], dir.RecLenToDisk(recLen, int(p.blockSize)))
		b[off+6] = byte(len(name))
		if name != "" {
			b[off+7] = ft
		}
		copy(b[off+8:], name)
	}
	end := int(p.blockSize)
	if p.csum() {
		end -= dir.TailSize
	}
	put(0, ino, 12, ".")
	put(12, super.RootIno, 12, "..")
	put(24, 0, end-24, "")
	if p.csum() {
		dir.SetLeafChecksum(b, f.dirFormat(), f.seed(ino))
	}
	return b
}

// reserveInodes is reserve_inodes: inodes 3 to 10 are counted as used.
func (f *builder) reserveInodes() error {
	for ino := uint32(super.RootIno + 1); ino < f.p.firstIno; ino++ {
		f.inodeAllocStats(ino, false)
	}
	return nil
}

// createBadBlockInode is create_bad_block_inode with an empty list:
// inode 1 is used and ext2fs_update_bb_inode stamps its times.
func (f *builder) createBadBlockInode() error {
	f.inodeAllocStats(super.BadBlocksIno, false)
	in := f.inode(super.BadBlocksIno)
	now := inode.FromTime(f.p.nowTime)
	in.Atime, in.Mtime, in.Ctime = now, now, now
	return nil
}

// createResizeInode is ext2fs_create_resize_inode for a new filesystem:
// inode 7's double indirect block points at the primary reserved GDT
// blocks, each of which lists that block's backups in the groups holding
// superblock backups.
func (f *builder) createResizeInode() error {
	p := f.p
	if !p.has(super.KindCompat, super.CompatResizeInode) {
		return nil
	}
	sbBlk := uint64(p.firstData)
	if p.blockSize == 1024 && sbBlk == 0 {
		sbBlk = 1
	}
	apb := uint64(p.addrPerBlock())
	goal := sbBlk + uint64(p.descBlocks) + uint64(p.rsvGDT) + 2 + uint64(p.itb)
	dind, err := f.allocBlock(goal)
	if err != nil {
		return err
	}
	in := f.inode(super.ResizeIno)
	in.Mode = modeFile | 0o600
	in.LinksCount = 1
	nblocks := uint64(1)
	dindBuf := make([]uint32, apb)

	// Backup groups, in ext2fs_list_backups order.
	var backups []uint32
	for g := uint32(1); g < p.groups; g++ {
		if p.hasSuper(g) {
			backups = append(backups, g)
		}
	}
	gdtOff := uint64(p.descBlocks)
	gdtBlk := sbBlk + 1 + uint64(p.descBlocks)
	for rsv := uint32(0); rsv < p.rsvGDT; rsv, gdtOff, gdtBlk = rsv+1, gdtOff+1, gdtBlk+1 {
		gdtOff %= apb
		dindBuf[gdtOff] = uint32(gdtBlk)
		nblocks++
		list := make([]uint32, 0, len(backups))
		for _, g := range backups {
			list = append(list, uint32(gdtBlk+uint64(g)*uint64(p.bpg)))
		}
		nblocks += uint64(len(list))
		f.blocks[gdtBlk] = f.putU32s(list)
	}
	f.blocks[dind] = f.putU32s(dindBuf)
	binary.LittleEndian.PutUint32(in.Block[4*dindBlock:], uint32(dind))
	if err := f.setBlocks(in, nblocks); err != nil {
		return err
	}
	in.Size = (apb*apb + apb + ndirBlocks) * uint64(p.blockSize)
	f.newFileInode(in)
	return nil
}
