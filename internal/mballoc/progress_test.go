package mballoc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSleepingHolder holds one group's lock for a while, as a goroutine
// preempted inside its critical section does (its thread taken away for a
// scheduler tick or more), while other goroutines allocate in the ways
// that meet that group: streams whose next blocks are in it (fallocate's
// unnormalized appends and buffered writes' normalized ones, with an
// inode preallocation there), and small files whose locality group's
// preallocation is there. The small files have somewhere else to go and
// must all be placed while the lock is held; the streams may wait for
// their own blocks, parked, and must finish once it is let go. No
// allocation may look at more than a bounded number of groups (package
// comment: progress).
func TestSleepingHolder(t *testing.T) {
	for _, scan := range []OptimizeScan{OptimizeScanOff, OptimizeScanOn} {
		t.Run("optimize_scan="+scan.String(), func(t *testing.T) { runSleepingHolder(t, scan) })
	}
}

func runSleepingHolder(t *testing.T, scan OptimizeScan) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 4096, BlocksCount: 64 * 4096, LogGroupsPerFlex: 4, InodesPerGroup: 256}
	s, err := NewMemStore(gm, MemStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tun := DefaultTunables(1)
	tun.OptimizeScan = scan
	a, err := New(gm, s, Config{CPUs: 2, Tunables: &tun})
	if err != nil {
		t.Fatal(err)
	}
	const held = 5                   // not the first of a flex group, which data avoids
	goal := uint64(held)*4096 + 2048 // past its backup superblock
	tx := testTx(1)

	// The files' first blocks, and their preallocations, in the group
	// that will be held.
	const workers, ops = 8, 300
	type file struct {
		ino        uint32
		next, last uint64 // next logical block, last physical block
		flags      Flags
	}
	files := make([]*file, workers)
	for w := range files {
		fl := &file{ino: uint32(300 + w), flags: FlagData}
		// Even workers append as fallocate does (not normalized); odd
		// ones as buffered writes do, into the inode preallocation
		// their first allocation leaves in the held group.
		req := Request{Inode: fl.ino, Len: 2, Goal: goal + uint64(w)*128, Flags: fl.flags | FlagTryGoal, OpenForWrite: true, FileSize: 100 << 10}
		if w%2 == 0 {
			fl.flags |= FlagNoPrealloc
			req.Flags |= FlagNoPrealloc
			req.Len = 32
		}
		e, err := a.Allocate(tx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.GroupOf(e.Start) != held {
			t.Fatalf("setup: file %d starts in group %d, not %d", w, a.GroupOf(e.Start), held)
		}
		fl.next, fl.last = uint64(e.Len), e.End()-1
		files[w] = fl
	}
	// A locality-group preallocation there too.
	if e, err := a.Allocate(tx, Request{Inode: 900, Len: 1, Goal: goal + 1500, Flags: FlagData, FileSize: 4096}); err != nil || a.GroupOf(e.Start) != held {
		t.Fatalf("setup: small file at %+v, %v", e, err)
	}

	var maxConsidered, sumConsidered, allocs atomic.Int64
	a.afterAlloc = func(considered, busy int) {
		allocs.Add(1)
		sumConsidered.Add(int64(considered))
		for {
			m := maxConsidered.Load()
			if int64(considered) <= m || maxConsidered.CompareAndSwap(m, int64(considered)) {
				break
			}
		}
	}

	g := &a.groups[held]
	g.mu.Lock() // the sleeping holder
	var released atomic.Bool
	release := func() {
		if released.CompareAndSwap(false, true) {
			g.mu.Unlock()
		}
	}
	defer release()
	// It sleeps until the small files are all placed (they must not need
	// it) or for 10 s, then lets go.
	smallDone := make(chan struct{})
	go func() {
		select {
		case <-smallDone:
		case <-time.After(10 * time.Second):
		}
		time.Sleep(50 * time.Millisecond) // and a little longer: the streams queue up
		release()
	}()

	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	for w, fl := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < ops; i++ {
				req := Request{Inode: fl.ino, Logical: fl.next, Len: 2, Flags: fl.flags, OpenForWrite: true,
					LeftLogical: fl.next - 1, LeftPhysical: fl.last}
				e, err := a.Allocate(tx, req)
				if err != nil {
					errs <- fmt.Errorf("worker %d op %d: %w", w, i, err)
					return
				}
				if a.GroupOf(e.Start) == held && !released.Load() {
					errs <- fmt.Errorf("worker %d got %+v in the held group", w, e)
					return
				}
				fl.next += uint64(e.Len)
				fl.last = e.End() - 1
			}
		}()
	}
	wg.Add(1)
	go func() { // small files, one after the other
		defer wg.Done()
		defer close(smallDone)
		for i := 0; i < ops; i++ {
			e, err := a.Allocate(tx, Request{Inode: uint32(1000 + i), Len: 1, Goal: goal + 1500, Flags: FlagData, FileSize: 4096})
			if err != nil {
				errs <- fmt.Errorf("small file %d: %w", i, err)
				return
			}
			if released.Load() {
				errs <- fmt.Errorf("small file %d was placed only after the holder let go", i)
				return
			}
			if a.GroupOf(e.Start) == held {
				errs <- fmt.Errorf("small file %d got %+v in the held group", i, e)
				return
			}
		}
	}()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("allocations did not finish: %d of %d, holder released: %v",
			allocs.Load(), (workers+1)*ops, released.Load())
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := allocs.Load()
	mean := float64(sumConsidered.Load()) / float64(max(n, 1))
	t.Logf("%d allocations; groups looked at: mean %.2f, max %d", n, mean, maxConsidered.Load())
	// The held group once, then the next with room; a stream whose goal
	// moved goes there directly. A stream that lost its goal looks at up
	// to spreadMaxGroups groups for a place apart; nothing walks all 64.
	if m := maxConsidered.Load(); m > 2*spreadMaxGroups {
		t.Errorf("an allocation looked at %d groups", m)
	}
	if mean > 2 {
		t.Errorf("allocations looked at %.2f groups on average", mean)
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}
