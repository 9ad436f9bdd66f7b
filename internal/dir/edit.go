package dir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/ext4go/ext4go/internal/fserr"
)

// ErrNoSpace reports entries that do not fit in one block.
var ErrNoSpace = errors.New("dir: entries do not fit in the block")

// checkName rejects names no dirent can hold.
func checkName(name []byte) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("dir: name length %d out of range 1..%d", len(name), MaxNameLen)
	}
	return nil
}

// putDirent writes a dirent at off spanning recLen bytes. Name bytes beyond
// the header are written; the padding is left as the caller prepared it.
func putDirent(b []byte, off, recLen int, e Entry, f *Format) {
	binary.LittleEndian.PutUint32(b[off:], e.Inode)
	binary.LittleEndian.PutUint16(b[off+4:], RecLenToDisk(recLen, f.BlockSize))
	b[off+6] = byte(len(e.Name))
	ft := byte(0)
	if f.FileType {
		ft = e.FileType
	}
	b[off+7] = ft
	copy(b[off+direntHeader:], e.Name)
}

// leafRegion returns the part of a leaf block that dirents tile.
func leafRegion(b []byte, f *Format) []byte {
	if f.Csum {
		return b[:len(b)-TailSize]
	}
	return b
}

// EncodeBlock builds a leaf block of f.BlockSize bytes holding entries in
// order, each packed to its minimal rec_len and the last one stretched to the
// end (to the tail with f.Csum, whose checksum it computes with seed). No
// entries gives one unused dirent spanning the block. It returns ErrNoSpace
// if the entries do not fit.
func EncodeBlock(f Format, entries []Entry, seed uint32) ([]byte, error) {
	if !ValidBlockSize(f.BlockSize) {
		return nil, fmt.Errorf("dir: bad block size %d", f.BlockSize)
	}
	b := make([]byte, f.BlockSize)
	if err := encodeRegion(leafRegion(b, &f), f, entries); err != nil {
		return nil, err
	}
	if f.Csum {
		SetLeafChecksum(b, f, seed)
	}
	return b, nil
}

// slotNeed is what a used slot keeps when split: its entry's rec_len, but
// never under 12 (a corrupt empty name would otherwise leave an 8-byte slot).
func slotNeed(s Slot) int {
	return max(RecLen(len(s.Name)), minRecLen)
}

// InsertRegion adds e to a region tiled by dirents, like the kernel's
// ext4_find_dest_de + ext4_insert_dentry: the first slot whose unused slack
// (its rec_len minus what its own entry needs) holds the new entry is taken,
// splitting a used slot in two. It reports false if no slot has room, and
// fs.ErrExist if the name is already there. The region is changed only on
// success.
func InsertRegion(region []byte, f Format, e Entry) (bool, error) {
	if err := checkName(e.Name); err != nil {
		return false, err
	}
	need := RecLen(len(e.Name))
	var at Slot
	found, dup := false, false
	err := scanRegion(region, &f, func(s Slot) bool {
		if s.Inode != 0 && bytes.Equal(s.Name, e.Name) {
			dup = true
			return false
		}
		if !found && slotRoom(s) >= need {
			at, found = s, true
		}
		return true
	})
	if err != nil {
		return false, err
	}
	if dup {
		return false, fmt.Errorf("dir: %q: %w", e.Name, fs.ErrExist)
	}
	if !found {
		return false, nil
	}
	s := at
	off, recLen := s.Off, s.RecLen
	if s.Inode != 0 {
		used := slotNeed(s)
		binary.LittleEndian.PutUint16(region[off+4:], RecLenToDisk(used, f.BlockSize))
		off, recLen = off+used, recLen-used
	}
	clear(region[off+direntHeader : off+recLen])
	putDirent(region, off, recLen, e, &f)
	return true, nil
}

// DeleteRegion removes the used entry called name from a region tiled by
// dirents, like the kernel's ext4_generic_delete_entry: its space is merged
// into the previous slot's rec_len, or, for the first slot, the slot is
// marked unused. The freed bytes are wiped. It returns the removed entry and
// false if no entry has that name.
func DeleteRegion(region []byte, f Format, name []byte) (Entry, bool, error) {
	slots, err := parseRegion(region, f, false)
	if err != nil {
		return Entry{}, false, err
	}
	for i, s := range slots {
		if s.Inode == 0 || !bytes.Equal(s.Name, name) {
			continue
		}
		s.Name = bytes.Clone(s.Name) // the wipe below would clobber it
		if i > 0 {
			p := slots[i-1]
			binary.LittleEndian.PutUint16(region[p.Off+4:], RecLenToDisk(p.RecLen+s.RecLen, f.BlockSize))
			clear(region[s.Off : s.Off+s.RecLen])
		} else {
			binary.LittleEndian.PutUint32(region[s.Off:], 0)
			clear(region[s.Off+6 : s.Off+s.RecLen])
		}
		return s.Entry, true, nil
	}
	return Entry{}, false, nil
}

// Insert adds e to the leaf block b (see InsertRegion) and, with f.Csum,
// recomputes the tail checksum with seed.
func Insert(b []byte, f Format, e Entry, seed uint32) (bool, error) {
	if err := checkLeafShape(b, &f); err != nil {
		return false, err
	}
	ok, err := InsertRegion(leafRegion(b, &f), f, e)
	if ok && f.Csum {
		SetLeafChecksum(b, f, seed)
	}
	return ok, err
}

// Delete removes the entry called name from the leaf block b (see
// DeleteRegion) and, with f.Csum, recomputes the tail checksum with seed.
func Delete(b []byte, f Format, name []byte, seed uint32) (Entry, bool, error) {
	if err := checkLeafShape(b, &f); err != nil {
		return Entry{}, false, err
	}
	e, ok, err := DeleteRegion(leafRegion(b, &f), f, name)
	if ok && f.Csum {
		SetLeafChecksum(b, f, seed)
	}
	return e, ok, err
}

func checkLeafShape(b []byte, f *Format) error {
	if len(b) != f.BlockSize || !ValidBlockSize(f.BlockSize) {
		return fserr.Corrupt("directory block", "%d bytes, want block size %d", len(b), f.BlockSize)
	}
	if f.Csum && !HasTail(b, *f) {
		return fserr.Corrupt("directory block", "no checksum tail (metadata_csum needs one; e2fsck -D adds it)")
	}
	return nil
}
