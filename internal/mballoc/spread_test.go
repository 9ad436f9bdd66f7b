package mballoc

import (
	"math/rand/v2"
	"testing"
)

// interleavedStreams appends to n files in turn, chunk blocks at a time,
// until each holds total blocks, as concurrent appenders do, and returns
// each file's extents (contiguous neighbours merged).
func interleavedStreams(t *testing.T, spread bool, n int, chunk, total uint64) [][]Extent {
	t.Helper()
	gm := GeometryFor(1<<30, 4096)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	tun := DefaultTunables(1)
	tun.StreamSpread = spread
	a, err := New(gm, s, Config{CPUs: 2, Tunables: &tun})
	if err != nil {
		t.Fatal(err)
	}
	files := make([][]Extent, n)
	next := make([]uint64, n)
	for done := false; !done; {
		done = true
		for i := range files {
			if next[i] >= total {
				continue
			}
			done = false
			ino := uint32(12 + i)
			for want := next[i] + chunk; next[i] < want; {
				req := Request{Inode: ino, Logical: next[i], Len: uint32(want - next[i]), Flags: FlagData,
					OpenForWrite: true, FileSize: next[i] * 4096}
				if k := len(files[i]); k > 0 {
					req.LeftLogical, req.LeftPhysical = next[i]-1, files[i][k-1].End()-1
				}
				e, err := a.Allocate(nil, req)
				if err != nil {
					t.Fatal(err)
				}
				if k := len(files[i]); k > 0 && files[i][k-1].End() == e.Start {
					files[i][k-1].Len += e.Len
				} else {
					files[i] = append(files[i], e)
				}
				next[i] += uint64(e.Len)
			}
		}
	}
	for i := range files {
		a.DiscardInodePrealloc(uint32(12 + i))
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
	if spreads := a.Stats().Spread; (spreads > 0) != (spread && n > 1) {
		t.Errorf("%d streams spread (spreading %v, %d streams)", spreads, spread, n)
	}
	for i, f := range files {
		t.Logf("spread %v, file %d: %v", spread, i, f)
	}
	return files
}

// TestStreamSpread: 8 streams appending 64 KiB in turn up to 32 MiB each
// interleave their windows and fragment as the kernel's do (about 7
// extents a file, the measure); spread, each has room to grow and
// keeps to a few extents.
func TestStreamSpread(t *testing.T) {
	count := func(files [][]Extent) (mean float64, most int) {
		sum := 0
		for _, f := range files {
			sum += len(f)
			most = max(most, len(f))
		}
		return float64(sum) / float64(len(files)), most
	}
	kernMean, _ := count(interleavedStreams(t, false, 8, 16, 8192))
	mean, most := count(interleavedStreams(t, true, 8, 16, 8192))
	t.Logf("extents per file: %.2f kernel placement, %.2f spread (max %d)", kernMean, mean, most)
	if mean > 4 || most > 5 {
		t.Errorf("spread streams: %.2f extents per file, max %d; want at most 4 (5)", mean, most)
	}
	if kernMean <= mean {
		t.Errorf("spreading did not help: %.2f extents per file without, %.2f with", kernMean, mean)
	}
}

// TestStreamSpreadAlone: a single stream is not spread, it is placed as
// the kernel places it.
func TestStreamSpreadAlone(t *testing.T) {
	on := interleavedStreams(t, true, 1, 16, 4096)
	off := interleavedStreams(t, false, 1, 16, 4096)
	if len(on) != 1 || len(on[0]) != len(off[0]) || on[0][0] != off[0][0] || on[0][len(on[0])-1] != off[0][len(off[0])-1] {
		t.Fatalf("a lone stream: %v spread, %v not", on, off)
	}
}

func TestSpreadPlace(t *testing.T) {
	for _, c := range []struct{ start, n, length, want uint32 }{
		{0, 32768, 2048, 0},        // a run starting the group: its start
		{130, 32638, 2048, 16384},  // behind metadata: the middle, aligned
		{1000, 100, 16, 1040},      // middle 1050 aligned down to 16
		{1000, 70, 64, 1006},       // alignment would leave the run: the middle, clipped to fit
		{4096, 8192, 2048, 8192},   // exactly aligned middle
		{5000, 4 * 300, 300, 5376}, // not a power of two: aligned to 256
		{7, 20, 5, 16},             // small
		{100, 8, 8, 100},           // run as long as the window
		{100, 9, 8, 101},           // middle clipped to the end
	} {
		got := spreadPlace(c.start, c.n, c.length)
		if got != c.want || got < c.start || got+c.length > c.start+c.n {
			t.Errorf("spreadPlace(%d, %d, %d) = %d, want %d", c.start, c.n, c.length, got, c.want)
		}
	}
}

func TestLargestRun(t *testing.T) {
	b := newBuddy(256, 256, 9)
	if s, n := b.largestRun(); n != 0 {
		t.Fatalf("all used: run %d+%d", s, n)
	}
	b.generate([]uint64{^uint64(0) &^ (0xff << 8), ^uint64(0) &^ 0xffff, ^uint64(0), ^uint64(0) &^ (1 << 63)})
	if s, n := b.largestRun(); s != 64 || n != 16 {
		t.Fatalf("largest run %d+%d, want 64+16", s, n)
	}
}

// TestAppendStreams: a small first request of a file is a locality-group
// allocation, as in the kernel, unless it is an append (space asked for
// ahead of the data past the file's end, as fallocate appends do): that
// streams, and the file's next request continues it.
func TestAppendStreams(t *testing.T) {
	gm := GeometryFor(1<<30, 4096)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	a, err := New(gm, s, Config{CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	small := Request{Inode: 20, Len: 16, Flags: FlagData, OpenForWrite: true}
	if _, err := a.Allocate(nil, small); err != nil {
		t.Fatal(err)
	}
	if a.inodeState(20, false) != nil {
		t.Fatal("a small first request streamed")
	}
	app := Request{Inode: 21, Len: 16, Flags: FlagData | FlagAppend, OpenForWrite: true}
	first, err := a.Allocate(nil, app)
	if err != nil {
		t.Fatal(err)
	}
	if a.inodeState(21, false) == nil {
		t.Fatal("an append did not stream")
	}
	app.Logical, app.FileSize, app.LeftLogical, app.LeftPhysical = 16, 16*4096, 15, first.End()-1
	next, err := a.Allocate(nil, app)
	if err != nil {
		t.Fatal(err)
	}
	if next.Start != first.End() {
		t.Errorf("the second append at %d, not after the first (%v)", next.Start, first)
	}
	a.DiscardInodePrealloc(21)
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

// TestLargestRunRandom: on random bitmaps the run largestRun finds through
// the buddy is free, cannot grow, and is at least half the longest.
func TestLargestRunRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for iter := range 500 {
		const nbits = 4096
		src := make([]uint64, nbits/64)
		density := rnd.IntN(100)
		for i := uint32(0); i < nbits; {
			run := uint32(1 + rnd.IntN(1+rnd.IntN(600)))
			if rnd.IntN(100) < density {
				setRange(src, i, min(run, nbits-i))
			}
			i += run
		}
		b := newBuddy(nbits, nbits, 13)
		b.generate(src)
		s, n := b.largestRun()
		_, longest := b.longestRunScan()
		if longest == 0 {
			if n != 0 {
				t.Fatalf("iter %d: run %d+%d on a full group", iter, s, n)
			}
			continue
		}
		if n*2 < longest || n > longest {
			t.Fatalf("iter %d: run of %d, longest %d", iter, n, longest)
		}
		if ok, _ := allClear(b.bitmap, s, n); !ok {
			t.Fatalf("iter %d: run %d+%d is not free", iter, s, n)
		}
		if (s > 0 && !testBit(b.bitmap, s-1)) || (s+n < nbits && !testBit(b.bitmap, s+n)) {
			t.Fatalf("iter %d: run %d+%d could grow", iter, s, n)
		}
	}
}

// TestSpreadOneKiBBlocks: at 1 KiB blocks the buddy stops at order 11
// (2048 clusters), below the chunk a spread's room (four 2048-cluster
// windows) implies, so a loaded group's largest order cannot rule it out
// when it is the top order: a free run of such a group can be any length
// up to the group's. When it did, spreading skipped every loaded group
// and sent each spread stream to a group never used before.
func TestSpreadOneKiBBlocks(t *testing.T) {
	gm := GeometryFor(256<<20, 1024)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	a, err := New(gm, s, Config{CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	for gi := range a.Groups() {
		if err := a.Load(gi); err != nil {
			t.Fatal(err)
		}
	}
	var got []Extent
	for _, ino := range []uint32{12, 13} {
		e, err := a.Allocate(nil, Request{Inode: ino, Len: 2048, Flags: FlagData, OpenForWrite: true, FileSize: 8 << 20})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
	}
	if n := a.Stats().Spread; n != 1 {
		t.Fatalf("%d spread allocations, want 1 (the second stream's): %v", n, got)
	}
	// Placed near the stream goal, in the first loaded group with room.
	if g := a.GroupOf(got[1].Start); g > 2 {
		t.Errorf("second stream spread to group %d (%v), want a group next to the first stream's", g, got)
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}
