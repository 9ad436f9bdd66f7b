package mkfs

import "math/bits"

// chunkBits is the span of one lazily allocated bitmap chunk (512 bytes of
// words): only chunks holding a set bit exist, so a 64 TiB filesystem, whose
// metadata sits in a few groups out of every flex group, needs megabytes
// rather than the 2 GiB of a dense bitmap.
const (
	chunkBits  = 1 << 12
	chunkWords = chunkBits / 64
)

// bitmap is an in-memory bitmap over [0, n), like e2fsprogs' block and
// inode bitmaps. Searches run a word at a time and skip absent (all-zero)
// chunks, so scanning millions of blocks takes microseconds.
type bitmap struct {
	chunks map[uint64]*[chunkWords]uint64
	n      uint64
}

func newBitmap(n uint64) *bitmap {
	return &bitmap{chunks: map[uint64]*[chunkWords]uint64{}, n: n}
}

// word returns the 64 bits holding bit b (0 in an absent chunk).
func (m *bitmap) word(b uint64) uint64 {
	if c := m.chunks[b/chunkBits]; c != nil {
		return c[b%chunkBits/64]
	}
	return 0
}

func (m *bitmap) test(b uint64) bool { return m.word(b)&(1<<(b%64)) != 0 }

func (m *bitmap) set(b uint64) {
	c := m.chunks[b/chunkBits]
	if c == nil {
		c = new([chunkWords]uint64)
		m.chunks[b/chunkBits] = c
	}
	c[b%chunkBits/64] |= 1 << (b % 64)
}

// setRange marks [b, b+n).
func (m *bitmap) setRange(b, n uint64) {
	for n > 0 {
		if b%64 == 0 && n >= 64 {
			m.set(b) // allocates the chunk
			c := m.chunks[b/chunkBits]
			c[b%chunkBits/64] = ^uint64(0)
			b, n = b+64, n-64
			continue
		}
		m.set(b)
		b, n = b+1, n-1
	}
}

// find returns the first bit in [from, to] (inclusive) whose value is want.
func (m *bitmap) find(from, to uint64, want bool) (uint64, bool) {
	if to >= m.n {
		to = m.n - 1
	}
	for b := from; b <= to; {
		c := m.chunks[b/chunkBits]
		if c == nil {
			if !want {
				return b, true // an absent chunk is all zeros
			}
			b = b&^(chunkBits-1) + chunkBits
			continue
		}
		end := min(to, b|(chunkBits-1))
		for b <= end {
			w := c[b%chunkBits/64]
			if !want {
				w = ^w
			}
			w &= ^uint64(0) << (b % 64)
			if w != 0 {
				r := b&^63 + uint64(bits.TrailingZeros64(w))
				if r > to {
					return 0, false
				}
				return r, true
			}
			b = b&^63 + 64
		}
	}
	return 0, false
}

// firstZero is ext2fs_find_first_zero_block_bitmap2 over [from, to].
func (m *bitmap) firstZero(from, to uint64) (uint64, bool) { return m.find(from, to, false) }

// firstSet is ext2fs_find_first_set_block_bitmap2 over [from, to].
func (m *bitmap) firstSet(from, to uint64) (uint64, bool) { return m.find(from, to, true) }

// clear reports whether [b, b+n) is entirely unset and inside the bitmap.
func (m *bitmap) clear(b, n uint64) bool {
	if b+n > m.n {
		return false
	}
	_, found := m.firstSet(b, b+n-1)
	return !found
}

// count returns the number of set bits in [from, to].
func (m *bitmap) count(from, to uint64) uint64 {
	var c uint64
	for k, ch := range m.chunks {
		lo, hi := k*chunkBits, k*chunkBits+chunkBits-1
		if hi < from || lo > to {
			continue
		}
		if lo >= from && hi <= to {
			for _, w := range ch {
				c += uint64(bits.OnesCount64(w))
			}
			continue
		}
		for b := max(lo, from); b <= min(hi, to); b++ {
			if ch[b%chunkBits/64]&(1<<(b%64)) != 0 {
				c++
			}
		}
	}
	return c
}

// bytes copies bits [from, from+8*len(dst)) into dst, least significant bit
// first, the on-disk bitmap order; bits past the end read as 0.
func (m *bitmap) bytes(dst []byte, from uint64) {
	var c *[chunkWords]uint64
	ck := ^uint64(0)
	bit := func(b uint64) uint64 { // bit b as 0 or 1
		if b >= m.n {
			return 0
		}
		if b/chunkBits != ck {
			ck, c = b/chunkBits, m.chunks[b/chunkBits]
		}
		if c == nil {
			return 0
		}
		return c[b%chunkBits/64] >> (b % 64) & 1
	}
	for i := range dst {
		b := from + uint64(i)*8
		if b%64 <= 56 && b+7 < m.n {
			if b/chunkBits != ck {
				ck, c = b/chunkBits, m.chunks[b/chunkBits]
			}
			if c == nil {
				dst[i] = 0
			} else {
				dst[i] = byte(c[b%chunkBits/64] >> (b % 64)) // within one word
			}
			continue
		}
		var v byte
		for j := uint64(0); j < 8; j++ {
			v |= byte(bit(b+j)) << j
		}
		dst[i] = v
	}
}
