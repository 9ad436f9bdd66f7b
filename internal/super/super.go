// Package super encodes and decodes the ext4 superblock and block group
// descriptors, and does the pure arithmetic of the filesystem's layout:
// where each group starts, which groups carry superblock and descriptor
// backups, where descriptor blocks live (also with meta_bg), and which group
// holds a block or an inode.
//
// Invariants: Decode accepts only superblocks whose geometry is sane (block,
// cluster, inode and descriptor sizes, per-group counts, group count), so
// every method of a decoded *Superblock is total — no division by zero, no
// overflow of the group count — and never panics. A Superblock built by
// hand must pass Validate before its layout methods are used. Encode of a
// valid Superblock produces 1024 bytes that Decode turns back into an equal
// value, with the checksum recomputed when metadata_csum is on.
//
// The package does no I/O and holds no state apart from the Known* feature
// masks, which the filesystem layer sets once at start-up.
package super

import (
	"encoding/binary"
	"time"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Size is the size of the on-disk superblock; Offset is where the primary
// copy starts on the device.
const (
	Size   = 1024
	Offset = 1024
)

// Magic is s_magic of every ext2/3/4 superblock.
const Magic = 0xEF53

// Revision levels (s_rev_level).
const (
	GoodOldRev = 0 // fixed 128-byte inodes, first inode 11, no features
	DynamicRev = 1
)

// Values fixed by the format.
const (
	GoodOldInodeSize = 128
	GoodOldFirstIno  = 11
	MinBlockLogSize  = 10 // 1 KiB
	MaxBlockLogSize  = 16 // 64 KiB
	MaxClusterLog    = 30 // kernel: EXT4_MAX_CLUSTER_LOG_SIZE (1 GiB clusters)
	MinDescSize      = 32
	MinDescSize64    = 64
	MaxDescSize      = 1024 // kernel: EXT4_MAX_DESC_SIZE
	ChecksumCRC32C   = 1    // s_checksum_type
	labelLen         = 16
)

// Root and reserved inode numbers.
const (
	BadBlocksIno  = 1
	RootIno       = 2
	UsrQuotaIno   = 3
	GrpQuotaIno   = 4
	BootLoaderIno = 5
	UndelDirIno   = 6
	ResizeIno     = 7
	JournalIno    = 8
	ExcludeIno    = 9
	ReplicaIno    = 10
)

// Filesystem states (s_state).
const (
	StateValid    = 0x0001 // cleanly unmounted
	StateError    = 0x0002 // errors detected
	StateOrphan   = 0x0004 // orphans being recovered
	StateFCReplay = 0x0020 // fast commit replay ongoing
)

// Error behaviours (s_errors).
const (
	ErrorsContinue = 1
	ErrorsRO       = 2
	ErrorsPanic    = 3
)

// Creator operating systems (s_creator_os).
const (
	OSLinux   = 0
	OSHurd    = 1
	OSMasix   = 2
	OSFreeBSD = 3
	OSLites   = 4
)

// Miscellaneous flags (s_flags).
const (
	FlagSignedHash   = 0x0001
	FlagUnsignedHash = 0x0002
	FlagTestFS       = 0x0004
)

// Default mount options (s_default_mount_opts).
const (
	DefmDebug          = 0x0001
	DefmBSDGroups      = 0x0002
	DefmXattrUser      = 0x0004
	DefmACL            = 0x0008
	DefmUID16          = 0x0010
	DefmJModeData      = 0x0020
	DefmJModeOrdered   = 0x0040
	DefmJModeWriteback = 0x0060
	DefmJModeMask      = 0x0060
	DefmNoBarrier      = 0x0100
	DefmBlockValidity  = 0x0200
	DefmDiscard        = 0x0400
	DefmNoDelalloc     = 0x0800
)

// Superblock is struct ext4_super_block field by field, in on-disk order
// (kernel: fs/ext4/ext4.h). Fields split into _lo/_hi halves keep both
// halves, so that Encode reproduces the bytes exactly; use the methods for
// the combined values. A few fields are named ...Raw because the plain name
// is the method that interprets them.
type Superblock struct {
	InodesCount       uint32 // 0x00
	BlocksCountLo     uint32
	RBlocksCountLo    uint32
	FreeBlocksCountLo uint32
	FreeInodesCount   uint32 // 0x10
	FirstDataBlock    uint32
	LogBlockSize      uint32 // block size = 1024 << LogBlockSize
	LogClusterSize    uint32
	BlocksPerGroup    uint32 // 0x20
	ClustersPerGroup  uint32
	InodesPerGroup    uint32
	Mtime             uint32 // last mount time (low 32 bits)
	Wtime             uint32 // 0x30, last write time
	MntCount          uint16
	MaxMntCount       int16
	Magic             uint16
	State             uint16
	Errors            uint16
	MinorRevLevel     uint16
	Lastcheck         uint32 // 0x40
	Checkinterval     uint32
	CreatorOS         uint32
	RevLevel          uint32
	DefResuid         uint16 // 0x50
	DefResgid         uint16
	// Dynamic-revision fields.
	FirstIno        uint32
	InodeSizeRaw    uint16 // s_inode_size; see InodeSize
	BlockGroupNr    uint16 // group holding this copy
	FeatureCompat   uint32
	FeatureIncompat uint32 // 0x60
	FeatureROCompat uint32
	UUID            [16]byte // 0x68
	VolumeName      [16]byte // 0x78
	LastMounted     [64]byte // 0x88
	// Performance hints.
	AlgorithmUsageBitmap uint32 // 0xC8
	PreallocBlocks       uint8
	PreallocDirBlocks    uint8
	ReservedGDTBlocks    uint16
	// Journaling.
	JournalUUID    [16]byte // 0xD0
	JournalInum    uint32   // 0xE0
	JournalDev     uint32
	LastOrphan     uint32
	HashSeed       [4]uint32
	DefHashVersion uint8
	JnlBackupType  uint8
	DescSizeRaw    uint16 // s_desc_size; see DescSize
	// 0x100
	DefaultMountOpts uint32
	FirstMetaBG      uint32
	MkfsTime         uint32
	JnlBlocks        [17]uint32 // backup of the journal inode's i_block and size
	// 64-bit support. 0x150
	BlocksCountHi        uint32
	RBlocksCountHi       uint32
	FreeBlocksCountHi    uint32
	MinExtraIsize        uint16
	WantExtraIsize       uint16
	Flags                uint32 // 0x160
	RaidStride           uint16
	MMPUpdateInterval    uint16
	MMPBlock             uint64
	RaidStripeWidth      uint32 // 0x170
	LogGroupsPerFlex     uint8
	ChecksumType         uint8
	EncryptionLevel      uint8
	ReservedPad          uint8
	KbytesWritten        uint64
	SnapshotInum         uint32 // 0x180
	SnapshotID           uint32
	SnapshotRBlocksCount uint64
	SnapshotList         uint32 // 0x190
	ErrorCount           uint32
	FirstErrorTime       uint32
	FirstErrorIno        uint32
	FirstErrorBlock      uint64 // 0x1A0
	FirstErrorFunc       [32]byte
	FirstErrorLine       uint32 // 0x1C8
	LastErrorTime        uint32
	LastErrorIno         uint32
	LastErrorLine        uint32
	LastErrorBlock       uint64 // 0x1D8
	LastErrorFunc        [32]byte
	MountOpts            [64]byte  // 0x200
	UsrQuotaInum         uint32    // 0x240
	GrpQuotaInum         uint32    //
	OverheadClusters     uint32    //
	BackupBGs            [2]uint32 // sparse_super2 backup groups
	EncryptAlgos         [4]byte
	EncryptPwSalt        [16]byte
	LpfIno               uint32 // 0x268
	PrjQuotaInum         uint32
	ChecksumSeedRaw      uint32 // s_checksum_seed; see ChecksumSeed
	WtimeHi              uint8  // 0x274
	MtimeHi              uint8
	MkfsTimeHi           uint8
	LastcheckHi          uint8
	FirstErrorTimeHi     uint8
	LastErrorTimeHi      uint8
	FirstErrorErrcode    uint8
	LastErrorErrcode     uint8
	Encoding             uint16 // 0x27C, casefold charset
	EncodingFlags        uint16
	OrphanFileInum       uint32     // 0x280
	Reserved             [94]uint32 // 0x284
	Checksum             uint32     // 0x3FC, crc32c of bytes 0..0x3FB
}

// checksumOffset is the offset of s_checksum.
const checksumOffset = Size - 4

// Decode decodes and validates the 1024-byte superblock in b (which may be
// longer), verifying its checksum when metadata_csum is set. A bad checksum
// is a *fserr.ChecksumError; broken geometry is a *fserr.CorruptError.
func Decode(b []byte) (*Superblock, error) {
	sb, err := DecodeNoVerify(b)
	if err != nil {
		return nil, err
	}
	if sb.HasMetadataCsum() {
		if c := Checksum(b); c != sb.Checksum {
			return nil, &fserr.ChecksumError{What: "superblock", Block: -1, Stored: sb.Checksum, Computed: c}
		}
	}
	return sb, nil
}

// DecodeNoVerify is Decode without the checksum check, for tools that look
// at damaged filesystems. The geometry is still validated.
func DecodeNoVerify(b []byte) (*Superblock, error) {
	if len(b) < Size {
		return nil, fserr.Corrupt("superblock", "%d bytes, need %d", len(b), Size)
	}
	sb := new(Superblock)
	if _, err := binary.Decode(b[:Size], binary.LittleEndian, sb); err != nil {
		return nil, fserr.Corrupt("superblock", "%v", err)
	}
	if err := sb.Validate(); err != nil {
		return nil, err
	}
	return sb, nil
}

// Checksum computes the metadata_csum superblock checksum of the raw
// superblock b: crc32c seeded with ~0 over everything before s_checksum
// (kernel: ext4_superblock_csum).
func Checksum(b []byte) uint32 {
	return csum.CRC32C(^uint32(0), b[:checksumOffset])
}

// Encode returns the 1024 on-disk bytes of sb. With metadata_csum the
// checksum is recomputed (and stored in sb.Checksum too).
func (sb *Superblock) Encode() []byte {
	b := make([]byte, Size)
	if sb.HasMetadataCsum() {
		sb.Checksum = 0
	}
	if _, err := binary.Encode(b, binary.LittleEndian, sb); err != nil {
		panic("super: encoding fixed-size superblock: " + err.Error()) // cannot happen: sizes are static
	}
	if sb.HasMetadataCsum() {
		sb.Checksum = Checksum(b)
		binary.LittleEndian.PutUint32(b[checksumOffset:], sb.Checksum)
	}
	return b
}

// Validate checks the geometry rules the kernel (ext4_fill_super,
// ext4_check_geometry) and e2fsprogs (ext2fs_open) enforce, so that the
// layout arithmetic of this package is well defined.
func (sb *Superblock) Validate() error {
	bad := func(format string, a ...any) error { return fserr.Corrupt("superblock", format, a...) }
	if sb.Magic != Magic {
		return bad("bad magic %#04x", sb.Magic)
	}
	if sb.LogBlockSize > MaxBlockLogSize-MinBlockLogSize {
		return bad("block size log %d out of range", sb.LogBlockSize)
	}
	bs := sb.BlockSize()
	if sb.IsBigalloc() {
		if sb.LogClusterSize < sb.LogBlockSize || sb.LogClusterSize > MaxClusterLog-MinBlockLogSize {
			return bad("cluster size log %d invalid for block size log %d", sb.LogClusterSize, sb.LogBlockSize)
		}
	} else if sb.LogClusterSize != sb.LogBlockSize {
		return bad("cluster size log %d differs from block size log %d without bigalloc", sb.LogClusterSize, sb.LogBlockSize)
	}
	ratio := sb.ClusterRatio()
	if sb.ClustersPerGroup == 0 || sb.ClustersPerGroup > bs*8 {
		return bad("clusters per group %d out of range 1..%d", sb.ClustersPerGroup, bs*8)
	}
	if uint64(sb.BlocksPerGroup) != uint64(sb.ClustersPerGroup)*uint64(ratio) {
		return bad("blocks per group %d is not clusters per group %d times %d", sb.BlocksPerGroup, sb.ClustersPerGroup, ratio)
	}
	if sb.RevLevel > GoodOldRev {
		is := uint32(sb.InodeSizeRaw)
		if is < GoodOldInodeSize || is > bs || is&(is-1) != 0 {
			return bad("inode size %d invalid", is)
		}
		if sb.FirstIno < GoodOldFirstIno {
			return bad("first inode %d below %d", sb.FirstIno, GoodOldFirstIno)
		}
	}
	if ipb := sb.InodesPerBlock(); sb.InodesPerGroup < ipb || sb.InodesPerGroup > bs*8 {
		return bad("inodes per group %d out of range %d..%d", sb.InodesPerGroup, ipb, bs*8)
	}
	if sb.Is64Bit() {
		ds := uint32(sb.DescSizeRaw)
		if ds < MinDescSize64 || ds > MaxDescSize || ds&(ds-1) != 0 {
			return bad("descriptor size %d invalid", ds)
		}
	}
	if sb.HasMetadataCsum() && sb.ChecksumType != ChecksumCRC32C {
		return bad("unknown checksum type %d", sb.ChecksumType)
	}
	blocks := sb.BlocksCount()
	if uint64(sb.FirstDataBlock) >= blocks {
		return bad("first data block %d beyond block count %d", sb.FirstDataBlock, blocks)
	}
	// The superblock is at byte 1024: block 1 for 1 KiB blocks, else block 0.
	// The first group starts there unless bigalloc rounds it down to 0.
	want := uint32(0)
	if bs == 1024 && ratio == 1 {
		want = 1
	}
	if sb.FirstDataBlock != want {
		return bad("first data block %d, want %d", sb.FirstDataBlock, want)
	}
	groups := (blocks - uint64(sb.FirstDataBlock) + uint64(sb.BlocksPerGroup) - 1) / uint64(sb.BlocksPerGroup)
	if groups > 1<<32-uint64(sb.DescPerBlock()) {
		return bad("group count %d too large", groups)
	}
	if groups*uint64(sb.InodesPerGroup) != uint64(sb.InodesCount) {
		return bad("inode count %d is not %d groups of %d", sb.InodesCount, groups, sb.InodesPerGroup)
	}
	if sb.RevLevel > GoodOldRev && sb.FirstIno > sb.InodesCount {
		return bad("first inode %d beyond inode count %d", sb.FirstIno, sb.InodesCount)
	}
	if uint32(sb.ReservedGDTBlocks) > bs/4 {
		return bad("reserved GDT blocks %d more than %d", sb.ReservedGDTBlocks, bs/4)
	}
	if sb.HasIncompat(IncompatMetaBG) && sb.FirstMetaBG > sb.GDTBlocks() {
		return bad("first meta_bg %d beyond %d descriptor blocks", sb.FirstMetaBG, sb.GDTBlocks())
	}
	return nil
}

// BlockSize returns the block size in bytes (1 KiB .. 64 KiB once validated).
func (sb *Superblock) BlockSize() uint32 { return 1024 << min(sb.LogBlockSize, 21) }

// ClusterSize returns the allocation unit in bytes: the block size, or with
// bigalloc 1024<<LogClusterSize.
func (sb *Superblock) ClusterSize() uint32 {
	if !sb.IsBigalloc() {
		return sb.BlockSize()
	}
	return 1024 << min(sb.LogClusterSize, 21)
}

// ClusterBits returns log2 of the blocks per cluster (0 without bigalloc).
func (sb *Superblock) ClusterBits() uint32 {
	if !sb.IsBigalloc() || sb.LogClusterSize < sb.LogBlockSize {
		return 0
	}
	return min(sb.LogClusterSize-sb.LogBlockSize, 31)
}

// ClusterRatio returns the number of blocks per cluster.
func (sb *Superblock) ClusterRatio() uint32 { return 1 << sb.ClusterBits() }

// InodeSize returns the on-disk inode size (128 for revision 0).
func (sb *Superblock) InodeSize() uint32 {
	if sb.RevLevel == GoodOldRev || sb.InodeSizeRaw == 0 {
		return GoodOldInodeSize
	}
	return uint32(sb.InodeSizeRaw)
}

// FirstInode returns the first inode number not reserved by the format.
func (sb *Superblock) FirstInode() uint32 {
	if sb.RevLevel == GoodOldRev {
		return GoodOldFirstIno
	}
	return sb.FirstIno
}

// InodesPerBlock returns how many inodes one inode-table block holds.
func (sb *Superblock) InodesPerBlock() uint32 { return max(sb.BlockSize()/sb.InodeSize(), 1) }

// InodeTableBlocks returns the number of blocks of each group's inode table
// (rounded up, as e2fsprogs does).
func (sb *Superblock) InodeTableBlocks() uint32 {
	bs := uint64(sb.BlockSize())
	return uint32((uint64(sb.InodesPerGroup)*uint64(sb.InodeSize()) + bs - 1) / bs)
}

// DescSize returns the size of one group descriptor: s_desc_size with the
// 64bit feature, else 32.
func (sb *Superblock) DescSize() uint32 {
	if sb.Is64Bit() && sb.DescSizeRaw >= MinDescSize64 {
		return uint32(sb.DescSizeRaw)
	}
	return MinDescSize
}

// DescPerBlock returns the number of group descriptors per block.
func (sb *Superblock) DescPerBlock() uint32 { return max(sb.BlockSize()/sb.DescSize(), 1) }

// BlocksCount returns the total number of blocks (the high half counts only
// with the 64bit feature, as in e2fsprogs).
func (sb *Superblock) BlocksCount() uint64 { return sb.join(sb.BlocksCountLo, sb.BlocksCountHi) }

// RBlocksCount returns the number of blocks reserved for the superuser.
func (sb *Superblock) RBlocksCount() uint64 { return sb.join(sb.RBlocksCountLo, sb.RBlocksCountHi) }

// FreeBlocksCount returns the free block count (a hint; group descriptors
// are authoritative). With bigalloc it still counts blocks.
func (sb *Superblock) FreeBlocksCount() uint64 {
	return sb.join(sb.FreeBlocksCountLo, sb.FreeBlocksCountHi)
}

// SetBlocksCount sets BlocksCountLo/Hi.
func (sb *Superblock) SetBlocksCount(n uint64) { sb.BlocksCountLo, sb.BlocksCountHi = sb.split(n) }

// SetRBlocksCount sets RBlocksCountLo/Hi.
func (sb *Superblock) SetRBlocksCount(n uint64) { sb.RBlocksCountLo, sb.RBlocksCountHi = sb.split(n) }

// SetFreeBlocksCount sets FreeBlocksCountLo/Hi.
func (sb *Superblock) SetFreeBlocksCount(n uint64) {
	sb.FreeBlocksCountLo, sb.FreeBlocksCountHi = sb.split(n)
}

func (sb *Superblock) join(lo, hi uint32) uint64 {
	if !sb.Is64Bit() {
		return uint64(lo)
	}
	return uint64(hi)<<32 | uint64(lo)
}

// split leaves the high half untouched without the 64bit feature, where it
// is not part of the value.
func (sb *Superblock) split(n uint64) (lo, hi uint32) {
	if !sb.Is64Bit() {
		return uint32(n), 0
	}
	return uint32(n), uint32(n >> 32)
}

// GroupCount returns the number of block groups.
func (sb *Superblock) GroupCount() uint32 {
	blocks, first, bpg := sb.BlocksCount(), uint64(sb.FirstDataBlock), uint64(sb.BlocksPerGroup)
	if bpg == 0 || blocks <= first {
		return 0
	}
	return uint32(min((blocks-first+bpg-1)/bpg, 1<<32-1))
}

// GDTBlocks returns the number of blocks the group descriptor table takes
// (kernel: s_gdb_count).
func (sb *Superblock) GDTBlocks() uint32 {
	dpb := uint64(sb.DescPerBlock())
	return uint32((uint64(sb.GroupCount()) + dpb - 1) / dpb)
}

// FlexGroupSize returns the number of groups in a flex group: 1 without
// flex_bg or with an out-of-range s_log_groups_per_flex (which the kernel
// ignores too).
func (sb *Superblock) FlexGroupSize() uint32 {
	if !sb.HasIncompat(IncompatFlexBG) || sb.LogGroupsPerFlex < 1 || sb.LogGroupsPerFlex > 31 {
		return 1
	}
	return 1 << sb.LogGroupsPerFlex
}

// ChecksumSeed returns the seed of all metadata_csum checksums except the
// superblock's own: s_checksum_seed with metadata_csum_seed, else
// crc32c(~0, uuid) (kernel: s_csum_seed).
func (sb *Superblock) ChecksumSeed() uint32 {
	if sb.HasIncompat(IncompatCsumSeed) {
		return sb.ChecksumSeedRaw
	}
	return csum.CRC32C(^uint32(0), sb.UUID[:])
}

// Label returns the volume name up to its first NUL.
func (sb *Superblock) Label() string { return cstring(sb.VolumeName[:]) }

// SetLabel sets the volume name, truncated to 16 bytes.
func (sb *Superblock) SetLabel(s string) {
	sb.VolumeName = [labelLen]byte{}
	copy(sb.VolumeName[:], s)
}

// LastMountedDir returns the directory where the filesystem was last
// mounted, up to its first NUL.
func (sb *Superblock) LastMountedDir() string { return cstring(sb.LastMounted[:]) }

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// The timestamps are 32 bits plus 8 high bits (kernel: ext4_get_tstamp):
// seconds since the epoch, unsigned, so they run until 2446.
func stamp(lo uint32, hi uint8) time.Time { return time.Unix(int64(hi)<<32|int64(lo), 0) }

func unstamp(t time.Time) (uint32, uint8) {
	s := t.Unix()
	if s < 0 {
		s = 0
	}
	return uint32(s), uint8(s >> 32)
}

// MountTime returns the last mount time.
func (sb *Superblock) MountTime() time.Time { return stamp(sb.Mtime, sb.MtimeHi) }

// WriteTime returns the last write time.
func (sb *Superblock) WriteTime() time.Time { return stamp(sb.Wtime, sb.WtimeHi) }

// CreateTime returns the time the filesystem was made.
func (sb *Superblock) CreateTime() time.Time { return stamp(sb.MkfsTime, sb.MkfsTimeHi) }

// CheckTime returns the time of the last fsck.
func (sb *Superblock) CheckTime() time.Time { return stamp(sb.Lastcheck, sb.LastcheckHi) }

// SetMountTime sets the last mount time.
func (sb *Superblock) SetMountTime(t time.Time) { sb.Mtime, sb.MtimeHi = unstamp(t) }

// SetWriteTime sets the last write time.
func (sb *Superblock) SetWriteTime(t time.Time) { sb.Wtime, sb.WtimeHi = unstamp(t) }

// SetCheckTime sets the time of the last fsck.
func (sb *Superblock) SetCheckTime(t time.Time) { sb.Lastcheck, sb.LastcheckHi = unstamp(t) }
