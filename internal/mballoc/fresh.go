package mballoc

import (
	"slices"
	"unsafe"

	"github.com/ext4go/ext4go/internal/pad"
)

// Clusters allocated and freed by the same transaction.
//
// A free is deferred until its transaction commits so that a crash never
// finds the blocks in use by a new owner while the committed state still
// gives them to the old one. Clusters that the freeing transaction itself
// allocated have no old owner in any committed state: after a crash they
// are free whichever way the replay goes, so file data freed this way can
// go back to the buddy at once (ext3 allowed the same through the
// committed copy of the bitmap, b_committed_data; mballoc defers them
// all). A file truncated and refilled within one transaction
// (will-it-scale's fallocate2) then reuses its own space instead of
// filling the filesystem with frees that wait for a commit, which forced a
// commit every few milliseconds.
//
// Each group keeps the runs of clusters the transaction freshTid
// allocated and has not freed since, sorted and merged, under the group's
// lock. A new transaction's first allocation in the group starts the list
// again. The list is capped: a run it cannot hold is simply not recorded,
// and its free is deferred as any other, so forgetting is always safe;
// what must never happen is a run recorded that the transaction did not
// allocate.

// freshRun is a run of clusters of one group.
type freshRun struct{ start, n uint32 }

// maxFresh caps a group's fresh list (8 bytes a run).
const maxFresh = 1024

// noteFresh records that transaction tid allocated clusters [start,
// start+n) of the group. Called with the group's lock held.
func (g *group) noteFresh(tid uint64, start, n uint32) {
	if n == 0 {
		return
	}
	if g.freshTid != tid {
		g.fresh, g.freshTid = g.fresh[:0], tid
	}
	if cap(g.fresh) == 0 {
		// A line of its own: grown from nil, the first array would be a
		// tiny 8-byte block, packed with other groups' on one line, and
		// this is written on every allocation.
		g.fresh = make([]freshRun, 0, pad.Line/unsafe.Sizeof(freshRun{}))
	}
	k := len(g.fresh)
	// Allocations mostly continue the last run (a file growing).
	if k > 0 && g.fresh[k-1].start+g.fresh[k-1].n == start {
		g.fresh[k-1].n += n
		return
	}
	i, _ := slices.BinarySearchFunc(g.fresh, start, func(r freshRun, s uint32) int {
		if r.start < s {
			return -1
		}
		return 1
	})
	// An overlap would mean the clusters were allocated twice: record
	// nothing rather than something wrong.
	if i > 0 && g.fresh[i-1].start+g.fresh[i-1].n > start || i < k && start+n > g.fresh[i].start {
		return
	}
	joinsLeft := i > 0 && g.fresh[i-1].start+g.fresh[i-1].n == start
	joinsRight := i < k && start+n == g.fresh[i].start
	switch {
	case joinsLeft && joinsRight:
		g.fresh[i-1].n += n + g.fresh[i].n
		g.fresh = slices.Delete(g.fresh, i, i+1)
	case joinsLeft:
		g.fresh[i-1].n += n
	case joinsRight:
		g.fresh[i].start, g.fresh[i].n = start, g.fresh[i].n+n
	case k < maxFresh:
		g.fresh = slices.Insert(g.fresh, i, freshRun{start, n})
	}
}

// splitFresh calls fn for the parts of clusters [off, off+n), in order,
// with whether transaction tid allocated them (fresh), and forgets the
// fresh ones: they are being freed. It stops at fn's first error (the
// caller marks the group corrupt). Called with the group's lock held.
func (g *group) splitFresh(tid uint64, off, n uint32, fn func(start, n uint32, fresh bool) error) error {
	end := off + n
	if g.freshTid != tid || len(g.fresh) == 0 {
		return fn(off, n, false)
	}
	// The first run ending after off, and those after it starting
	// before end.
	i, _ := slices.BinarySearchFunc(g.fresh, off, func(r freshRun, s uint32) int {
		if r.start+r.n <= s {
			return -1
		}
		return 1
	})
	j := i
	for j < len(g.fresh) && g.fresh[j].start < end {
		j++
	}
	if i == j {
		return fn(off, n, false)
	}
	first, last := g.fresh[i], g.fresh[j-1]
	at := off
	for _, r := range g.fresh[i:j] {
		s, e := max(r.start, off), min(r.start+r.n, end)
		if at < s {
			if err := fn(at, s-at, false); err != nil {
				return err
			}
		}
		if err := fn(s, e-s, true); err != nil {
			return err
		}
		at = e
	}
	if at < end {
		if err := fn(at, end-at, false); err != nil {
			return err
		}
	}
	// Forget [off, end): what is left of the first and last runs stays.
	var keep [2]freshRun
	nk := 0
	if first.start < off {
		keep[nk] = freshRun{first.start, off - first.start}
		nk++
	}
	if le := last.start + last.n; le > end && (j-i > 1 || nk == 0 || len(g.fresh) < maxFresh) {
		keep[nk] = freshRun{end, le - end}
		nk++
	}
	g.fresh = slices.Replace(g.fresh, i, j, keep[:nk]...)
	return nil
}
