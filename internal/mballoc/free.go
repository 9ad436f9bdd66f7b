package mballoc

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
)

// FreeFlags qualify a Free.
type FreeFlags uint32

const (
	// FreeMetadata marks metadata blocks (informational: with a
	// transaction, data and metadata frees are both deferred).
	FreeMetadata FreeFlags = 1 << iota
	// FreeNoDefer returns the blocks to the buddy at once even with a
	// transaction, for blocks never written in it (kernel: data=writeback).
	FreeNoDefer
	// FreeReuseFresh marks file data that no metadata buffer holds: the
	// clusters the freeing transaction allocated itself go back to the
	// buddy at once, the others wait for the commit (fresh.go).
	FreeReuseFresh
)

// deferShard maps transaction IDs to the groups holding extents they freed
// (kernel: s_freed_data_list, here sharded by group).
type deferShard struct {
	mu lockstat.Mutex[lockstat.MAllocDeferred]
	m  map[uint64][]uint32
	_  [cacheLine * pad.On]byte
}

// Free releases blocks [start, start+count) (kernel: ext4_free_blocks).
// With bigalloc the clusters holding them are freed. The bitmap and the
// free counts change in tx at once; with a non-nil tx the blocks stay
// unallocatable until ReleaseDeferred is called with tx's ID or a later
// one, so that they cannot be reused and overwritten before the commit
// that frees them is durable; with FreeReuseFresh, the clusters tx itself
// allocated are the exception (fresh.go).
func (a *Allocator) Free(tx Tx, start, count uint64, flags FreeFlags) error {
	return a.eachGroup("freeing", start, count, func(gi, off, n uint32) error {
		return a.freeInGroup(tx, gi, off, n, flags)
	})
}

// CheckInUse reports, as Free would, a range it must not free: blocks
// outside the filesystem or in the system zone, or a cluster its group's
// bitmap has free. It changes nothing: a change that will free the range
// asks first, so that it fails before it has changed anything rather
// than half way through (kernel: ext4_free_blocks would find the bit
// already cleared and mark the filesystem as having errors).
func (a *Allocator) CheckInUse(start, count uint64) error {
	return a.eachGroup("freeing", start, count, func(gi, off, n uint32) error {
		g, err := a.lockLoaded(gi)
		if err != nil {
			return err
		}
		defer g.mu.Unlock()
		if g.corrupt.Load() {
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "group is marked corrupt")
		}
		if ok, at := allSet(g.disk, off, n); !ok {
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "cluster %d, to be freed, is already free", at)
		}
		return nil
	})
}

// eachGroup checks blocks [start, start+count) (inside the filesystem,
// outside the system zone; doing names the operation in errors) and calls
// fn with the clusters of each group they cover.
func (a *Allocator) eachGroup(doing string, start, count uint64, fn func(gi, off, n uint32) error) error {
	gm := a.geo
	if count == 0 {
		return nil
	}
	end := start + count
	if start < uint64(gm.FirstDataBlock) || end > gm.BlocksCount || end < start {
		return fserr.Corrupt("block range", "%s blocks %d+%d outside the filesystem", doing, start, count)
	}
	if a.zone != nil && a.zone.InSystemZone(start, count) {
		return fserr.Corrupt("block range", "%s blocks %d+%d in the system zone", doing, start, count)
	}
	for start < end {
		gi, off := gm.locate(start)
		gstart := gm.blockOf(gi, 0)
		stop := min(end, gstart+uint64(gm.BlocksPerGroup))
		last := uint32((stop - 1 - gstart) >> gm.clusterBits)
		if last >= gm.clustersIn(gi) {
			return fserr.Corrupt("block range", "%s blocks past the end of group %d", doing, gi)
		}
		if err := fn(gi, off, last-off+1); err != nil {
			return err
		}
		start = stop
	}
	return nil
}

func (a *Allocator) freeInGroup(tx Tx, gi, off, n uint32, flags FreeFlags) error {
	g, err := a.lockLoaded(gi)
	if err != nil {
		return err
	}
	var victims []*prealloc
	defer func() {
		for _, pa := range victims {
			a.unlinkPA(pa)
		}
	}()
	defer g.mu.Unlock()
	if g.corrupt.Load() {
		return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "group is marked corrupt")
	}
	if ok, at := allSet(g.disk, off, n); !ok {
		return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "freeing cluster %d which is already free", at)
	}
	// An inode preallocation overlapping the range would give the freed
	// clusters back a second time when discarded: discard it first.
	// Backwards: deletePALocked takes pa out of g.pas, behind the index.
	for i := len(g.pas) - 1; i >= 0; i-- {
		pa := g.pas[i]
		if pa.kind != paInode || pa.deleted.Load() {
			continue
		}
		ps := pa.start.Load()
		if ps < off+n && off < ps+pa.len {
			a.releasePALocked(g, pa)
			a.deletePALocked(g, pa)
			victims = append(victims, pa)
		}
	}
	if err := a.markDiskLocked(tx, g, gi, off, n, false); err != nil {
		a.publishLocked(g, gi)
		return err
	}
	if tx != nil && flags&FreeNoDefer == 0 {
		tid := tx.ID()
		reuse := flags&FreeReuseFresh != 0
		deferred := false
		err := g.splitFresh(tid, off, n, func(s, k uint32, fresh bool) error {
			if fresh && reuse {
				return g.b.freeRange(s, k)
			}
			if err := g.addPending(s, k, tid); err != nil {
				return err
			}
			a.pending.Add(uint64(gi), int64(k))
			lockstat.Count(lockstat.AllocPending)
			deferred = true
			return nil
		})
		if err != nil {
			g.corrupt.Store(true)
			a.publishLocked(g, gi)
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "%v", err)
		}
		if deferred {
			a.registerDeferred(tid, gi)
		}
	} else if err := g.b.freeRange(off, n); err != nil {
		g.corrupt.Store(true)
		a.publishLocked(g, gi)
		return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "%v", err)
	}
	a.publishLocked(g, gi)
	return nil
}

// addPending records a deferred free, merging it with a neighbour of the
// same transaction (kernel: ext4_mb_free_metadata,
// ext4_try_merge_freed_extent).
func (g *group) addPending(start, n uint32, tid uint64) error {
	i, _ := slices.BinarySearchFunc(g.pending, start, func(p pendingFree, s uint32) int {
		if p.start < s {
			return -1
		}
		return 1
	})
	if i > 0 && g.pending[i-1].start+g.pending[i-1].n > start {
		return errors.New("block already on the to-be-freed list")
	}
	if i < len(g.pending) && start+n > g.pending[i].start {
		return errors.New("block already on the to-be-freed list")
	}
	if i > 0 && g.pending[i-1].tid == tid && g.pending[i-1].start+g.pending[i-1].n == start {
		g.pending[i-1].n += n
		if i < len(g.pending) && g.pending[i].tid == tid && start+n == g.pending[i].start {
			g.pending[i-1].n += g.pending[i].n
			g.pending = slices.Delete(g.pending, i, i+1)
		}
		return nil
	}
	if i < len(g.pending) && g.pending[i].tid == tid && start+n == g.pending[i].start {
		g.pending[i].start = start
		g.pending[i].n += n
		return nil
	}
	if cap(g.pending) == 0 {
		g.pending = make([]pendingFree, 0, pad.Line/unsafe.Sizeof(pendingFree{})) // a line of its own, as g.fresh
	}
	g.pending = slices.Insert(g.pending, i, pendingFree{start, n, tid})
	return nil
}

func (a *Allocator) registerDeferred(tid uint64, gi uint32) {
	if a.legacy {
		// Before the 2025 series the freed-data list shared s_md_lock with
		// the stream goal.
		a.legacyGoal.Lock()
		defer a.legacyGoal.Unlock()
	}
	sh := &a.deferred[gi%uint32(len(a.deferred))]
	sh.mu.Lock()
	gs := sh.m[tid]
	if len(gs) == 0 || gs[len(gs)-1] != gi {
		sh.m[tid] = append(gs, gi)
	}
	sh.mu.Unlock()
}

// OldestPending returns the oldest transaction whose frees wait for its
// commit, and false when none waits (as far as a moment's look at the
// registers of deferred frees sees: a free in progress may be missed). An
// allocation that ran out of space waits for that transaction's commit
// before it tries again: a later one would keep it waiting for nothing,
// while others take what the first one releases (kernel:
// ext4_should_retry_alloc, which waits for a commit only when
// s_mb_free_pending is not zero). Not for hot paths: it takes every
// deferred-free shard's lock.
func (a *Allocator) OldestPending() (tid uint64, ok bool) {
	for i := range a.deferred {
		sh := &a.deferred[i]
		sh.mu.Lock()
		for t := range sh.m {
			if !ok || t < tid {
				tid, ok = t, true
			}
		}
		sh.mu.Unlock()
	}
	return tid, ok
}

// ReleaseDeferred tells the allocator that every transaction up to and
// including tid has committed: the blocks they freed become allocatable
// and are merged back into the buddies (kernel: ext4_process_freed_data).
func (a *Allocator) ReleaseDeferred(tid uint64) error {
	var groups []uint32
	if a.legacy {
		a.legacyGoal.Lock()
	}
	for i := range a.deferred {
		sh := &a.deferred[i]
		sh.mu.Lock()
		for t, gs := range sh.m {
			if t <= tid {
				groups = append(groups, gs...)
				delete(sh.m, t)
			}
		}
		sh.mu.Unlock()
	}
	if a.legacy {
		a.legacyGoal.Unlock()
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	var firstErr error
	for _, gi := range groups {
		g := &a.groups[gi]
		g.mu.Lock()
		released := int64(0)
		keep := g.pending[:0]
		for _, p := range g.pending {
			if p.tid > tid {
				keep = append(keep, p)
				continue
			}
			if err := g.b.freeRange(p.start, p.n); err != nil {
				g.corrupt.Store(true)
				if firstErr == nil {
					firstErr = fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "releasing deferred free: %v", err)
				}
			}
			released += int64(p.n)
		}
		clear(g.pending[len(keep):])
		g.pending = keep
		a.publishLocked(g, gi)
		g.mu.Unlock()
		a.pending.Add(uint64(gi), -released)
		lockstat.Count(lockstat.AllocPending)
	}
	return firstErr
}
