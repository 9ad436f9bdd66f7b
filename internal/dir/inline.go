package dir

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Inline directory layout (kernel: fs/ext4/inline.c).
const (
	InlineIBlockSize = 60 // EXT4_MIN_INLINE_DATA_SIZE: i_block
	InlineDotDotSize = 4  // EXT4_INLINE_DOTDOT_SIZE: the parent inode at the start of i_block
)

// Inline is a decoded inline-data directory. "." and ".." have no dirents:
// "." is the directory's own inode and ".." is Parent.
type Inline struct {
	Parent uint32
	IBody  []Slot // dirents in i_block after the parent; offsets relative to i_block[4:]
	EA     []Slot // dirents in the system.data xattr value; offsets relative to its start
}

// Entries returns the used entries, i_block first, then system.data.
func (in *Inline) Entries() []Entry {
	return append(Used(in.IBody), Used(in.EA)...)
}

// ParseInline decodes an inline directory from its 60-byte i_block and the
// value of its system.data xattr (empty or nil when the directory fits in
// i_block). Each part must be tiled exactly by dirents, which are checked
// like a block's (kernel: ext4_read_inline_dir, ext4_check_dir_entry).
func ParseInline(iblock, ea []byte, f Format) (*Inline, error) {
	if len(iblock) != InlineIBlockSize {
		return nil, fserr.Corrupt("inline directory", "i_block is %d bytes, want %d", len(iblock), InlineIBlockSize)
	}
	in := &Inline{Parent: binary.LittleEndian.Uint32(iblock)}
	if f.InodesCount != 0 && in.Parent > f.InodesCount {
		return nil, fserr.Corrupt("inline directory", "parent inode %d out of bounds", in.Parent)
	}
	var err error
	if in.IBody, err = ParseRegion(iblock[InlineDotDotSize:], f); err != nil {
		return nil, err
	}
	if in.EA, err = ParseRegion(ea, f); err != nil {
		return nil, err
	}
	return in, nil
}

// EncodeInline builds the i_block of an inline directory holding parent and
// entries, the last one stretched to the end of i_block. It returns
// ErrNoSpace if they need more than i_block; spilling into system.data is
// left to the caller (EncodeRegion builds that part).
func EncodeInline(f Format, parent uint32, entries []Entry) ([]byte, error) {
	b := make([]byte, InlineIBlockSize)
	binary.LittleEndian.PutUint32(b, parent)
	if err := encodeRegion(b[InlineDotDotSize:], f, entries); err != nil {
		return nil, err
	}
	return b, nil
}

// EncodeRegion builds a region of size bytes tiled by entries (the last one
// stretched to the end, or one unused dirent if there are none): the
// system.data part of an inline directory, or a leaf block without tail.
func EncodeRegion(f Format, size int, entries []Entry) ([]byte, error) {
	b := make([]byte, size)
	if err := encodeRegion(b, f, entries); err != nil {
		return nil, err
	}
	return b, nil
}

func encodeRegion(b []byte, f Format, entries []Entry) error {
	if len(b) == 0 && len(entries) == 0 {
		return nil
	}
	if len(b) < minRecLen || len(b)%4 != 0 {
		return ErrNoSpace
	}
	if len(entries) == 0 {
		putDirent(b, 0, len(b), Entry{}, &f)
		return nil
	}
	off := 0
	for i, e := range entries {
		if err := checkName(e.Name); err != nil {
			return err
		}
		n := RecLen(len(e.Name))
		if off+n > len(b) {
			return ErrNoSpace
		}
		if i == len(entries)-1 {
			n = len(b) - off
		}
		putDirent(b, off, n, e, &f)
		off += n
	}
	return nil
}
