package mballoc

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/fserr"
)

// MarkRange sets blocks [start, start+count) to used or free whatever
// their state, on disk and in the buddy (kernel: ext4_mb_mark_bb, which
// the fast-commit replay uses to rebuild the bitmaps of the inodes it
// changed). Clusters already in the wanted state are left alone. It is
// meant for a filesystem just opened: a cluster that is preallocated or
// waiting for a commit to be freed is refused, as its state is not the
// bitmap's alone.
func (a *Allocator) MarkRange(tx Tx, start, count uint64, used bool) error {
	return a.eachGroup("marking", start, count, func(gi, off, n uint32) error {
		return a.markInGroup(tx, gi, off, n, used)
	})
}

func (a *Allocator) markInGroup(tx Tx, gi, off, n uint32, used bool) error {
	g, err := a.lockLoaded(gi)
	if err != nil {
		return err
	}
	defer g.mu.Unlock()
	defer a.publishLocked(g, gi)
	if g.corrupt.Load() {
		return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "group is marked corrupt")
	}
	for _, pa := range g.pas {
		if ps := pa.start.Load(); !pa.deleted.Load() && ps < off+n && off < ps+pa.len {
			return fmt.Errorf("mballoc: marking clusters %d+%d of group %d: preallocated", off, n, gi)
		}
	}
	for _, p := range g.pending {
		if p.start < off+n && off < p.start+p.n {
			return fmt.Errorf("mballoc: marking clusters %d+%d of group %d: waiting to be freed", off, n, gi)
		}
	}
	for c := off; c < off+n; {
		// The next run of clusters in the other state.
		var s, e uint32
		if used {
			s = nextZero(g.disk, c, off+n)
			e = nextOne(g.disk, s, off+n)
		} else {
			s = nextOne(g.disk, c, off+n)
			e = nextZero(g.disk, s, off+n)
		}
		if s >= off+n {
			break
		}
		if err := a.markDiskLocked(tx, g, gi, s, e-s, used); err != nil {
			return err
		}
		if used {
			g.b.markUsed(s, e-s)
		} else if err := g.b.freeRange(s, e-s); err != nil {
			g.corrupt.Store(true)
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "%v", err)
		}
		c = e
	}
	return nil
}
