package mballoc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type atomicTx struct{ id *atomic.Uint64 }

// TestConcurrent runs many goroutines allocating, appending, truncating and
// freeing at once while a committer releases deferred frees, with an atomic
// ownership map that catches a block handed to two owners the moment it
// happens. Run it under -race.
func TestConcurrent(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		for _, bs := range []uint32{1024, 4096} {
			t.Run(fmt.Sprintf("%dk-legacy=%v", bs/1024, legacy), func(t *testing.T) {
				runConcurrent(t, smallGroupsGeometry(bs), legacy)
			})
		}
		// A tiny filesystem: allocations fail, preallocations get
		// discarded and chunks get lost while others run.
		tiny := Geometry{BlockSize: 1024, BlocksPerGroup: 1024, BlocksCount: 6*1024 + 1, FirstDataBlock: 1,
			LogGroupsPerFlex: 1, InodesPerGroup: 32}
		t.Run(fmt.Sprintf("tiny-legacy=%v", legacy), func(t *testing.T) { runConcurrent(t, tiny, legacy) })
	}
}

func runConcurrent(t *testing.T, gm Geometry, legacy bool) {
	bs := gm.BlockSize
	s, err := NewMemStore(gm, MemStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tun := DefaultTunables(1)
	tun.OptimizeScan = OptimizeScanOn
	tun.Stats = true
	a, err := New(gm, s, Config{Legacy: legacy, CPUs: 8, Tunables: &tun})
	if err != nil {
		t.Fatal(err)
	}
	owned := make([]atomic.Uint32, gm.BlocksCount)
	var tid atomic.Uint64
	tid.Store(1)
	var failed atomic.Bool
	fail := func(f string, args ...any) {
		if failed.CompareAndSwap(false, true) {
			t.Errorf(f, args...)
		}
	}
	take := func(e Extent, who int) {
		for b := e.Start; b < e.End(); b++ {
			if !owned[b].CompareAndSwap(0, uint32(who)) {
				fail("block %d of %+v given to worker %d while worker %d owns it", b, e, who, owned[b].Load())
			}
		}
	}
	release := func(e Extent, who int) {
		for b := e.Start; b < e.End(); b++ {
			if !owned[b].CompareAndSwap(uint32(who), 0) {
				fail("worker %d frees block %d it does not own", who, b)
			}
		}
		if err := a.Free(testTx(tid.Load()), e.Start, uint64(e.Len), 0); err != nil {
			fail("free: %v", err)
		}
	}
	stop := make(chan struct{})
	var cwg sync.WaitGroup
	cwg.Add(1)
	go func() { // the journal: commit every few hundred microseconds
		defer cwg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			old := tid.Add(1) - 1
			if err := a.ReleaseDeferred(old); err != nil {
				fail("release: %v", err)
			}
		}
	}()
	const workers = 8
	ops := 600
	if testing.Short() {
		ops = 150
	}
	var wg sync.WaitGroup
	for w := 1; w <= workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(bs)))
			type file struct {
				next uint64
				exts []Extent
			}
			files := map[uint32]*file{}
			var meta []Extent
			for i := 0; i < ops && !failed.Load(); i++ {
				ino := uint32(w*1000 + r.IntN(6))
				switch k := r.IntN(10); {
				case k < 6:
					f := files[ino]
					if f == nil {
						f = &file{}
						files[ino] = f
					}
					req := Request{Inode: ino, Logical: f.next, Len: uint32(1 + r.IntN(24)), Flags: FlagData,
						OpenForWrite: k < 5, FileSize: f.next * uint64(bs)}
					if n := len(f.exts); n > 0 {
						req.LeftLogical, req.LeftPhysical = f.next-1, f.exts[n-1].End()-1
					}
					e, err := a.Allocate(testTx(tid.Load()), req)
					if errors.Is(err, ErrNoSpace) {
						continue
					}
					if err != nil {
						fail("allocate: %v", err)
						return
					}
					take(e, w)
					f.exts = append(f.exts, e)
					f.next += uint64(e.Len)
				case k < 7:
					e, err := a.Allocate(testTx(tid.Load()), Request{Len: 1, Goal: uint64(r.IntN(int(gm.BlocksCount)))})
					if err == nil {
						take(e, w)
						meta = append(meta, e)
					} else if !errors.Is(err, ErrNoSpace) {
						fail("allocate metadata: %v", err)
					}
				case k < 9:
					if f := files[ino]; f != nil {
						a.DiscardInodePrealloc(ino)
						for _, e := range f.exts {
							release(e, w)
						}
						delete(files, ino)
					}
				default:
					if len(meta) > 0 {
						release(meta[len(meta)-1], w)
						meta = meta[:len(meta)-1]
					}
				}
			}
			for ino, f := range files {
				a.DiscardInodePrealloc(ino)
				for _, e := range f.exts {
					release(e, w)
				}
			}
			for _, e := range meta {
				release(e, w)
			}
		}(w)
	}
	wg.Wait()
	close(stop)
	cwg.Wait()
	if failed.Load() {
		return
	}
	if err := a.ReleaseDeferred(tid.Load()); err != nil {
		t.Fatal(err)
	}
	a.DiscardPreallocations()
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		st := a.Stats()
		t.Logf("trylock misses %d, lost chunks %d, ENOSPC retries %d, discarded %d, inode/group PA hits %d/%d",
			st.TryLockMisses, st.LostChunks, st.ENOSPCRetries, st.Discarded, st.InodePAHits, st.GroupPAHits)
	}
	if got, want := uint64(a.FreeClusters()), s.FreeClusters(); got != want {
		t.Fatalf("free %d, store says %d", got, want)
	}
	// Everything was freed: only the metadata of a fresh store is in use.
	fresh, _ := NewMemStore(gm, MemStoreOptions{})
	if got, want := s.FreeClusters(), fresh.FreeClusters(); got != want {
		t.Fatalf("%d clusters free at the end, a fresh filesystem has %d: %d lost", got, want, int64(want)-int64(got))
	}
}
