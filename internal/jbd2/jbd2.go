// Package jbd2 encodes and decodes the on-disk structures of the jbd2
// journal that ext4 keeps in inode 8 (or on an external device): the journal
// superblock, block headers, descriptor blocks with their block tags, commit
// blocks and revoke blocks, and computes their checksums.
//
// Everything in the journal is big-endian. Journal block numbers (First,
// Start, MaxLen, ...) count from the start of the journal: for an internal
// journal they are logical blocks of the journal inode, block 0 holding the
// superblock; for an external journal device they are device blocks, the
// superblock sitting in the block after the ext4 superblock. The package is pure: it does no I/O and holds no state apart
// from the Known* feature masks, which the filesystem layer sets once at
// start-up. Recover replays a log read through a callback and returns the
// blocks the replay would write; it writes nothing. Structural decoding
// and checksum verification are separate steps for descriptor, commit and
// revoke blocks (the kernel treats a bad checksum differently from a bad
// structure while scanning the log), while the superblock is always
// verified.
//
// Invariants: a *Superblock returned by Decode has a sane geometry (block
// size, log area, fast-commit area), so TagBytes, LogEnd and the other
// methods are total and never panic; every decoder bounds its loops by the
// block size and never panics on any input.
package jbd2

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Magic starts every journal metadata block ("the first 4 bytes of
// /dev/random").
const Magic uint32 = 0xC03B3998

// Block types (h_blocktype).
const (
	BlockDescriptor = 1
	BlockCommit     = 2
	BlockSuperV1    = 3
	BlockSuperV2    = 4
	BlockRevoke     = 5
)

// Features. Only version-2 superblocks have them.
const (
	CompatChecksum uint32 = 0x1 // v1 transaction checksums in commit blocks

	IncompatRevoke      uint32 = 0x01
	Incompat64Bit       uint32 = 0x02
	IncompatAsyncCommit uint32 = 0x04
	IncompatCsumV2      uint32 = 0x08
	IncompatCsumV3      uint32 = 0x10
	IncompatFastCommit  uint32 = 0x20
)

// Known feature sets, as in the kernel's JBD2_KNOWN_*_FEATURES; the
// filesystem layer may narrow them to what it replays.
var (
	KnownCompat   = CompatChecksum
	KnownIncompat = IncompatRevoke | Incompat64Bit | IncompatAsyncCommit |
		IncompatCsumV2 | IncompatCsumV3 | IncompatFastCommit
	KnownROCompat uint32 = 0
)

// Checksum types (s_checksum_type, h_chksum_type).
const (
	ChecksumCRC32  = 1
	ChecksumMD5    = 2
	ChecksumSHA1   = 3
	ChecksumCRC32C = 4
)

// Sizes and limits.
const (
	SuperblockSize   = 1024
	HeaderSize       = 12
	MinJournalBlocks = 1024 // kernel: JBD2_MIN_JOURNAL_BLOCKS
	DefaultFCBlocks  = 256  // kernel: JBD2_DEFAULT_FAST_COMMIT_BLOCKS
	MaxUsers         = 48   // s_users holds 48 UUIDs
	tailSize         = 4    // struct jbd2_journal_block_tail
	minBlockSize     = 1024
	maxBlockSize     = 65536
)

// Header starts every journal metadata block (journal_header_t).
type Header struct {
	Magic     uint32
	BlockType uint32
	Sequence  uint32 // transaction ID
}

// DecodeHeader decodes the header at the start of b and checks its magic.
// Journal data blocks do not have one; a missing magic ends the log.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fserr.Corrupt("journal block", "%d bytes, need %d", len(b), HeaderSize)
	}
	h := Header{
		Magic:     binary.BigEndian.Uint32(b[0:]),
		BlockType: binary.BigEndian.Uint32(b[4:]),
		Sequence:  binary.BigEndian.Uint32(b[8:]),
	}
	if h.Magic != Magic {
		return h, fserr.Corrupt("journal block", "no magic (%#08x)", h.Magic)
	}
	return h, nil
}

// put writes h into b[0:12].
func (h Header) put(b []byte) {
	binary.BigEndian.PutUint32(b[0:], h.Magic)
	binary.BigEndian.PutUint32(b[4:], h.BlockType)
	binary.BigEndian.PutUint32(b[8:], h.Sequence)
}

// Superblock is journal_superblock_t field by field (kernel:
// include/linux/jbd2.h), big-endian on disk. It occupies the first 1024
// bytes of journal block 0.
type Superblock struct {
	Header Header // 0x00, BlockType BlockSuperV1 or BlockSuperV2
	// Static description of the journal.
	BlockSize uint32 // 0x0C
	MaxLen    uint32 // total blocks in the journal
	First     uint32 // first block of log information
	// Dynamic state of the log.
	Sequence uint32 // 0x18, first transaction expected in the log
	Start    uint32 // block of the start of the log; 0 = clean, nothing to replay
	Errno    int32  // 0x20, set by jbd2_journal_abort (negative errno)
	// Version 2 only.
	FeatureCompat   uint32   // 0x24
	FeatureIncompat uint32   //
	FeatureROCompat uint32   //
	UUID            [16]byte // 0x30
	NrUsers         uint32   // 0x40, filesystems sharing the log
	DynSuper        uint32   // unused
	MaxTransaction  uint32   // 0x48, unused limit
	MaxTransData    uint32   // unused limit
	ChecksumType    uint8    // 0x50
	Padding2        [3]byte
	NumFCBlocks     uint32     // 0x54, fast commit blocks (0 = default)
	Head            uint32     // 0x58, head of log, only while clean
	Padding         [40]uint32 // 0x5C
	Checksum        uint32     // 0xFC, crc32c of the superblock
	Users           [16 * MaxUsers]byte
}

const sbChecksumOffset = 0xFC

// Decode decodes and validates a journal superblock from b (at least 1024
// bytes: the start of journal block 0), verifying its checksum when the
// journal has v2/v3 checksums (kernel: journal_check_superblock). Unknown
// features are not an error here; see UnknownIncompat.
func Decode(b []byte) (*Superblock, error) {
	return decode(b, true)
}

// DecodeNoVerify is Decode without the checksum check.
func DecodeNoVerify(b []byte) (*Superblock, error) {
	return decode(b, false)
}

func decode(b []byte, verify bool) (*Superblock, error) {
	if len(b) < SuperblockSize {
		return nil, fserr.Corrupt("journal superblock", "%d bytes, need %d", len(b), SuperblockSize)
	}
	sb := new(Superblock)
	if _, err := binary.Decode(b[:SuperblockSize], binary.BigEndian, sb); err != nil {
		return nil, fserr.Corrupt("journal superblock", "%v", err)
	}
	if err := sb.Validate(); err != nil {
		return nil, err
	}
	if verify && sb.HasCsumV2or3() {
		if c := SuperblockChecksum(b); c != sb.Checksum {
			return nil, &fserr.ChecksumError{What: "journal superblock", Block: -1, Stored: sb.Checksum, Computed: c}
		}
	}
	return sb, nil
}

// Validate checks the rules of the kernel's journal_check_superblock that do
// not need the device: magic, format, block size, log bounds, consistent
// checksum features.
func (sb *Superblock) Validate() error {
	bad := func(format string, a ...any) error { return fserr.Corrupt("journal superblock", format, a...) }
	switch {
	case sb.Header.Magic != Magic:
		return bad("bad magic %#08x", sb.Header.Magic)
	case sb.Header.BlockType != BlockSuperV1 && sb.Header.BlockType != BlockSuperV2:
		return bad("unknown format %d", sb.Header.BlockType)
	case sb.BlockSize < minBlockSize || sb.BlockSize > maxBlockSize || sb.BlockSize&(sb.BlockSize-1) != 0:
		return bad("block size %d", sb.BlockSize)
	case sb.First == 0 || sb.First >= sb.MaxLen:
		return bad("first log block %d outside journal of %d blocks", sb.First, sb.MaxLen)
	case sb.Start != 0 && (sb.Start < sb.First || sb.Start >= sb.MaxLen):
		return bad("log start %d outside %d..%d", sb.Start, sb.First, sb.MaxLen-1)
	}
	if sb.Version() < 2 {
		return nil
	}
	fc := sb.FastCommitBlocks()
	switch {
	case sb.MaxLen < MinJournalBlocks || sb.MaxLen-MinJournalBlocks < fc:
		return bad("journal of %d blocks too short (%d fast commit blocks)", sb.MaxLen, fc)
	case sb.HasIncompat(IncompatCsumV2) && sb.HasIncompat(IncompatCsumV3):
		return bad("both checksum v2 and v3")
	case sb.HasCsumV2or3() && sb.HasCompat(CompatChecksum):
		return bad("both checksum v1 and v2/v3")
	case sb.HasCsumV2or3() && sb.ChecksumType != ChecksumCRC32C:
		return bad("unknown checksum type %d", sb.ChecksumType)
	case sb.Start != 0 && sb.Start >= sb.LogEnd():
		return bad("log start %d inside the fast commit area", sb.Start)
	}
	return nil
}

// SuperblockChecksum computes the checksum of the raw journal superblock b:
// crc32c seeded with ~0 over its 1024 bytes with s_checksum taken as zero
// (kernel: jbd2_superblock_csum).
func SuperblockChecksum(b []byte) uint32 {
	var zero [4]byte
	c := csum.CRC32C(^uint32(0), b[:sbChecksumOffset])
	c = csum.CRC32C(c, zero[:])
	return csum.CRC32C(c, b[sbChecksumOffset+4:SuperblockSize])
}

// Encode returns the 1024 on-disk bytes of sb, with the checksum recomputed
// (and stored in sb.Checksum) when the journal has v2/v3 checksums.
func (sb *Superblock) Encode() []byte {
	b := make([]byte, SuperblockSize)
	if _, err := binary.Encode(b, binary.BigEndian, sb); err != nil {
		panic("jbd2: encoding fixed-size superblock: " + err.Error()) // cannot happen: sizes are static
	}
	if sb.HasCsumV2or3() {
		sb.Checksum = SuperblockChecksum(b)
		binary.BigEndian.PutUint32(b[sbChecksumOffset:], sb.Checksum)
	}
	return b
}

// Version returns 1 or 2, the superblock format.
func (sb *Superblock) Version() int {
	if sb.Header.BlockType == BlockSuperV2 {
		return 2
	}
	return 1
}

// HasCompat reports whether all of the compat features f are set (never
// for a version-1 superblock).
func (sb *Superblock) HasCompat(f uint32) bool {
	return sb.Version() >= 2 && sb.FeatureCompat&f == f
}

// HasIncompat reports whether all of the incompat features f are set.
func (sb *Superblock) HasIncompat(f uint32) bool {
	return sb.Version() >= 2 && sb.FeatureIncompat&f == f
}

// HasROCompat reports whether all of the ro_compat features f are set.
func (sb *Superblock) HasROCompat(f uint32) bool {
	return sb.Version() >= 2 && sb.FeatureROCompat&f == f
}

// UnknownIncompat returns the incompat bits outside KnownIncompat: a journal
// with any must not be replayed or written.
func (sb *Superblock) UnknownIncompat() uint32 {
	if sb.Version() < 2 {
		return 0
	}
	return sb.FeatureIncompat &^ KnownIncompat
}

// UnknownROCompat returns the ro_compat bits outside KnownROCompat.
func (sb *Superblock) UnknownROCompat() uint32 {
	if sb.Version() < 2 {
		return 0
	}
	return sb.FeatureROCompat &^ KnownROCompat
}

// UnknownCompat returns the compat bits outside KnownCompat.
func (sb *Superblock) UnknownCompat() uint32 {
	if sb.Version() < 2 {
		return 0
	}
	return sb.FeatureCompat &^ KnownCompat
}

// Is64Bit reports whether block tags and revoke records carry 64-bit block
// numbers.
func (sb *Superblock) Is64Bit() bool { return sb.HasIncompat(Incompat64Bit) }

// HasCsumV2or3 reports per-block crc32c checksums (v2 or v3).
func (sb *Superblock) HasCsumV2or3() bool {
	return sb.Version() >= 2 && sb.FeatureIncompat&(IncompatCsumV2|IncompatCsumV3) != 0
}

// Seed returns the seed of the v2/v3 block checksums: crc32c(~0, uuid)
// (kernel: j_csum_seed).
func (sb *Superblock) Seed() uint32 { return csum.CRC32C(^uint32(0), sb.UUID[:]) }

// TagBytes returns the size of one descriptor block tag, not counting the
// UUID that may follow it (kernel: journal_tag_bytes): 16 with csum v3,
// else 8 plus 4 with 64bit, plus 2 with csum v2.
func (sb *Superblock) TagBytes() int {
	if sb.HasIncompat(IncompatCsumV3) {
		return 16
	}
	n := 8
	if sb.HasIncompat(IncompatCsumV2) {
		n += 2
	}
	if sb.Is64Bit() {
		n += 4
	}
	return n
}

// tail returns the size of the checksum tail at the end of descriptor and
// revoke blocks: 4 with v2/v3 checksums, else 0.
func (sb *Superblock) tail() int {
	if sb.HasCsumV2or3() {
		return tailSize
	}
	return 0
}

// FastCommitBlocks returns the size of the fast commit area at the end of
// the journal: 0 without the fast commit feature, else s_num_fc_blks or the
// default 256 (kernel: jbd2_journal_get_num_fc_blks).
func (sb *Superblock) FastCommitBlocks() uint32 {
	if !sb.HasIncompat(IncompatFastCommit) {
		return 0
	}
	if sb.NumFCBlocks == 0 {
		return DefaultFCBlocks
	}
	return sb.NumFCBlocks
}

// LogEnd returns the end (exclusive) of the circular log area [First,
// LogEnd) (kernel: j_last).
func (sb *Superblock) LogEnd() uint32 {
	return sb.MaxLen - min(sb.FastCommitBlocks(), sb.MaxLen)
}

// FastCommitArea returns the blocks [first, end) holding fast commits.
// As in the kernel (j_fc_first = j_last + 1) the block at LogEnd belongs
// to neither area. The range is empty without fast commits.
func (sb *Superblock) FastCommitArea() (first, end uint32) {
	if sb.FastCommitBlocks() == 0 {
		return sb.MaxLen, sb.MaxLen
	}
	return min(sb.LogEnd()+1, sb.MaxLen), sb.MaxLen
}

// NextLogBlock returns the log block after b, wrapping from LogEnd back to
// First (kernel: wrap()).
func (sb *Superblock) NextLogBlock(b uint32) uint32 {
	b++
	if b >= sb.LogEnd() {
		b = sb.First + (b - sb.LogEnd())
	}
	return b
}

// UserUUIDs returns the UUIDs of the filesystems sharing the journal (an
// external journal's s_users), at most 48.
func (sb *Superblock) UserUUIDs() [][16]byte {
	n := min(sb.NrUsers, MaxUsers)
	out := make([][16]byte, n)
	for i := range out {
		copy(out[i][:], sb.Users[16*i:])
	}
	return out
}

// featureNames are the names dumpe2fs prints (lib/e2p/feature.c); bits it
// has no name for, fast commit among them, print as FEATURE_<C|I|R><bit>.
var featureNames = [3]map[uint32]string{
	{CompatChecksum: "journal_checksum"},
	{
		IncompatRevoke:      "journal_incompat_revoke",
		Incompat64Bit:       "journal_64bit",
		IncompatAsyncCommit: "journal_async_commit",
		IncompatCsumV2:      "journal_checksum_v2",
		IncompatCsumV3:      "journal_checksum_v3",
	},
	{},
}

// FeatureNames lists the journal features the way dumpe2fs prints its
// "Journal features" line: compat, incompat, then ro_compat bits, each in
// bit order. The words are listed even for a version-1 superblock, as
// dumpe2fs does.
func (sb *Superblock) FeatureNames() []string {
	var names []string
	for kind, word := range [3]uint32{sb.FeatureCompat, sb.FeatureIncompat, sb.FeatureROCompat} {
		for i := range 32 {
			bit := uint32(1) << i
			if word&bit == 0 {
				continue
			}
			if n, ok := featureNames[kind][bit]; ok {
				names = append(names, n)
			} else {
				names = append(names, "FEATURE_"+string("CIR"[kind])+itoa(i))
			}
		}
	}
	return names
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return string(rune('0'+i/10)) + string(rune('0'+i%10))
}

// SeqAfter reports whether transaction ID a comes after b, allowing for
// wrap-around (kernel: tid_gt).
func SeqAfter(a, b uint32) bool { return int32(a-b) > 0 }
