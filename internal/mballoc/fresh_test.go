package mballoc

import (
	"math/rand/v2"
	"testing"
)

// TestFreshRunsModel drives noteFresh and splitFresh with random
// allocations and frees against a plain bitmap of which clusters the
// current transaction allocated: splitFresh must never call a cluster
// fresh that the model does not, must forget what it reports, and the
// list must stay sorted, merged and within its cap.
func TestFreshRunsModel(t *testing.T) {
	const clusters = 4096
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		var g group
		var model [clusters]bool // allocated by the current tid, not freed
		var used [clusters]bool  // allocated, whatever the tid
		tid := uint64(1)
		for step := 0; step < 3000; step++ {
			switch r := rng.IntN(20); {
			case r == 0: // a commit: the next transaction starts
				tid++
				model = [clusters]bool{}
			case r < 11: // allocate a free run
				start := uint32(rng.IntN(clusters))
				n := uint32(1 + rng.IntN(16))
				if start+n > clusters {
					n = clusters - start
				}
				free := true
				for c := start; c < start+n; c++ {
					free = free && !used[c]
				}
				if !free {
					continue
				}
				for c := start; c < start+n; c++ {
					used[c], model[c] = true, true
				}
				g.noteFresh(tid, start, n)
			default: // free a used run
				start := uint32(rng.IntN(clusters))
				n := uint32(1 + rng.IntN(24))
				if start+n > clusters {
					n = clusters - start
				}
				all := true
				for c := start; c < start+n; c++ {
					all = all && used[c]
				}
				if !all {
					continue
				}
				at := start
				err := g.splitFresh(tid, start, n, func(s, k uint32, fresh bool) error {
					if s != at || k == 0 {
						t.Fatalf("seed %d step %d: part %d+%d, want it to start at %d", seed, step, s, k, at)
					}
					at = s + k
					for c := s; c < s+k; c++ {
						if fresh && !model[c] {
							t.Fatalf("seed %d step %d: cluster %d called fresh, tid %d did not allocate it", seed, step, c, tid)
						}
					}
					return nil
				})
				if err != nil || at != start+n {
					t.Fatalf("seed %d step %d: parts end at %d, want %d (%v)", seed, step, at, start+n, err)
				}
				for c := start; c < start+n; c++ {
					used[c], model[c] = false, false
				}
			}
			if g.freshTid == tid {
				for i, r := range g.fresh {
					if r.n == 0 || i > 0 && g.fresh[i-1].start+g.fresh[i-1].n >= r.start {
						t.Fatalf("seed %d step %d: runs %v not sorted and merged", seed, step, g.fresh)
					}
					for c := r.start; c < r.start+r.n; c++ {
						if !model[c] {
							t.Fatalf("seed %d step %d: run %+v holds cluster %d, not allocated by tid %d", seed, step, r, c, tid)
						}
					}
				}
			}
			if len(g.fresh) > maxFresh {
				t.Fatalf("%d runs, cap %d", len(g.fresh), maxFresh)
			}
		}
	}
}

// TestFreshRunsCap fills a group's list to its cap: runs past it are not
// recorded (their frees wait for the commit), and splitting a run in the
// middle of a full list drops a piece rather than growing it.
func TestFreshRunsCap(t *testing.T) {
	var g group
	for i := uint32(0); i < maxFresh+10; i++ {
		g.noteFresh(1, i*4, 2)
	}
	if len(g.fresh) != maxFresh {
		t.Fatalf("%d runs, want the cap %d", len(g.fresh), maxFresh)
	}
	last := uint32(maxFresh+5) * 4
	err := g.splitFresh(1, last, 2, func(s, k uint32, fresh bool) error {
		if fresh {
			t.Errorf("run %d+%d past the cap called fresh", s, k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	g.fresh[0].n = 3 // one run of 3 to split in the middle: 0..3
	if err := g.splitFresh(1, 1, 1, func(s, k uint32, fresh bool) error {
		if !fresh {
			t.Errorf("cluster 1 not fresh")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(g.fresh) > maxFresh || g.fresh[0] != (freshRun{0, 1}) {
		t.Fatalf("after the split: %d runs, first %+v", len(g.fresh), g.fresh[0])
	}
}

// TestFreeReuseFresh: file data a transaction allocated and frees again is
// allocatable at once; data allocated by an earlier transaction, and
// metadata, wait for the commit that frees them.
func TestFreeReuseFresh(t *testing.T) {
	gm := kernelGeometry(4096)
	a, _ := newBare(t, gm, Config{})
	goal := uint64(8192)
	alloc := func(tx Tx) Extent {
		t.Helper()
		e, err := a.Allocate(tx, Request{Len: 8, Goal: goal, Flags: FlagTryGoal | FlagNoPrealloc})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	free := func(tx Tx, e Extent, flags FreeFlags) {
		t.Helper()
		if err := a.Free(tx, e.Start, uint64(e.Len), flags); err != nil {
			t.Fatal(err)
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
	}
	e := alloc(testTx(5))
	if e.Start != goal {
		t.Fatalf("first allocation at %d, want the goal %d", e.Start, goal)
	}
	free(testTx(5), e, FreeReuseFresh)
	if p := a.PendingFrees(); p != 0 {
		t.Fatalf("%d clusters pending after freeing fresh data, want 0", p)
	}
	if again := alloc(testTx(5)); again.Start != goal {
		t.Fatalf("fresh data freed: next allocation at %d, want %d again", again.Start, goal)
	}
	// Allocated by 5, freed by 6: held until 6 commits.
	free(testTx(6), Extent{Start: goal, Len: 8}, FreeReuseFresh)
	if p := a.PendingFrees(); p != 8 {
		t.Fatalf("%d clusters pending, want 8", p)
	}
	if next := alloc(testTx(6)); next.Start == goal {
		t.Fatalf("blocks freed by an uncommitted transaction handed out again")
	}
	// Metadata allocated and freed by one transaction still waits.
	m := alloc(testTx(6))
	free(testTx(6), m, FreeMetadata)
	if p := a.PendingFrees(); p != 16 {
		t.Fatalf("%d clusters pending after a metadata free, want 16", p)
	}
	// Half fresh, half not: a range across runs of transactions 7 and 8,
	// in a group nothing else used.
	g2 := uint64(2 * 8192)
	old, err := a.Allocate(testTx(7), Request{Len: 8, Goal: g2, Flags: FlagTryGoal | FlagNoPrealloc})
	if err != nil || old.Start != g2 {
		t.Fatalf("allocation %+v, %v; want it at %d", old, err, g2)
	}
	young, err := a.Allocate(testTx(8), Request{Len: 8, Goal: g2 + 8, Flags: FlagTryGoal | FlagNoPrealloc})
	if err != nil || young.Start != g2+8 {
		t.Fatalf("second allocation %+v, %v; want it right after %+v", young, err, old)
	}
	before := a.PendingFrees()
	free(testTx(8), Extent{Start: old.Start + 4, Len: 12}, FreeReuseFresh)
	if p := a.PendingFrees() - before; p != 4 {
		t.Fatalf("%d clusters pending, want the 4 of transaction 7's run", p)
	}
}
