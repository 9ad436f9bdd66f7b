package inode

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Seed returns the per-inode checksum seed the kernel keeps in
// ext4_inode_info.i_csum_seed: crc32c over the inode number and then the
// generation, both little-endian, starting from the filesystem seed. Inode,
// extent block, directory block and xattr checksums all start from it.
func Seed(fsSeed, ino, generation uint32) uint32 {
	return csum.CRC32CUint32(csum.CRC32CUint32(fsSeed, ino), generation)
}

// hasChecksumHi reports whether i_checksum_hi is part of the inode in raw:
// the inode is larger than 128 bytes and i_extra_isize covers the field.
func hasChecksumHi(raw []byte) bool {
	if len(raw) <= GoodOldSize {
		return false
	}
	return fits(offChecksumHi+2, len(raw), binary.LittleEndian.Uint16(raw[offExtraIsize:]))
}

// Checksum computes the checksum of the inode in raw (all of the inode
// size, which is len(raw)) for inode number ino, as the kernel's
// ext4_inode_csum does: crc32c from Seed(fsSeed, ino, i_generation) over
// the whole inode with the checksum fields taken as zero. When only
// i_checksum_lo is stored (a 128-byte inode, or i_extra_isize too small to
// hold i_checksum_hi) the result is cut to its low 16 bits. It returns 0 if
// raw is shorter than 128 bytes.
func Checksum(fsSeed, ino uint32, raw []byte) uint32 {
	if len(raw) < GoodOldSize {
		return 0
	}
	c := Seed(fsSeed, ino, binary.LittleEndian.Uint32(raw[offGeneration:]))
	c = csum.CRC32C(c, raw[:offChecksumLo])
	c = csum.CRC32CZeros(c, 2)
	c = csum.CRC32C(c, raw[offChecksumLo+2:GoodOldSize])
	if len(raw) > GoodOldSize {
		c = csum.CRC32C(c, raw[GoodOldSize:offChecksumHi])
		rest := offChecksumHi
		if hasChecksumHi(raw) {
			c = csum.CRC32CZeros(c, 2)
			rest += 2
		}
		c = csum.CRC32C(c, raw[rest:])
	}
	if !hasChecksumHi(raw) {
		c &= 0xFFFF
	}
	return c
}

// storedChecksum returns the checksum stored in raw, 16 or 32 bits.
func storedChecksum(raw []byte) uint32 {
	s := uint32(binary.LittleEndian.Uint16(raw[offChecksumLo:]))
	if hasChecksumHi(raw) {
		s |= uint32(binary.LittleEndian.Uint16(raw[offChecksumHi:])) << 16
	}
	return s
}

// Verify checks the checksum of the inode in raw (len(raw) is the inode
// size). Like e2fsprogs (ext2fs_inode_csum_verify) it accepts an inode
// whose first 128 bytes are all zero whatever its checksum fields say: a
// never-used inode in a zeroed inode table. A mismatch is a
// *fserr.ChecksumError with Block -1.
func Verify(fsSeed, ino uint32, raw []byte) error {
	if len(raw) < GoodOldSize {
		return fserr.Corrupt("inode", "%d bytes, want at least %d", len(raw), GoodOldSize)
	}
	stored, computed := storedChecksum(raw), Checksum(fsSeed, ino, raw)
	if stored == computed || allZero(raw[:GoodOldSize]) {
		return nil
	}
	return &fserr.ChecksumError{What: "inode", Block: -1, Ino: ino, Stored: stored, Computed: computed}
}

// SetChecksum computes the checksum of the inode in raw and stores it in
// i_checksum_lo and, where the inode has it, i_checksum_hi. raw must be at
// least 128 bytes long.
func SetChecksum(fsSeed, ino uint32, raw []byte) {
	if len(raw) < GoodOldSize {
		return
	}
	c := Checksum(fsSeed, ino, raw)
	binary.LittleEndian.PutUint16(raw[offChecksumLo:], uint16(c))
	if hasChecksumHi(raw) {
		binary.LittleEndian.PutUint16(raw[offChecksumHi:], uint16(c>>16))
	}
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}
