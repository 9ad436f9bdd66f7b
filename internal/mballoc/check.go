package mballoc

import (
	"fmt"
	"slices"
)

// CheckConsistency verifies the invariants of the package comment for every
// loaded group (kernel: AGGRESSIVE_CHECK's __mb_check_buddy plus the
// counters): the buddy equals one generated from the on-disk bitmap, the
// preallocations and the deferred frees; the on-disk copy equals what the
// Store returns; preallocations and deferred frees do not overlap; and the
// free counters add up. Each group is checked under its lock; the totals
// are only exact when nothing runs concurrently. It is meant for tests.
func (a *Allocator) CheckConsistency() error {
	var total, pending int64
	flex := make([]int64, len(a.flexFree))
	for i := range a.groups {
		gi := uint32(i)
		free, p, err := a.checkGroup(gi)
		if err != nil {
			return fmt.Errorf("group %d: %w", gi, err)
		}
		total += int64(free)
		pending += p
		flex[a.geo.flexOf(gi)] += int64(free)
		// The group's changes the flex count has not taken yet.
		g := &a.groups[gi]
		g.mu.Lock()
		flex[a.geo.flexOf(gi)] -= g.flexDelta
		g.mu.Unlock()
	}
	if got := a.FreeClusters(); got != total {
		return fmt.Errorf("free clusters counter %d, groups sum to %d", got, total)
	}
	for f := range flex {
		if got := a.flexFree[f].v.Load(); got != flex[f] {
			return fmt.Errorf("flex group %d free counter %d, groups sum to %d", f, got, flex[f])
		}
	}
	if got := a.pending.Sum(); got != pending {
		return fmt.Errorf("pending counter %d, groups hold %d", got, pending)
	}
	return nil
}

func (a *Allocator) checkGroup(gi uint32) (uint32, int64, error) {
	g := &a.groups[gi]
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.loaded.Load() {
		f := g.diskFree.Load()
		if sf, err := a.store.GroupFree(gi); err == nil && sf != f {
			return 0, 0, fmt.Errorf("unloaded group: counter %d, store %d", f, sf)
		}
		return f, 0, nil
	}
	if g.corrupt.Load() {
		return 0, 0, fmt.Errorf("marked corrupt")
	}
	n := a.geo.clustersIn(gi)
	raw, err := a.store.ReadBlockBitmap(gi)
	if err != nil {
		return 0, 0, err
	}
	disk := make([]uint64, len(g.disk))
	wordsFromBytes(disk, raw)
	for c := uint32(0); c < n; c++ {
		if testBit(disk, c) != testBit(g.disk, c) {
			return 0, 0, fmt.Errorf("cluster %d: store bitmap %v, allocator's copy %v", c, testBit(disk, c), testBit(g.disk, c))
		}
	}
	diskFree := n - countOnes(g.disk, 0, n)
	if diskFree != g.diskFree.Load() {
		return 0, 0, fmt.Errorf("disk free counter %d, bitmap has %d", g.diskFree.Load(), diskFree)
	}
	if sf, err := a.store.GroupFree(gi); err == nil && sf != diskFree {
		return 0, 0, fmt.Errorf("store descriptor free %d, bitmap has %d", sf, diskFree)
	}
	want := slices.Clone(g.disk)
	claim := make([]uint64, len(g.disk)) // clusters claimed by PAs and pending frees
	take := func(start, cnt uint32, what string) error {
		if start+cnt > n {
			return fmt.Errorf("%s %d+%d past the group end", what, start, cnt)
		}
		if ok, at := allClear(claim, start, cnt); !ok {
			return fmt.Errorf("%s %d+%d overlaps another claim at %d", what, start, cnt, at)
		}
		setRange(claim, start, cnt)
		return nil
	}
	for _, pa := range g.pas {
		if pa.deleted.Load() {
			return 0, 0, fmt.Errorf("deleted preallocation still listed")
		}
		s := pa.start.Load()
		if pa.kind == paGroup {
			f := pa.free.Load()
			if f == 0 {
				return 0, 0, fmt.Errorf("empty locality-group preallocation listed")
			}
			if ok, _ := allClear(g.disk, s, f); !ok {
				return 0, 0, fmt.Errorf("locality-group preallocation %d+%d used on disk", s, f)
			}
			if err := take(s, f, "group preallocation"); err != nil {
				return 0, 0, err
			}
			setRange(want, s, f)
			continue
		}
		if err := take(s, pa.len, "inode preallocation"); err != nil {
			return 0, 0, err
		}
		if unused := pa.len - countOnes(g.disk, s, pa.len); unused != pa.free.Load() {
			return 0, 0, fmt.Errorf("inode preallocation %d+%d: %d clear on disk, free says %d", s, pa.len, unused, pa.free.Load())
		}
		setRange(want, s, pa.len)
	}
	var pend int64
	for _, p := range g.pending {
		if ok, at := allClear(g.disk, p.start, p.n); !ok {
			return 0, 0, fmt.Errorf("deferred free %d+%d: cluster %d in use on disk", p.start, p.n, at)
		}
		if err := take(p.start, p.n, "deferred free"); err != nil {
			return 0, 0, err
		}
		setRange(want, p.start, p.n)
		pend += int64(p.n)
	}
	fresh := newBuddy(n, a.geo.bitmapBits, a.geo.maxOrder)
	fresh.generate(want)
	b := g.b
	if !slices.Equal(fresh.bitmap, b.bitmap) {
		for c := uint32(0); c < a.geo.bitmapBits; c++ {
			if testBit(fresh.bitmap, c) != testBit(b.bitmap, c) {
				return 0, 0, fmt.Errorf("buddy bitmap cluster %d is %v, disk|prealloc|pending says %v", c, testBit(b.bitmap, c), testBit(fresh.bitmap, c))
			}
		}
	}
	if fresh.free != b.free || fresh.fragments != b.fragments || fresh.firstFree != b.firstFree {
		return 0, 0, fmt.Errorf("buddy free/fragments/first %d/%d/%d, rebuilt %d/%d/%d",
			b.free, b.fragments, b.firstFree, fresh.free, fresh.fragments, fresh.firstFree)
	}
	if !slices.Equal(fresh.counters, b.counters) {
		return 0, 0, fmt.Errorf("buddy counters %v, rebuilt %v", b.counters, fresh.counters)
	}
	for o := 1; o <= b.maxOrder; o++ {
		if !slices.Equal(fresh.orders[o], b.orders[o]) {
			return 0, 0, fmt.Errorf("buddy order %d differs from a rebuild", o)
		}
	}
	if g.free.Load() != b.free || g.fragments.Load() != b.fragments || int(g.largest.Load()) != b.largestOrder() {
		return 0, 0, fmt.Errorf("published counters stale")
	}
	return diskFree, pend, nil
}
