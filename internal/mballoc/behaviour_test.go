package mballoc

import (
	"errors"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

func TestDeferredFree(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 8192}
	a, s := newBare(t, gm, Config{})
	e, err := a.Allocate(testTx(1), Request{Len: 8192})
	if err != nil || e.Len != 8192 {
		t.Fatalf("allocate all: %+v %v", e, err)
	}
	if err := a.Free(testTx(2), 100, 50, 0); err != nil {
		t.Fatal(err)
	}
	if a.PendingFrees() != 50 || a.FreeClusters() != 50 || s.FreeClusters() != 50 {
		t.Fatalf("pending %d free %d store %d", a.PendingFrees(), a.FreeClusters(), s.FreeClusters())
	}
	// Not reusable before transaction 2 commits.
	_, err = a.Allocate(testTx(3), Request{Len: 1})
	var ns *NoSpaceError
	if !errors.As(err, &ns) || ns.Pending != 50 {
		t.Fatalf("allocate before commit: %v, want ENOSPC with 50 pending", err)
	}
	if err := a.ReleaseDeferred(1); err != nil || a.PendingFrees() != 50 {
		t.Fatalf("releasing an older transaction released tid 2's frees: %v %d", err, a.PendingFrees())
	}
	if err := a.ReleaseDeferred(2); err != nil || a.PendingFrees() != 0 {
		t.Fatalf("release: %v, pending %d", err, a.PendingFrees())
	}
	e, err = a.Allocate(testTx(3), Request{Len: 50})
	if err != nil || e.Start != 100 || e.Len != 50 {
		t.Fatalf("after commit: %+v %v; want 100+50", e, err)
	}
	// Adjacent frees of one transaction merge; nil tx frees at once.
	if err := a.Free(testTx(4), 100, 10, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(testTx(4), 110, 10, 0); err != nil {
		t.Fatal(err)
	}
	if n := len(a.groups[0].pending); n != 1 {
		t.Fatalf("%d pending extents, want 1 merged", n)
	}
	if err := a.Free(nil, 200, 10, 0); err != nil || a.groups[0].free.Load() != 10 {
		t.Fatalf("immediate free: %v, buddy free %d", err, a.groups[0].free.Load())
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

// TestOldestPending: OldestPending names the oldest transaction whose
// frees still wait, in whichever group and deferred-free shard, and none
// once all have been released.
func TestOldestPending(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
	a, _ := newBare(t, gm, Config{})
	if _, ok := a.OldestPending(); ok {
		t.Fatal("a transaction pending before any free")
	}
	for g := uint64(0); g < 4; g++ {
		if e, err := a.Allocate(testTx(1), Request{Goal: g * 8192, Len: 8192}); err != nil || e.Len != 8192 {
			t.Fatalf("allocate group %d: %+v %v", g, e, err)
		}
	}
	for _, f := range []struct{ tid, block uint64 }{{7, 3*8192 + 5}, {5, 8192 + 5}, {9, 5}, {5, 2*8192 + 5}} {
		if err := a.Free(testTx(f.tid), f.block, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct{ release, want uint64 }{{0, 5}, {4, 5}, {5, 7}, {8, 9}, {9, 0}} {
		if step.release > 0 {
			if err := a.ReleaseDeferred(step.release); err != nil {
				t.Fatal(err)
			}
		}
		tid, ok := a.OldestPending()
		if step.want == 0 && ok || step.want != 0 && (!ok || tid != step.want) {
			t.Fatalf("after releasing through %d: oldest pending %d %v, want %d", step.release, tid, ok, step.want)
		}
	}
}

func TestGlobalGoalCount(t *testing.T) {
	for _, c := range []struct {
		groups uint32
		cpus   int
		want   int
	}{{40, 4, 4}, {40, 64, 10}, {3, 8, 1}, {16, 2, 2}} {
		gm := Geometry{BlockSize: 1024, BlocksPerGroup: 1024, BlocksCount: uint64(c.groups) * 1024}
		a, _ := newBare(t, gm, Config{CPUs: c.cpus})
		if a.GlobalGoals() != c.want {
			t.Errorf("%d groups, %d CPUs: %d goals, want %d", c.groups, c.cpus, a.GlobalGoals(), c.want)
		}
	}
}

// Small closed files go to the locality group's preallocation one after
// the other (Jan Kara's fix), so they end up packed together; also with
// more locality groups than writers (one a CPU), where a lone writer's
// files all go to one group's preallocation, as the kernel's writeback
// thread's do, not to every group in turn.
func TestSmallClosedFilesPacked(t *testing.T) {
	for _, cpus := range []int{1, 4, 64} {
		gm := GeometryFor(1<<30, 4096)
		s, _ := NewMemStore(gm, MemStoreOptions{})
		tun := DefaultTunables(1)
		tun.Stats = true
		a, err := New(gm, s, Config{CPUs: cpus, Tunables: &tun})
		if err != nil {
			t.Fatal(err)
		}
		groups := map[uint32]bool{}
		var prev Extent
		gaps := 0
		for i := uint32(0); i < 300; i++ {
			ino := 20 + i
			e, err := a.Allocate(nil, Request{Inode: ino, Len: 3, Flags: FlagData, FileSize: 3 * 4096})
			if err != nil || e.Len != 3 {
				t.Fatalf("%d CPUs, file %d: %+v %v", cpus, i, e, err)
			}
			if i > 0 && e.Start != prev.End() {
				gaps++
			}
			prev = e
			groups[a.GroupOf(e.Start)] = true
		}
		// 900 blocks from 512-block preallocations: a handful of gaps at most.
		if gaps > 3 || len(groups) > 1 {
			t.Fatalf("%d CPUs: %d gaps, %d groups for 300 small files", cpus, gaps, len(groups))
		}
		if st := a.Stats(); st.GroupPAHits == 0 {
			t.Fatalf("%d CPUs: no locality-group preallocation hits", cpus)
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
	}
}

// A file appended to a block at a time while open gets contiguous space
// from its inode preallocation; closing it gives the rest back.
func TestStreamingFileContiguous(t *testing.T) {
	gm := GeometryFor(1<<30, 4096)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	a, err := New(gm, s, Config{CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	free0 := a.FreeClusters()
	const ino = 5000
	var exts []Extent
	next := uint64(0)
	for next < 3000 {
		req := Request{Inode: ino, Logical: next, Len: 1, Flags: FlagData, OpenForWrite: true, FileSize: next * 4096}
		if n := len(exts); n > 0 {
			req.LeftLogical, req.LeftPhysical = next-1, exts[n-1].End()-1
		}
		e, err := a.Allocate(nil, req)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(exts); n > 0 && exts[n-1].End() == e.Start {
			exts[n-1].Len += e.Len
		} else {
			exts = append(exts, e)
		}
		next += uint64(e.Len)
	}
	// The first 16 blocks come from the locality group, the rest streams.
	if len(exts) > 3 {
		t.Fatalf("3000 appended blocks in %d extents: %v", len(exts), exts)
	}
	if got := free0 - a.FreeClusters(); got != 3000 {
		t.Fatalf("%d clusters used on disk, want 3000", got)
	}
	a.DiscardInodePrealloc(ino)
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
	for _, pa := range a.groups[a.GroupOf(exts[len(exts)-1].Start)].pas {
		if pa.kind == paInode {
			t.Fatal("inode preallocation survived the discard")
		}
	}
}

// Preallocations hold space the disk counts as free; when nothing else is
// left the allocator discards them and retries.
func TestENOSPCDiscardsPreallocations(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 4096, BlocksCount: 2 * 4096}
	tun := DefaultTunables(1)
	tun.Stats = true
	a, _ := newBare(t, gm, Config{CPUs: 1, Tunables: &tun})
	// An open file that grew to 6 MiB gets an 8 MiB window: a preallocation.
	e, err := a.Allocate(nil, Request{Inode: 7, Logical: 1536, Len: 1, Flags: FlagData, OpenForWrite: true, FileSize: 6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	held := len(a.groups[a.GroupOf(e.Start)].pas)
	if held == 0 {
		t.Fatal("no preallocation made")
	}
	// Fill everything else with metadata blocks.
	n := 0
	for {
		_, err := a.Allocate(nil, Request{Len: 1})
		if err != nil {
			if !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
			break
		}
		n++
	}
	if n != 2*4096-1 {
		t.Fatalf("allocated %d more blocks, want %d", n, 2*4096-1)
	}
	if st := a.Stats(); st.ENOSPCRetries == 0 || st.Discarded == 0 {
		t.Fatalf("stats %+v: no discard on ENOSPC", st)
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

func TestGoalOnlyAndMerge(t *testing.T) {
	a, _ := newBare(t, kernelGeometry(4096), Config{})
	if _, err := a.Allocate(nil, Request{Len: 10, Goal: 105, Flags: FlagGoalOnly}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(nil, Request{Len: 10, Goal: 100, Flags: FlagGoalOnly}); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("goal-only over a used block: %v", err)
	}
	e, err := a.Allocate(nil, Request{Len: 10, Goal: 100, Flags: FlagTryGoal | FlagMerge})
	if err != nil || e.Start != 100 || e.Len != 5 {
		t.Fatalf("merge hint: %+v %v, want the 5 free blocks at 100", e, err)
	}
}

func TestBigalloc(t *testing.T) {
	gm := Geometry{BlockSize: 4096, ClusterRatio: 16, BlocksPerGroup: 16 * 8192, BlocksCount: 4 * 16 * 8192, LogGroupsPerFlex: 1}
	m := newModelFS(t, gm, Config{CPUs: 2}, 11)
	_ = m
	a := m.a
	e, err := a.Allocate(nil, Request{Inode: 3, Len: 20, Flags: FlagData, OpenForWrite: true, Logical: 0})
	if err != nil || e.Len != 32 || e.Start%16 != 0 {
		t.Fatalf("20 blocks on 16-block clusters: %+v %v", e, err)
	}
	if err := a.Free(nil, e.Start+3, 2, 0); err != nil { // frees the whole first cluster
		t.Fatal(err)
	}
	if err := a.Free(nil, e.Start, 1, 0); err == nil {
		t.Fatal("freeing a freed cluster succeeded")
	}
	a.DiscardInodePrealloc(3)
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}

func TestTunables(t *testing.T) {
	a, _ := newBare(t, kernelGeometry(4096), Config{})
	tun := a.Tunables()
	if tun != DefaultTunables(1) || tun.MaxToScan != 200 || tun.MinToScan != 10 || tun.StreamReq != 16 || tun.GroupPrealloc != 512 {
		t.Fatalf("defaults %+v", tun)
	}
	tun.MinToScan = 500
	if err := a.SetTunables(tun); err == nil {
		t.Fatal("MinToScan > MaxToScan accepted")
	}
	tun = DefaultTunables(1)
	tun.OptimizeScan = OptimizeScanOff
	tun.Stats = true
	if err := a.SetTunables(tun); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(nil, Request{Len: 4}); err != nil {
		t.Fatal(err)
	}
	if a.Stats().Requests != 1 || a.Stats().Hits[CrPower2Aligned] != 1 {
		t.Fatalf("stats %+v", a.Stats())
	}
	if DefaultTunables(16).GroupPrealloc != 32 {
		t.Fatal("bigalloc group prealloc default")
	}
}

// A truncate of an open file gives its preallocation back but keeps the
// file's state: it still counts as a stream, so its next allocation need
// not make the state again, and the discard itself allocates nothing
// (fallocate2 truncates every 128 steps).
func TestDiscardInodePreallocOpen(t *testing.T) {
	gm := GeometryFor(1<<30, 4096)
	s, err := NewMemStore(gm, MemStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(gm, s, Config{CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	const ino = 5000
	free0 := a.FreeClusters()
	grow := func() {
		t.Helper()
		for next := uint64(0); next < 2048; {
			e, err := a.Allocate(nil, Request{Inode: ino, Logical: next, Len: 256, Flags: FlagData, OpenForWrite: true, FileSize: next * 4096})
			if err != nil {
				t.Fatal(err)
			}
			next += uint64(e.Len)
		}
	}
	grow()
	if a.inodeState(ino, false) == nil || len(a.inodeState(ino, false).pas) == 0 {
		t.Fatal("no inode preallocation to discard")
	}
	streams := a.streams.Sum()
	used := free0 - a.FreeClusters()
	a.DiscardInodePreallocOpen(ino)
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
	is := a.inodeState(ino, false)
	if is == nil || len(is.pas) != 0 {
		t.Fatalf("state after the discard: %v", is)
	}
	if got := a.streams.Sum(); got != streams {
		t.Errorf("streams %d after the discard, was %d", got, streams)
	}
	for gi := range a.groups {
		for _, pa := range a.groups[gi].pas {
			if pa.kind == paInode && pa.ino == ino {
				t.Fatal("inode preallocation survived the discard")
			}
		}
	}
	if got := free0 - a.FreeClusters(); got != used {
		t.Errorf("%d clusters used after the discard, %d before: the discard changed what the disk counts", got, used)
	}
	if n := testing.AllocsPerRun(20, func() { a.DiscardInodePreallocOpen(ino) }); n != 0 && !testutil.RaceEnabled {
		t.Errorf("DiscardInodePreallocOpen allocates %v objects", n)
	}
	// Closing forgets it.
	a.DiscardInodePrealloc(ino)
	if a.inodeState(ino, false) != nil || a.streams.Sum() != streams-1 {
		t.Errorf("after the last close: state %v, streams %d (want %d)", a.inodeState(ino, false), a.streams.Sum(), streams-1)
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
}
