package ext4go

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go/internal/benchknob"
	"github.com/ext4go/ext4go/internal/inode"
)

// Lazy timestamps (Options.Lazytime, the kernel's lazytime mount option).
//
// A change that only moves timestamps — an access time after a read, the
// modification and change times of a write that overwrote mapped blocks
// without changing the size or the mapping — replaces the node's inode
// (n.cur) in memory and marks the node's times dirty (kernel:
// __mark_inode_dirty(I_DIRTY_TIME)). Stat sees the new times at once; the
// inode table does not, until one of:
//
//   - the inode's next real write: setInode encodes the whole current
//     inode, times included, and the node is clean again;
//   - a real write of another inode in the same inode-table block, which
//     copies the times of its dirty neighbours into that block in the same
//     transaction (kernel: ext4_update_other_inodes_time), never waiting
//     for them (below); on the hot paths that is a file's first change in
//     a transaction, the one that writes the block (inode_defer.go);
//   - FS.Sync (all of them), File.Sync (that file's: fsync writes a
//     dirty-time inode, kernel: ext4_sync_file), FS.Close;
//   - the periodic commit (Options.CommitInterval) after the times have
//     been dirty for Options.LazytimeExpire, 12 hours by default (kernel:
//     dirtytime_expire_interval), or at once for all those waiting when
//     more than maxLazyTimes nodes are dirty (the kernel writes a
//     dirty-time inode before evicting it; here the dirty set keeps its
//     nodes, so it is bounded instead). Without periodic commits (a negative
//     CommitInterval) only the other ways apply.
//
// A crash loses at most the timestamps written this way, never anything
// else: nothing but times is ever kept back, and a real write carries the
// times with it.
//
// The dirty set (lazyTimes) holds its nodes strongly. That keeps the rule
// the inode cache relies on: a node can only die once everything it
// changed is in the inode table buffer, so a reload never reads times older
// than a stat showed.
//
// Locks. A node's timesDirtyAt and its slot in the dirty set change only
// under the node's mu held exclusively, so under mu the two agree. The
// dirty set itself takes no lock (atomic slots per inode-table block).
// Copying a neighbour's times is optional work done while the writer
// holds its own node's mu, an open transaction handle and the
// inode-table block's buffer lock, so it must never wait: the neighbour's
// mu is only tried (TryLock), and a neighbour that is busy (locked by
// anyone, reader or writer), being created (no inode yet) or freed is
// skipped — its times stay dirty and reach the disk another way. Waiting
// there would break the lock order (inode locks before a handle; a handle
// never waits for an inode lock): the neighbour's holder may itself be
// writing its inode and wait for the block's buffer lock the writer holds,
// or wait for the commit the writer's handle holds up. "ext4go bench
// lazytime" measures it with a bounded wait (f.neighbourWait): nearly
// every wait runs out, even at 200 ms, so an unbounded one would be a
// deadlock. The kernel skips such inodes the same way (find_inode_nowait
// and other_inode_match).

// maxLazyTimes bounds the nodes whose times wait in memory: past it the
// periodic committer writes them all.
const maxLazyTimes = 1 << 14

// defaultLazytimeExpire is how long times may stay dirty in memory
// (kernel: dirtytime_expire_interval, 12 hours).
const defaultLazytimeExpire = 12 * time.Hour

// lazyTimes is the set of nodes whose timestamps changed in memory only
// (kernel: the b_dirty_time list), kept by inode-table block, so that a
// write of that block finds the neighbours it may carry, and slot by slot
// in it. It takes no lock: every write of an inode of a block with dirty
// neighbours looks here and every time-only change may enter, and a mutex
// here (a first version had sharded ones) was the hot spot of the
// lazytime benchmark, as the inode hash lock was the kernel's.
type lazyTimes struct {
	count  atomic.Int64 // nodes in the set
	blocks sync.Map     // inode-table block number -> *lazyBlock
}

// lazyBlock holds the nodes of one inode-table block whose times are
// dirty: slots[i] is the block's i-th inode, or nil. A slot changes only
// under its node's mu (held exclusively), and holds at most one node: one
// inode number has one live node, and a node leaves before its inode is
// freed (its last write cleans it).
type lazyBlock struct {
	dirty atomic.Int32 // non-nil slots, and markers on their way in
	// dead: being pruned (no dirty slot); a marker that finds it set
	// takes a new record instead.
	dead  atomic.Bool
	slots []atomic.Pointer[node]
}

// add records n, the slot-th inode of inode-table block blk (of
// perBlock), as dirty. n.mu is held exclusively and n was not in the set.
// It returns the number of nodes in the set.
func (s *lazyTimes) add(blk uint64, slot, perBlock int, n *node) int64 {
	for {
		v, ok := s.blocks.Load(blk)
		if !ok {
			v, _ = s.blocks.LoadOrStore(blk, &lazyBlock{slots: make([]atomic.Pointer[node], perBlock)})
		}
		b := v.(*lazyBlock)
		// Announce, then look: prune marks dead, then looks (see
		// prune); one of the two sees the other.
		b.dirty.Add(1)
		if b.dead.Load() {
			// Being pruned: gone in a moment, or kept (prune saw a
			// dirty slot, maybe only this marker's).
			b.dirty.Add(-1)
			runtime.Gosched()
			continue
		}
		b.slots[slot].Store(n)
		return s.count.Add(1)
	}
}

// remove takes n, the slot-th inode of block blk, out of the set. n.mu is
// held exclusively and n is in the set.
func (s *lazyTimes) remove(blk uint64, slot int, n *node) {
	v, ok := s.blocks.Load(blk)
	if !ok {
		return
	}
	b := v.(*lazyBlock)
	if b.slots[slot].CompareAndSwap(n, nil) {
		b.dirty.Add(-1)
		s.count.Add(-1)
	}
}

// neighbours appends to dst the nodes of block blk in the set, but skip.
func (s *lazyTimes) neighbours(dst []*node, blk uint64, skip *node) []*node {
	v, ok := s.blocks.Load(blk)
	if !ok {
		return dst
	}
	b := v.(*lazyBlock)
	if b.dirty.Load() == 0 {
		return dst
	}
	for i := range b.slots {
		if m := b.slots[i].Load(); m != nil && m != skip {
			dst = append(dst, m)
		}
	}
	return dst
}

// expired returns the nodes whose times have been dirty since before
// cutoff (all of them when cutoff is zero), and drops the records of
// blocks with none.
func (s *lazyTimes) expired(cutoff time.Time) []*node {
	var ns []*node
	s.blocks.Range(func(k, v any) bool {
		b := v.(*lazyBlock)
		if b.dirty.Load() == 0 {
			s.prune(k.(uint64), b)
			return true
		}
		for i := range b.slots {
			m := b.slots[i].Load()
			if m == nil {
				continue
			}
			// Read without m.mu: a stale answer only moves the write
			// to the next round, and writeTimes checks under mu.
			if at := m.timesDirtyAt.Load(); at != 0 && (cutoff.IsZero() || at < cutoff.UnixNano()) {
				ns = append(ns, m)
			}
		}
		return true
	})
	return ns
}

// prune drops the record of block blk if no slot of it is dirty.
func (s *lazyTimes) prune(blk uint64, b *lazyBlock) {
	b.dead.Store(true)
	if b.dirty.Load() != 0 {
		b.dead.Store(false) // a marker came in; it keeps the record
		return
	}
	s.blocks.CompareAndDelete(blk, b)
}

// lazytime reports whether time-only changes stay in memory.
func (f *FS) lazytime() bool { return f.opts.Lazytime && f.w != nil && !f.reproducible }

// lazytimeExpire is how long times may stay dirty before the periodic
// commit writes them; 0 means never by age.
func (f *FS) lazytimeExpire() time.Duration {
	switch d := f.opts.LazytimeExpire; {
	case d == 0:
		return defaultLazytimeExpire
	case d < 0:
		return 0
	default:
		return d
	}
}

// truncateTimes keeps in memory what the inode stores: without the extra
// time fields (128-byte inodes) whole seconds, so that a stat does not
// change across a reopen (Linux: s_time_gran of one second,
// timestamp_truncate).
func (f *FS) truncateTimes(in *inode.Inode) {
	if f.inodeSize <= inode.GoodOldSize {
		for _, ts := range []*inode.Timestamp{&in.Atime, &in.Ctime, &in.Mtime, &in.Crtime} {
			ts.Nsec = 0
		}
	}
}

// setTimesLazily publishes in, which differs from n's inode in its
// timestamps only, without writing it: n's times are dirty until
// something writes the inode (see above; kernel: generic_update_time with
// SB_LAZYTIME). n.mu must be held exclusively, and lazytime() be true.
func (f *FS) setTimesLazily(n *node, in *inode.Inode) {
	f.truncateTimes(in)
	// Published, the inode is read by lock-free readers: its Raw is no
	// one's to write in place any more (as setInode).
	in.RawOwned = false
	n.publish(in, false)
	if n.timesDirtyAt.Load() != 0 {
		return
	}
	blk, off, err := f.inodeLocation(n.ino)
	if err != nil {
		return // cannot happen for a loaded node; the times stay in memory
	}
	n.timesDirtyAt.Store(time.Now().UnixNano())
	if f.w.lazyTimes.add(blk, off/f.inodeSize, int(f.blockSize)/f.inodeSize, n) > f.w.lazyTimesLimit.Load() {
		select {
		case f.w.flushTimes <- struct{}{}:
		default:
		}
	}
}

// timesWritten records that n's current times reached its inode-table
// block blk, at byte off. n.mu is held exclusively.
func (f *FS) timesWritten(blk uint64, off int, n *node) {
	if n.timesDirtyAt.Load() != 0 {
		n.timesDirtyAt.Store(0)
		f.w.lazyTimes.remove(blk, off/f.inodeSize, n)
	}
}

// neighbourTimes returns the nodes of inode-table block blk, but n, whose
// times wait in memory: those a write of blk may carry. It is called
// before the block's buffer is locked.
func (f *FS) neighbourTimes(blk uint64, n *node) []*node {
	if f.w == nil || f.w.lazyTimes.count.Load() == 0 {
		return nil
	}
	return f.w.lazyTimes.neighbours(nil, blk, n)
}

// copyNeighbourTimes writes into b, inode-table block blk, the current
// inodes of the nodes of cands whose times are still dirty, leaving out
// every one that is busy (kernel: ext4_update_other_inodes_time,
// other_inode_match). It runs under the block's buffer lock, with the
// writer's own node locked and its handle open, so it never waits (see
// above; f.neighbourWait, a benchmark's knob, makes it wait to show why).
func (f *FS) copyNeighbourTimes(b []byte, blk uint64, cands []*node) {
	for _, m := range cands {
		if !f.tryLockNeighbour(m) {
			f.w.neighbourSkips.Add(1)
			continue
		}
		f.copyTimesLocked(b, blk, m)
		m.mu.Unlock()
	}
}

// copyTimesLocked is copyNeighbourTimes for one neighbour m, whose mu is
// held.
func (f *FS) copyTimesLocked(b []byte, blk uint64, m *node) {
	cur := m.in()
	if m.timesDirtyAt.Load() == 0 || cur == nil || m.freed.Load() {
		return // written meanwhile, being created, or gone
	}
	mblk, off, err := f.inodeLocation(m.ino)
	if err != nil || mblk != blk {
		return
	}
	slot := b[off : off+f.inodeSize]
	if inode.SlotGeneration(slot) != cur.Generation {
		// The slot is not m's: a live node whose slot another inode
		// owns is the bug lifetime.go's rules prevent. A slot without
		// links may still be m's: an orphan (unlinked, still open) has
		// none, and its times go to its slot like anyone's.
		staleWrites.Add(1)
		return
	}
	// Only the times, into the slot as it is, and the checksum (kernel:
	// EXT4_INODE_SET_XTIME, ext4_inode_csum_set): every other field of
	// the slot is already cur's, which changes only through setInode.
	// cur.Raw keeps the old times, which no one reads: encodes write
	// the fields over it.
	if err := cur.EncodeTimes(slot); err != nil {
		return
	}
	if f.csum {
		inode.SetChecksum(f.seed, m.ino, slot)
	}
	f.timesWritten(blk, off, m)
	f.w.neighbourCopies.Add(1)
}

// tryLockNeighbour takes m's lock if it is free. With the benchmark knob
// f.neighbourWait it waits for the lock instead, spinning up to that long:
// the bound only breaks the deadlocks that waiting here makes possible.
func (f *FS) tryLockNeighbour(m *node) bool {
	if m.mu.TryLock() {
		return true
	}
	if f.neighbourWait <= 0 {
		return false
	}
	benchknob.LazytimeNeighbourWaits.Add(1)
	deadline := time.Now().Add(f.neighbourWait)
	for time.Now().Before(deadline) {
		runtime.Gosched()
		if m.mu.TryLock() {
			return true
		}
	}
	benchknob.LazytimeNeighbourTimeouts.Add(1)
	return false
}

// writeTimes writes n's inode if its times are dirty. No lock of n may be
// held, and no handle be open.
func (f *FS) writeTimes(n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.timesDirtyAt.Load() == 0 || n.freed.Load() || n.in() == nil {
		return nil
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	err = f.setInode(h, n, editInode(n))
	if e := h.End(); err == nil {
		err = e
	}
	return err
}

// writeDirtyTimes writes the inodes whose times have been dirty since
// before cutoff, all of them when cutoff is zero (kernel: the writeback
// of I_DIRTY_TIME inodes by sync and on expiry). No lock may be held.
func (f *FS) writeDirtyTimes(cutoff time.Time) error {
	if f.w == nil {
		return nil
	}
	var first error
	for _, n := range f.w.lazyTimes.expired(cutoff) {
		if err := f.writeTimes(n); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writeExpiredTimes is the periodic committer's part: the times dirty for
// longer than Options.LazytimeExpire, or all of them when too many wait.
func (f *FS) writeExpiredTimes() error {
	if f.w.lazyTimes.count.Load() > f.w.lazyTimesLimit.Load() {
		return f.writeDirtyTimes(time.Time{})
	}
	expire := f.lazytimeExpire()
	if expire == 0 {
		return nil
	}
	return f.writeDirtyTimes(time.Now().Add(-expire))
}

// neighbourWaitFromKnob is the neighbour wait of a new FS: the
// benchmark's knob (internal/benchknob), zero everywhere else.
func neighbourWaitFromKnob() time.Duration {
	return time.Duration(benchknob.LazytimeNeighbourWait.Load())
}
