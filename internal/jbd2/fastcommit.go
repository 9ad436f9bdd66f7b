package jbd2

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
)

// Fast commit tags (ext4's fast_commit.h: EXT4_FC_TAG_*). Fast-commit
// blocks hold tag-length-value records, little-endian, packed within each
// block (a PAD tag fills a block's end).
const (
	FCTagAddRange uint16 = 1
	FCTagDelRange uint16 = 2
	FCTagCreat    uint16 = 3
	FCTagLink     uint16 = 4
	FCTagUnlink   uint16 = 5
	FCTagInode    uint16 = 6
	FCTagPad      uint16 = 7
	FCTagTail     uint16 = 8
	FCTagHead     uint16 = 9
)

const fcTLSize = 4

// FCTagName names a fast-commit tag as debugfs's logdump does.
func FCTagName(tag uint16) string {
	switch tag {
	case FCTagAddRange:
		return "ADD_RANGE"
	case FCTagDelRange:
		return "DEL_RANGE"
	case FCTagCreat:
		return "CREAT_DENTRY"
	case FCTagLink:
		return "ADD_ENTRY"
	case FCTagUnlink:
		return "DEL_ENTRY"
	case FCTagInode:
		return "INODE"
	case FCTagPad:
		return "PAD"
	case FCTagTail:
		return "TAIL"
	case FCTagHead:
		return "HEAD"
	}
	return fmt.Sprintf("tag %d", tag)
}

// FCTag is one fast-commit record: its tag and value bytes.
type FCTag struct {
	Tag   uint16
	Value []byte
}

// FastCommits is what the fast-commit area holds for one transaction.
type FastCommits struct {
	Tid  uint32  // the transaction the fast commits belong to
	Tags []FCTag // the records a replay would apply: up to the last TAIL whose checksum holds, without HEAD, TAIL and PAD
}

// ScanFastCommits reads the fast-commit area of sb and returns the fast
// commits of transaction expected (the one after the last full commit
// replayed), as the kernel's scan pass does (ext4_fc_replay_scan): a HEAD
// with no unknown features and that transaction ID, then records, each
// group ended by a TAIL of the same ID whose crc32c covers every byte from
// the previous TAIL. Records after the last good TAIL are not committed.
// A HEAD of another transaction means the area is stale: nil, no error.
// A damaged area is an error only where the kernel's scan fails too (a
// TAIL of the right transaction whose checksum fails before any good one).
func ScanFastCommits(sb *Superblock, read ReadLog, expected uint32) (*FastCommits, error) {
	first, end := sb.FastCommitArea()
	if first >= end {
		return nil, nil
	}
	var (
		fc      *FastCommits
		pending []FCTag
		crc     uint32
	)
	for blk := first; blk < end; blk++ {
		b, err := read(blk)
		if err != nil {
			return nil, fmt.Errorf("jbd2: reading fast-commit block %d: %w", blk, err)
		}
		for off := 0; off+fcTLSize <= len(b); {
			tag := binary.LittleEndian.Uint16(b[off:])
			n := int(binary.LittleEndian.Uint16(b[off+2:]))
			if off+fcTLSize+n > len(b) {
				return fc, nil // a record running off its block: the end
			}
			rec := b[off : off+fcTLSize+n]
			val := rec[fcTLSize:]
			off += fcTLSize + n
			switch tag {
			case FCTagHead:
				if fc != nil || len(val) < 8 {
					return fc, nil
				}
				if binary.LittleEndian.Uint32(val[0:]) != 0 || binary.LittleEndian.Uint32(val[4:]) != expected {
					return nil, nil // unknown features, or a stale area
				}
				fc = &FastCommits{Tid: expected}
				crc = csum.CRC32C(0, rec)
			case FCTagTail:
				if fc == nil || len(val) < 8 {
					return fc, nil
				}
				crc = csum.CRC32C(crc, rec[:fcTLSize+4])
				if binary.LittleEndian.Uint32(val[0:]) != expected {
					return fc, nil
				}
				if binary.LittleEndian.Uint32(val[4:]) != crc {
					if len(fc.Tags) == 0 && len(pending) > 0 {
						return nil, fmt.Errorf("jbd2: fast commit of transaction %d fails its checksum", expected)
					}
					return fc, nil
				}
				fc.Tags = append(fc.Tags, pending...)
				pending = nil
				crc = 0
			case FCTagPad:
				if fc == nil {
					return nil, nil
				}
				crc = csum.CRC32C(crc, rec)
			case FCTagAddRange, FCTagDelRange, FCTagCreat, FCTagLink, FCTagUnlink, FCTagInode:
				if fc == nil {
					return nil, nil
				}
				crc = csum.CRC32C(crc, rec)
				pending = append(pending, FCTag{Tag: tag, Value: append([]byte(nil), val...)})
			default:
				return fc, nil // not a record: the end
			}
		}
	}
	return fc, nil
}

// Fast-commit record values (ext4's fast_commit.h).

// FCRange is an ADD_RANGE record: the extent now maps these blocks.
type FCRange struct {
	Ino       uint32
	Logical   uint32
	Len       uint32 // blocks, 1..32768 (written) or 1..32767 (unwritten)
	Start     uint64 // physical block
	Unwritten bool
}

// FCDelRange is a DEL_RANGE record: these blocks are unmapped.
type FCDelRange struct {
	Ino, Logical, Len uint32
}

// FCDentry is a CREAT_DENTRY, ADD_ENTRY or DEL_ENTRY record.
type FCDentry struct {
	Parent, Ino uint32
	Name        []byte
}

// FCInode is an INODE record: the first len(Raw) bytes of the on-disk
// inode (128 plus i_extra_isize).
type FCInode struct {
	Ino uint32
	Raw []byte
}

func fcShort(tag uint16, n int) error {
	return fmt.Errorf("jbd2: fast-commit %s record of %d bytes is too short", FCTagName(tag), n)
}

// DecodeFCRange decodes an ADD_RANGE value (ext4_fc_add_range: inode,
// then an ext4_extent).
func DecodeFCRange(v []byte) (FCRange, error) {
	if len(v) < 16 {
		return FCRange{}, fcShort(FCTagAddRange, len(v))
	}
	le := binary.LittleEndian
	r := FCRange{Ino: le.Uint32(v[0:]), Logical: le.Uint32(v[4:])}
	n := uint32(le.Uint16(v[8:]))
	if n > 32768 {
		r.Unwritten, n = true, n-32768
	}
	r.Len = n
	r.Start = uint64(le.Uint16(v[10:]))<<32 | uint64(le.Uint32(v[12:]))
	if n == 0 {
		return FCRange{}, fmt.Errorf("jbd2: fast-commit ADD_RANGE of inode %d maps no blocks", r.Ino)
	}
	return r, nil
}

// DecodeFCDelRange decodes a DEL_RANGE value.
func DecodeFCDelRange(v []byte) (FCDelRange, error) {
	if len(v) < 12 {
		return FCDelRange{}, fcShort(FCTagDelRange, len(v))
	}
	le := binary.LittleEndian
	return FCDelRange{Ino: le.Uint32(v[0:]), Logical: le.Uint32(v[4:]), Len: le.Uint32(v[8:])}, nil
}

// DecodeFCDentry decodes a dentry record value (ext4_fc_dentry_info).
func DecodeFCDentry(tag uint16, v []byte) (FCDentry, error) {
	if len(v) < 8 {
		return FCDentry{}, fcShort(tag, len(v))
	}
	le := binary.LittleEndian
	return FCDentry{Parent: le.Uint32(v[0:]), Ino: le.Uint32(v[4:]), Name: v[8:]}, nil
}

// DecodeFCInode decodes an INODE record value (ext4_fc_inode).
func DecodeFCInode(v []byte) (FCInode, error) {
	if len(v) < 4+128 {
		return FCInode{}, fcShort(FCTagInode, len(v))
	}
	return FCInode{Ino: binary.LittleEndian.Uint32(v[0:]), Raw: v[4:]}, nil
}
