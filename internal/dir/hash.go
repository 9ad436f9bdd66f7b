package dir

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Hash versions (dx_root_info.hash_version, s_def_hash_version). The
// unsigned variants are never stored in a dx root: the kernel adds 3 to
// versions ≤ HashTea when the superblock has EXT2_FLAGS_UNSIGNED_HASH.
const (
	HashLegacy          = 0
	HashHalfMD4         = 1
	HashTea             = 2
	HashLegacyUnsigned  = 3
	HashHalfMD4Unsigned = 4
	HashTeaUnsigned     = 5
	HashSiphash         = 6 // casefolded + encrypted directories; not implemented
)

// HtreeEOF is the 32-bit end-of-directory hash position (kernel:
// EXT4_HTREE_EOF_32BIT); Hash never returns its shifted value 0xFFFFFFFE.
const HtreeEOF = 0x7FFFFFFF

// defaultSeed is used when the superblock's s_hash_seed is all zero.
var defaultSeed = [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}

// EffectiveVersion maps the hash version stored in a dx root to the one
// names are hashed with, like dx_probe: versions up to HashTea move to their
// unsigned variant when the filesystem says so.
func EffectiveVersion(stored uint8, unsigned bool) int {
	v := int(stored)
	if v <= HashTea && unsigned {
		v += 3
	}
	return v
}

// Hash computes the htree hash of name, bit-exact with the kernel's
// ext4fs_dirhash: the major hash has its low bit cleared (that bit marks hash
// collisions continuing into the next leaf in the index) and is never
// (HtreeEOF << 1). The legacy hashes have no minor hash. A zero seed means
// the default seed. Siphash returns an *fserr.UnsupportedError, other unknown
// versions an *fserr.CorruptError.
func Hash(name []byte, version int, seed [4]uint32) (hash, minorHash uint32, err error) {
	buf := defaultSeed
	if seed != [4]uint32{} {
		buf = seed
	}
	switch version {
	case HashLegacy, HashLegacyUnsigned:
		hash = dxHackHash(name, version == HashLegacy)
	case HashHalfMD4, HashHalfMD4Unsigned:
		signed := version == HashHalfMD4
		var in [8]uint32
		for p := name; len(p) > 0; {
			str2hashbuf(p, in[:], signed)
			halfMD4Transform(&buf, &in)
			p = p[min(32, len(p)):]
		}
		hash, minorHash = buf[1], buf[2]
	case HashTea, HashTeaUnsigned:
		signed := version == HashTea
		var in [4]uint32
		for p := name; len(p) > 0; {
			str2hashbuf(p, in[:], signed)
			teaTransform(&buf, &in)
			p = p[min(16, len(p)):]
		}
		hash, minorHash = buf[0], buf[1]
	case HashSiphash:
		return 0, 0, &fserr.UnsupportedError{Feature: "siphash directory hash", Detail: "casefolded encrypted directories"}
	default:
		return 0, 0, fserr.Corrupt("htree", "unknown hash version %d", version)
	}
	hash &^= 1
	if hash == HtreeEOF<<1 {
		hash = (HtreeEOF - 1) << 1
	}
	return hash, minorHash, nil
}

// hashName is how the htree code hashes names: Hash, which tests replace
// with a weak hash to force long runs of colliding names.
var hashName = Hash

// MustHash is Hash for versions known to be implemented; it panics otherwise.
func MustHash(name []byte, version int, seed [4]uint32) (uint32, uint32) {
	h, m, err := Hash(name, version, seed)
	if err != nil {
		panic(fmt.Sprintf("dir.MustHash: %v", err))
	}
	return h, m
}

// charValue widens a name byte like C does for a (signed or unsigned) char.
func charValue(c byte, signed bool) uint32 {
	if signed {
		return uint32(int32(int8(c)))
	}
	return uint32(c)
}

// dxHackHash is the legacy hash (kernel: dx_hack_hash_signed/unsigned).
func dxHackHash(name []byte, signed bool) uint32 {
	hash0, hash1 := uint32(0x12a3fe2d), uint32(0x37abe8f9)
	for _, c := range name {
		h := hash1 + (hash0 ^ charValue(c, signed)*7152373)
		if h&0x80000000 != 0 {
			h -= 0x7fffffff
		}
		hash1, hash0 = hash0, h
	}
	return hash0 << 1
}

// str2hashbuf packs up to 4*len(buf) bytes of msg into buf, padding with a
// word made from the remaining length (kernel: str2hashbuf_signed/unsigned).
func str2hashbuf(msg []byte, buf []uint32, signed bool) {
	n := len(msg)
	pad := uint32(n) | uint32(n)<<8
	pad |= pad << 16
	val := pad
	n = min(n, 4*len(buf))
	j := 0
	for i := 0; i < n; i++ {
		val = charValue(msg[i], signed) + val<<8
		if i%4 == 3 {
			buf[j] = val
			j++
			val = pad
		}
	}
	if j < len(buf) {
		buf[j] = val
		j++
	}
	for ; j < len(buf); j++ {
		buf[j] = pad
	}
}

// teaTransform is 16 rounds of TEA over two words of buf (kernel:
// TEA_transform).
func teaTransform(buf *[4]uint32, in *[4]uint32) {
	const delta = 0x9E3779B9
	var sum uint32
	b0, b1 := buf[0], buf[1]
	a, b, c, d := in[0], in[1], in[2], in[3]
	for range 16 {
		sum += delta
		b0 += ((b1 << 4) + a) ^ (b1 + sum) ^ ((b1 >> 5) + b)
		b1 += ((b0 << 4) + c) ^ (b0 + sum) ^ ((b0 >> 5) + d)
	}
	buf[0] += b0
	buf[1] += b1
}

// halfMD4Transform is the cut-down MD4 of lib/halfmd4.c (kernel:
// half_md4_transform).
func halfMD4Transform(buf *[4]uint32, in *[8]uint32) {
	const (
		k2 = 013240474631
		k3 = 015666365641
	)
	f := func(x, y, z uint32) uint32 { return z ^ (x & (y ^ z)) }
	g := func(x, y, z uint32) uint32 { return (x & y) + ((x ^ y) & z) }
	h := func(x, y, z uint32) uint32 { return x ^ y ^ z }
	rot := func(v uint32, s uint) uint32 { return v<<s | v>>(32-s) }

	a, b, c, d := buf[0], buf[1], buf[2], buf[3]

	a = rot(a+f(b, c, d)+in[0], 3)
	d = rot(d+f(a, b, c)+in[1], 7)
	c = rot(c+f(d, a, b)+in[2], 11)
	b = rot(b+f(c, d, a)+in[3], 19)
	a = rot(a+f(b, c, d)+in[4], 3)
	d = rot(d+f(a, b, c)+in[5], 7)
	c = rot(c+f(d, a, b)+in[6], 11)
	b = rot(b+f(c, d, a)+in[7], 19)

	a = rot(a+g(b, c, d)+in[1]+k2, 3)
	d = rot(d+g(a, b, c)+in[3]+k2, 5)
	c = rot(c+g(d, a, b)+in[5]+k2, 9)
	b = rot(b+g(c, d, a)+in[7]+k2, 13)
	a = rot(a+g(b, c, d)+in[0]+k2, 3)
	d = rot(d+g(a, b, c)+in[2]+k2, 5)
	c = rot(c+g(d, a, b)+in[4]+k2, 9)
	b = rot(b+g(c, d, a)+in[6]+k2, 13)

	a = rot(a+h(b, c, d)+in[3]+k3, 3)
	d = rot(d+h(a, b, c)+in[7]+k3, 9)
	c = rot(c+h(d, a, b)+in[2]+k3, 11)
	b = rot(b+h(c, d, a)+in[6]+k3, 15)
	a = rot(a+h(b, c, d)+in[1]+k3, 3)
	d = rot(d+h(a, b, c)+in[5]+k3, 9)
	c = rot(c+h(d, a, b)+in[0]+k3, 11)
	b = rot(b+h(c, d, a)+in[4]+k3, 15)

	buf[0] += a
	buf[1] += b
	buf[2] += c
	buf[3] += d
}
