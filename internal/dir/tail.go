package dir

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// HasTail reports whether b (one directory block) ends in the checksum tail:
// a fake dirent with inode 0, rec_len 12, name_len 0 and file_type 0xDE
// (kernel: get_dirent_tail).
func HasTail(b []byte, f Format) bool {
	if len(b) < TailSize {
		return false
	}
	t := b[len(b)-TailSize:]
	return binary.LittleEndian.Uint32(t) == 0 &&
		RecLenFromDisk(binary.LittleEndian.Uint16(t[4:]), f.BlockSize) == TailSize &&
		t[6] == 0 && t[7] == FTDirCsum
}

// LeafChecksum computes the checksum of a leaf block with a tail: raw
// crc32c, seeded with the directory inode's checksum seed, over the bytes
// before the tail (kernel: ext4_dirblock_csum).
func LeafChecksum(b []byte, seed uint32) uint32 {
	if len(b) < TailSize {
		return 0
	}
	return csum.CRC32C(seed, b[:len(b)-TailSize])
}

// VerifyLeafChecksum checks the tail checksum of a leaf block. Without
// f.Csum there is nothing to check.
func VerifyLeafChecksum(b []byte, f Format, seed uint32) error {
	if !f.Csum || f.NoVerify {
		return nil
	}
	if !HasTail(b, f) {
		return fserr.Corrupt("directory block", "no checksum tail (metadata_csum needs one; e2fsck -D adds it)")
	}
	stored := binary.LittleEndian.Uint32(b[len(b)-4:])
	if c := LeafChecksum(b, seed); c != stored {
		return &fserr.ChecksumError{What: "directory block", Block: -1, Stored: stored, Computed: c}
	}
	return nil
}

// SetLeafChecksum writes the checksum tail into the last 12 bytes of b (the
// entries must already stop there) and fills in its checksum.
func SetLeafChecksum(b []byte, f Format, seed uint32) {
	if len(b) < TailSize {
		return
	}
	t := b[len(b)-TailSize:]
	binary.LittleEndian.PutUint32(t, 0)
	binary.LittleEndian.PutUint16(t[4:], RecLenToDisk(TailSize, f.BlockSize))
	t[6] = 0
	t[7] = FTDirCsum
	binary.LittleEndian.PutUint32(t[8:], LeafChecksum(b, seed))
}
