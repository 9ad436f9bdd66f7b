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

import "hash/crc32"

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
