// Package orphan encodes and decodes the blocks of the orphan file
// (feature orphan_file): the inode numbers of files that were unlinked or
// truncated while in use, for a crash to finish.
//
// Each block of the file is an array of little-endian 32-bit inode numbers
// (0 is a free slot) followed by an 8-byte tail: the magic number and, with
// metadata_csum, a crc32c of the slots seeded with the orphan file inode's
// checksum seed (inode.Seed) and the block's number (kernel: fs/ext4/orphan.c,
// struct ext4_orphan_block_tail). The package does no I/O and keeps no
// state.
package orphan

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

const (
	// Magic is ob_magic, the first word of every block's tail.
	Magic = 0x0b10ca04
	// TailSize is the bytes of the tail at the end of each block.
	TailSize = 8
)

// Slots returns the inode slots of a block of blockSize bytes (kernel:
// ext4_inodes_per_orphan_block).
func Slots(blockSize int) int { return (blockSize - TailSize) / 4 }

// Checksum is the checksum of orphan block b stored at physical block
// blk, for the orphan file inode whose checksum seed is seed (kernel:
// ext4_orphan_file_block_trigger).
func Checksum(b []byte, seed uint32, blk uint64) uint32 {
	var nr [8]byte
	binary.LittleEndian.PutUint64(nr[:], blk)
	c := csum.CRC32C(seed, nr[:])
	return csum.CRC32C(c, b[:4*Slots(len(b))])
}

// NewBlock returns an empty block: no inodes, the magic, and with withCsum
// its checksum.
func NewBlock(blockSize int, withCsum bool, seed uint32, blk uint64) []byte {
	b := make([]byte, blockSize)
	binary.LittleEndian.PutUint32(b[blockSize-TailSize:], Magic)
	if withCsum {
		SetChecksum(b, seed, blk)
	}
	return b
}

// SetChecksum stores b's checksum in its tail.
func SetChecksum(b []byte, seed uint32, blk uint64) {
	binary.LittleEndian.PutUint32(b[len(b)-4:], Checksum(b, seed, blk))
}

// Verify checks b's size, magic and (withCsum) checksum, as the kernel
// does when it loads the orphan file (kernel: ext4_init_orphan_info).
func Verify(b []byte, blockSize int, withCsum bool, seed uint32, blk uint64) error {
	if len(b) != blockSize || blockSize < 1024 {
		return fserr.Corrupt("orphan file block", "%d bytes, want block size %d", len(b), blockSize)
	}
	if m := binary.LittleEndian.Uint32(b[blockSize-TailSize:]); m != Magic {
		return &fserr.CorruptError{What: "orphan file block", Block: int64(blk), Detail: fmt.Sprintf("bad magic %#x", m)}
	}
	if withCsum {
		stored := binary.LittleEndian.Uint32(b[blockSize-4:])
		if c := Checksum(b, seed, blk); c != stored {
			return &fserr.ChecksumError{What: "orphan file block", Block: int64(blk), Stored: stored, Computed: c}
		}
	}
	return nil
}

// Slot returns the inode number in slot i of b (0: free).
func Slot(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }

// SetSlot stores ino in slot i of b; the caller then updates the checksum.
func SetSlot(b []byte, i int, ino uint32) { binary.LittleEndian.PutUint32(b[4*i:], ino) }

// Used returns the inode numbers in the used slots of b, in slot order.
func Used(b []byte) []uint32 {
	var out []uint32
	for i := 0; i < Slots(len(b)); i++ {
		if v := Slot(b, i); v != 0 {
			out = append(out, v)
		}
	}
	return out
}
