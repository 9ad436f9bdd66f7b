package super

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Group descriptor flags (bg_flags). The uninit flags are only meaningful
// when the filesystem has group descriptor checksums (HasGroupDescCsum).
const (
	BGInodeUninit  uint16 = 0x0001 // inode table and bitmap not initialised
	BGBlockUninit  uint16 = 0x0002 // block bitmap not initialised
	BGItableZeroed uint16 = 0x0004 // inode table zeroed on disk
)

// Offsets inside a group descriptor (struct ext4_group_desc).
const (
	gdChecksumOffset = 0x1E
	gdFirstHalf      = 32
	gdSecondHalf     = 64
)

// GroupDesc is a block group descriptor with its _lo/_hi halves merged. With
// 32-byte descriptors only the low halves exist: the high halves decode as 0
// and are dropped on encode.
type GroupDesc struct {
	BlockBitmap     uint64 // block of the block bitmap
	InodeBitmap     uint64 // block of the inode bitmap
	InodeTable      uint64 // first block of the inode table
	FreeBlocksCount uint32 // free clusters, really
	FreeInodesCount uint32
	UsedDirsCount   uint32
	Flags           uint16 // BG* flags
	ExcludeBitmap   uint64 // snapshot exclude bitmap (e2fsprogs only)
	BlockBitmapCsum uint32 // crc32c of the block bitmap (low 16 bits with 32-byte descriptors)
	InodeBitmapCsum uint32 // crc32c of the inode bitmap (likewise)
	ItableUnused    uint32 // inodes at the end of the table never used
	Checksum        uint16 // bg_checksum
	Reserved        uint32 // bg_reserved of 64-byte descriptors
	// Tail holds the bytes past 64 of descriptors larger than 64 bytes:
	// they are covered by the checksum and written back unchanged.
	Tail []byte
}

// DecodeGroupDesc decodes the descriptor of group from b (at least
// sb.DescSize() bytes), verifies its checksum when the filesystem has one and
// checks it with CheckGroupDesc.
func DecodeGroupDesc(sb *Superblock, b []byte, group uint32) (*GroupDesc, error) {
	if err := VerifyGroupDesc(sb, b, group); err != nil {
		return nil, err
	}
	g, err := DecodeGroupDescNoVerify(sb, b)
	if err != nil {
		return nil, err
	}
	if err := CheckGroupDesc(sb, g, group); err != nil {
		return nil, err
	}
	return g, nil
}

// DecodeGroupDescNoVerify decodes a descriptor without checking its checksum
// or where it points, for tools that inspect damaged filesystems.
func DecodeGroupDescNoVerify(sb *Superblock, b []byte) (*GroupDesc, error) {
	ds := int(sb.DescSize())
	if len(b) < ds {
		return nil, fserr.Corrupt("group descriptor", "%d bytes, need %d", len(b), ds)
	}
	le := binary.LittleEndian
	g := &GroupDesc{
		BlockBitmap:     uint64(le.Uint32(b[0x00:])),
		InodeBitmap:     uint64(le.Uint32(b[0x04:])),
		InodeTable:      uint64(le.Uint32(b[0x08:])),
		FreeBlocksCount: uint32(le.Uint16(b[0x0C:])),
		FreeInodesCount: uint32(le.Uint16(b[0x0E:])),
		UsedDirsCount:   uint32(le.Uint16(b[0x10:])),
		Flags:           le.Uint16(b[0x12:]),
		ExcludeBitmap:   uint64(le.Uint32(b[0x14:])),
		BlockBitmapCsum: uint32(le.Uint16(b[0x18:])),
		InodeBitmapCsum: uint32(le.Uint16(b[0x1A:])),
		ItableUnused:    uint32(le.Uint16(b[0x1C:])),
		Checksum:        le.Uint16(b[gdChecksumOffset:]),
	}
	if ds >= gdSecondHalf {
		g.BlockBitmap |= uint64(le.Uint32(b[0x20:])) << 32
		g.InodeBitmap |= uint64(le.Uint32(b[0x24:])) << 32
		g.InodeTable |= uint64(le.Uint32(b[0x28:])) << 32
		g.FreeBlocksCount |= uint32(le.Uint16(b[0x2C:])) << 16
		g.FreeInodesCount |= uint32(le.Uint16(b[0x2E:])) << 16
		g.UsedDirsCount |= uint32(le.Uint16(b[0x30:])) << 16
		g.ItableUnused |= uint32(le.Uint16(b[0x32:])) << 16
		g.ExcludeBitmap |= uint64(le.Uint32(b[0x34:])) << 32
		g.BlockBitmapCsum |= uint32(le.Uint16(b[0x38:])) << 16
		g.InodeBitmapCsum |= uint32(le.Uint16(b[0x3A:])) << 16
		g.Reserved = le.Uint32(b[0x3C:])
	}
	if ds > gdSecondHalf {
		g.Tail = append([]byte(nil), b[gdSecondHalf:ds]...)
	}
	return g, nil
}

// EncodeGroupDesc returns the sb.DescSize() on-disk bytes of g as the
// descriptor of group, with the checksum computed when the filesystem has
// descriptor checksums (and stored in g.Checksum). Without them the stored
// g.Checksum is written unchanged, as the kernel leaves it.
func EncodeGroupDesc(sb *Superblock, g *GroupDesc, group uint32) []byte {
	b := make([]byte, sb.DescSize())
	PutGroupDesc(sb, g, group, b)
	return b
}

// PutGroupDesc is EncodeGroupDesc into b (at least sb.DescSize() bytes,
// of which the first DescSize are written), without a buffer of its own.
func PutGroupDesc(sb *Superblock, g *GroupDesc, group uint32, b []byte) {
	ds := int(sb.DescSize())
	b = b[:ds]
	clear(b)
	le := binary.LittleEndian
	le.PutUint32(b[0x00:], uint32(g.BlockBitmap))
	le.PutUint32(b[0x04:], uint32(g.InodeBitmap))
	le.PutUint32(b[0x08:], uint32(g.InodeTable))
	le.PutUint16(b[0x0C:], uint16(g.FreeBlocksCount))
	le.PutUint16(b[0x0E:], uint16(g.FreeInodesCount))
	le.PutUint16(b[0x10:], uint16(g.UsedDirsCount))
	le.PutUint16(b[0x12:], g.Flags)
	le.PutUint32(b[0x14:], uint32(g.ExcludeBitmap))
	le.PutUint16(b[0x18:], uint16(g.BlockBitmapCsum))
	le.PutUint16(b[0x1A:], uint16(g.InodeBitmapCsum))
	le.PutUint16(b[0x1C:], uint16(g.ItableUnused))
	if ds >= gdSecondHalf {
		le.PutUint32(b[0x20:], uint32(g.BlockBitmap>>32))
		le.PutUint32(b[0x24:], uint32(g.InodeBitmap>>32))
		le.PutUint32(b[0x28:], uint32(g.InodeTable>>32))
		le.PutUint16(b[0x2C:], uint16(g.FreeBlocksCount>>16))
		le.PutUint16(b[0x2E:], uint16(g.FreeInodesCount>>16))
		le.PutUint16(b[0x30:], uint16(g.UsedDirsCount>>16))
		le.PutUint16(b[0x32:], uint16(g.ItableUnused>>16))
		le.PutUint32(b[0x34:], uint32(g.ExcludeBitmap>>32))
		le.PutUint16(b[0x38:], uint16(g.BlockBitmapCsum>>16))
		le.PutUint16(b[0x3A:], uint16(g.InodeBitmapCsum>>16))
		le.PutUint32(b[0x3C:], g.Reserved)
		copy(b[gdSecondHalf:], g.Tail)
	}
	if sb.HasGroupDescCsum() {
		g.Checksum = GroupDescChecksum(sb, b, group)
	}
	le.PutUint16(b[gdChecksumOffset:], g.Checksum)
}

// GroupDescChecksum computes the checksum of the raw descriptor b (at least
// sb.DescSize() bytes) of group, skipping its stored checksum (kernel:
// ext4_group_desc_csum). With metadata_csum it is the low 16 bits of a
// crc32c seeded with ChecksumSeed; with gdt_csum a crc16 over the UUID,
// group number and descriptor; otherwise 0.
func GroupDescChecksum(sb *Superblock, b []byte, group uint32) uint16 {
	ds := min(int(sb.DescSize()), len(b))
	switch {
	case sb.HasMetadataCsum():
		c := csum.CRC32CUint32(sb.ChecksumSeed(), group)
		c = csum.CRC32C(c, b[:min(gdChecksumOffset, ds)])
		c = csum.CRC32CZeros(c, 2)
		if ds > gdChecksumOffset+2 {
			c = csum.CRC32C(c, b[gdChecksumOffset+2:ds])
		}
		return uint16(c)
	case sb.HasGDTCsum():
		var le [4]byte
		binary.LittleEndian.PutUint32(le[:], group)
		c := csum.CRC16(0xFFFF, sb.UUID[:])
		c = csum.CRC16(c, le[:])
		c = csum.CRC16(c, b[:min(gdChecksumOffset, ds)])
		// The old algorithm covers the second half only with 64bit.
		if sb.Is64Bit() && ds > gdChecksumOffset+2 {
			c = csum.CRC16(c, b[gdChecksumOffset+2:ds])
		}
		return c
	}
	return 0
}

// VerifyGroupDesc checks the stored checksum of the raw descriptor b of
// group, when the filesystem has descriptor checksums.
func VerifyGroupDesc(sb *Superblock, b []byte, group uint32) error {
	ds := int(sb.DescSize())
	if len(b) < ds {
		return fserr.Corrupt(fmt.Sprintf("group descriptor %d", group), "%d bytes, need %d", len(b), ds)
	}
	if !sb.HasGroupDescCsum() {
		return nil
	}
	stored := binary.LittleEndian.Uint16(b[gdChecksumOffset:])
	if c := GroupDescChecksum(sb, b, group); c != stored {
		return &fserr.ChecksumError{What: fmt.Sprintf("group descriptor %d", group), Block: -1, Stored: uint32(stored), Computed: uint32(c)}
	}
	return nil
}

// CheckGroupDesc checks that g, the descriptor of group, points inside the
// filesystem — inside its own group unless flex_bg lets metadata live
// anywhere — without overlapping the primary superblock and descriptor
// table, and that its counts fit the group (kernel: ext4_check_descriptors).
func CheckGroupDesc(sb *Superblock, g *GroupDesc, group uint32) error {
	what := fmt.Sprintf("group descriptor %d", group)
	if group >= sb.GroupCount() {
		return fserr.Corrupt(what, "group beyond group count %d", sb.GroupCount())
	}
	first, last := uint64(sb.FirstDataBlock), sb.BlocksCount()-1
	if !sb.HasIncompat(IncompatFlexBG) {
		first = sb.GroupFirstBlock(group)
		last = first + uint64(sb.GroupBlocks(group)) - 1
	}
	o := sb.GroupOverhead(0)
	metaStart, metaEnd := o.SuperBlock, o.SuperBlock+uint64(o.Blocks()) // [start, end)
	check := func(name string, b, n uint64) error {
		switch {
		case b >= metaStart && b < metaEnd:
			return fserr.Corrupt(what, "%s at %d overlaps the superblock or group descriptors", name, b)
		case b < first || b > last || n-1 > last-b:
			return fserr.Corrupt(what, "%s at %d (%d blocks) not in %d..%d", name, b, n, first, last)
		}
		return nil
	}
	if err := check("block bitmap", g.BlockBitmap, 1); err != nil {
		return err
	}
	if err := check("inode bitmap", g.InodeBitmap, 1); err != nil {
		return err
	}
	if err := check("inode table", g.InodeTable, uint64(max(sb.InodeTableBlocks(), 1))); err != nil {
		return err
	}
	return CheckGroupDescCounts(sb, g, group)
}

// CheckGroupDescCounts checks that a descriptor's counts fit its group.
// The kernel only enforces them where it relies on them (writing), so a
// reader may skip this part of CheckGroupDesc.
func CheckGroupDescCounts(sb *Superblock, g *GroupDesc, group uint32) error {
	what := fmt.Sprintf("group descriptor %d", group)
	switch ipg := sb.InodesPerGroup; {
	case g.FreeBlocksCount > sb.ClustersPerGroup:
		return fserr.Corrupt(what, "%d free clusters, group has %d", g.FreeBlocksCount, sb.ClustersPerGroup)
	case g.FreeInodesCount > ipg:
		return fserr.Corrupt(what, "%d free inodes, group has %d", g.FreeInodesCount, ipg)
	case g.UsedDirsCount > ipg:
		return fserr.Corrupt(what, "%d directories, group has %d inodes", g.UsedDirsCount, ipg)
	case sb.HasGroupDescCsum() && g.ItableUnused > ipg:
		return fserr.Corrupt(what, "%d unused inodes, group has %d", g.ItableUnused, ipg)
	}
	return nil
}

// BlockBitmapChecksum returns the crc32c of a group's block bitmap: the
// first ClustersPerGroup/8 bytes, seeded with ChecksumSeed (kernel:
// ext4_block_bitmap_csum_set). A shorter bitmap counts as zero-padded.
func BlockBitmapChecksum(sb *Superblock, bitmap []byte) uint32 {
	return bitmapChecksum(sb, bitmap, sb.ClustersPerGroup/8)
}

// InodeBitmapChecksum returns the crc32c of a group's inode bitmap: the
// first InodesPerGroup/8 bytes (kernel: ext4_inode_bitmap_csum_set).
func InodeBitmapChecksum(sb *Superblock, bitmap []byte) uint32 {
	return bitmapChecksum(sb, bitmap, sb.InodesPerGroup/8)
}

func bitmapChecksum(sb *Superblock, bitmap []byte, n uint32) uint32 {
	have := min(uint32(len(bitmap)), n)
	c := csum.CRC32C(sb.ChecksumSeed(), bitmap[:have])
	return csum.CRC32CZeros(c, int(n-have))
}

// bitmapCsumMask is what of a bitmap checksum the descriptor stores: all 32
// bits in 64-byte descriptors, the low 16 in 32-byte ones.
func bitmapCsumMask(sb *Superblock) uint32 {
	if sb.DescSize() >= gdSecondHalf {
		return 0xFFFFFFFF
	}
	return 0xFFFF
}

// SetBlockBitmapChecksum stores the checksum of bitmap in g (metadata_csum
// only; otherwise g is left alone).
func SetBlockBitmapChecksum(sb *Superblock, g *GroupDesc, bitmap []byte) {
	if sb.HasMetadataCsum() {
		g.BlockBitmapCsum = BlockBitmapChecksum(sb, bitmap) & bitmapCsumMask(sb)
	}
}

// StoreBlockBitmapChecksum stores crc, the whole BlockBitmapChecksum, in g
// as the descriptor keeps it (metadata_csum only).
func StoreBlockBitmapChecksum(sb *Superblock, g *GroupDesc, crc uint32) {
	if sb.HasMetadataCsum() {
		g.BlockBitmapCsum = crc & bitmapCsumMask(sb)
	}
}

// BlockBitmapChecksumStored reports whether g holds crc as
// StoreBlockBitmapChecksum would store it.
func BlockBitmapChecksumStored(sb *Superblock, g *GroupDesc, crc uint32) bool {
	return g.BlockBitmapCsum == crc&bitmapCsumMask(sb)
}

// SetInodeBitmapChecksum stores the checksum of bitmap in g (metadata_csum
// only).
func SetInodeBitmapChecksum(sb *Superblock, g *GroupDesc, bitmap []byte) {
	if sb.HasMetadataCsum() {
		g.InodeBitmapCsum = InodeBitmapChecksum(sb, bitmap) & bitmapCsumMask(sb)
	}
}

// VerifyBlockBitmap checks bitmap against the checksum in g, the descriptor
// of group (kernel: ext4_block_bitmap_csum_verify). Without metadata_csum
// there is nothing to check. Callers skip BLOCK_UNINIT groups, whose bitmap
// is not on disk.
func VerifyBlockBitmap(sb *Superblock, g *GroupDesc, group uint32, bitmap []byte) error {
	if !sb.HasMetadataCsum() {
		return nil
	}
	m := bitmapCsumMask(sb)
	if c := BlockBitmapChecksum(sb, bitmap) & m; c != g.BlockBitmapCsum&m {
		return &fserr.ChecksumError{What: fmt.Sprintf("block bitmap of group %d", group), Block: int64(g.BlockBitmap), Stored: g.BlockBitmapCsum & m, Computed: c}
	}
	return nil
}

// VerifyInodeBitmap checks bitmap against the checksum in g, the descriptor
// of group (kernel: ext4_inode_bitmap_csum_verify).
func VerifyInodeBitmap(sb *Superblock, g *GroupDesc, group uint32, bitmap []byte) error {
	if !sb.HasMetadataCsum() {
		return nil
	}
	m := bitmapCsumMask(sb)
	if c := InodeBitmapChecksum(sb, bitmap) & m; c != g.InodeBitmapCsum&m {
		return &fserr.ChecksumError{What: fmt.Sprintf("inode bitmap of group %d", group), Block: int64(g.InodeBitmap), Stored: g.InodeBitmapCsum & m, Computed: c}
	}
	return nil
}
