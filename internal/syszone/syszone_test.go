package syszone

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestZone(t *testing.T) {
	z := New([]Range{{100, 110}, {1, 3}, {3, 5}, {50, 50}, {108, 120}})
	if got, want := z.Ranges(), []Range{{1, 5}, {100, 120}}; !slices.Equal(got, want) {
		t.Fatalf("Ranges = %v, want %v", got, want)
	}
	const journal, resize = 8, 7
	z = z.WithOwner(journal, []Range{{200, 300}}).WithOwner(resize, []Range{{5, 9}})
	z = z.WithOwner(journal, []Range{{300, 310}})
	if got, want := z.Owned(journal), []Range{{200, 310}}; !slices.Equal(got, want) {
		t.Fatalf("Owned(journal) = %v, want %v", got, want)
	}
	for _, c := range []struct {
		ino          uint32
		start, count uint64
		permits      bool
		overlaps     bool
	}{
		{12, 0, 1, true, false},
		{12, 5, 1, false, true},     // the resize inode's
		{resize, 5, 4, true, true},  // its own
		{resize, 4, 2, false, true}, // 4 is fixed metadata
		{12, 9, 91, true, false},    // between
		{12, 99, 2, false, true},
		{12, 119, 1, false, true},
		{12, 120, 80, true, false},
		{journal, 200, 110, true, true},
		{journal, 150, 100, true, true}, // its own and free blocks
		{journal, 100, 1, false, true},
		{resize, 250, 1, false, true}, // the journal's
		{12, 309, 1, false, true},
		{12, 310, 1 << 40, true, false},
		{12, 1<<64 - 2, 4, false, true}, // wraps
		{12, 7, 0, true, false},         // nothing
	} {
		if got := z.Permits(c.ino, c.start, c.count); got != c.permits {
			t.Errorf("Permits(%d, %d, %d) = %v, want %v", c.ino, c.start, c.count, got, c.permits)
		}
		if got := z.Overlaps(c.start, c.count); got != c.overlaps {
			t.Errorf("Overlaps(%d, %d) = %v, want %v", c.start, c.count, got, c.overlaps)
		}
	}
	var empty *Zone
	if !empty.Permits(1, 0, 10) || empty.Overlaps(0, 10) || empty.Ranges() != nil {
		t.Error("the nil zone must be empty")
	}
}

// TestZoneMatchesBlockByBlock compares Permits and Overlaps with a block by
// block model on random zones.
func TestZoneMatchesBlockByBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const blocks = 200
	for iter := 0; iter < 300; iter++ {
		var fixed []Range
		owner := make([]uint32, blocks) // 0: free, 1: fixed, else the owning inode
		for range rng.IntN(8) {
			s := rng.Uint64N(blocks)
			e := min(blocks, s+rng.Uint64N(20))
			fixed = append(fixed, Range{s, e})
			for b := s; b < e; b++ {
				owner[b] = 1
			}
		}
		z := New(fixed)
		for _, ino := range []uint32{7, 8} {
			var own []Range
			for range rng.IntN(4) {
				s := rng.Uint64N(blocks)
				e := min(blocks, s+rng.Uint64N(20))
				// Owned ranges keep off the fixed ones and the other
				// owner's, as the callers make them.
				ok := true
				for b := s; b < e; b++ {
					ok = ok && (owner[b] == 0 || owner[b] == ino)
				}
				if !ok {
					continue
				}
				own = append(own, Range{s, e})
				for b := s; b < e; b++ {
					owner[b] = ino
				}
			}
			z = z.WithOwner(ino, own)
		}
		for range 200 {
			s := rng.Uint64N(blocks)
			n := rng.Uint64N(blocks-s) + 1
			ino := []uint32{7, 8, 12}[rng.IntN(3)]
			permits, overlaps := true, false
			for b := s; b < s+n; b++ {
				if owner[b] != 0 {
					overlaps = true
					if owner[b] != ino {
						permits = false
					}
				}
			}
			if got := z.Permits(ino, s, n); got != permits {
				t.Fatalf("zone %v owned %v/%v: Permits(%d, %d, %d) = %v, want %v", z.fixed, z.Owned(7), z.Owned(8), ino, s, n, got, permits)
			}
			if got := z.Overlaps(s, n); got != overlaps {
				t.Fatalf("Overlaps(%d, %d) = %v, want %v", s, n, got, overlaps)
			}
		}
	}
}

func BenchmarkPermits(b *testing.B) {
	var fixed []Range
	for g := uint64(0); g < 4096; g += 16 { // flex groups of 16
		base := g * 32768
		fixed = append(fixed, Range{base, base + 64}, Range{base + 1024, base + 1024 + 16*512})
	}
	z := New(fixed).WithOwner(8, []Range{{1 << 20, 1<<20 + 32768}})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		z.Permits(12, uint64(i*7919)%(1<<27), 8)
	}
}
