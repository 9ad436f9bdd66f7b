package mballoc

import (
	"math/rand/v2"
	"testing"
)

// TestMarkRange: random used and free markings over group boundaries leave
// exactly the model's bitmap, consistent buddies and counters; marking a
// preallocated or to-be-freed range is refused.
func TestMarkRange(t *testing.T) {
	for _, bs := range []uint32{1024, 4096} {
		a, s := newBare(t, kernelGeometry(bs), Config{})
		model := map[uint64]bool{}
		r := rand.New(rand.NewPCG(1, uint64(bs)))
		for i := 0; i < 300; i++ {
			start := uint64(r.IntN(4*8192-1) + 1)
			n := uint64(r.IntN(3000) + 1)
			n = min(n, 4*8192-start)
			used := r.IntN(2) == 0
			if err := a.MarkRange(nil, start, n, used); err != nil {
				t.Fatal(err)
			}
			for b := start; b < start+n; b++ {
				model[b] = used
			}
		}
		for b := uint64(1); b < 4*8192; b++ {
			if s.IsUsed(b) != model[b] {
				t.Fatalf("bs %d: block %d used=%v, model %v", bs, b, s.IsUsed(b), model[b])
			}
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
		// Allocations still find only free blocks.
		for {
			e, err := a.Allocate(nil, Request{Len: 64})
			if err != nil {
				break
			}
			for b := e.Start; b < e.End(); b++ {
				if model[b] {
					t.Fatalf("bs %d: allocated block %d, which was marked used", bs, b)
				}
				model[b] = true
			}
		}
		e, err := a.Allocate(nil, Request{Len: 1})
		if err == nil {
			t.Fatalf("allocated %v from a full filesystem", e)
		}
	}
	a, _ := newBare(t, kernelGeometry(4096), Config{})
	e, err := a.Allocate(testTx(1), Request{Len: 8, Goal: 100, Flags: FlagTryGoal})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(testTx(1), e.Start, 8, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.MarkRange(nil, e.Start, 1, true); err == nil {
		t.Fatal("marked a block that waits for its commit to be freed")
	}
	if err := a.MarkRange(nil, 0, 1<<40, true); err == nil {
		t.Fatal("marked blocks outside the filesystem")
	}
}
