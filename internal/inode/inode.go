// Package inode decodes and encodes the on-disk ext4 inode (struct
// ext4_inode) and computes its checksum. It does no I/O: callers hand it the
// inode's bytes from the inode table and get them back from Encode.
//
// Invariants:
//   - The inode size is a power of two of at least 128 bytes (the
//     superblock's s_inode_size); a 128-byte inode has no extra fields.
//   - In a larger inode, i_extra_isize says how many bytes past the first
//     128 hold the extra fields. It must be a multiple of 4 and fit inside the
//     inode (kernel: __ext4_iget). An extra field is read and written only
//     when i_extra_isize covers it (kernel: EXT4_FITS_IN_INODE); the bytes
//     after the extra fields hold in-inode extended attributes.
//   - Decode keeps a copy of all the inode's bytes in Inode.Raw and Encode
//     starts from it, so fields this package does not model (osd2 reserved
//     bytes, i_obso_faddr, the in-inode xattr area) survive a round trip.
//
// Inode has no locks; callers that share one must serialise access.
package inode

import (
	"encoding/binary"
	"math"
	"math/bits"
	"time"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Sizes of the fixed parts of an inode.
const (
	GoodOldSize = 128 // EXT4_GOOD_OLD_INODE_SIZE: the base inode, all there is in a 128-byte inode
	NBlocks     = 15  // EXT4_N_BLOCKS: words in i_block
	BlockLen    = 60  // bytes in i_block
	// ExtraSize is the i_extra_isize that covers every extra field this
	// package knows (up to and including i_projid); mke2fs and the kernel
	// use it for new inodes.
	ExtraSize = 32
)

// Byte offsets of the fields of struct ext4_inode.
const (
	offMode        = 0
	offUIDLo       = 2
	offSizeLo      = 4
	offAtime       = 8
	offCtime       = 12
	offMtime       = 16
	offDtime       = 20
	offGIDLo       = 24
	offLinks       = 26
	offBlocksLo    = 28
	offFlags       = 32
	offVersionLo   = 36 // osd1.linux1.l_i_version
	offBlock       = 40
	offGeneration  = 100
	offFileACLLo   = 104
	offSizeHigh    = 108
	offBlocksHigh  = 116 // osd2.linux2.l_i_blocks_high
	offFileACLHigh = 118
	offUIDHigh     = 120
	offGIDHigh     = 122
	offChecksumLo  = 124
	offExtraIsize  = 128
	offChecksumHi  = 130
	offCtimeExtra  = 132
	offMtimeExtra  = 136
	offAtimeExtra  = 140
	offCrtime      = 144
	offCrtimeExtra = 148
	offVersionHi   = 152
	offProjid      = 156
)

// Inode flags (i_flags), kernel EXT4_*_FL.
const (
	FlagSecRm       uint32 = 0x00000001 // secure deletion (unimplemented)
	FlagUnRm        uint32 = 0x00000002 // undelete (unimplemented)
	FlagCompr       uint32 = 0x00000004 // compress file (unimplemented)
	FlagSync        uint32 = 0x00000008 // synchronous updates
	FlagImmutable   uint32 = 0x00000010 // immutable file
	FlagAppend      uint32 = 0x00000020 // writes may only append
	FlagNoDump      uint32 = 0x00000040 // do not dump file
	FlagNoAtime     uint32 = 0x00000080 // do not update atime
	FlagDirty       uint32 = 0x00000100 // compression: dirty
	FlagComprBlk    uint32 = 0x00000200 // compression: compressed clusters
	FlagNoCompr     uint32 = 0x00000400 // compression: don't compress
	FlagEncrypt     uint32 = 0x00000800 // encrypted inode (was ECOMPR)
	FlagIndex       uint32 = 0x00001000 // hash-indexed directory
	FlagIMagic      uint32 = 0x00002000 // AFS directory
	FlagJournalData uint32 = 0x00004000 // file data is journaled
	FlagNoTail      uint32 = 0x00008000 // file tail should not be merged
	FlagDirSync     uint32 = 0x00010000 // dirsync behaviour (directories only)
	FlagTopDir      uint32 = 0x00020000 // top of directory hierarchies
	FlagHugeFile    uint32 = 0x00040000 // i_blocks counts filesystem blocks, not 512-byte sectors
	FlagExtents     uint32 = 0x00080000 // i_block holds an extent tree
	FlagVerity      uint32 = 0x00100000 // fs-verity protected
	FlagEAInode     uint32 = 0x00200000 // inode holds a large xattr value
	FlagEOFBlocks   uint32 = 0x00400000 // formerly EXT4_EOFBLOCKS_FL; unused
	FlagDAX         uint32 = 0x02000000 // direct access
	FlagInlineData  uint32 = 0x10000000 // data stored in i_block and system.data xattr
	FlagProjInherit uint32 = 0x20000000 // children inherit the project id
	FlagCasefold    uint32 = 0x40000000 // case-insensitive directory
	FlagReserved    uint32 = 0x80000000 // reserved for ext4 lib
)

// FileType is the format part of i_mode (S_IFMT bits).
type FileType uint16

// File types, the S_IF* constants.
const (
	TypeMask    FileType = 0xF000 // S_IFMT
	TypeFIFO    FileType = 0x1000 // S_IFIFO
	TypeCharDev FileType = 0x2000 // S_IFCHR
	TypeDir     FileType = 0x4000 // S_IFDIR
	TypeBlkDev  FileType = 0x6000 // S_IFBLK
	TypeRegular FileType = 0x8000 // S_IFREG
	TypeSymlink FileType = 0xA000 // S_IFLNK
	TypeSocket  FileType = 0xC000 // S_IFSOCK
)

func (t FileType) String() string {
	switch t {
	case TypeFIFO:
		return "fifo"
	case TypeCharDev:
		return "char device"
	case TypeDir:
		return "directory"
	case TypeBlkDev:
		return "block device"
	case TypeRegular:
		return "regular"
	case TypeSymlink:
		return "symlink"
	case TypeSocket:
		return "socket"
	}
	return "unknown"
}

// Timestamp is an inode time: seconds since the Unix epoch and nanoseconds.
type Timestamp struct {
	Sec  int64
	Nsec uint32 // as stored (30 bits); not checked to be below 1e9
}

// Time returns t as a time.Time in UTC.
func (t Timestamp) Time() time.Time { return time.Unix(t.Sec, int64(t.Nsec)).UTC() }

// FromTime returns the Timestamp of tm.
func FromTime(tm time.Time) Timestamp {
	return Timestamp{Sec: tm.Unix(), Nsec: uint32(tm.Nanosecond())}
}

// Inode is a decoded struct ext4_inode. Fields that come from split lo/hi
// words on disk are merged here.
type Inode struct {
	Mode       uint16 // file type and permission bits
	UID, GID   uint32 // owner; the high 16 bits come from osd2
	Size       uint64 // i_size_lo | i_size_high<<32
	Atime      Timestamp
	Ctime      Timestamp
	Mtime      Timestamp
	Crtime     Timestamp // creation time; zero if the extra fields do not cover it
	Dtime      uint32    // deletion time, or the next inode on the orphan list
	LinksCount uint16
	// Blocks is i_blocks_lo | l_i_blocks_high<<32 as stored. What unit it
	// counts depends on the huge_file feature and FlagHugeFile; use Sectors.
	Blocks     uint64
	Flags      uint32
	Version    uint64 // l_i_version | i_version_hi<<32 (high half only if covered)
	Block      [BlockLen]byte
	Generation uint32
	// FileACL is the xattr block: i_file_acl_lo | l_i_file_acl_high<<32
	// (48 bits). The kernel ignores the high half without the 64bit feature;
	// see ACLBlock.
	FileACL    uint64
	ExtraIsize uint16 // i_extra_isize; 0 in a 128-byte inode
	ChecksumLo uint16 // l_i_checksum_lo
	ChecksumHi uint16 // i_checksum_hi; 0 unless covered by ExtraIsize
	Projid     uint32 // project id; 0 unless covered by ExtraIsize
	// Raw is a copy of the whole on-disk inode (the inode size in bytes).
	// Encode starts from it, keeping what the fields above do not model.
	Raw []byte
	// RawOwned says Raw is this value's own copy, shared with no other
	// Inode: an encoder may then write the new bytes into it in place.
	// Copying an Inode copies the flag with the shared slice, so whoever
	// copies must clear it (or copy Raw).
	RawOwned bool
}

// checkSize validates an inode size: a power of two, at least 128 bytes and
// no larger than the largest block (the superblock decoder enforces the
// tighter bound of the actual block size).
func checkSize(size int) error {
	if size < GoodOldSize || size > 65536 || size&(size-1) != 0 {
		return fserr.Corrupt("inode", "inode size %d is not a power of two between 128 and 65536", size)
	}
	return nil
}

// checkExtraIsize applies the kernel's i_extra_isize rule (__ext4_iget).
func checkExtraIsize(extra uint16, size int) error {
	if GoodOldSize+int(extra) > size || extra&3 != 0 {
		return fserr.Corrupt("inode", "bad i_extra_isize %d (inode size %d)", extra, size)
	}
	return nil
}

// fits reports whether a field ending at byte end lies within the part of
// the inode that i_extra_isize covers (kernel: EXT4_FITS_IN_INODE).
func fits(end int, size int, extra uint16) bool {
	return size > GoodOldSize && end <= GoodOldSize+int(extra)
}

// Decode decodes the inode in b[:inodeSize]. It fails only if inodeSize is
// not a valid inode size, b is too short, or i_extra_isize is bad; the
// fields' meaning is checked by the callers that use them.
func Decode(b []byte, inodeSize int) (*Inode, error) {
	if err := checkSize(inodeSize); err != nil {
		return nil, err
	}
	if len(b) < inodeSize {
		return nil, fserr.Corrupt("inode", "%d bytes, want %d", len(b), inodeSize)
	}
	b = b[:inodeSize]
	le := binary.LittleEndian
	in := &Inode{
		Mode:       le.Uint16(b[offMode:]),
		UID:        uint32(le.Uint16(b[offUIDLo:])) | uint32(le.Uint16(b[offUIDHigh:]))<<16,
		GID:        uint32(le.Uint16(b[offGIDLo:])) | uint32(le.Uint16(b[offGIDHigh:]))<<16,
		Size:       uint64(le.Uint32(b[offSizeLo:])) | uint64(le.Uint32(b[offSizeHigh:]))<<32,
		Dtime:      le.Uint32(b[offDtime:]),
		LinksCount: le.Uint16(b[offLinks:]),
		Blocks:     uint64(le.Uint32(b[offBlocksLo:])) | uint64(le.Uint16(b[offBlocksHigh:]))<<32,
		Flags:      le.Uint32(b[offFlags:]),
		Version:    uint64(le.Uint32(b[offVersionLo:])),
		Generation: le.Uint32(b[offGeneration:]),
		FileACL:    uint64(le.Uint32(b[offFileACLLo:])) | uint64(le.Uint16(b[offFileACLHigh:]))<<32,
		ChecksumLo: le.Uint16(b[offChecksumLo:]),
		Raw:        append([]byte(nil), b...),
	}
	copy(in.Block[:], b[offBlock:offBlock+BlockLen])
	if inodeSize > GoodOldSize {
		in.ExtraIsize = le.Uint16(b[offExtraIsize:])
		if err := checkExtraIsize(in.ExtraIsize, inodeSize); err != nil {
			return nil, err
		}
	}
	f := func(end int) bool { return fits(end, inodeSize, in.ExtraIsize) }
	in.Atime = decodeTime(b, offAtime, offAtimeExtra, f(offAtimeExtra+4))
	in.Ctime = decodeTime(b, offCtime, offCtimeExtra, f(offCtimeExtra+4))
	in.Mtime = decodeTime(b, offMtime, offMtimeExtra, f(offMtimeExtra+4))
	if f(offCrtime + 4) {
		in.Crtime = decodeTime(b, offCrtime, offCrtimeExtra, f(offCrtimeExtra+4))
	}
	if f(offChecksumHi + 2) {
		in.ChecksumHi = le.Uint16(b[offChecksumHi:])
	}
	if f(offVersionHi + 4) {
		in.Version |= uint64(le.Uint32(b[offVersionHi:])) << 32
	}
	if f(offProjid + 4) {
		in.Projid = le.Uint32(b[offProjid:])
	}
	return in, nil
}

// decodeTime follows the kernel's ext4_decode_extra_time: the base is a
// signed 32-bit count of seconds; the low 2 bits of the extra word add
// multiples of 2^32 seconds (so 1901..2446 is representable) and its high
// 30 bits are nanoseconds.
func decodeTime(b []byte, base, extra int, hasExtra bool) Timestamp {
	t := Timestamp{Sec: int64(int32(binary.LittleEndian.Uint32(b[base:])))}
	if hasExtra {
		x := binary.LittleEndian.Uint32(b[extra:])
		t.Sec += int64(x&3) << 32
		t.Nsec = x >> 2
	}
	return t
}

// encodeTime is the inverse of decodeTime (kernel: ext4_encode_extra_time,
// EXT4_INODE_SET_XTIME). Without an extra word the seconds are clamped to
// the signed 32-bit range, as the kernel does.
func encodeTime(b []byte, base, extra int, hasExtra bool, t Timestamp) {
	le := binary.LittleEndian
	if !hasExtra {
		s := min(max(t.Sec, math.MinInt32), math.MaxInt32)
		le.PutUint32(b[base:], uint32(int32(s)))
		return
	}
	le.PutUint32(b[base:], uint32(t.Sec))
	epoch := uint32((t.Sec-int64(int32(uint32(t.Sec))))>>32) & 3
	le.PutUint32(b[extra:], epoch|t.Nsec<<2)
}

// Encode writes the inode into dst, whose length is the inode size. dst is
// first filled from Raw (zeros where Raw is short or nil), then every field
// is written; extra fields are written only where ExtraIsize covers them.
// dst may be Raw itself.
// The checksum fields are written as they are in the Inode; use
// EncodeChecksum to compute them.
func (in *Inode) Encode(dst []byte) error {
	size := len(dst)
	if err := checkSize(size); err != nil {
		return err
	}
	if size == GoodOldSize && in.ExtraIsize != 0 {
		return fserr.Corrupt("inode", "i_extra_isize %d in a 128-byte inode", in.ExtraIsize)
	}
	if err := checkExtraIsize(in.ExtraIsize, size); err != nil {
		return err
	}
	if len(in.Raw) > 0 && len(dst) > 0 && &dst[0] == &in.Raw[0] {
		clear(dst[min(len(in.Raw), len(dst)):])
	} else {
		clear(dst)
		copy(dst, in.Raw)
	}
	le := binary.LittleEndian
	b := dst
	le.PutUint16(b[offMode:], in.Mode)
	le.PutUint16(b[offUIDLo:], uint16(in.UID))
	le.PutUint16(b[offUIDHigh:], uint16(in.UID>>16))
	le.PutUint16(b[offGIDLo:], uint16(in.GID))
	le.PutUint16(b[offGIDHigh:], uint16(in.GID>>16))
	le.PutUint32(b[offSizeLo:], uint32(in.Size))
	le.PutUint32(b[offSizeHigh:], uint32(in.Size>>32))
	le.PutUint32(b[offDtime:], in.Dtime)
	le.PutUint16(b[offLinks:], in.LinksCount)
	le.PutUint32(b[offBlocksLo:], uint32(in.Blocks))
	le.PutUint16(b[offBlocksHigh:], uint16(in.Blocks>>32))
	le.PutUint32(b[offFlags:], in.Flags)
	le.PutUint32(b[offVersionLo:], uint32(in.Version))
	copy(b[offBlock:], in.Block[:])
	le.PutUint32(b[offGeneration:], in.Generation)
	le.PutUint32(b[offFileACLLo:], uint32(in.FileACL))
	le.PutUint16(b[offFileACLHigh:], uint16(in.FileACL>>32))
	le.PutUint16(b[offChecksumLo:], in.ChecksumLo)
	if size > GoodOldSize {
		le.PutUint16(b[offExtraIsize:], in.ExtraIsize)
	}
	f := func(end int) bool { return fits(end, size, in.ExtraIsize) }
	encodeTime(b, offAtime, offAtimeExtra, f(offAtimeExtra+4), in.Atime)
	encodeTime(b, offCtime, offCtimeExtra, f(offCtimeExtra+4), in.Ctime)
	encodeTime(b, offMtime, offMtimeExtra, f(offMtimeExtra+4), in.Mtime)
	if f(offCrtime + 4) {
		encodeTime(b, offCrtime, offCrtimeExtra, f(offCrtimeExtra+4), in.Crtime)
	}
	if f(offChecksumHi + 2) {
		le.PutUint16(b[offChecksumHi:], in.ChecksumHi)
	}
	if f(offVersionHi + 4) {
		le.PutUint32(b[offVersionHi:], uint32(in.Version>>32))
	}
	if f(offProjid + 4) {
		le.PutUint32(b[offProjid:], in.Projid)
	}
	return nil
}

// EncodeTimes writes only in's access, change and modification times into
// dst, the raw inode (of the inode size) that in was decoded from or
// encoded to, leaving every other byte as it is (kernel:
// EXT4_INODE_SET_XTIME, as other_inode_match does for a neighbour's lazy
// times). The checksum is not updated: SetChecksum must follow on a
// filesystem with metadata_csum.
func (in *Inode) EncodeTimes(dst []byte) error {
	size := len(dst)
	if err := checkSize(size); err != nil {
		return err
	}
	if err := checkExtraIsize(in.ExtraIsize, size); err != nil {
		return err
	}
	f := func(end int) bool { return fits(end, size, in.ExtraIsize) }
	encodeTime(dst, offAtime, offAtimeExtra, f(offAtimeExtra+4), in.Atime)
	encodeTime(dst, offCtime, offCtimeExtra, f(offCtimeExtra+4), in.Ctime)
	encodeTime(dst, offMtime, offMtimeExtra, f(offMtimeExtra+4), in.Mtime)
	return nil
}

// EncodeChecksum encodes the inode like Encode, then computes its checksum
// for inode number ino under the filesystem checksum seed fsSeed, stores it
// in dst and in the Inode's ChecksumLo/ChecksumHi.
func (in *Inode) EncodeChecksum(dst []byte, fsSeed, ino uint32) error {
	if err := in.Encode(dst); err != nil {
		return err
	}
	SetChecksum(fsSeed, ino, dst)
	in.ChecksumLo = binary.LittleEndian.Uint16(dst[offChecksumLo:])
	if hasChecksumHi(dst) {
		in.ChecksumHi = binary.LittleEndian.Uint16(dst[offChecksumHi:])
	}
	return nil
}

// ExtraSpace returns the bytes after the extra fields: the in-inode
// extended attribute area (it starts with the 0xEA020000 magic when used).
// It aliases Raw and is nil for a 128-byte inode or when i_extra_isize
// leaves no room.
func (in *Inode) ExtraSpace() []byte {
	start := GoodOldSize + int(in.ExtraIsize)
	if len(in.Raw) <= GoodOldSize || start >= len(in.Raw) {
		return nil
	}
	return in.Raw[start:]
}

// FileType returns the file type bits of Mode.
func (in *Inode) FileType() FileType { return FileType(in.Mode) & TypeMask }

// Perm returns the permission bits of Mode, including setuid, setgid and
// sticky.
func (in *Inode) Perm() uint16 { return in.Mode & 0o7777 }

// IsRegular reports whether the inode is a regular file.
func (in *Inode) IsRegular() bool { return in.FileType() == TypeRegular }

// IsDir reports whether the inode is a directory.
func (in *Inode) IsDir() bool { return in.FileType() == TypeDir }

// IsSymlink reports whether the inode is a symbolic link.
func (in *Inode) IsSymlink() bool { return in.FileType() == TypeSymlink }

// IsDevice reports whether the inode is a character or block device.
func (in *Inode) IsDevice() bool {
	t := in.FileType()
	return t == TypeCharDev || t == TypeBlkDev
}

// HasFlag reports whether all the bits of f are set in Flags.
func (in *Inode) HasFlag(f uint32) bool { return in.Flags&f == f }

// Sectors returns i_blocks in 512-byte units as the kernel reads it
// (ext4_inode_blocks): only the low 32 bits without the huge_file feature;
// with it the 48-bit value, counted in filesystem blocks when the inode has
// FlagHugeFile.
func (in *Inode) Sectors(blockSize uint32, hugeFile bool) uint64 {
	if !hugeFile {
		return in.Blocks & math.MaxUint32
	}
	if in.Flags&FlagHugeFile != 0 {
		return in.Blocks << blockShift(blockSize)
	}
	return in.Blocks
}

// BlockBytes returns the space charged to the inode in bytes (Sectors*512).
func (in *Inode) BlockBytes(blockSize uint32, hugeFile bool) uint64 {
	return in.Sectors(blockSize, hugeFile) * 512
}

// SetSectors stores a count of 512-byte units in Blocks, setting or
// clearing FlagHugeFile as the kernel does (ext4_inode_blocks_set). It
// fails if the count does not fit the format.
func (in *Inode) SetSectors(n uint64, blockSize uint32, hugeFile bool) error {
	const max48 = 1<<48 - 1
	switch {
	case n <= math.MaxUint32:
		in.Blocks = n
		in.Flags &^= FlagHugeFile
	case !hugeFile:
		return &fserr.UnsupportedError{Feature: "block count over 2^32 sectors", Detail: "needs huge_file"}
	case n <= max48:
		in.Blocks = n
		in.Flags &^= FlagHugeFile
	default:
		n >>= blockShift(blockSize)
		if n > max48 {
			return &fserr.UnsupportedError{Feature: "block count over 2^48 blocks"}
		}
		in.Blocks = n
		in.Flags |= FlagHugeFile
	}
	return nil
}

// blockShift returns log2(blockSize) - 9: how far a count of filesystem
// blocks is shifted to count 512-byte sectors.
func blockShift(blockSize uint32) int {
	if blockSize < 1024 {
		return 1
	}
	return bits.Len32(blockSize) - 1 - 9
}

// ACLBlock returns the xattr block number the kernel uses: the high 16
// bits count only with the 64bit feature (__ext4_iget).
func (in *Inode) ACLBlock(is64bit bool) uint64 {
	if is64bit {
		return in.FileACL
	}
	return in.FileACL & math.MaxUint32
}

// IsFastSymlink reports whether the inode is a symlink whose target is
// stored in i_block, by the kernel's rule (ext4_inode_is_fast_symlink):
// with the ea_inode feature, a symlink with a non-zero size below 60 bytes;
// otherwise a symlink without inline data that owns no blocks except one
// xattr cluster. Symlinks with FlagInlineData keep their target in i_block
// too (and the system.data xattr) but are not "fast"; encrypted symlinks
// are never read this way by the kernel. clusterSize equals blockSize
// without bigalloc.
func (in *Inode) IsFastSymlink(blockSize, clusterSize uint32, hugeFile, eaInode bool) bool {
	if !in.IsSymlink() {
		return false
	}
	if eaInode {
		return in.Size != 0 && in.Size < BlockLen
	}
	if in.Flags&FlagInlineData != 0 {
		return false
	}
	var eaSectors uint64
	if in.FileACL != 0 { // the kernel tests the in-memory i_file_acl
		eaSectors = uint64(clusterSize) >> 9
	}
	return in.Sectors(blockSize, hugeFile) == eaSectors
}

// Device returns the device number of a character or block device inode
// (kernel: __ext4_iget): the old 8:8 encoding in i_block[0] when that word
// is non-zero, otherwise the new 12:20 encoding in i_block[1].
func (in *Inode) Device() (major, minor uint32) {
	le := binary.LittleEndian
	if old := le.Uint32(in.Block[0:]); old != 0 {
		v := uint16(old) // old_decode_dev takes a u16
		return uint32(v >> 8), uint32(v & 0xff)
	}
	v := le.Uint32(in.Block[4:])
	return (v & 0xfff00) >> 8, (v & 0xff) | (v>>12)&0xfff00
}

// SetDevice stores a device number the way the kernel does
// (ext4_fill_raw_inode): the old encoding when major and minor both fit in
// 8 bits, otherwise the new one with i_block[0] zero. Numbers are truncated
// to 12 bits of major and 20 bits of minor.
func (in *Inode) SetDevice(major, minor uint32) {
	le := binary.LittleEndian
	if major < 256 && minor < 256 {
		le.PutUint32(in.Block[0:], major<<8|minor)
		le.PutUint32(in.Block[4:], 0)
		return
	}
	le.PutUint32(in.Block[0:], 0)
	le.PutUint32(in.Block[4:], minor&0xff|(major&0xfff)<<8|(minor&^0xff)<<12)
	le.PutUint32(in.Block[8:], 0)
}

// SlotGeneration returns i_generation of the raw inode at the start of b.
func SlotGeneration(b []byte) uint32 { return binary.LittleEndian.Uint32(b[offGeneration:]) }

// SlotInUse reports whether the raw inode at the start of b has links.
func SlotInUse(b []byte) bool { return binary.LittleEndian.Uint16(b[offLinks:]) != 0 }
