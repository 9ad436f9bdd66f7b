package mballoc

import (
	"fmt"
)

// shouldOptimize says whether the current criterion walks the order
// indexes (kernel: should_optimize_scan).
func (ac *allocCtx) shouldOptimize() bool {
	if ac.cr >= CrGoalLenSlow {
		return false
	}
	switch ac.t.OptimizeScan {
	case OptimizeScanOn:
		return true
	case OptimizeScanOff:
		return false
	}
	return ac.a.geo.groups >= optimizeScanMinGroups
}

// scanGroups runs the current criterion over the groups, starting from the
// goal group, and moves to the next criterion when it finds nothing
// (kernel: ext4_mb_scan_groups).
func (ac *allocCtx) scanGroups() error {
	ng := ac.a.geo.groups
	start := ac.g.group
	if start >= ng {
		start = 0
	}
	if !ac.shouldOptimize() {
		return ac.scanLinear(start, ng)
	}
	if n := ac.t.MaxLinearGroups; n > 0 {
		if n >= ng {
			return ac.scanLinear(start, ng)
		}
		if err := ac.scanLinear(start, n); err != nil || ac.status != acContinue {
			return err
		}
		start = (start + n) % ng
	}
	// The goal group first, whatever the indexes say (Jan Kara's 2022
	// fix): it keeps a file next to its inode and lets it grow in place.
	skip := start
	if err := ac.scanGroup(start); err != nil || ac.status != acContinue {
		return err
	}
	if ac.a.legacy {
		// The old per-order lists were walked from their head, not from
		// the goal.
		start = 0
	}
	switch ac.cr {
	case CrPower2Aligned:
		return ac.scanPower2(start, skip)
	case CrGoalLenFast:
		return ac.scanGoalFast(start, skip)
	case CrBestAvailLen:
		return ac.scanBestAvail(start, skip)
	}
	return fmt.Errorf("mballoc: criterion %v cannot use the indexes", ac.cr)
}

// scanLinear scans count groups from start and, after a full round, moves
// to the next criterion (kernel: ext4_mb_scan_groups_linear).
func (ac *allocCtx) scanLinear(start, count uint32) error {
	ng := ac.a.geo.groups
	gi := start
	for i := uint32(0); i < count; i++ {
		if err := ac.scanGroup(gi); err != nil || ac.status != acContinue {
			return err
		}
		if gi++; gi >= ng {
			gi = 0
		}
	}
	if count == ng {
		ac.failed()
		ac.cr++
	}
	return nil
}

func (ac *allocCtx) failed() {
	if ac.t.Stats && ac.cr < numCriteria {
		ac.a.stats.failed[ac.cr].Add(1)
	}
}

// walk scans the groups filed under order o of ix in [from, end), skipping
// skip, in group order (kernel: ext4_mb_scan_groups_xa_range).
func (ac *allocCtx) walk(ix *orderIndex, o int, from, end, skip uint32) (bool, error) {
	if ix.empty(o) {
		return false, nil
	}
	for gi, ok := ix.next(o, from, end); ok; gi, ok = ix.next(o, gi+1, end) {
		if gi == skip {
			continue
		}
		if err := ac.scanGroup(gi); err != nil || ac.status != acContinue {
			return true, err
		}
	}
	return false, nil
}

// ranges returns the two halves of a walk from start: the goal's right,
// then its left.
func (ac *allocCtx) ranges(start uint32) [2][2]uint32 {
	return [2][2]uint32{{start, ac.a.geo.groups}, {0, start}}
}

// scanPower2: groups whose largest free chunk has the request's order or
// more (kernel: ext4_mb_scan_groups_p2_aligned).
func (ac *allocCtx) scanPower2(start, skip uint32) error {
	for _, r := range ac.ranges(start) {
		for o := ac.order2; o < ac.a.geo.numOrders(); o++ {
			if done, err := ac.walk(ac.a.lfo, o, r[0], r[1], skip); done {
				return err
			}
		}
	}
	ac.failed()
	ac.cr = CrGoalLenFast
	return nil
}

// scanGoalFast: groups whose average free run is at least the goal
// (kernel: ext4_mb_scan_groups_goal_fast).
func (ac *allocCtx) scanGoalFast(start, skip uint32) error {
	no := ac.a.geo.numOrders()
	for _, r := range ac.ranges(start) {
		for o := avgFragOrder(ac.g.len, no); o < no; o++ {
			if done, err := ac.walk(ac.a.avg, o, r[0], r[1], skip); done {
				return err
			}
		}
	}
	ac.failed()
	if ac.flags&FlagData != 0 {
		ac.cr = CrBestAvailLen
	} else {
		ac.cr = CrGoalLenSlow
	}
	return nil
}

// scanBestAvail shrinks the goal length a power of two at a time, down to
// BestAvailMaxTrimOrder orders but never below the original request, and
// looks for groups whose average free run fits (kernel:
// ext4_mb_scan_groups_best_avail).
func (ac *allocCtx) scanBestAvail(start, skip uint32) error {
	no := ac.a.geo.numOrders()
	order := bitsLen(ac.g.len) - 1
	if order > no {
		order = no
	}
	minOrder := max(order-int(ac.t.BestAvailMaxTrimOrder), 0)
	if 1<<minOrder < ac.o.len {
		minOrder = bitsLen(ac.o.len)
	}
	for _, r := range ac.ranges(start) {
		for i := order; i >= minOrder; i-- {
			ac.g.len = 1 << i
			if done, err := ac.walk(ac.a.avg, avgFragOrder(ac.g.len, no), r[0], r[1], skip); done {
				return err
			}
		}
	}
	ac.g.len = ac.origGoalLen
	ac.failed()
	ac.cr = CrGoalLenSlow
	return nil
}

// scanGroup looks for space in group gi at the current criterion (kernel:
// ext4_mb_scan_group): a racy look at its counters first, then the lock —
// only tried at the cheap criteria, so a busy group is skipped rather than
// waited for — and a check under the lock.
func (ac *allocCtx) scanGroup(gi uint32) error {
	a := ac.a
	g := &a.groups[gi]
	cr := ac.cr
	ac.considered++
	if ac.t.Stats {
		a.stats.considered[cr].Add(1)
	}
	if g.corrupt.Load() {
		return nil
	}
	free := g.free.Load()
	if free == 0 || (cr < CrAnyFree && free < ac.g.len) {
		return nil
	}
	if !a.legacy && ac.flags&flagStrict == 0 {
		// Every criterion passes over a busy group at first, the last
		// one too; regular waits only once every other place failed.
		if !g.mu.TryLock() {
			ac.busy++
			a.countTryLockMiss(ac.t)
			return nil
		}
	} else {
		g.mu.Lock()
	}
	defer g.mu.Unlock()
	if !g.loaded.Load() {
		if err := a.loadLocked(g, gi); err != nil {
			if ac.firstErr == nil {
				ac.firstErr = err
			}
			return nil
		}
	}
	if g.corrupt.Load() || !ac.goodGroup(g, gi, cr) {
		return nil
	}
	ac.groupsScanned++
	if cr == CrPower2Aligned {
		return ac.simpleScan(g, gi)
	}
	return ac.complexScan(g, gi)
}

// goodGroup checks, under the group's lock, whether the group can serve
// the request at criterion cr (kernel: ext4_mb_good_group).
func (ac *allocCtx) goodGroup(g *group, gi uint32, cr Criterion) bool {
	free, frags := g.b.free, g.b.fragments
	if free == 0 || frags == 0 {
		return false
	}
	switch cr {
	case CrPower2Aligned:
		// Leave the first group of a flex group, where the metadata and
		// the directories are, to them.
		fs := ac.a.geo.flexSize
		if ac.flags&FlagData != 0 && fs >= 4 && gi%fs == 0 {
			return false
		}
		if free < ac.g.len {
			return false
		}
		return int(g.largest.Load()) >= ac.order2
	case CrGoalLenFast, CrBestAvailLen:
		return free/frags >= ac.g.len
	case CrGoalLenSlow:
		return free >= ac.g.len
	}
	return true
}

// simpleScan takes the first free buddy chunk of the request's order or
// above (kernel: ext4_mb_simple_scan_group). With Tunables.RunStart a data
// request goes to the start of the free run holding that chunk instead (the
// run holds the chunk, so the request fits from there): the chunk is how
// the run is found, not where the data goes.
func (ac *allocCtx) simpleScan(g *group, gi uint32) error {
	b := g.b
	for o := ac.order2; o <= b.maxOrder; o++ {
		if b.counters[o] == 0 {
			continue
		}
		k := nextZero(b.orders[o], 0, b.obits[o])
		if k >= b.obits[o] {
			ac.markCorrupt(g, gi, fmt.Errorf("%d free chunks of order %d but none in the buddy", b.counters[o], o))
			return nil
		}
		ac.found++
		ac.crFound[ac.cr]++
		ac.b = fex{group: gi, start: k << o, len: 1 << o}
		if ac.t.RunStart && ac.flags&FlagData != 0 && !ac.a.legacy {
			ac.b.start = prevOneEnd(b.bitmap, k<<o)
		}
		return ac.useBestFound(g, gi)
	}
	return nil
}

// complexScan walks the group's free extents from its first free cluster,
// measuring each against the goal length (kernel:
// ext4_mb_complex_scan_group).
func (ac *allocCtx) complexScan(g *group, gi uint32) error {
	b := g.b
	free := b.free
	i := b.firstFree
	for free > 0 && ac.status == acContinue {
		i = nextZero(b.bitmap, i, b.nbits)
		if i >= b.nbits {
			ac.markCorrupt(g, gi, fmt.Errorf("%d free clusters as per group info, but the bitmap has no more", free))
			return nil
		}
		if ac.cr < CrGoalLenSlow {
			// Cheap criteria: skip runs too short for the goal. Only the
			// goal's length needs looking at, not the whole run.
			if j := nextOne(b.bitmap, i, min(i+ac.g.len, b.nbits)); j-i < ac.g.len {
				free -= min(j-i, free)
				i = j
				continue
			}
		}
		n, err := b.findExtent(i, ac.g.len)
		if err == nil && (n == 0 || n > free) {
			err = fmt.Errorf("%d free clusters as per group info, but found %d at %d", free, n, i)
		}
		if err != nil {
			ac.markCorrupt(g, gi, err)
			return nil
		}
		if err := ac.measure(g, gi, fex{group: gi, start: i, len: n}); err != nil {
			return err
		}
		i += n
		free -= n
	}
	return ac.checkLimits(g, gi, true)
}

// measure compares a free extent with the best so far (kernel:
// ext4_mb_measure_extent): an exact fit is taken at once; otherwise the
// best is the smallest extent at least as long as the goal, or failing
// that the longest.
func (ac *allocCtx) measure(g *group, gi uint32, ex fex) error {
	ac.found++
	ac.crFound[min(ac.cr, CrAnyFree)]++
	if ac.flags&flagFirst != 0 || ex.len == ac.g.len {
		ac.b = ex
		return ac.useBestFound(g, gi)
	}
	if ac.b.len == 0 {
		ac.b = ex
		return nil
	}
	if ac.b.len < ac.g.len {
		if ex.len > ac.b.len {
			ac.b = ex
		}
	} else if ex.len > ac.g.len && ex.len < ac.b.len {
		ac.b = ex
	}
	return ac.checkLimits(g, gi, false)
}

// checkLimits stops the search once enough extents were seen (kernel:
// ext4_mb_check_limits).
func (ac *allocCtx) checkLimits(g *group, gi uint32, finishGroup bool) error {
	if ac.status == acFound {
		return nil
	}
	if ac.found > int(ac.t.MaxToScan) && ac.flags&flagFirst == 0 {
		ac.status = acBreak
		return nil
	}
	if ac.b.len < ac.g.len || ac.b.group != gi {
		return nil
	}
	if finishGroup || ac.found > int(ac.t.MinToScan) {
		return ac.useBestFound(g, gi)
	}
	return nil
}
