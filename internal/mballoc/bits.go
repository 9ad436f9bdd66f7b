package mballoc

import "math/bits"

// Bit helpers over []uint64 words, bit i of the bitmap being bit i%64 of
// word i/64. That is the on-disk ext4 bitmap order (little-endian bytes,
// least significant bit first) read as little-endian 64-bit words.

func testBit(w []uint64, i uint32) bool { return w[i>>6]&(1<<(i&63)) != 0 }
func setBit(w []uint64, i uint32)       { w[i>>6] |= 1 << (i & 63) }
func clearBit(w []uint64, i uint32)     { w[i>>6] &^= 1 << (i & 63) }

// rangeMask returns the mask of bits [lo, hi) within one word, 0 <= lo < hi <= 64.
func rangeMask(lo, hi uint32) uint64 {
	if hi-lo == 64 {
		return ^uint64(0)
	}
	return ((1 << (hi - lo)) - 1) << lo
}

// setRange sets bits [start, start+n).
func setRange(w []uint64, start, n uint32) {
	for n > 0 {
		i, lo := start>>6, start&63
		hi := min(lo+n, 64)
		w[i] |= rangeMask(lo, hi)
		n -= hi - lo
		start += hi - lo
	}
}

// clearRange clears bits [start, start+n).
func clearRange(w []uint64, start, n uint32) {
	for n > 0 {
		i, lo := start>>6, start&63
		hi := min(lo+n, 64)
		w[i] &^= rangeMask(lo, hi)
		n -= hi - lo
		start += hi - lo
	}
}

// allSet reports whether bits [start, start+n) are all set, and if not the
// first clear one.
func allSet(w []uint64, start, n uint32) (bool, uint32) {
	for n > 0 {
		i, lo := start>>6, start&63
		hi := min(lo+n, 64)
		m := rangeMask(lo, hi)
		if miss := ^w[i] & m; miss != 0 {
			return false, i<<6 + uint32(bits.TrailingZeros64(miss))
		}
		n -= hi - lo
		start += hi - lo
	}
	return true, 0
}

// allClear reports whether bits [start, start+n) are all clear, and if not
// the first set one.
func allClear(w []uint64, start, n uint32) (bool, uint32) {
	for n > 0 {
		i, lo := start>>6, start&63
		hi := min(lo+n, 64)
		m := rangeMask(lo, hi)
		if hit := w[i] & m; hit != 0 {
			return false, i<<6 + uint32(bits.TrailingZeros64(hit))
		}
		n -= hi - lo
		start += hi - lo
	}
	return true, 0
}

// nextZero returns the first clear bit in [from, max), or max.
func nextZero(w []uint64, from, max uint32) uint32 {
	if from >= max {
		return max
	}
	i := from >> 6
	word := ^w[i] &^ ((1 << (from & 63)) - 1)
	for {
		if word != 0 {
			r := i<<6 + uint32(bits.TrailingZeros64(word))
			if r > max {
				return max
			}
			return r
		}
		i++
		if i<<6 >= max {
			return max
		}
		word = ^w[i]
	}
}

// nextOne returns the first set bit in [from, max), or max.
func nextOne(w []uint64, from, max uint32) uint32 {
	if from >= max {
		return max
	}
	i := from >> 6
	word := w[i] &^ ((1 << (from & 63)) - 1)
	for {
		if word != 0 {
			r := i<<6 + uint32(bits.TrailingZeros64(word))
			if r > max {
				return max
			}
			return r
		}
		i++
		if i<<6 >= max {
			return max
		}
		word = w[i]
	}
}

// prevOneEnd returns one past the last set bit below before, or 0 when
// every bit below it is clear: where a run of clear bits ending at before
// starts.
func prevOneEnd(w []uint64, before uint32) uint32 {
	if before == 0 {
		return 0
	}
	i := (before - 1) >> 6
	word := w[i]
	if r := before & 63; r != 0 {
		word &= 1<<r - 1
	}
	for {
		if word != 0 {
			return i<<6 + uint32(63-bits.LeadingZeros64(word)) + 1
		}
		if i == 0 {
			return 0
		}
		i--
		word = w[i]
	}
}

// countOnes returns the number of set bits in [start, start+n).
func countOnes(w []uint64, start, n uint32) uint32 {
	var c uint32
	for n > 0 {
		i, lo := start>>6, start&63
		hi := min(lo+n, 64)
		c += uint32(bits.OnesCount64(w[i] & rangeMask(lo, hi)))
		n -= hi - lo
		start += hi - lo
	}
	return c
}

// wordsFromBytes fills dst from an on-disk bitmap; missing bytes read as set
// (in use), as the padding of a short bitmap block must be.
func wordsFromBytes(dst []uint64, src []byte) {
	for i := range dst {
		var v uint64
		for j := 0; j < 8; j++ {
			b := byte(0xff)
			if k := i*8 + j; k < len(src) {
				b = src[k]
			}
			v |= uint64(b) << (8 * j)
		}
		dst[i] = v
	}
}

// bytesFromWords writes words as on-disk bitmap bytes into dst.
func bytesFromWords(dst []byte, src []uint64) {
	for k := range dst {
		dst[k] = byte(src[k/8] >> (8 * (k % 8)))
	}
}
