package mballoc

import (
	"math/rand/v2"
	"testing"
)

// holeFitSetup gives an allocator on a bare 4-group filesystem whose group
// 0 has holes of 3 blocks at 300, 5 at 100 and 8 at 200 in a used run of
// 1000 blocks, and is free from 1000 on.
func holeFitSetup(t *testing.T, holeFit bool) *Allocator {
	t.Helper()
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
	tun := DefaultTunables(1)
	tun.HoleFit = holeFit
	tun.Stats = true
	a, _ := newBare(t, gm, Config{CPUs: 1, Tunables: &tun})
	e, err := a.Allocate(nil, Request{Len: 1000, Flags: FlagTryGoal})
	if err != nil || e.Start != 0 || e.Len != 1000 {
		t.Fatalf("fill: %+v %v", e, err)
	}
	for _, h := range []Extent{{100, 5}, {200, 8}, {300, 3}} {
		if err := a.Free(nil, h.Start, uint64(h.Len), 0); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func smallFile(ino, n uint32) Request {
	return Request{Inode: ino, Len: n, Flags: FlagData, FileSize: uint64(n) * 4096}
}

// A small file goes to the smallest hole that holds it, from its start:
// an exact fit closes the hole, a longer hole keeps its tail.
func TestHoleFitSmallestHole(t *testing.T) {
	a := holeFitSetup(t, true)
	for _, c := range []struct {
		n     uint32
		start uint64
		frags uint32 // free runs of group 0 after it
	}{
		{5, 100, 3}, // exactly the 5-block hole: it is gone
		{4, 200, 3}, // the 8-block one (3 is too short), 4 left at 204
		{2, 300, 3}, // the 3-block one now (the 4 at 204 is longer), 1 left at 302
		{4, 204, 2}, // the rest of the 8-block hole, exactly
	} {
		e, err := a.Allocate(nil, smallFile(100+c.n, c.n))
		if err != nil || e.Start != c.start || e.Len != c.n {
			t.Fatalf("%d-block file: %+v %v, want %d+%d", c.n, e, err, c.start, c.n)
		}
		if f := a.groups[0].fragments.Load(); f != c.frags {
			t.Fatalf("after the %d-block file: %d free runs, want %d", c.n, f, c.frags)
		}
	}
	// No hole holds 2 blocks now (1 at 302): a locality-group
	// preallocation serves it, as the kernel would (at 1000, the start of
	// the run: Tunables.RunStart).
	e, err := a.Allocate(nil, smallFile(200, 2))
	if err != nil || e.Start != 1000 {
		t.Fatalf("no hole left: %+v %v, want a preallocation at 1000", e, err)
	}
	st := a.Stats()
	if st.HoleFits != 4 || st.GroupPAHits != 0 || st.Preallocated == 0 {
		t.Fatalf("hole fits %d, group PA hits %d, preallocated %d; want 4, 0, >0", st.HoleFits, st.GroupPAHits, st.Preallocated)
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

// Off, the holes stay: the kernel's placement from a locality-group
// preallocation.
func TestHoleFitOff(t *testing.T) {
	a := holeFitSetup(t, false)
	e, err := a.Allocate(nil, smallFile(105, 5))
	if err != nil || e.Start != 1000 {
		t.Fatalf("%+v %v, want the preallocation at 1000", e, err)
	}
	if f := a.groups[0].fragments.Load(); f != 4 {
		t.Fatalf("%d free runs, want 4 (3 holes, and the run after the preallocation)", f)
	}
}

// A hole of a preallocation's size or more is free space, not a hole: the
// locality group's preallocation is carved from it as before.
func TestHoleFitLeavesLargeRuns(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
	a, _ := newBare(t, gm, Config{CPUs: 1})
	if _, err := a.Allocate(nil, Request{Len: 2000, Flags: FlagTryGoal}); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(nil, 100, 600, 0); err != nil { // 600 >= 512
		t.Fatal(err)
	}
	// The 512-block preallocation comes from the run holding the first
	// free aligned 512-block chunk (2048), at the run's start.
	e, err := a.Allocate(nil, smallFile(9, 4))
	if err != nil || e.Start != 2000 {
		t.Fatalf("%+v %v, want 2000 (from a new preallocation)", e, err)
	}
	if e, err := a.Allocate(nil, smallFile(10, 4)); err != nil || e.Start != 2004 {
		t.Fatalf("second file: %+v %v, want 2004 from the preallocation", e, err)
	}
	if n, _ := a.groups[0].b.findExtent(100, 600); n < 600 {
		t.Fatalf("the 600-block run at 100 was cut: %d free there", n)
	}
}

// A small file appended to takes the blocks right after its last one when
// they are free, rather than the smallest hole.
func TestHoleFitAppendAtGoal(t *testing.T) {
	a := holeFitSetup(t, true)
	// The file's first 3 blocks end at 999; 1000 on is free.
	req := smallFile(7, 3)
	req.Logical, req.FileSize = 3, 3*4096
	req.LeftLogical, req.LeftPhysical = 2, 999
	e, err := a.Allocate(nil, req)
	if err != nil || e.Start != 1000 || e.Len != 3 {
		t.Fatalf("append: %+v %v, want 1000+3 after the file", e, err)
	}
	// Its goal taken, an append goes to the smallest hole that fits.
	req.Logical, req.LeftLogical, req.LeftPhysical = 6, 5, 1002
	a.groups[0].mu.Lock()
	a.groups[0].b.markUsed(1003, 10)
	a.groups[0].mu.Unlock()
	e, err = a.Allocate(nil, req)
	if err != nil || e.Start != 300 {
		t.Fatalf("append with its goal taken: %+v %v, want the 3-block hole at 300", e, err)
	}
}

// Churn of small files (creates of 1..16 blocks and removes in random
// order, deterministic for the seed) leaves far fewer free runs with hole
// fitting than without, and the same free space.
func TestHoleFitChurn(t *testing.T) {
	run := func(holeFit bool) (runs uint32, free int64) {
		gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
		tun := DefaultTunables(1)
		tun.HoleFit = holeFit
		a, _ := newBare(t, gm, Config{CPUs: 1, Tunables: &tun})
		rng := rand.New(rand.NewPCG(1, 2))
		var live []Extent
		for i := 0; i < 6000; i++ {
			if len(live) > 0 && rng.IntN(100) < 45 {
				k := rng.IntN(len(live))
				e := live[k]
				live[k] = live[len(live)-1]
				live = live[:len(live)-1]
				if err := a.Free(nil, e.Start, uint64(e.Len), 0); err != nil {
					t.Fatal(err)
				}
				continue
			}
			e, err := a.Allocate(nil, smallFile(uint32(100+i), uint32(1+rng.IntN(16))))
			if err != nil {
				t.Fatal(err)
			}
			live = append(live, e)
		}
		a.DiscardPreallocations()
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
		for gi := range a.groups {
			runs += a.groups[gi].fragments.Load()
		}
		return runs, a.FreeClusters()
	}
	onRuns, onFree := run(true)
	offRuns, offFree := run(false)
	t.Logf("free runs: %d with hole fitting, %d without (free %d, %d)", onRuns, offRuns, onFree, offFree)
	if onFree != offFree {
		t.Fatalf("free clusters %d with hole fitting, %d without", onFree, offFree)
	}
	if onRuns*2 > offRuns {
		t.Fatalf("%d free runs with hole fitting, %d without: want at most half", onRuns, offRuns)
	}
}

// TestRunStart: a normalized stream window (a power of two) goes to the
// start of the free run holding the aligned chunk the power-of-two
// criterion finds, so closing the file (which gives the window's unused
// rest back) leaves one free run; aligned as the kernel aligns it, the
// part of the run before the chunk stays a hole.
func TestRunStart(t *testing.T) {
	for _, c := range []struct {
		runStart bool
		start    uint64
		runs     uint32
	}{{true, 1001, 1}, {false, 1024, 2}} {
		gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
		tun := DefaultTunables(1)
		tun.RunStart = c.runStart
		tun.HoleFit = false
		a, _ := newBare(t, gm, Config{CPUs: 1, Tunables: &tun})
		if _, err := a.Allocate(nil, Request{Len: 1001, Flags: FlagTryGoal}); err != nil {
			t.Fatal(err)
		}
		// 20 blocks of a new file open for writing: a stream, its window
		// normalized to 128 KiB (32 blocks).
		e, err := a.Allocate(nil, Request{Inode: 50, Len: 20, Flags: FlagData, OpenForWrite: true})
		if err != nil || e.Start != c.start || e.Len != 20 {
			t.Fatalf("RunStart %v: %+v %v, want %d+20", c.runStart, e, err, c.start)
		}
		a.DiscardInodePrealloc(50)
		if f := a.groups[0].fragments.Load(); f != c.runs {
			t.Fatalf("RunStart %v: %d free runs after close, want %d", c.runStart, f, c.runs)
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
	}
}

// smallestRun walks a bounded number of runs: behind 2000 one-block runs a
// 3-block one is found only when the bound reaches it.
func TestSmallestRunBounded(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 8192}
	a, _ := newBare(t, gm, Config{CPUs: 1})
	if _, err := a.Allocate(nil, Request{Len: 8192}); err != nil {
		t.Fatal(err)
	}
	for b := uint64(0); b < 4000; b += 2 {
		if err := a.Free(nil, b, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Free(nil, 5000, 3, 0); err != nil {
		t.Fatal(err)
	}
	b := a.groups[0].b
	if s, n := b.smallestRun(2, 512, 200); n != 0 {
		t.Fatalf("limit 200: found %d+%d past %d runs", s, n, holeFitWalk*200)
	}
	if s, n := b.smallestRun(2, 512, 1000); s != 5000 || n != 3 {
		t.Fatalf("limit 1000: %d+%d, want 5000+3", s, n)
	}
}
