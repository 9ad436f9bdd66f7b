package mballoc

// Hole fitting: ext4go's addition to the kernel's locality-group
// allocation (Tunables.HoleFit).
//
// The kernel serves every small-file allocation from a locality group's
// preallocation, carved from a large free run (mb_group_prealloc clusters).
// Small files are removed and truncated in any order, so the holes they
// leave behind are never asked for again: later small files go to the
// preallocations, which cut ever more large runs into small-file space, and
// the holes pile up. Aged to 80% with creates, appends, truncates and
// removes (ext4go bench age), that gives several thousand free extents,
// most under 256 KiB, on a 1 GiB filesystem.
//
// With hole fitting, a small-file allocation first looks, in the goal group
// and the few groups after it, for the smallest free run that holds it and
// is shorter than a locality-group preallocation (a hole, not free space a
// preallocation would come from), and takes the request from that run's
// start: a run of exactly the request's length disappears, a longer one
// shrinks. Only when there is no hole does the locality group's
// preallocation serve. A small file that grows (an append right after its
// last block) first tries the blocks after it, so it stays contiguous. On a
// fresh filesystem there are no holes and nothing changes.

// holeFitWalk bounds the free runs smallestRun walks, in units of the
// runs it may measure (Tunables.MaxToScan), so that a group cut into very
// many runs too short for the request costs a bounded walk.
const holeFitWalk = 4

// holeFit serves a locality-group request from a hole. The caller holds
// the locality group's lock; group locks are taken one at a time.
func (ac *allocCtx) holeFit() (bool, error) {
	a := ac.a
	n := ac.o.len
	maxHole := ac.t.GroupPrealloc
	if n >= maxHole {
		return false, nil
	}
	if ac.pleft != 0 && ac.lleft+1 == ac.o.logical {
		if ok, err := ac.holeFitGoal(); ok || err != nil {
			return ok, err
		}
	}
	ng := a.geo.groups
	fs := a.geo.flexSize
	gi := ac.g.group
	if gi >= ng {
		gi = 0
	}
	for k := uint32(0); k < min(ac.t.HoleFitGroups, ng); k, gi = k+1, (gi+1)%ng {
		g := &a.groups[gi]
		// A group with one free run or none has no hole; nor is one
		// looked for in the first group of a flex group, which is left to
		// metadata and directories (as at CrPower2Aligned).
		if g.corrupt.Load() || g.free.Load() < n || g.fragments.Load() < 2 || (fs >= 4 && gi%fs == 0) {
			continue
		}
		ac.considered++
		if !a.tryLockLoaded(g, gi) {
			continue
		}
		var start uint32
		var best uint32
		if !g.corrupt.Load() {
			start, best = g.b.smallestRun(n, maxHole, ac.t.MaxToScan)
		}
		if best == 0 {
			g.mu.Unlock()
			continue
		}
		ac.found++
		ac.flags &^= flagGroupAlloc // the request alone: no preallocation
		ac.g.len = n
		ac.b = fex{group: gi, start: start, len: n}
		err := ac.useBestFound(g, gi)
		g.mu.Unlock()
		if err == nil && ac.t.Stats {
			a.stats.holeFits.Add(1)
		}
		return err == nil, err
	}
	return false, nil
}

// holeFitGoal takes the request at its goal (right after the file's last
// block) if that is free.
func (ac *allocCtx) holeFitGoal() (bool, error) {
	a := ac.a
	gi := ac.g.group
	if gi >= a.geo.groups {
		return false, nil
	}
	g := &a.groups[gi]
	ac.considered++
	if g.corrupt.Load() || g.free.Load() < ac.o.len || !a.tryLockLoaded(g, gi) {
		return false, nil
	}
	defer g.mu.Unlock()
	if g.corrupt.Load() || ac.g.start >= g.b.nbits {
		return false, nil
	}
	n, err := g.b.findExtent(ac.g.start, ac.o.len)
	if err != nil || n < ac.o.len {
		return false, nil
	}
	ac.found++
	ac.flags &^= flagGroupAlloc
	ac.g.len = ac.o.len
	ac.b = fex{group: gi, start: ac.g.start, len: ac.o.len}
	if err := ac.useBestFound(g, gi); err != nil {
		return false, err
	}
	if ac.t.Stats {
		a.stats.holeFits.Add(1)
	}
	return true, nil
}

// smallestRun returns the shortest free run of at least n and fewer than
// below clusters (the first of them), looking at no more than limit runs
// that hold n, and no more than holeFitWalk*limit runs in all; a run of
// exactly n ends the search. best is 0 if there is none.
func (b *buddy) smallestRun(n, below, limit uint32) (start, best uint32) {
	seen, walked := uint32(0), uint32(0)
	for i := nextZero(b.bitmap, b.firstFree, b.nbits); i < b.nbits && seen < limit && walked < holeFitWalk*limit; walked++ {
		j := nextOne(b.bitmap, i, b.nbits)
		if l := j - i; l >= n && l < below {
			seen++
			if best == 0 || l < best {
				start, best = i, l
				if l == n {
					break
				}
			}
		}
		i = nextZero(b.bitmap, j, b.nbits)
	}
	return start, best
}
