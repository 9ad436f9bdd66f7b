package mballoc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refBuddy computes the buddy state of a bitmap the slow, obvious way, one
// chunk at a time: the reference the generated and incremental buddies must
// equal (after the kernel's mballoc-test test_mb_generate_buddy).
type refBuddy struct {
	orders    [][]bool // orders[o][k]: chunk k of order o is free at order o
	counters  []uint32
	free      uint32
	fragments uint32
	firstFree uint32
	largest   int
}

func reference(used func(uint32) bool, nbits, bitmapBits uint32, maxOrder int) refBuddy {
	whole := func(o int, k uint32) bool {
		s := k << o
		e := s + 1<<o
		if e > nbits {
			return false
		}
		for c := s; c < e; c++ {
			if used(c) {
				return false
			}
		}
		return true
	}
	r := refBuddy{orders: make([][]bool, maxOrder+1), counters: make([]uint32, maxOrder+1), firstFree: nbits, largest: -1}
	for o := 1; o <= maxOrder; o++ {
		n := max(bitmapBits>>o, 1)
		r.orders[o] = make([]bool, n)
		for k := uint32(0); k < n; k++ {
			if whole(o, k) && (o == maxOrder || !whole(o+1, k>>1)) {
				r.orders[o][k] = true
				r.counters[o]++
			}
		}
	}
	prev := false
	for c := uint32(0); c < nbits; c++ {
		f := !used(c)
		if f {
			r.free++
			if !prev {
				r.fragments++
			}
			if r.firstFree == nbits {
				r.firstFree = c
			}
			if !whole(1, c>>1) {
				r.counters[0]++
			}
		}
		prev = f
	}
	for o := maxOrder; o >= 0; o-- {
		if r.counters[o] > 0 {
			r.largest = o
			break
		}
	}
	return r
}

// sameAsReference compares a buddy with the reference for its own bitmap.
func sameAsReference(b *buddy) error {
	r := reference(func(c uint32) bool { return testBit(b.bitmap, c) }, b.nbits, b.obits[0], b.maxOrder)
	if b.free != r.free || b.fragments != r.fragments || b.firstFree != r.firstFree {
		return fmt.Errorf("free/fragments/first free %d/%d/%d, want %d/%d/%d",
			b.free, b.fragments, b.firstFree, r.free, r.fragments, r.firstFree)
	}
	if !slices.Equal(b.counters, r.counters) {
		return fmt.Errorf("counters %v, want %v", b.counters, r.counters)
	}
	if lo := b.largestOrder(); lo != r.largest {
		return fmt.Errorf("largest order %d, want %d", lo, r.largest)
	}
	for o := 1; o <= b.maxOrder; o++ {
		for k := range r.orders[o] {
			if got := !testBit(b.orders[o], uint32(k)); got != r.orders[o][k] {
				return fmt.Errorf("order %d chunk %d free=%v, want %v", o, k, got, r.orders[o][k])
			}
		}
	}
	for c := b.nbits; c < b.obits[0]; c++ {
		if !testBit(b.bitmap, c) {
			return fmt.Errorf("bit %d past the group end is clear", c)
		}
	}
	return nil
}

// buddyGeoms are the shapes the buddy tests run on: 1k and 4k blocks, full
// and short groups.
var buddyGeoms = []struct {
	name             string
	nbits, bitmapBit uint32
	maxOrder         int
}{
	{"1k-full", 8192, 8192, 11},
	{"1k-short", 5000, 8192, 11},
	{"4k-full", 32768, 32768, 13},
	{"4k-short", 20001, 32768, 13},
}

func randomBitmap(r *rand.Rand, words int, density float64) []uint64 {
	w := make([]uint64, words)
	// Runs of random length give both long free runs and fragmentation.
	used := r.Float64() < density
	for c := 0; c < words*64; {
		n := 1 + r.IntN(1+r.IntN(300))
		for i := 0; i < n && c < words*64; i, c = i+1, c+1 {
			if used {
				w[c/64] |= 1 << (c % 64)
			}
		}
		used = r.Float64() < density
	}
	return w
}

func TestGenerateBuddyEqualsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range buddyGeoms {
		for i := 0; i < 6; i++ {
			b := newBuddy(g.nbits, g.bitmapBit, g.maxOrder)
			src := randomBitmap(r, int(g.bitmapBit/64), []float64{0, 0.2, 0.5, 0.8, 1, 0.05}[i])
			b.generate(src)
			if err := sameAsReference(b); err != nil {
				t.Fatalf("%s #%d: %v", g.name, i, err)
			}
		}
	}
}

// TestIncrementalEqualsRebuild checks the kernel's test_mb_mark_used and
// test_mb_free_blocks property: after every incremental mark-used or free,
// the buddy equals one generated from scratch from the same bitmap.
func TestIncrementalEqualsRebuild(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, g := range buddyGeoms {
		b := newBuddy(g.nbits, g.bitmapBit, g.maxOrder)
		b.generate(randomBitmap(r, int(g.bitmapBit/64), 0.4))
		fresh := newBuddy(g.nbits, g.bitmapBit, g.maxOrder)
		for step := 0; step < 400; step++ {
			start := uint32(r.IntN(int(g.nbits)))
			if r.IntN(2) == 0 {
				// mark a free run (or part of it) used
				if testBit(b.bitmap, start) {
					continue
				}
				end := nextOne(b.bitmap, start, g.nbits)
				n := 1 + uint32(r.IntN(int(end-start)))
				b.markUsed(start, n)
			} else {
				if !testBit(b.bitmap, start) || start >= g.nbits {
					continue
				}
				end := nextZero(b.bitmap, start, g.nbits)
				n := 1 + uint32(r.IntN(int(end-start)))
				if err := b.freeRange(start, n); err != nil {
					t.Fatalf("%s step %d: %v", g.name, step, err)
				}
			}
			if err := sameAsReference(b); err != nil {
				t.Fatalf("%s step %d: %v", g.name, step, err)
			}
			fresh.generate(b.bitmap)
			if !slices.Equal(fresh.counters, b.counters) || fresh.fragments != b.fragments || fresh.free != b.free {
				t.Fatalf("%s step %d: incremental differs from rebuild", g.name, step)
			}
			for o := 1; o <= b.maxOrder; o++ {
				if !slices.Equal(fresh.orders[o], b.orders[o]) {
					t.Fatalf("%s step %d: order %d differs from rebuild", g.name, step, o)
				}
			}
		}
	}
}

func TestFreeRangeRejectsDoubleFree(t *testing.T) {
	b := newBuddy(8192, 8192, 11)
	b.generate(make([]uint64, 128))
	b.markUsed(100, 50)
	if err := b.freeRange(90, 20); err == nil {
		t.Fatal("freeing a partly free range succeeded")
	}
	if err := sameAsReference(b); err != nil {
		t.Fatalf("state changed by a refused free: %v", err)
	}
	if err := b.freeRange(100, 50); err != nil {
		t.Fatal(err)
	}
	if b.free != 8192 || b.fragments != 1 || b.counters[11] != 4 {
		t.Fatalf("after freeing all: free %d fragments %d counters %v", b.free, b.fragments, b.counters)
	}
}

func TestFindExtent(t *testing.T) {
	b := newBuddy(8192, 8192, 11)
	w := make([]uint64, 128)
	setRange(w, 0, 3)      // 0..2 used
	setRange(w, 1000, 24)  // 1000..1023 used
	setRange(w, 5000, 100) // 5000..5099 used
	b.generate(w)
	cases := []struct{ c, need, min, max uint32 }{
		{0, 1, 0, 0},        // used
		{3, 1, 1, 1},        // order-0 chunk
		{3, 5, 5, 997},      // grows across chunks
		{3, 2000, 997, 997}, // stops at the used run
		{4, 4, 4, 996},      // aligned order-2 chunk
		{1024, 10000, 3976, 3976},
		{8000, 500, 192, 192}, // stops at the group end
	}
	for _, c := range cases {
		n, err := b.findExtent(c.c, c.need)
		if err != nil || n < c.min || n > c.max {
			t.Errorf("findExtent(%d, %d) = %d, %v; want in [%d, %d]", c.c, c.need, n, err, c.min, c.max)
		}
		if n > 0 {
			if ok, _ := allClear(b.bitmap, c.c, n); !ok {
				t.Errorf("findExtent(%d, %d) = %d covers used clusters", c.c, c.need, n)
			}
		}
	}
}

func BenchmarkGenerateBuddy(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	src := randomBitmap(r, 512, 0.5)
	bd := newBuddy(32768, 32768, 13)
	for b.Loop() {
		bd.generate(src)
	}
}
