// Package xattr encodes and decodes ext4 extended attributes: the in-inode
// area after i_extra_isize (4-byte magic, then entries whose values are
// offset from the first entry), the external xattr block (32-byte header,
// entries, values offset from the block start), entry and block hashes, the
// block checksum, attribute names as (index, suffix) pairs, and the POSIX ACL
// formats (ext4's compact on-disk one and the VFS xattr one getfattr shows).
//
// It is pure: no I/O, no state, safe for concurrent use. Values stored in an
// EA inode (ea_inode feature) are reported by inode number, never read.
//
// Invariants kept by the decoders, whatever the input bytes: they never
// panic or read outside the given slice; entries are checked like the
// kernel's check_xattrs (entry headers and names inside the area and ended
// by a 4-byte zero, names without NUL, values inside the area and after the
// entry table, sizes at most 16 MiB, EA inode references only with the
// feature); decoded names and values are copies.
package xattr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// On-disk constants (kernel: fs/ext4/xattr.h).
const (
	Magic       = 0xEA020000 // h_magic of blocks and the in-inode area
	HeaderSize  = 32         // sizeof(struct ext4_xattr_header)
	EntrySize   = 16         // sizeof(struct ext4_xattr_entry) without the name
	IBodyHeader = 4          // sizeof(struct ext4_xattr_ibody_header)
	SizeMax     = 1 << 24    // EXT4_XATTR_SIZE_MAX: the largest value
	goodOldSize = 128        // EXT4_GOOD_OLD_INODE_SIZE
	rootIno     = 2
)

// ErrNoSpace reports attributes that do not fit in the area or block.
var ErrNoSpace = errors.New("xattr: attributes do not fit")

// Entry is one extended attribute.
type Entry struct {
	Index     uint8  // name index: IndexUser, IndexTrusted, ...
	Name      []byte // the name after the index's prefix (may be empty, e.g. for ACLs)
	Value     []byte // the value; nil when it lives in an EA inode
	ValueInum uint32 // ea_inode: the inode holding the value, else 0
	ValueSize uint32 // e_value_size (len(Value) unless ValueInum ≠ 0)
	// Hash is e_hash as stored. Encoders compute it for values they store,
	// but for EA-inode values take it as given (see HashEntryEAInode).
	Hash uint32
}

// FullName returns the attribute's name as the VFS shows it, or "" and
// false for an unknown index.
func (e Entry) FullName() (string, bool) { return FullName(e.Index, e.Name) }

// Options are the filesystem facts the decoders check against.
type Options struct {
	EAInode     bool   // incompat ea_inode: entries may reference EA inodes
	InodesCount uint32 // s_inodes_count bounds e_value_inum; 0 skips
	FirstIno    uint32 // s_first_ino (0 means 11): EA inodes are not reserved inodes
}

// Header is the decoded header of an xattr block.
type Header struct {
	Magic    uint32
	RefCount uint32 // h_refcount: inodes sharing the block
	Blocks   uint32 // h_blocks, always 1
	Hash     uint32 // h_hash (see BlockHash)
	Checksum uint32 // h_checksum (see BlockChecksum)
}

// xattrLen is the space an entry with a name of n bytes takes
// (EXT4_XATTR_LEN).
func xattrLen(n int) int { return (n + EntrySize + 3) &^ 3 }

// valueLen is the space a value of n bytes takes (EXT4_XATTR_SIZE).
func valueLen(n int) int { return (n + 3) &^ 3 }

// decodeEntries walks the entry table at b[first:] (values offset from
// b[valueBase:]) like the kernel's check_xattrs and returns copies.
func decodeEntries(b []byte, first, valueBase int, what string, opt Options) ([]Entry, error) {
	end := len(b)
	// Pass 1: the entry table must end in a 4-byte zero inside the area.
	var offs []int
	e := first
	for {
		if e+4 > end {
			return nil, fserr.Corrupt(what, "entry table at %d runs past the end (%d) without a terminator", e, end)
		}
		if binary.LittleEndian.Uint32(b[e:]) == 0 {
			break
		}
		next := e + xattrLen(int(b[e]))
		if next+4 > end {
			return nil, fserr.Corrupt(what, "entry name at %d out of bounds", e)
		}
		name := b[e+EntrySize : e+EntrySize+int(b[e])]
		if bytes.IndexByte(name, 0) >= 0 {
			return nil, fserr.Corrupt(what, "entry at %d: NUL in name", e)
		}
		offs = append(offs, e)
		e = next
	}
	tableEnd := e + 4 // values must not overlap the terminator
	// Pass 2: the values.
	out := make([]Entry, 0, len(offs))
	for _, e := range offs {
		x := Entry{
			Index:     b[e+1],
			Name:      bytes.Clone(b[e+EntrySize : e+EntrySize+int(b[e])]),
			ValueInum: binary.LittleEndian.Uint32(b[e+4:]),
			ValueSize: binary.LittleEndian.Uint32(b[e+8:]),
			Hash:      binary.LittleEndian.Uint32(b[e+12:]),
		}
		if x.Name == nil {
			x.Name = []byte{}
		}
		vo := int(binary.LittleEndian.Uint16(b[e+2:]))
		size := x.ValueSize
		switch {
		case x.ValueInum != 0 && !opt.EAInode:
			return nil, fserr.Corrupt(what, "entry at %d: ea_inode %d without the ea_inode feature", e, x.ValueInum)
		case x.ValueInum != 0 && !validEAIno(x.ValueInum, opt):
			return nil, fserr.Corrupt(what, "entry at %d: invalid ea_inode %d", e, x.ValueInum)
		case x.ValueInum != 0 && size == 0:
			return nil, fserr.Corrupt(what, "entry at %d: ea_inode %d with size 0", e, x.ValueInum)
		case size > SizeMax:
			return nil, fserr.Corrupt(what, "entry at %d: value size %d too large", e, size)
		}
		if x.ValueInum == 0 {
			if size != 0 {
				start := valueBase + vo
				if vo > end-valueBase {
					return nil, fserr.Corrupt(what, "entry at %d: value offset %d out of bounds", e, vo)
				}
				if start < tableEnd || int64(size) > int64(end-start) || int64(valueLen(int(size))) > int64(end-start) {
					return nil, fserr.Corrupt(what, "entry at %d: value (offset %d, size %d) overlaps the entries or the end", e, vo, size)
				}
				x.Value = bytes.Clone(b[start : start+int(size)])
			} else {
				x.Value = []byte{}
			}
		}
		out = append(out, x)
	}
	return out, nil
}

func validEAIno(ino uint32, opt Options) bool {
	first := opt.FirstIno
	if first == 0 {
		first = 11
	}
	if ino == rootIno || ino < first {
		return false
	}
	return opt.InodesCount == 0 || ino <= opt.InodesCount
}

// DecodeIBody decodes the in-inode xattr area: the bytes of the on-disk
// inode from 128 + i_extra_isize to the inode size. An area without the
// magic holds no attributes (nil, nil), as for the kernel.
func DecodeIBody(area []byte, opt Options) ([]Entry, error) {
	if len(area) < IBodyHeader || binary.LittleEndian.Uint32(area) != Magic {
		return nil, nil
	}
	if len(area) < IBodyHeader+4 {
		return nil, fserr.Corrupt("in-inode xattrs", "area of %d bytes too small", len(area))
	}
	return decodeEntries(area, IBodyHeader, IBodyHeader, "in-inode xattrs", opt)
}

// IBodyArea returns the in-inode xattr area of a raw on-disk inode (all
// inode-size bytes) with the given i_extra_isize, or nil if there is no room
// for one (kernel: EXT4_GOOD_OLD_INODE_SIZE + i_extra_isize + 4 must fit).
func IBodyArea(raw []byte, extraIsize int) ([]byte, error) {
	if extraIsize%4 != 0 || extraIsize < 0 {
		return nil, fserr.Corrupt("inode", "i_extra_isize %d not a multiple of 4", extraIsize)
	}
	start := goodOldSize + extraIsize
	if start+IBodyHeader > len(raw) {
		if start > len(raw) {
			return nil, fserr.Corrupt("inode", "i_extra_isize %d beyond the %d-byte inode", extraIsize, len(raw))
		}
		return nil, nil
	}
	return raw[start:], nil
}

// DecodeInode decodes the in-inode attributes of a raw on-disk inode.
func DecodeInode(raw []byte, extraIsize int, opt Options) ([]Entry, error) {
	area, err := IBodyArea(raw, extraIsize)
	if err != nil || area == nil {
		return nil, err
	}
	return DecodeIBody(area, opt)
}

// DecodeBlock decodes an xattr block (kernel: ext4_xattr_check_block):
// magic, h_blocks 1, then the entries. The checksum is checked by
// VerifyBlockChecksum, which needs the block number and seed.
func DecodeBlock(b []byte, opt Options) (Header, []Entry, error) {
	const what = "xattr block"
	if len(b) < HeaderSize+4 {
		return Header{}, nil, fserr.Corrupt(what, "%d bytes, too small", len(b))
	}
	h := Header{
		Magic:    binary.LittleEndian.Uint32(b),
		RefCount: binary.LittleEndian.Uint32(b[4:]),
		Blocks:   binary.LittleEndian.Uint32(b[8:]),
		Hash:     binary.LittleEndian.Uint32(b[12:]),
		Checksum: binary.LittleEndian.Uint32(b[16:]),
	}
	if h.Magic != Magic || h.Blocks != 1 {
		return h, nil, fserr.Corrupt(what, "invalid header (magic %#x, blocks %d)", h.Magic, h.Blocks)
	}
	es, err := decodeEntries(b, HeaderSize, 0, what, opt)
	return h, es, err
}

// BlockChecksum computes an xattr block's checksum: raw crc32c seeded with
// the filesystem checksum seed over the little-endian 64-bit block number,
// then the block with h_checksum as zero (kernel: ext4_xattr_block_csum).
func BlockChecksum(b []byte, blockNr uint64, seed uint32) uint32 {
	if len(b) < HeaderSize {
		return 0
	}
	var nr [8]byte
	binary.LittleEndian.PutUint64(nr[:], blockNr)
	c := csum.CRC32C(seed, nr[:])
	c = csum.CRC32C(c, b[:16])
	c = csum.CRC32C(c, []byte{0, 0, 0, 0})
	return csum.CRC32C(c, b[20:])
}

// VerifyBlockChecksum checks h_checksum of the block stored at blockNr.
func VerifyBlockChecksum(b []byte, blockNr uint64, seed uint32) error {
	if len(b) < HeaderSize {
		return fserr.Corrupt("xattr block", "%d bytes, too small", len(b))
	}
	stored := binary.LittleEndian.Uint32(b[16:])
	if c := BlockChecksum(b, blockNr, seed); c != stored {
		return &fserr.ChecksumError{What: "xattr block", Block: int64(blockNr), Stored: stored, Computed: c}
	}
	return nil
}

// SetBlockChecksum stores h_checksum for the block living at blockNr; the
// block number is part of the checksum, so a moved block needs a new one.
func SetBlockChecksum(b []byte, blockNr uint64, seed uint32) {
	if len(b) >= HeaderSize {
		binary.LittleEndian.PutUint32(b[16:], BlockChecksum(b, blockNr, seed))
	}
}

// Hash shifts (kernel: NAME_HASH_SHIFT, VALUE_HASH_SHIFT, BLOCK_HASH_SHIFT).
const (
	nameHashShift  = 5
	valueHashShift = 16
	blockHashShift = 16
)

func hashName(name []byte, signed bool) uint32 {
	var h uint32
	for _, c := range name {
		v := uint32(c)
		if signed {
			v = uint32(int32(int8(c)))
		}
		h = h<<nameHashShift ^ h>>(32-nameHashShift) ^ v
	}
	return h
}

func hashWords(h uint32, value []byte) uint32 {
	for i := 0; i < len(value); i += 4 {
		var w [4]byte // the value's zero padding to 4 bytes
		copy(w[:], value[i:])
		h = h<<valueHashShift ^ h>>(32-valueHashShift) ^ binary.LittleEndian.Uint32(w[:])
	}
	return h
}

// HashEntry is the entry hash of a name (the suffix) and a value stored in
// the block, with name bytes unsigned (kernel: ext4_xattr_hash_entry).
func HashEntry(name, value []byte) uint32 { return hashWords(hashName(name, false), value) }

// HashEntrySigned is HashEntry with name bytes as signed chars, as older
// kernels and e2fsprogs computed it on x86; both are valid on disk (kernel:
// ext4_xattr_hash_entry_signed).
func HashEntrySigned(name, value []byte) uint32 { return hashWords(hashName(name, true), value) }

// HashEntryEAInode is the entry hash of a value stored in an EA inode: the
// name hash mixed with the EA inode's value hash (its crc32c, kept in the EA
// inode's i_atime) instead of the value.
func HashEntryEAInode(name []byte, valueHash uint32) uint32 {
	var w [4]byte
	binary.LittleEndian.PutUint32(w[:], valueHash)
	return hashWords(hashName(name, false), w[:])
}

// EntryHashOK reports whether a stored e_hash matches the entry's name and
// value in either variant. EA-inode entries, whose hash needs the EA inode,
// and zero hashes (in-inode entries) are not judged and report true.
func EntryHashOK(e Entry) bool {
	if e.ValueInum != 0 || e.Hash == 0 {
		return true
	}
	return e.Hash == HashEntry(e.Name, e.Value) || e.Hash == HashEntrySigned(e.Name, e.Value)
}

// BlockHash is h_hash for entries in block order: their e_hash values mixed,
// or 0 if any is 0 (kernel: ext4_xattr_rehash).
func BlockHash(es []Entry) uint32 {
	var h uint32
	for _, e := range es {
		if e.Hash == 0 {
			return 0
		}
		h = h<<blockHashShift ^ h>>(32-blockHashShift) ^ e.Hash
	}
	return h
}

// Less orders entries as blocks keep them: by index, name length, then name
// bytes (kernel: ext4_xattr_find_entry on a sorted list; e2fsprogs:
// xattr_find_position).
func Less(a, b Entry) bool { return compare(a, b) < 0 }

func compare(a, b Entry) int {
	if a.Index != b.Index {
		return int(a.Index) - int(b.Index)
	}
	if len(a.Name) != len(b.Name) {
		return len(a.Name) - len(b.Name)
	}
	return bytes.Compare(a.Name, b.Name)
}

// Space returns the bytes es take in an area: entry headers, names and
// padded values (EA-inode values take none).
func Space(es []Entry) int {
	n := 0
	for _, e := range es {
		n += xattrLen(len(e.Name))
		if e.ValueInum == 0 {
			n += valueLen(len(e.Value))
		}
	}
	return n
}

// checkEntry refuses an entry that cannot be stored. The API validates
// names and values before they get here, so a bad entry is one read from a
// corrupt area or block and kept when it is written back: reported as a
// corruption.
func checkEntry(e Entry) error {
	switch {
	case e.Index == 0:
		// With an empty name and offset 0 it would read as the terminator.
		return fserr.Corrupt("xattr entry", "name index 0")
	case len(e.Name) > 255:
		return fserr.Corrupt("xattr entry", "name of %d bytes", len(e.Name))
	case bytes.IndexByte(e.Name, 0) >= 0:
		return fserr.Corrupt("xattr entry", "NUL in name")
	case e.ValueInum == 0 && len(e.Value) > SizeMax:
		return fserr.Corrupt("xattr entry", "value of %d bytes", len(e.Value))
	case e.ValueInum != 0 && (e.ValueSize == 0 || e.ValueSize > SizeMax):
		return fserr.Corrupt("xattr entry", "EA inode value size %d", e.ValueSize)
	}
	return nil
}

// encodeEntries writes es in order at b[first:], their values from the end
// of b downwards in the same order (as e2fsprogs and the kernel place them),
// value offsets relative to b[valueBase:]. With hash it computes e_hash for
// stored values; EA-inode entries keep their given Hash. It returns the
// entries as written.
func encodeEntries(b []byte, first, valueBase int, es []Entry, hash bool) ([]Entry, error) {
	if first+Space(es)+4 > len(b) {
		return nil, ErrNoSpace
	}
	out := make([]Entry, len(es))
	e, vend := first, len(b)
	for i, x := range es {
		if err := checkEntry(x); err != nil {
			return nil, err
		}
		b[e] = byte(len(x.Name))
		b[e+1] = x.Index
		copy(b[e+EntrySize:], x.Name)
		if x.ValueInum != 0 {
			binary.LittleEndian.PutUint32(b[e+4:], x.ValueInum)
			binary.LittleEndian.PutUint32(b[e+8:], x.ValueSize)
			x.Value = nil
		} else {
			vend -= valueLen(len(x.Value))
			copy(b[vend:], x.Value)
			if vend-valueBase > 0xFFFF {
				return nil, fmt.Errorf("xattr: value offset %d beyond 16 bits", vend-valueBase)
			}
			binary.LittleEndian.PutUint16(b[e+2:], uint16(vend-valueBase))
			binary.LittleEndian.PutUint32(b[e+8:], uint32(len(x.Value)))
			x.ValueSize = uint32(len(x.Value))
			x.Hash = 0
			if hash {
				x.Hash = HashEntry(x.Name, x.Value)
			}
		}
		binary.LittleEndian.PutUint32(b[e+12:], x.Hash)
		out[i] = x
		e += xattrLen(len(x.Name))
	}
	return out, nil
}

// EncodeIBody builds an in-inode xattr area of size bytes holding es in the
// given order (the kernel and e2fsprogs do not sort in-inode entries). Stored
// values get e_hash 0, as both write them; EA-inode entries keep their Hash.
// No entries give an all-zero area without the magic, as the kernel leaves
// it. It returns ErrNoSpace if they do not fit.
func EncodeIBody(size int, es []Entry) ([]byte, error) {
	b := make([]byte, size)
	if len(es) == 0 {
		return b, nil
	}
	if size < IBodyHeader+4 {
		return nil, ErrNoSpace
	}
	binary.LittleEndian.PutUint32(b, Magic)
	if _, err := encodeEntries(b, IBodyHeader, IBodyHeader, es, false); err != nil {
		return nil, err
	}
	return b, nil
}

// BlockParams are what an xattr block's header and checksum need besides
// its entries.
type BlockParams struct {
	Size     int    // block size in bytes
	RefCount uint32 // h_refcount; 0 means 1
	Csum     bool   // metadata_csum: fill in h_checksum
	Seed     uint32 // the filesystem checksum seed
	BlockNr  uint64 // the block's physical number (part of the checksum)
}

// EncodeBlock builds an xattr block holding es sorted as blocks keep them
// (see Less), with entry hashes, the block hash and, with p.Csum, the
// checksum. It returns ErrNoSpace if they do not fit.
func EncodeBlock(es []Entry, p BlockParams) ([]byte, error) {
	if p.Size < HeaderSize+4 {
		return nil, fmt.Errorf("xattr: block size %d", p.Size)
	}
	sorted := slices.Clone(es)
	slices.SortStableFunc(sorted, compare)
	b := make([]byte, p.Size)
	written, err := encodeEntries(b, HeaderSize, 0, sorted, true)
	if err != nil {
		return nil, err
	}
	ref := p.RefCount
	if ref == 0 {
		ref = 1
	}
	binary.LittleEndian.PutUint32(b, Magic)
	binary.LittleEndian.PutUint32(b[4:], ref)
	binary.LittleEndian.PutUint32(b[8:], 1)
	binary.LittleEndian.PutUint32(b[12:], BlockHash(written))
	if p.Csum {
		SetBlockChecksum(b, p.BlockNr, p.Seed)
	}
	return b, nil
}

// IBodyFree is the room left for attributes in an in-inode area of size
// bytes already holding es (after the magic and the terminator).
func IBodyFree(size int, es []Entry) int {
	return size - IBodyHeader - 4 - Space(es)
}
