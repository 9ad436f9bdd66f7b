package mballoc

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// orderIndex is one of the two group indexes: for each order, the set of
// groups filed under it (kernel: s_mb_largest_free_orders and
// s_mb_avg_fragment_size, xarrays since 6.17). A set is a bitmap of group
// numbers changed with atomic OR/AND-NOT, so filing a group never takes a
// lock and a walk reads the words without one: a walk may see a group in
// two orders or in none for a moment, which is fine because the scanner
// re-checks the group under its lock.
//
// In the legacy configuration every order also has an RWMutex taken for
// writing on each change and for reading on each lookup, as the kernel's
// per-order list locks were before the 2025 series.
type orderIndex struct {
	sets   [][]atomic.Uint64
	counts []atomic.Int64 // groups per order, to skip empty orders quickly
	locks  []sync.RWMutex // legacy only
	legacy bool
}

func newOrderIndex(orders int, groups uint32, legacy bool) *orderIndex {
	ix := &orderIndex{
		sets:   make([][]atomic.Uint64, orders),
		counts: make([]atomic.Int64, orders),
		legacy: legacy,
	}
	words := int(groups+63) / 64
	for o := range ix.sets {
		ix.sets[o] = make([]atomic.Uint64, words)
	}
	if legacy {
		ix.locks = make([]sync.RWMutex, orders)
	}
	return ix
}

// move refiles group gi from order *cur to order to (-1: no order). The
// caller holds the group's lock, which serializes moves of one group.
func (ix *orderIndex) move(gi uint32, cur *int8, to int) {
	from := int(*cur)
	if from == to {
		return
	}
	w, m := gi>>6, uint64(1)<<(gi&63)
	if from >= 0 {
		if ix.legacy {
			ix.locks[from].Lock()
		}
		ix.sets[from][w].And(^m)
		ix.counts[from].Add(-1)
		if ix.legacy {
			ix.locks[from].Unlock()
		}
	}
	if to >= 0 {
		if ix.legacy {
			ix.locks[to].Lock()
		}
		ix.sets[to][w].Or(m)
		ix.counts[to].Add(1)
		if ix.legacy {
			ix.locks[to].Unlock()
		}
	}
	*cur = int8(to)
}

// empty reports whether no group is filed under order o.
func (ix *orderIndex) empty(o int) bool { return ix.counts[o].Load() <= 0 }

// next returns the first group filed under order o in [from, end).
func (ix *orderIndex) next(o int, from, end uint32) (uint32, bool) {
	if ix.legacy {
		ix.locks[o].RLock()
		defer ix.locks[o].RUnlock()
	}
	set := ix.sets[o]
	for from < end {
		i := from >> 6
		word := set[i].Load() &^ (1<<(from&63) - 1)
		if word != 0 {
			g := i<<6 + uint32(bits.TrailingZeros64(word))
			if g < end {
				return g, true
			}
			return 0, false
		}
		from = (i + 1) << 6
	}
	return 0, false
}

// avgFragOrder is the index order for an average free run of n clusters
// (kernel: mb_avg_fragment_size_order): runs of 2^(k+1) .. 2^(k+2)-1 go to k,
// runs of 1 to 0 as well.
func avgFragOrder(n uint32, numOrders int) int {
	o := bits.Len32(n) - 2
	if o < 0 {
		return 0
	}
	if o >= numOrders {
		o = numOrders - 1
	}
	return o
}
