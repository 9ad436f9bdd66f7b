package ext4go

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLazyTimesSet: the lock-free dirty set under concurrent markers,
// cleaners and pruning scans loses no node and counts right. Each
// goroutine owns some slots (as a node owns its inode's, under its mu)
// and adds and removes its nodes in them; a scanner prunes all the while.
func TestLazyTimesSet(t *testing.T) {
	var s lazyTimes
	const (
		blocks, perBlock = 3, 16
		owners           = 8
		rounds           = 20000
	)
	type owned struct {
		blk  uint64
		slot int
		n    *node
		in   bool
	}
	var stop atomic.Bool
	var scans sync.WaitGroup
	for range 2 {
		scans.Add(1)
		go func() {
			defer scans.Done()
			for !stop.Load() {
				s.expired(time.Time{})
			}
		}()
	}
	mine := make([][]*owned, owners)
	var wg sync.WaitGroup
	for o := range owners {
		for k := o; k < blocks*perBlock; k += owners {
			mine[o] = append(mine[o], &owned{blk: uint64(100 + k/perBlock), slot: k % perBlock, n: &node{ino: uint32(k)}})
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(o), 5))
			for range rounds {
				x := mine[o][rng.IntN(len(mine[o]))]
				if x.in {
					x.n.timesDirtyAt.Store(0)
					s.remove(x.blk, x.slot, x.n)
				} else {
					x.n.timesDirtyAt.Store(1)
					s.add(x.blk, x.slot, perBlock, x.n)
				}
				x.in = !x.in
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	scans.Wait()
	want := 0
	for _, xs := range mine {
		for _, x := range xs {
			found := false
			for _, m := range s.neighbours(nil, x.blk, nil) {
				found = found || m == x.n
			}
			if found != x.in {
				t.Errorf("block %d slot %d: in the set %v, want %v", x.blk, x.slot, found, x.in)
			}
			if x.in {
				want++
			}
		}
	}
	if got := s.count.Load(); got != int64(want) {
		t.Errorf("count %d, want %d", got, want)
	}
	if got := len(s.expired(time.Time{})); got != want {
		t.Errorf("expired lists %d nodes, want %d", got, want)
	}
}
