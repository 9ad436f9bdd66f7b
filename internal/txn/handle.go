package txn

import (
	"errors"
	"fmt"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/shard"
)

// Handle is one atomic change in progress.
type Handle struct {
	m     *Manager
	t     *Transaction
	shard *paddedCount // where the handle counted itself open
	ended bool
	// commitOnEnd: End waits for the transaction's commit (CommitOnEnd).
	commitOnEnd bool
}

// Begin opens a handle in the running transaction, waiting while a commit
// is closing it.
func (m *Manager) Begin() (*Handle, error) { return m.BeginFor(0) }

// BeginFor is Begin for a change to the object key names (an inode
// number): handles with different keys count themselves open in different
// cache lines.
func (m *Manager) BeginFor(key uint64) (*Handle, error) {
	h := new(Handle)
	if err := m.BeginInto(h, key); err != nil {
		return nil, err
	}
	return h, nil
}

// ErrHandleOpen is returned by BeginInto for a handle that has not ended.
var ErrHandleOpen = errors.New("txn: beginning a handle that is still open")

// BeginInto is BeginFor into a handle the caller keeps (one per object,
// reused change after change, so that the hot paths allocate none). h must
// be new or ended; a handle still open is refused, never reset. The
// caller must make sure nothing uses h from its End to its next
// BeginInto.
func (m *Manager) BeginInto(h *Handle, key uint64) error {
	if h.t != nil && !h.ended {
		return ErrHandleOpen
	}
	for {
		if err := m.Err(); err != nil {
			return err
		}
		t := m.running.Load()
		if hard := m.hardLimit.Load(); hard > 0 && t.size() >= hard && !t.locked.Load() {
			if err := m.commitFull(t); err != nil {
				return err
			}
			continue
		}
		if !t.locked.Load() {
			c := &t.updates[shard.Index(key, updateShards)]
			c.n.Add(1)
			lockstat.Count(lockstat.TxnOpenCount)
			// Commit sets locked before it reads updates, and we read
			// locked after adding ours (both sequentially consistent):
			// either Commit sees our handle and waits for it, or we
			// see locked and back out.
			if !t.locked.Load() {
				*h = Handle{m: m, t: t, shard: c}
				return nil
			}
			m.endUpdate(t, c)
		}
		m.mu.Lock()
		for m.running.Load() == t && t.locked.Load() {
			m.cond.Wait()
		}
		m.mu.Unlock()
	}
}

// TID returns the number of the transaction the handle belongs to.
func (h *Handle) TID() uint64 { return h.t.tid }

func (m *Manager) checkBlock(nr uint64) error {
	if nr >= m.nblocks {
		return fmt.Errorf("txn: block %d outside the filesystem (%d blocks)", nr, m.nblocks)
	}
	return nil
}

// Modify lets fn change block nr in place: the block is read if it is not
// cached, locked while fn runs, and recorded in the handle's transaction.
// If fn fails the block is still recorded (fn may have changed it).
func (h *Handle) Modify(nr uint64, fn func(b []byte) error) error {
	return h.modify(nr, false, 0, nil, fn)
}

// Create is Modify for a block whose old content does not matter (newly
// allocated): it starts zeroed and is not read from the device.
func (h *Handle) Create(nr uint64, fn func(b []byte) error) error {
	return h.modify(nr, true, 0, nil, fn)
}

// ModifySealed is Modify for a writer that leaves the block with a correct
// checksum under seed (its own encoder computed it): the block is sealed
// with seed, and ViewSealed need not verify it again (see Buffer.sealed).
func (h *Handle) ModifySealed(nr uint64, seed uint32, fn func(b []byte) error) error {
	return h.modify(nr, false, sealOf(seed), nil, fn)
}

// CreateSealed is Create with ModifySealed's promise.
func (h *Handle) CreateSealed(nr uint64, seed uint32, fn func(b []byte) error) error {
	return h.modify(nr, true, sealOf(seed), nil, fn)
}

// ModifyDeferred is ModifySealed for a writer that leaves the block's
// checksum to sum: the block is sealed with seed at once, and sum runs
// under the buffer's lock once, before the checksum field can be read
// (see Buffer.sum), normally when the commit freezes the block. sum must
// not take locks; a function value that needs no closure keeps the call
// free of allocations.
func (h *Handle) ModifyDeferred(nr uint64, seed uint32, sum SumFunc, fn func(b []byte) error) error {
	return h.modifySum(nr, false, sealOf(seed), nil, sum, seed, fn)
}

// CreateDeferred is Create with ModifyDeferred's promise.
func (h *Handle) CreateDeferred(nr uint64, seed uint32, sum SumFunc, fn func(b []byte) error) error {
	return h.modifySum(nr, true, sealOf(seed), nil, sum, seed, fn)
}

func sealOf(seed uint32) uint64 { return 1<<32 | uint64(seed) }

// ModifyOrZero is Modify for a block whose content matters only if zero
// says so: when the block is not in memory, zero is asked (with the
// buffer's lock held, so no other change of the block can start in
// between) and, if it reports true, the block starts zeroed instead of
// being read. An inode-table block none of whose other inodes are in use
// is one (kernel: __ext4_get_inode_loc's in_mem case). zero must not
// take a buffer's lock.
func (h *Handle) ModifyOrZero(nr uint64, zero func() bool, fn func(b []byte) error) error {
	return h.modify(nr, false, 0, zero, fn)
}

func (h *Handle) modify(nr uint64, fresh bool, seal uint64, zero func() bool, fn func(b []byte) error) error {
	return h.modifySum(nr, fresh, seal, zero, nil, 0, fn)
}

// modifySum is modify for a writer that may defer the block's checksum to
// sum (under seed).
func (h *Handle) modifySum(nr uint64, fresh bool, seal uint64, zero func() bool, sum SumFunc, seed uint32, fn func(b []byte) error) error {
	if h.ended {
		return errors.New("txn: handle already ended")
	}
	m := h.m
	if err := m.checkBlock(nr); err != nil {
		return err
	}
	b, err := m.buffer(nr, !fresh, zero)
	if err != nil {
		return err
	}
	defer b.unpin()
	b.mu.Lock()
	if fresh {
		clear(b.data)
		b.valid = true
		b.sum = nil
	} else if b.sum != nil && (sum == nil || b.sumSeed != seed) {
		// fn may read the checksum field, or leaves it under
		// another seed: the pending one first.
		if err := b.settleSum(); err != nil {
			b.mu.Unlock()
			return err
		}
	}
	err = fn(b.data)
	if err != nil {
		seal = 0
	}
	if sum != nil {
		// Even after a failed fn: the block is what it is now, and
		// a commit must not freeze it with a checksum of before.
		b.sum, b.sumSeed = sum, seed
	}
	b.sealed.Store(seal)
	if b.tx != h.t {
		b.tx = h.t
		h.t.addDirty(nr, b)
		h.t.cancelRevoke(nr)
	}
	b.mu.Unlock()
	return err
}

// cancelRevoke drops a revoke of nr recorded earlier in t: t logs the
// block again, and its copy must replay (kernel: jbd2_journal_cancel_revoke).
func (t *Transaction) cancelRevoke(nr uint64) {
	if t.nrevoke.Load() == 0 {
		return
	}
	t.revokeMu.Lock()
	delete(t.revokes, nr)
	t.nrevoke.Store(int64(len(t.revokes)))
	t.revokeMu.Unlock()
}

// Revoke is called for blocks [start, start+n) being freed by the handle's
// transaction, whatever they held: each is forgotten (Forget) and, when the
// committer keeps a log that holds a copy of it, a revoke record is made,
// so that a replay after the block is reused (as file data, which is not
// logged) cannot write the old copy over it (kernel: jbd2_journal_revoke,
// called by ext4_free_blocks).
func (h *Handle) Revoke(start, n uint64) {
	for nr := start; nr < start+n; nr++ {
		h.Forget(nr)
	}
	h.RevokeUncached(start, n)
}

// RevokeUncached is Revoke for blocks the cache holds no buffer of: a
// regular file's data, which is read and written around the cache (a
// block that was metadata before was forgotten when it was freed as such).
// It skips the per-block cache lookups, a truncate's main cost in them.
func (h *Handle) RevokeUncached(start, n uint64) {
	m := h.m
	lg, ok := m.committerNow().(Logger)
	if !ok {
		return
	}
	if logged := lg.Logged(start, n); len(logged) > 0 {
		t := h.t
		t.revokeMu.Lock()
		if t.revokes == nil {
			t.revokes = map[uint64]struct{}{}
		}
		for _, nr := range logged {
			t.revokes[nr] = struct{}{}
		}
		t.nrevoke.Store(int64(len(t.revokes)))
		t.revokeMu.Unlock()
	}
}

// Forget drops block nr from the running transaction and the cache: it has
// been freed and must not be written back (kernel: jbd2_journal_forget).
func (h *Handle) Forget(nr uint64) {
	m := h.m
	b := m.cache.lookup(nr)
	if b == nil {
		return
	}
	defer b.unpin()
	b.mu.Lock()
	if b.tx == h.t {
		h.t.dropDirty(nr)
		b.tx = nil
	}
	b.mu.Unlock()
	m.cache.drop(nr, b)
}

// CommitOnEnd makes h's End return only once h's transaction has
// committed: End commits it, or waits for its commit in progress (as a
// handle waits for a commit when the journal is full). For a change that
// leaves the transaction holding what others cannot have until it
// commits, such as blocks it freed, which no allocation may take before
// then: a writer that keeps making such changes waits for the commits it
// makes necessary, and the others are not held up.
func (h *Handle) CommitOnEnd() { h.commitOnEnd = true }

// End closes the handle. When the running transaction has grown past
// Options.MaxDirty, End commits it, unless another End or a Begin at the
// hard limit is committing. After CommitOnEnd it returns once the
// transaction has committed, making the commit if none is in progress.
func (h *Handle) End() error {
	if h.ended {
		return errors.New("txn: handle already ended")
	}
	h.ended = true
	m := h.m
	t := h.t
	m.endUpdate(t, h.shard)
	if h.commitOnEnd {
		return m.CommitThrough(t.tid)
	}
	big := t.ndirty.Load() >= m.maxDirty.Load() && !t.locked.Load() && m.running.Load() == t
	if big {
		_, err := m.commitOnce(t)
		return err
	}
	return nil
}
