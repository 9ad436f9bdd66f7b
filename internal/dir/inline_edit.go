package dir

import (
	"encoding/binary"
	"fmt"
	"io/fs"
)

// Editing inline-data directories (kernel: fs/ext4/inline.c). The caller
// owns the inode side: it passes the 60-byte i_block and the system.data
// xattr value (nil or empty when there is none), stores them back after a
// change, and moves the directory to a block (InlineToBlock) when an entry
// no longer fits.

// parseInlineForEdit decodes both parts and reports whether name is used.
func parseInlineForEdit(iblock, ea []byte, f Format, name []byte) (*Inline, bool, error) {
	in, err := ParseInline(iblock, ea, f)
	if err != nil {
		return nil, false, err
	}
	for _, x := range in.Entries() {
		if string(x.Name) == string(name) {
			return in, true, nil
		}
	}
	return in, false, nil
}

// InlineAdd inserts e into an inline directory in place: into i_block after
// the parent word if a slot there has room, else into the system.data part
// (kernel: ext4_try_add_inline_entry). It reports false, changing nothing,
// when neither has room: the caller may then grow the system.data part
// (GrowRegion) and retry, or convert the directory (InlineToBlock). A name
// already present (or "." or "..") gives an error matching fs.ErrExist.
func InlineAdd(iblock, ea []byte, f Format, e Entry) (bool, error) {
	if err := checkNewName(e.Name); err != nil {
		return false, err
	}
	if e.Inode == 0 {
		return false, fmt.Errorf("dir: %q: inode 0: %w", e.Name, fs.ErrInvalid)
	}
	_, dup, err := parseInlineForEdit(iblock, ea, f, e.Name)
	if err != nil {
		return false, err
	}
	if dup || isDots(e.Name) {
		return false, fmt.Errorf("dir: %q: %w", e.Name, fs.ErrExist)
	}
	if !f.FileType {
		e.FileType = 0
	}
	if ok, err := InsertRegion(iblock[InlineDotDotSize:], f, e); ok || err != nil {
		return ok, err
	}
	if len(ea) == 0 {
		return false, nil
	}
	return InsertRegion(ea, f, e)
}

// InlineRemove deletes the entry called name from an inline directory in
// place (kernel: ext4_delete_inline_entry) and returns it. A missing name
// gives an error matching fs.ErrNotExist.
func InlineRemove(iblock, ea []byte, f Format, name []byte) (Entry, error) {
	if _, _, err := parseInlineForEdit(iblock, ea, f, nil); err != nil {
		return Entry{}, err
	}
	for _, region := range [][]byte{iblock[InlineDotDotSize:], ea} {
		e, ok, err := DeleteRegion(region, f, name)
		if ok || err != nil {
			return e, err
		}
	}
	return Entry{}, notFound(name)
}

// InlineReplace points the entry called name at inode ino of file type ft,
// in place, and returns the entry as it was.
func InlineReplace(iblock, ea []byte, f Format, name []byte, ino uint32, ft uint8) (Entry, error) {
	if ino == 0 {
		return Entry{}, fmt.Errorf("dir: %q: inode 0: %w", name, fs.ErrInvalid)
	}
	in, err := ParseInline(iblock, ea, f)
	if err != nil {
		return Entry{}, err
	}
	for i, part := range [][]Slot{in.IBody, in.EA} {
		region := ea
		if i == 0 {
			region = iblock[InlineDotDotSize:]
		}
		for _, s := range part {
			if s.Inode == 0 || string(s.Name) != string(name) {
				continue
			}
			binary.LittleEndian.PutUint32(region[s.Off:], ino)
			if f.FileType {
				region[s.Off+7] = ft
			}
			return s.Entry, nil
		}
	}
	return Entry{}, notFound(name)
}

// SetInlineParent stores the parent inode (the inline "..") in i_block.
func SetInlineParent(iblock []byte, parent uint32) error {
	if len(iblock) != InlineIBlockSize {
		return fmt.Errorf("dir: i_block is %d bytes, want %d", len(iblock), InlineIBlockSize)
	}
	if parent == 0 {
		return fmt.Errorf("dir: parent inode 0: %w", fs.ErrInvalid)
	}
	binary.LittleEndian.PutUint32(iblock, parent)
	return nil
}

// InlineIsEmpty reports whether an inline directory has no entries.
func InlineIsEmpty(iblock, ea []byte, f Format) (bool, error) {
	in, err := ParseInline(iblock, ea, f)
	if err != nil {
		return false, err
	}
	return len(in.Entries()) == 0, nil
}

// GrowRegion returns a copy of region (the system.data part of an inline
// directory) grown to size bytes: the last dirent absorbs the new space, or
// an empty region becomes one unused dirent (kernel: ext4_update_final_de).
// size must be a multiple of 4, at least len(region) and, for an empty
// region, at least 12.
func GrowRegion(region []byte, size int, f Format) ([]byte, error) {
	slots, err := ParseRegion(region, f)
	if err != nil {
		return nil, err
	}
	if size < len(region) || size%4 != 0 || size > 65532 || (len(slots) == 0 && size != 0 && size < minRecLen) {
		return nil, fmt.Errorf("dir: cannot grow a %d-byte region to %d bytes", len(region), size)
	}
	out := make([]byte, size)
	copy(out, region)
	if size == len(region) {
		return out, nil
	}
	if len(slots) == 0 {
		putDirent(out, 0, size, Entry{}, &f)
		return out, nil
	}
	last := slots[len(slots)-1]
	binary.LittleEndian.PutUint16(out[last.Off+4:], RecLenToDisk(size-last.Off, f.BlockSize))
	return out, nil
}

// InlineToBlock returns block 0 for the inline directory self when it moves
// out of the inode (kernel: ext4_convert_inline_data_nolock and
// ext4_finish_convert_inline_dir): "." and "..", then every entry of
// i_block and system.data, the last reaching the end (or the checksum tail,
// set with seed, with f.Csum). ErrNoSpace if they need more than a block.
// The caller then clears the inline flag, drops system.data, maps the block
// and sets i_size to one block.
func InlineToBlock(f Format, self uint32, iblock, ea []byte, seed uint32) ([]byte, error) {
	in, err := ParseInline(iblock, ea, f)
	if err != nil {
		return nil, err
	}
	es := []Entry{
		{Inode: self, Name: []byte("."), FileType: FTDir},
		{Inode: in.Parent, Name: []byte(".."), FileType: FTDir},
	}
	return EncodeBlock(f, append(es, in.Entries()...), seed)
}
