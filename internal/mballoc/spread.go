package mballoc

import "math/bits"

// Stream spreading: ext4go's addition to the kernel's stream allocation.
//
// A stream whose goal (the blocks right after its file's last extent) is
// taken gets a fresh place. The kernel gives it the first free chunk of a
// group from the stream goal, which is where the concurrent streams got
// theirs: their windows interleave, every window after the first lands
// behind another stream's, and each becomes an extent (8 appenders of
// 32 MiB, fsync every MiB: 7 extents per file). Spreading puts the fresh
// window in the middle of the largest free run instead, halving the
// largest gap as streams arrive, so each stream has room behind it and
// its next windows find their goal free. Only concurrent streams are
// spread: a lone writer packs its files as the kernel does.

// spreadRoom is how many windows of free space a run must hold for a
// stream to be placed in it: the stream's window, and room for it to grow.
const spreadRoom = 4

// spreadMaxGroups bounds the groups tried before falling back to the
// kernel's criteria.
const spreadMaxGroups = 8

// spreadStream places a stream allocation that missed its goal in the
// middle of the largest free run of the groups from the stream goal, if it
// holds spreadRoom windows, while other files stream too (one writer at a
// time, as an untar or a copy, is best served by the kernel's packing:
// each file right after the one before). Busy groups are skipped, as at
// the cheap criteria.
func (ac *allocCtx) spreadStream() error {
	a := ac.a
	// This stream counts itself from its first stream allocation on (its
	// state goes at the file's last close), so that streams starting
	// together see each other before any has a preallocation.
	a.inodeState(ac.ino, true)
	if a.streams.Sum() <= 1 {
		return nil // alone, a stream grows where the kernel puts it
	}
	need := uint64(ac.g.len) * spreadRoom
	if need > uint64(a.geo.cpg) {
		return nil
	}
	// A run of need clusters holds an aligned chunk of at least need/4,
	// or of the buddy's top order, whichever is smaller: at 1 KiB blocks
	// the buddy stops at order 11 (2048 clusters) while a window and its
	// room can be a whole group.
	maxOrder := a.geo.maxOrder
	minOrder := min(bits.Len64(need)-2, maxOrder)
	ng := a.geo.groups
	fs := a.geo.flexSize
	gi := ac.g.group
	if gi >= ng {
		gi = 0
	}
	// The largest run of the groups looked at, so that streams starting
	// together go to groups of their own while there are free ones.
	var best struct {
		gi, start, n uint32
		ok           bool
	}
	for i := uint32(0); i < min(ng, spreadMaxGroups); i, gi = i+1, (gi+1)%ng {
		g := &a.groups[gi]
		if g.corrupt.Load() || uint64(g.free.Load()) < need || (fs >= 4 && gi%fs == 0) {
			continue // the first group of a flex group is left to metadata
		}
		// A group's runs are shorter than 2^(largest order + 2), unless
		// the largest order is the buddy's top one, whose chunks can run
		// on to the group's end: one that cannot beat the best so far is
		// not scanned.
		if g.loaded.Load() {
			lo := int(g.largest.Load())
			if lo < minOrder || (best.ok && (g.free.Load() <= best.n || (lo < maxOrder && uint64(1)<<(lo+2) <= uint64(best.n)))) {
				continue
			}
		}
		ac.considered++
		if !a.tryLockLoaded(g, gi) {
			continue
		}
		if start, n := g.b.largestRun(); !g.corrupt.Load() && uint64(n) >= need && n > best.n {
			best.gi, best.start, best.n, best.ok = gi, start, n, true
		}
		g.mu.Unlock()
	}
	if !best.ok {
		return nil
	}
	g := &a.groups[best.gi]
	ac.considered++
	if !a.lockLoadedSoon(g, best.gi) {
		a.countTryLockMiss(ac.t)
		return nil // the criteria place it instead
	}
	defer g.mu.Unlock()
	start, n := g.b.largestRun() // again: it may have changed while unlocked
	if g.corrupt.Load() || uint64(n) < need {
		return nil
	}
	ac.found++
	ac.b = fex{group: best.gi, start: spreadPlace(start, n, ac.g.len), len: ac.g.len}
	if err := ac.useBestFound(g, best.gi); err != nil {
		return err
	}
	a.stats.spread.Add(1)
	return nil
}

// spreadPlace chooses where in the free run [start, start+n) a window of
// length clusters goes: at the run's start if the run begins the group
// (nothing grows into it from the left), else in its middle, aligned down
// to the window's power of two so that the buddy stays in few chunks.
func spreadPlace(start, n, length uint32) uint32 {
	if start == 0 {
		return 0
	}
	mid := start + n/2
	if align := uint32(1) << (bits.Len32(length) - 1); mid&^(align-1) >= start {
		mid &^= align - 1
	}
	return min(mid, start+n-length)
}

// largestRun returns a long run of free clusters: the longest of the runs
// that hold a chunk of the largest free order, found through that order's
// buddy bitmap rather than by walking every run of the group (which, on
// every stream allocation that missed its goal, was a quarter of the
// allocator's time with two writers). Any run more than twice as long as
// another holds a chunk of a higher order, so the run returned is at least
// half the longest; n is 0 if nothing is free.
func (b *buddy) largestRun() (start, n uint32) {
	o := b.largestOrder()
	if o < 0 {
		return 0, 0
	}
	if o == 0 {
		return b.longestRunScan()
	}
	w, nb := b.orders[o], b.obits[o]
	for i := nextZero(w, 0, nb); i < nb; i = nextZero(w, i+1, nb) {
		c := i << o
		s := prevOneEnd(b.bitmap, c)
		e := nextOne(b.bitmap, c+1<<o, b.nbits)
		if e-s > n {
			start, n = s, e-s
		}
		i = max(i, e>>o) // the chunks inside this run are done
	}
	return start, n
}

// longestRunScan returns the longest run of free clusters (the first of
// the longest), walking every run.
func (b *buddy) longestRunScan() (start, n uint32) {
	for i := nextZero(b.bitmap, b.firstFree, b.nbits); i < b.nbits; {
		j := nextOne(b.bitmap, i, b.nbits)
		if j-i > n {
			start, n = i, j-i
		}
		i = nextZero(b.bitmap, j, b.nbits)
	}
	return start, n
}
