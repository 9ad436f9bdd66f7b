package mballoc

import (
	"fmt"
	"math/bits"
)

// buddy is the in-memory allocation state of one group (kernel: the buddy
// cache pages plus the counters of ext4_group_info).
//
// Order 0 is the in-core bitmap: a set bit is a cluster that may not be
// handed out (in use on disk, preallocated, freed by a transaction that has
// not committed yet, or past the end of the group). For order o >= 1,
// orders[o] has one bit per aligned chunk of 2^o clusters; a clear bit means
// the chunk is wholly free and is not part of a larger free chunk, so every
// free cluster belongs to exactly one free chunk, found at the lowest order o
// whose bit is clear (or at order 0 if none is). counters[o] counts those
// chunks. Orders run up to blkBits+1 as in the kernel.
//
// A buddy is not safe for concurrent use; its group's lock protects it.
type buddy struct {
	nbits     uint32     // clusters in the group; bits at and past nbits are set
	maxOrder  int        // highest order
	bitmap    []uint64   // order 0
	orders    [][]uint64 // orders[o] for 1 <= o <= maxOrder; orders[0] is nil
	obits     []uint32   // bits held at each order
	counters  []uint32   // free chunks per order (bb_counters)
	free      uint32     // free clusters (bb_free)
	fragments uint32     // runs of free clusters (bb_fragments)
	firstFree uint32     // lowest free cluster, nbits if none (bb_first_free)
}

// newBuddy returns an all-used buddy for a group of nbits clusters, with a
// bitmap of bitmapBits bits (8 * block size) and orders up to maxOrder.
func newBuddy(nbits, bitmapBits uint32, maxOrder int) *buddy {
	b := &buddy{nbits: nbits, maxOrder: maxOrder}
	b.obits = make([]uint32, maxOrder+1)
	b.orders = make([][]uint64, maxOrder+1)
	b.counters = make([]uint32, maxOrder+1)
	total := 0
	for o := 0; o <= maxOrder; o++ {
		n := bitmapBits >> o
		if n == 0 {
			n = 1
		}
		b.obits[o] = n
		total += int(n+63) / 64
	}
	// One allocation for all orders keeps a group's buddy together in memory.
	words := make([]uint64, total)
	for o := 0; o <= maxOrder; o++ {
		n := int(b.obits[o]+63) / 64
		w := words[:n:n]
		words = words[n:]
		if o == 0 {
			b.bitmap = w
		} else {
			b.orders[o] = w
		}
	}
	b.reset()
	return b
}

// reset marks everything used.
func (b *buddy) reset() {
	fill(b.bitmap)
	for o := 1; o <= b.maxOrder; o++ {
		fill(b.orders[o])
	}
	clear(b.counters)
	b.free, b.fragments, b.firstFree = 0, 0, b.nbits
}

func fill(w []uint64) {
	for i := range w {
		w[i] = ^uint64(0)
	}
}

// generate rebuilds the buddy from an in-core bitmap (kernel:
// ext4_mb_generate_buddy). src holds at least nbits bits; bits past nbits
// are taken as used whatever src says.
func (b *buddy) generate(src []uint64) {
	b.reset()
	copy(b.bitmap, src)
	if b.nbits < uint32(len(b.bitmap))*64 {
		setRange(b.bitmap, b.nbits, uint32(len(b.bitmap))*64-b.nbits)
	}
	i := nextZero(b.bitmap, 0, b.nbits)
	b.firstFree = i
	for i < b.nbits {
		j := nextOne(b.bitmap, i, b.nbits)
		b.fragments++
		b.free += j - i
		b.markFreeSimple(i, j-i)
		i = nextZero(b.bitmap, j, b.nbits)
	}
}

// markFreeSimple records [first, first+n) as free chunks, each as large as
// its alignment and the remaining length allow (kernel:
// ext4_mb_mark_free_simple). It does not touch the order-0 bitmap.
func (b *buddy) markFreeSimple(first, n uint32) {
	border := uint32(1) << b.maxOrder
	for n > 0 {
		o := bits.TrailingZeros32(first | border)
		if l := bits.Len32(n) - 1; l < o {
			o = l
		}
		b.counters[o]++
		if o > 0 {
			clearBit(b.orders[o], first>>o)
		}
		first += 1 << o
		n -= 1 << o
	}
}

// orderOf returns the order of the free chunk holding free cluster c
// (kernel: mb_find_order_for_block).
func (b *buddy) orderOf(c uint32) int {
	for o := 1; o <= b.maxOrder; o++ {
		if !testBit(b.orders[o], c>>o) {
			return o
		}
	}
	return 0
}

// largestOrder returns the highest order with a free chunk, or -1.
func (b *buddy) largestOrder() int {
	for o := b.maxOrder; o >= 0; o-- {
		if b.counters[o] > 0 {
			return o
		}
	}
	return -1
}

// findExtent returns the length of the free extent starting at cluster c,
// walking whole buddy chunks until it holds at least needed clusters; the
// result may exceed needed (kernel: mb_find_extent). It returns 0 if c is in
// use, and an error if the chunks run past the group's end.
func (b *buddy) findExtent(c, needed uint32) (uint32, error) {
	if c >= b.nbits || testBit(b.bitmap, c) {
		return 0, nil
	}
	o := b.orderOf(c)
	n := uint32(1)<<o - c&(1<<o-1)
	idx := c >> o
	for needed > n {
		if idx+1 >= b.obits[o] {
			break
		}
		next := (idx + 1) << o
		if next >= uint32(len(b.bitmap))*64 || testBit(b.bitmap, next) {
			break
		}
		o = b.orderOf(next)
		idx = next >> o
		n += 1 << o
	}
	if c+n > b.nbits {
		return 0, fmt.Errorf("free chunk at %d runs %d clusters past the group end", c, c+n-b.nbits)
	}
	return n, nil
}

// markUsed takes [start, start+n) out of the buddy, splitting the chunks it
// cuts (kernel: mb_mark_used). The range must be wholly free.
func (b *buddy) markUsed(start, n uint32) {
	b.free -= n
	leftFree := start > 0 && !testBit(b.bitmap, start-1)
	rightFree := start+n < b.nbits && !testBit(b.bitmap, start+n)
	switch {
	case leftFree && rightFree:
		b.fragments++
	case !leftFree && !rightFree:
		b.fragments--
	}
	s, l := start, n
	for l > 0 {
		o := b.orderOf(s)
		size := uint32(1) << o
		if s&(size-1) == 0 && l >= size {
			// The whole chunk goes.
			if o > 0 {
				setBit(b.orders[o], s>>o)
			}
			b.counters[o]--
			s += size
			l -= size
			continue
		}
		// Split: the chunk goes, its parts outside the range come back.
		setBit(b.orders[o], s>>o)
		b.counters[o]--
		cs := s &^ (size - 1)
		ce := cs + size
		if s > cs {
			b.markFreeSimple(cs, s-cs)
		}
		if s+l < ce {
			b.markFreeSimple(s+l, ce-(s+l))
			break
		}
		l = s + l - ce
		s = ce
	}
	setRange(b.bitmap, start, n)
	if b.firstFree >= start && b.firstFree < start+n {
		b.firstFree = nextZero(b.bitmap, start+n, b.nbits)
	}
}

// freeRange returns [first, first+n) to the buddy, coalescing buddies
// (kernel: mb_free_blocks). Every cluster of the range must be in use; if
// one is not, nothing changes and the error names it.
func (b *buddy) freeRange(first, n uint32) error {
	if n == 0 {
		return nil
	}
	if first+n > b.nbits || first+n < first {
		return fmt.Errorf("freeing clusters %d+%d past the group end %d", first, n, b.nbits)
	}
	if ok, at := allSet(b.bitmap, first, n); !ok {
		return fmt.Errorf("freeing cluster %d which is already free", at)
	}
	last := first + n - 1
	leftFree := first > 0 && !testBit(b.bitmap, first-1)
	rightFree := last+1 < b.nbits && !testBit(b.bitmap, last+1)
	clearRange(b.bitmap, first, n)
	b.free += n
	if first < b.firstFree {
		b.firstFree = first
	}
	switch {
	case leftFree && rightFree:
		b.fragments--
	case !leftFree && !rightFree:
		b.fragments++
	}
	// Order 0: an odd first cluster pairs with its left neighbour, an even
	// last one with its right neighbour; a free partner leaves order 0 and
	// goes up with the pair, a used one leaves the cluster alone at order 0.
	f, l := int64(first), int64(last)
	if f&1 == 1 {
		if leftFree {
			b.counters[0]--
		} else {
			b.counters[0]++
			f++
		}
	}
	if l&1 == 0 {
		if rightFree {
			b.counters[0]--
		} else {
			b.counters[0]++
			l--
		}
	}
	if f <= l {
		b.markFreeUp(f>>1, l>>1)
	}
	return nil
}

// markFreeUp frees chunks [first, last] of order 1 and merges upward (kernel:
// mb_buddy_mark_free): at each order the border chunks either merge with a
// free partner (which then leaves this order) or stay at this order.
func (b *buddy) markFreeUp(first, last int64) {
	for o := 1; ; o++ {
		w := b.orders[o]
		if o == b.maxOrder {
			for c := first; c <= last; c++ {
				clearBit(w, uint32(c))
			}
			b.counters[o] += uint32(last - first + 1)
			return
		}
		if first&1 == 1 {
			if testBit(w, uint32(first-1)) {
				clearBit(w, uint32(first))
				b.counters[o]++
				first++
			} else {
				setBit(w, uint32(first-1))
				b.counters[o]--
				first--
			}
		}
		if last&1 == 0 {
			if testBit(w, uint32(last+1)) {
				clearBit(w, uint32(last))
				b.counters[o]++
				last--
			} else {
				setBit(w, uint32(last+1))
				b.counters[o]--
				last++
			}
		}
		if first > last {
			return
		}
		first >>= 1
		last >>= 1
	}
}
