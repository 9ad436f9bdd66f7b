// Package csum holds the checksum functions of the ext4 on-disk format.
//
// ext4 uses the "raw" CRC32C of the kernel's crc32c_le: no inversion before
// or after, the caller passes the running value (usually a seed derived from
// the filesystem UUID). hash/crc32 inverts on entry and exit, so CRC32C
// undoes both. Group descriptors of filesystems with uninit_bg (gdt_csum) and
// no metadata_csum use CRC16 (ANSI, reflected polynomial 0xA001).
//
// Everything here is pure and safe for concurrent use.
package csum

import (
	"hash/crc32"
	"sync"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C continues a raw CRC32C (kernel: crc32c_le / ext4_chksum) over b.
func CRC32C(crc uint32, b []byte) uint32 {
	return ^crc32.Update(^crc, castagnoli, b)
}

var crc16Table = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i)
		for range 8 {
			if c&1 != 0 {
				c = c>>1 ^ 0xA001
			} else {
				c >>= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 continues the reflected ANSI CRC16 (kernel: crc16) over b.
func CRC16(crc uint16, b []byte) uint16 {
	for _, x := range b {
		crc = crc>>8 ^ crc16Table[byte(crc)^x]
	}
	return crc
}

// zeros feeds CRC32CZeros: a package-level array, because a slice of a
// local array passed to crc32.Update escapes to the heap (the update goes
// through a function variable) and costs an allocation per call.
var zeros [1024]byte

// CRC32CZeros continues crc over n zero bytes.
func CRC32CZeros(crc uint32, n int) uint32 {
	for n > 0 {
		k := min(n, len(zeros))
		crc = CRC32C(crc, zeros[:k])
		n -= k
	}
	return crc
}

// CRC32CUint32 continues crc over the four little-endian bytes of v,
// without a buffer (see zeros).
func CRC32CUint32(crc uint32, v uint32) uint32 {
	// CRC32C's two inversions cancel crc32.Update's: the raw register.
	for range 4 {
		crc = castagnoli[byte(crc)^byte(v)] ^ crc>>8
		v >>= 8
	}
	return crc
}

// The raw crc32c register (what CRC32C returns) is linear over GF(2) in
// the register and the data together, so a change to a few bytes of a
// long buffer changes its crc by the crc of the change alone, carried
// through the bytes after it: for buffers B and B' of length L that differ
// only in [i, j),
//
//	CRC32C(s, B') = CRC32C(s, B) ^ Shift(CRC32C(0, (B^B')[i:j]), L-j)
//
// which lets a block bitmap's checksum follow a one-bit change without
// reading the other 4095 bytes (UpdateCRC32C).

// shiftTables[k] applies Z^(2^k), the register's advance over 2^k zero
// bytes, to a register one byte at a time: Z^(2^k)(v) = t[0][v&0xff] ^
// t[1][v>>8&0xff] ^ t[2][v>>16&0xff] ^ t[3][v>>24].
var (
	shiftOnce   sync.Once
	shiftTables [maxShiftBits + 1][4][256]uint32
)

// maxShiftBits bounds Shift: 2^17 bytes, past the largest bitmap (64 KiB).
const maxShiftBits = 17

func buildShiftTables() {
	for k := range shiftTables {
		n := 1 << k
		var basis [32]uint32
		for b := range basis {
			basis[b] = CRC32CZeros(1<<b, n)
		}
		for byteIdx := range 4 {
			for x := range 256 {
				var v uint32
				for bit := range 8 {
					if x&(1<<bit) != 0 {
						v ^= basis[byteIdx*8+bit]
					}
				}
				shiftTables[k][byteIdx][x] = v
			}
		}
	}
}

// Shift advances a raw register over n zero bytes without reading them:
// Shift(c, n) == CRC32CZeros(c, n). n must be below 2^18.
func Shift(c uint32, n int) uint32 {
	if n >= 1<<(maxShiftBits+1) || n < 0 {
		return CRC32CZeros(c, n)
	}
	shiftOnce.Do(buildShiftTables)
	for k := 0; n != 0; k++ {
		if n&1 != 0 {
			t := &shiftTables[k]
			c = t[0][byte(c)] ^ t[1][byte(c>>8)] ^ t[2][byte(c>>16)] ^ t[3][byte(c>>24)]
		}
		n >>= 1
	}
	return c
}

// UpdateCRC32C returns the crc of a buffer of length total after bytes
// [at, at+len(old)) changed from old to new (same length), given its crc
// before. It reads only old and new: the cost is that of the change.
func UpdateCRC32C(crc uint32, total, at int, old, new []byte) uint32 {
	var d uint32 // the raw register over old^new from state 0
	for i := range old {
		d = castagnoli[byte(d)^old[i]^new[i]] ^ d>>8
	}
	return crc ^ Shift(d, total-at-len(old))
}
