package dir

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/fserr"
)

// File types stored in ext4_dir_entry_2.file_type (kernel: EXT4_FT_*).
const (
	FTUnknown  = 0
	FTRegFile  = 1
	FTDir      = 2
	FTChrdev   = 3
	FTBlkdev   = 4
	FTFifo     = 5
	FTSock     = 6
	FTSymlink  = 7
	FTMax      = 8
	FTDirCsum  = 0xDE // file_type of the checksum tail's fake dirent
	MaxNameLen = 255  // EXT4_NAME_LEN
)

// Sizes of the fixed parts.
const (
	direntHeader = 8  // inode, rec_len, name_len, file_type
	minRecLen    = 12 // ext4_dir_rec_len(1): the smallest possible dirent
	TailSize     = 12 // sizeof(struct ext4_dir_entry_tail)
	maxRecLenRaw = 0xFFFF
)

// Format holds the filesystem-wide parameters that shape directory blocks.
// It is plain data taken from the superblock; the zero value is not useful.
type Format struct {
	BlockSize    int       // filesystem block size in bytes (1 KiB .. 64 KiB)
	FileType     bool      // incompat filetype: dirents carry a file type byte
	Csum         bool      // ro_compat metadata_csum: leaves end in a tail, dx blocks in a dx_tail
	LargeDir     bool      // incompat largedir: the htree may have 3 levels
	HashSeed     [4]uint32 // s_hash_seed (all zero: the default seed)
	HashUnsigned bool      // s_flags EXT2_FLAGS_UNSIGNED_HASH: use the unsigned-char hash variants
	InodesCount  uint32    // s_inodes_count bounds dirent inode numbers; 0 skips that check
	// NoVerify skips checksum verification (and accepts a leaf without
	// its tail) while keeping the metadata_csum layout Csum describes, for
	// reading past bad checksums.
	NoVerify bool
}

// ValidBlockSize reports whether n is an ext4 block size: a power of two
// from 1 KiB to 64 KiB. Block-level functions refuse other sizes.
func ValidBlockSize(n int) bool {
	return n >= 1024 && n <= 65536 && n&(n-1) == 0
}

// Entry is one directory entry. Inode 0 marks an unused slot.
type Entry struct {
	Inode    uint32
	Name     []byte
	FileType uint8 // FT*; always 0 when the filetype feature is off
}

// Slot is one dirent as laid out in a block or inline region, used or not:
// the view the write path needs to insert and delete in place.
type Slot struct {
	Entry
	Off    int // byte offset of the dirent within its region
	RecLen int // decoded rec_len: the bytes the slot spans
}

// RecLen returns the bytes a dirent with a name of nameLen bytes needs:
// 8 bytes of header plus the name, rounded up to 4 (kernel: ext4_dir_rec_len
// without the casefold hash).
func RecLen(nameLen int) int {
	return (nameLen + direntHeader + 3) &^ 3
}

// RecLenFromDisk decodes a rec_len field. Block sizes of 64 KiB and more
// cannot store a full-block rec_len in 16 bits: 0 and 0xFFFF then mean the
// whole block and the low two bits carry bits 16-17 (kernel:
// ext4_rec_len_from_disk; e2fsprogs: ext2fs_get_rec_len).
func RecLenFromDisk(v uint16, blockSize int) int {
	if blockSize < 65536 {
		return int(v)
	}
	if v == maxRecLenRaw || v == 0 {
		return blockSize
	}
	return int(v&65532) | int(v&3)<<16
}

// RecLenToDisk encodes a rec_len (kernel: ext4_rec_len_to_disk). n must be a
// multiple of 4 and at most blockSize.
func RecLenToDisk(n, blockSize int) uint16 {
	if n < 65536 {
		return uint16(n)
	}
	if n == blockSize {
		if blockSize == 65536 {
			return maxRecLenRaw
		}
		return 0
	}
	return uint16(n&65532) | uint16(n>>16&3)
}

// readDirent decodes the dirent header at off (which the caller has bounds
// checked for 8 bytes) and returns it with its raw name_len.
func readDirent(b []byte, off int, f *Format) (ino uint32, recLen, nameLen int, ft uint8) {
	ino = binary.LittleEndian.Uint32(b[off:])
	recLen = RecLenFromDisk(binary.LittleEndian.Uint16(b[off+4:]), f.BlockSize)
	nameLen = int(b[off+6])
	// Without the filetype feature byte 7 is the high byte of a 16-bit
	// name_len (ext4_dir_entry); names are at most 255 bytes, so like the
	// kernel we read only the low byte and report no file type.
	if f.FileType {
		ft = b[off+7]
	}
	return
}

// checkDirent applies the kernel's __ext4_check_dir_entry rules to the
// dirent at off in a region of size bytes.
func checkDirent(off, size int, ino uint32, recLen, nameLen int, f *Format) string {
	switch {
	case recLen < minRecLen:
		return "rec_len is smaller than minimal"
	case recLen%4 != 0:
		return "rec_len % 4 != 0"
	case recLen < RecLen(nameLen):
		return "rec_len is too small for name_len"
	case off+recLen > size:
		return "directory entry overrun"
	case off+recLen > size-minRecLen && off+recLen != size:
		return "directory entry too close to block end"
	case f.InodesCount != 0 && ino > f.InodesCount:
		return "inode out of bounds"
	}
	return ""
}

// ParseRegion decodes the dirents that tile region exactly: a directory
// block without its checksum tail, or one part of an inline directory. It
// returns every slot, unused ones (inode 0) included.
func ParseRegion(region []byte, f Format) ([]Slot, error) {
	return parseRegion(region, f, true)
}

// parseRegion is ParseRegion; without copyNames the names alias region,
// for callers that drop the slots before region changes.
func parseRegion(region []byte, f Format, copyNames bool) ([]Slot, error) {
	// Each slot takes at least 12 bytes: cap the allocation by that.
	slots := make([]Slot, 0, min(len(region)/minRecLen, 64))
	err := scanRegion(region, &f, func(s Slot) bool {
		if copyNames {
			s.Name = append([]byte(nil), s.Name...)
		}
		slots = append(slots, s)
		return true
	})
	if err != nil {
		return nil, err
	}
	return slots, nil
}

// scanRegion checks the dirents tiling region in order and calls fn with
// each slot (its name aliasing region) until fn returns false. It is the
// one place the dirent rules are applied, and allocates nothing, so the hot
// lookups and inserts that only look at slots can use it directly. A slot is
// passed to fn only after it has been checked; a bad dirent stops the scan
// with its error even when earlier slots were passed.
func scanRegion(region []byte, f *Format, fn func(Slot) bool) error {
	size := len(region)
	for off := 0; off < size; {
		if size-off < direntHeader {
			return fserr.Corrupt("directory entry", "at offset %d: header runs past the end of the %d-byte region", off, size)
		}
		ino, recLen, nameLen, ft := readDirent(region, off, f)
		if msg := checkDirent(off, size, ino, recLen, nameLen, f); msg != "" {
			return fserr.Corrupt("directory entry", "at offset %d: %s (rec_len %d, name_len %d, inode %d, region %d bytes)", off, msg, recLen, nameLen, ino, size)
		}
		end := off + direntHeader + nameLen
		s := Slot{Entry: Entry{Inode: ino, FileType: ft, Name: region[off+direntHeader : end : end]}, Off: off, RecLen: recLen}
		if !fn(s) {
			return nil
		}
		off += recLen
	}
	return nil
}

// Used returns the entries of the slots that are in use (inode ≠ 0).
func Used(slots []Slot) []Entry {
	var out []Entry
	for _, s := range slots {
		if s.Inode != 0 {
			out = append(out, s.Entry)
		}
	}
	return out
}

// Block is a decoded linear directory block (an htree leaf is one too).
type Block struct {
	Slots    []Slot // every dirent before the tail, unused ones included
	Tail     bool   // the block ends in a checksum tail
	Checksum uint32 // the tail's stored checksum, when Tail
}

// Entries returns the used entries of the block, in on-disk order.
func (b *Block) Entries() []Entry { return Used(b.Slots) }

// ParseBlock decodes a linear directory block of f.BlockSize bytes. With
// f.Csum the block must end in a checksum tail (the kernel refuses leaf
// blocks without one); the checksum itself is checked by VerifyLeafChecksum,
// which needs the directory's checksum seed.
func ParseBlock(b []byte, f Format) (*Block, error) {
	return parseBlock(b, f, true)
}

// checkedLeafRegion checks a leaf block's size and, with f.Csum, its
// checksum tail, and returns the part its dirents tile.
func checkedLeafRegion(b []byte, f *Format) ([]byte, error) {
	if len(b) != f.BlockSize || !ValidBlockSize(f.BlockSize) {
		return nil, fserr.Corrupt("directory block", "%d bytes, want block size %d", len(b), f.BlockSize)
	}
	if !f.Csum {
		return b, nil
	}
	if !HasTail(b, *f) {
		if f.NoVerify {
			return b, nil
		}
		return nil, fserr.Corrupt("directory block", "no checksum tail (metadata_csum needs one; e2fsck -D adds it)")
	}
	return b[:len(b)-TailSize], nil
}

// parseBlock is ParseBlock; without copyNames the names alias b.
func parseBlock(b []byte, f Format, copyNames bool) (*Block, error) {
	region, err := checkedLeafRegion(b, &f)
	if err != nil {
		return nil, err
	}
	blk := &Block{}
	if f.Csum && len(region) < len(b) {
		blk.Tail = true
		blk.Checksum = binary.LittleEndian.Uint32(b[len(b)-4:])
	}
	slots, err := parseRegion(region, f, copyNames)
	if err != nil {
		return nil, err
	}
	blk.Slots = slots
	return blk, nil
}
