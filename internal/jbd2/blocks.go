package jbd2

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Block tag flags (t_flags).
const (
	FlagEscape   uint16 = 1 // the logged block began with Magic, zeroed in the log
	FlagSameUUID uint16 = 2 // no UUID follows this tag
	FlagDeleted  uint16 = 4 // block deleted by this transaction (unused)
	FlagLastTag  uint16 = 8 // last tag of the descriptor
)

const uuidSize = 16

// Tag describes one filesystem block logged in the journal: the data follows
// the descriptor in log order, one journal block per tag.
type Tag struct {
	Block    uint64 // filesystem block; the high half only with 64bit
	Flags    uint16 // Flag* bits
	Checksum uint32 // crc32c of the logged block; only the low 16 bits with csum v2
	UUID     [16]byte
}

// HasUUID reports whether a UUID follows the tag on disk.
func (t *Tag) HasUUID() bool { return t.Flags&FlagSameUUID == 0 }

// Descriptor is a descriptor block: a header followed by tags.
type Descriptor struct {
	Header Header
	Tags   []Tag
}

// DecodeDescriptor decodes the descriptor block b (one journal block) of
// the journal sb. Tags are read up to the one with FlagLastTag or until
// the next tag would not fit before the checksum tail, like the kernel's
// count_tags. A UUID that would run past the tag area is left zero. The
// tail checksum is not checked: see VerifyBlockTail.
func DecodeDescriptor(sb *Superblock, b []byte) (*Descriptor, error) {
	h, err := decodeBlock(sb, b, BlockDescriptor, "journal descriptor block")
	if err != nil {
		return nil, err
	}
	d := &Descriptor{Header: h}
	tb, end := sb.TagBytes(), len(b)-sb.tail()
	for off := HeaderSize; off+tb <= end; {
		t := decodeTag(sb, b[off:off+tb])
		off += tb
		if t.HasUUID() {
			if off+uuidSize <= end {
				copy(t.UUID[:], b[off:])
			}
			off += uuidSize
		}
		d.Tags = append(d.Tags, t)
		if t.Flags&FlagLastTag != 0 {
			break
		}
	}
	return d, nil
}

func decodeBlock(sb *Superblock, b []byte, typ uint32, what string) (Header, error) {
	if len(b) != int(sb.BlockSize) {
		return Header{}, fserr.Corrupt(what, "%d bytes, journal block size %d", len(b), sb.BlockSize)
	}
	h, err := DecodeHeader(b)
	if err != nil {
		return h, fserr.Corrupt(what, "no magic (%#08x)", h.Magic)
	}
	if h.BlockType != typ {
		return h, fserr.Corrupt(what, "block type %d, want %d", h.BlockType, typ)
	}
	return h, nil
}

// decodeTag reads a tag of sb.TagBytes() bytes. The kernel reads the flags
// as the 16 bits at offset 6 in every format: for tag3 they are the low
// half of the 32-bit t_flags.
func decodeTag(sb *Superblock, b []byte) Tag {
	be := binary.BigEndian
	t := Tag{Block: uint64(be.Uint32(b[0:])), Flags: be.Uint16(b[6:])}
	if sb.HasIncompat(IncompatCsumV3) {
		t.Checksum = be.Uint32(b[12:])
	} else {
		t.Checksum = uint32(be.Uint16(b[4:]))
	}
	if sb.Is64Bit() {
		t.Block |= uint64(be.Uint32(b[8:])) << 32
	}
	return t
}

func encodeTag(sb *Superblock, b []byte, t *Tag) {
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(t.Block))
	if sb.HasIncompat(IncompatCsumV3) {
		be.PutUint32(b[4:], uint32(t.Flags))
		be.PutUint32(b[12:], t.Checksum)
	} else {
		be.PutUint16(b[4:], uint16(t.Checksum))
		be.PutUint16(b[6:], t.Flags)
	}
	if sb.Is64Bit() {
		be.PutUint32(b[8:], uint32(t.Block>>32))
	}
}

// DescriptorSpace returns how many bytes of a descriptor block tags may use.
func DescriptorSpace(sb *Superblock) int { return int(sb.BlockSize) - HeaderSize - sb.tail() }

// EncodeDescriptor returns a descriptor block for transaction seq holding
// tags, with the tail checksum set when the journal has v2/v3 checksums.
// Tags are written as given: the caller sets FlagSameUUID (all but the
// first, normally) and FlagLastTag (the last). It fails if the tags do not
// fit (see DescriptorSpace).
func EncodeDescriptor(sb *Superblock, seq uint32, tags []Tag) ([]byte, error) {
	b := make([]byte, sb.BlockSize)
	Header{Magic, BlockDescriptor, seq}.put(b)
	tb, end := sb.TagBytes(), len(b)-sb.tail()
	off := HeaderSize
	for i := range tags {
		if tags[i].Block>>32 != 0 && !sb.Is64Bit() {
			return nil, fmt.Errorf("jbd2: logged block %d needs the 64bit feature", tags[i].Block)
		}
		n := tb
		if tags[i].HasUUID() {
			n += uuidSize
		}
		if off+n > end {
			return nil, fmt.Errorf("jbd2: %d tags do not fit in a descriptor block", len(tags))
		}
		encodeTag(sb, b[off:], &tags[i])
		if tags[i].HasUUID() {
			copy(b[off+tb:], tags[i].UUID[:])
		}
		off += n
	}
	SetBlockTail(sb, b)
	return b, nil
}

// BlockTailChecksum computes the checksum of a descriptor or revoke block b:
// crc32c seeded with the journal seed over the whole block with the 4-byte
// tail taken as zero (kernel: jbd2_descriptor_block_csum_set).
func BlockTailChecksum(seed uint32, b []byte) uint32 {
	if len(b) < tailSize {
		return csum.CRC32C(seed, b)
	}
	var zero [tailSize]byte
	return csum.CRC32C(csum.CRC32C(seed, b[:len(b)-tailSize]), zero[:])
}

// SetBlockTail stores the tail checksum of a descriptor or revoke block,
// when the journal has v2/v3 checksums.
func SetBlockTail(sb *Superblock, b []byte) {
	if sb.HasCsumV2or3() && len(b) >= tailSize {
		binary.BigEndian.PutUint32(b[len(b)-tailSize:], BlockTailChecksum(sb.Seed(), b))
	}
}

// VerifyBlockTail checks the tail checksum of a descriptor or revoke block
// (kernel: jbd2_descriptor_block_csum_verify); without v2/v3 checksums
// there is none.
func VerifyBlockTail(sb *Superblock, b []byte) error {
	if !sb.HasCsumV2or3() || len(b) < tailSize {
		return nil
	}
	stored := binary.BigEndian.Uint32(b[len(b)-tailSize:])
	if c := BlockTailChecksum(sb.Seed(), b); c != stored {
		return &fserr.ChecksumError{What: blockName(b), Block: -1, Stored: stored, Computed: c}
	}
	return nil
}

func blockName(b []byte) string {
	if len(b) >= HeaderSize && binary.BigEndian.Uint32(b[4:]) == BlockRevoke {
		return "journal revoke block"
	}
	return "journal descriptor block"
}

// TagChecksum computes the checksum of a logged block as the tag stores it:
// crc32c seeded with the journal seed over the big-endian transaction ID,
// then the block as it is in the journal (still escaped) (kernel:
// jbd2_block_tag_csum_set).
func TagChecksum(seed, seq uint32, data []byte) uint32 {
	var be [4]byte
	binary.BigEndian.PutUint32(be[:], seq)
	return csum.CRC32C(csum.CRC32C(seed, be[:]), data)
}

// SetTagChecksum stores the checksum of data in t, when the journal has
// v2/v3 checksums (only 16 bits of it with v2).
func SetTagChecksum(sb *Superblock, t *Tag, seq uint32, data []byte) {
	switch {
	case sb.HasIncompat(IncompatCsumV3):
		t.Checksum = TagChecksum(sb.Seed(), seq, data)
	case sb.HasIncompat(IncompatCsumV2):
		t.Checksum = TagChecksum(sb.Seed(), seq, data) & 0xFFFF
	}
}

// VerifyTag checks the logged block data of transaction seq against its
// tag (kernel: jbd2_block_tag_csum_verify).
func VerifyTag(sb *Superblock, t *Tag, seq uint32, data []byte) error {
	if !sb.HasCsumV2or3() {
		return nil
	}
	c, stored := TagChecksum(sb.Seed(), seq, data), t.Checksum
	if !sb.HasIncompat(IncompatCsumV3) {
		c, stored = c&0xFFFF, stored&0xFFFF
	}
	if c != stored {
		return &fserr.ChecksumError{What: "journal data block", Block: int64(t.Block), Stored: stored, Computed: c}
	}
	return nil
}

// Escape prepares a block for logging: if it starts with Magic, the copy in
// the journal must not, so Escape zeroes those 4 bytes and reports true
// (the tag then gets FlagEscape).
func Escape(data []byte) bool {
	if len(data) < 4 || binary.BigEndian.Uint32(data) != Magic {
		return false
	}
	clear(data[:4])
	return true
}

// Unescape restores the magic of a block logged with FlagEscape.
func Unescape(data []byte) {
	if len(data) >= 4 {
		binary.BigEndian.PutUint32(data, Magic)
	}
}

// Commit is a commit block (struct commit_header).
type Commit struct {
	Header       Header
	ChecksumType uint8 // v1 checksums: ChecksumCRC32
	ChecksumSize uint8 // v1 checksums: 4
	Padding      [2]byte
	Checksums    [8]uint32 // [0]: v1 transaction crc32 or v2/v3 block crc32c
	CommitSec    uint64    // commit time
	CommitNsec   uint32
}

const commitSize = 60

// DecodeCommit decodes the commit block b of the journal sb. Its checksum is
// not checked: see VerifyCommit.
func DecodeCommit(sb *Superblock, b []byte) (*Commit, error) {
	h, err := decodeBlock(sb, b, BlockCommit, "journal commit block")
	if err != nil {
		return nil, err
	}
	c := &Commit{Header: h, ChecksumType: b[12], ChecksumSize: b[13], Padding: [2]byte{b[14], b[15]}}
	be := binary.BigEndian
	for i := range c.Checksums {
		c.Checksums[i] = be.Uint32(b[16+4*i:])
	}
	c.CommitSec = be.Uint64(b[48:])
	c.CommitNsec = be.Uint32(b[56:])
	return c, nil
}

// EncodeCommit returns the commit block for c. With v2/v3 checksums the
// block checksum is computed into Checksums[0] (also stored in c), after
// clearing the type and size as the kernel does.
func EncodeCommit(sb *Superblock, c *Commit) []byte {
	b := make([]byte, max(sb.BlockSize, commitSize))
	if sb.HasCsumV2or3() {
		c.ChecksumType, c.ChecksumSize, c.Checksums[0] = 0, 0, 0
	}
	c.Header.put(b)
	b[12], b[13], b[14], b[15] = c.ChecksumType, c.ChecksumSize, c.Padding[0], c.Padding[1]
	be := binary.BigEndian
	for i, v := range c.Checksums {
		be.PutUint32(b[16+4*i:], v)
	}
	be.PutUint64(b[48:], c.CommitSec)
	be.PutUint32(b[56:], c.CommitNsec)
	if sb.HasCsumV2or3() {
		c.Checksums[0] = CommitChecksum(sb.Seed(), b)
		be.PutUint32(b[16:], c.Checksums[0])
	}
	return b
}

// CommitChecksum computes the v2/v3 checksum of a commit block b: crc32c
// seeded with the journal seed over the whole block with h_chksum[0] taken
// as zero (kernel: jbd2_commit_block_csum_set).
func CommitChecksum(seed uint32, b []byte) uint32 {
	if len(b) < 20 {
		return csum.CRC32C(seed, b)
	}
	var zero [4]byte
	c := csum.CRC32C(seed, b[:16])
	c = csum.CRC32C(c, zero[:])
	return csum.CRC32C(c, b[20:])
}

// VerifyCommit checks the v2/v3 checksum of the commit block b (kernel:
// jbd2_commit_block_csum_verify). The v1 transaction checksum needs the
// whole transaction: see TransactionCRC32.
func VerifyCommit(sb *Superblock, b []byte) error {
	if !sb.HasCsumV2or3() || len(b) < 20 {
		return nil
	}
	stored := binary.BigEndian.Uint32(b[16:])
	if c := CommitChecksum(sb.Seed(), b); c != stored {
		return &fserr.ChecksumError{What: "journal commit block", Block: -1, Stored: stored, Computed: c}
	}
	return nil
}

// TransactionCRC32 continues the v1 (journal_checksum) transaction checksum
// over one more descriptor or data block, in log order. Start from ^0; the
// commit block stores the result in Checksums[0] with ChecksumType
// ChecksumCRC32 (kernel: jbd2_checksum_data, crc32_be).
func TransactionCRC32(crc uint32, b []byte) uint32 { return crc32BE(crc, b) }

// Revoke is a revoke block: filesystem blocks whose earlier logged copies
// must not be replayed.
type Revoke struct {
	Header Header
	Count  uint32   // r_count: bytes used, header included
	Blocks []uint64 // revoked filesystem blocks
}

const revokeHeaderSize = HeaderSize + 4

// DecodeRevoke decodes the revoke block b of the journal sb (kernel:
// scan_revoke_records): records of 4 bytes, or 8 with 64bit, fill bytes
// 16..r_count, which must leave room for the checksum tail. The tail
// checksum is not checked: see VerifyBlockTail.
func DecodeRevoke(sb *Superblock, b []byte) (*Revoke, error) {
	h, err := decodeBlock(sb, b, BlockRevoke, "journal revoke block")
	if err != nil {
		return nil, err
	}
	r := &Revoke{Header: h, Count: binary.BigEndian.Uint32(b[HeaderSize:])}
	if int64(r.Count) > int64(len(b)-sb.tail()) {
		return nil, fserr.Corrupt("journal revoke block", "count %d beyond %d usable bytes", r.Count, len(b)-sb.tail())
	}
	rl := revokeRecordSize(sb)
	for off := revokeHeaderSize; off+rl <= int(r.Count); off += rl {
		if rl == 8 {
			r.Blocks = append(r.Blocks, binary.BigEndian.Uint64(b[off:]))
		} else {
			r.Blocks = append(r.Blocks, uint64(binary.BigEndian.Uint32(b[off:])))
		}
	}
	return r, nil
}

func revokeRecordSize(sb *Superblock) int {
	if sb.Is64Bit() {
		return 8
	}
	return 4
}

// RevokeCapacity returns how many records one revoke block holds.
func RevokeCapacity(sb *Superblock) int {
	return (int(sb.BlockSize) - revokeHeaderSize - sb.tail()) / revokeRecordSize(sb)
}

// EncodeRevoke returns a revoke block of transaction seq listing blocks,
// with r_count and the tail checksum set. It fails if blocks exceed
// RevokeCapacity or, without 64bit, 32 bits.
func EncodeRevoke(sb *Superblock, seq uint32, blocks []uint64) ([]byte, error) {
	if len(blocks) > RevokeCapacity(sb) {
		return nil, fmt.Errorf("jbd2: %d revoke records, room for %d", len(blocks), RevokeCapacity(sb))
	}
	b := make([]byte, sb.BlockSize)
	Header{Magic, BlockRevoke, seq}.put(b)
	rl := revokeRecordSize(sb)
	off := revokeHeaderSize
	for _, blk := range blocks {
		if rl == 8 {
			binary.BigEndian.PutUint64(b[off:], blk)
		} else {
			if blk>>32 != 0 {
				return nil, fmt.Errorf("jbd2: revoked block %d needs the 64bit feature", blk)
			}
			binary.BigEndian.PutUint32(b[off:], uint32(blk))
		}
		off += rl
	}
	binary.BigEndian.PutUint32(b[HeaderSize:], uint32(off))
	SetBlockTail(sb, b)
	return b, nil
}

// crc32BE is the kernel's crc32_be: CRC-32 with the 0x04C11DB7 polynomial,
// most significant bit first, no inversion.
func crc32BE(crc uint32, b []byte) uint32 {
	for _, x := range b {
		crc = crc<<8 ^ crc32BETable[byte(crc>>24)^x]
	}
	return crc
}

var crc32BETable = func() (t [256]uint32) {
	for i := range t {
		c := uint32(i) << 24
		for range 8 {
			if c&0x80000000 != 0 {
				c = c<<1 ^ 0x04C11DB7
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()
