package mballoc

import (
	"fmt"
	"io"
	"sync/atomic"
)

// Criterion is one of the allocator's group-selection passes, cheapest
// first (kernel: enum criteria).
type Criterion int

const (
	CrPower2Aligned Criterion = iota // CR_POWER2_ALIGNED: 2^k request, buddy of order >= k
	CrGoalLenFast                    // CR_GOAL_LEN_FAST: groups whose average free run fits the goal
	CrBestAvailLen                   // CR_BEST_AVAIL_LEN: shrink the goal by up to a few orders
	CrGoalLenSlow                    // CR_GOAL_LEN_SLOW: linear, any group with enough free
	CrAnyFree                        // CR_ANY_FREE: linear, first free extent
	numCriteria
)

var criterionNames = [numCriteria]string{"power2_aligned", "goal_len_fast", "best_avail_len", "goal_len_slow", "any_free"}

func (c Criterion) String() string {
	if c >= 0 && c < numCriteria {
		return criterionNames[c]
	}
	return fmt.Sprintf("criterion(%d)", int(c))
}

// Stats are the allocator's counters, like the kernel's mb_stats file. They
// are only counted while Tunables.Stats is on, except Buddies, LostChunks
// and Spread, which are always kept.
type Stats struct {
	Requests         uint64 // allocations that ran the regular allocator
	Allocated        uint64 // clusters those allocations returned
	Success          uint64 // of them, ones that got at least the length asked for
	Goals            uint64 // ones that got exactly the goal extent
	StreamGoals      uint64 // stream allocations that found space in their global goal group
	LenGoals         uint64 // ones whose length equalled the (normalized) goal length
	Breaks           uint64 // ones that stopped after MaxToScan extents
	ExtentsScanned   uint64 // free extents measured
	GroupsScanned    uint64 // groups whose buddy was searched
	TryLockMisses    uint64 // groups skipped because their lock was busy
	LostChunks       uint64 // best extents taken by someone else before use
	Buddies          uint64 // buddies generated from bitmaps
	InodePAHits      uint64 // allocations served by an inode preallocation
	GroupPAHits      uint64 // allocations served by a locality-group preallocation
	Preallocated     uint64 // clusters put into new preallocations
	Discarded        uint64 // preallocated clusters given back unused
	ENOSPCRetries    uint64 // retries after discarding preallocations
	Spread           uint64 // stream allocations placed by spreading (ext4go's, see Tunables.StreamSpread)
	HoleFits         uint64 // small-file allocations taken from a hole (ext4go's, see Tunables.HoleFit)
	Hits             [numCriteria]uint64
	GroupsConsidered [numCriteria]uint64
	Failed           [numCriteria]uint64 // passes that found nothing
	CrExtents        [numCriteria]uint64 // extents measured per criterion
}

type statCounters struct {
	requests, allocated, success, goals, streamGoals, lenGoals, breaks atomic.Uint64
	extentsScanned, groupsScanned, trylockMisses, lostChunks, buddies  atomic.Uint64
	inodePAHits, groupPAHits, preallocated, discarded, enospcRetries   atomic.Uint64
	spread, holeFits                                                   atomic.Uint64
	hits, considered, failed, crExtents                                [numCriteria]atomic.Uint64
}

// Stats returns a snapshot of the counters.
func (a *Allocator) Stats() Stats {
	s := &a.stats
	out := Stats{
		Requests: s.requests.Load(), Allocated: s.allocated.Load(), Success: s.success.Load(),
		Goals: s.goals.Load(), StreamGoals: s.streamGoals.Load(), LenGoals: s.lenGoals.Load(),
		Breaks: s.breaks.Load(), ExtentsScanned: s.extentsScanned.Load(), GroupsScanned: s.groupsScanned.Load(),
		TryLockMisses: s.trylockMisses.Load(), LostChunks: s.lostChunks.Load(), Buddies: s.buddies.Load(),
		InodePAHits: s.inodePAHits.Load(), GroupPAHits: s.groupPAHits.Load(),
		Preallocated: s.preallocated.Load(), Discarded: s.discarded.Load(), ENOSPCRetries: s.enospcRetries.Load(),
		Spread: s.spread.Load(), HoleFits: s.holeFits.Load(),
	}
	for i := range numCriteria {
		out.Hits[i] = s.hits[i].Load()
		out.GroupsConsidered[i] = s.considered[i].Load()
		out.Failed[i] = s.failed[i].Load()
		out.CrExtents[i] = s.crExtents[i].Load()
	}
	return out
}

// WriteTo prints the counters in the layout of the kernel's mb_stats file.
func (s Stats) WriteTo(w io.Writer) (int64, error) {
	var n int64
	p := func(f string, a ...any) {
		k, _ := fmt.Fprintf(w, f, a...)
		n += int64(k)
	}
	p("mballoc:\n")
	p("\treqs: %d\n\tsuccess: %d\n\tgroups_scanned: %d\n", s.Requests, s.Success, s.GroupsScanned)
	p("\tcr_p2_aligned_stats: hits %d groups_considered %d extents_scanned %d useless_loops %d\n",
		s.Hits[0], s.GroupsConsidered[0], s.CrExtents[0], s.Failed[0])
	for c := CrGoalLenFast; c < numCriteria; c++ {
		p("\tcr_%s_stats: hits %d groups_considered %d extents_scanned %d useless_loops %d\n",
			c, s.Hits[c], s.GroupsConsidered[c], s.CrExtents[c], s.Failed[c])
	}
	p("\textents_scanned: %d\n\tgoal_hits: %d\n\tstream_goal_hits: %d\n\tlen_goal_hits: %d\n\tbreaks: %d\n\tlost: %d\n",
		s.ExtentsScanned, s.Goals, s.StreamGoals, s.LenGoals, s.Breaks, s.LostChunks)
	p("\ttrylock_misses: %d\n\tbuddies_generated: %d\n\tpreallocated: %d\n\tdiscarded: %d\n",
		s.TryLockMisses, s.Buddies, s.Preallocated, s.Discarded)
	p("\tinode_pa_hits: %d\n\tgroup_pa_hits: %d\n\tenospc_retries: %d\n\tstream_spread: %d\n\thole_fits: %d\n",
		s.InodePAHits, s.GroupPAHits, s.ENOSPCRetries, s.Spread, s.HoleFits)
	return n, nil
}
