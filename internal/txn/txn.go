// Package txn is ext4go's transaction layer: a cache of metadata blocks and
// the handles through which every metadata change is made, in the manner of
// the kernel's jbd2 (handle start, get write access, dirty metadata, handle
// stop, commit).
//
// A change to the filesystem opens a Handle, changes blocks with
// Handle.Modify / Handle.Create (which lock the block's buffer, let the
// caller edit it and record it in the running transaction) and ends the
// handle. Handles from many goroutines join the same running Transaction.
// Commit closes the running transaction to new handles, waits for its open
// handles to end, freezes a copy of every block it changed, opens the next
// transaction, and hands the frozen copies to the Committer: InPlace
// writes them home (no journal); internal/journal logs them first. Blocks
// freed by a transaction are revoked in it (Handle.Revoke) when the
// committer is a Logger that holds a copy of them.
//
// Data blocks of regular files do not pass through here: the filesystem
// writes them to the device before the handle that maps them ends, which
// gives the ordering of the kernel's data=ordered mode.
//
// Locks, in the order they may be taken:
//   - Manager.commitMu serialises commits;
//   - Manager.mu is only for waiting (cond): Begin while a commit closes
//     the running transaction, Commit for its handles to end;
//   - a dirty-set shard's mu protects that shard of a transaction's
//     changed blocks (sharded by block number, so handles changing
//     different blocks do not meet on one lock);
//   - a transaction's revokeMu protects its revoke set (taken alone);
//   - a cache shard's mu protects its map;
//   - a Buffer's mu protects its data and state. ModifyOrZero calls its
//     zero callback with that lock held: the callback may take the
//     caller's own locks (ialloc's group mutex) but no Buffer's.
//
// Begin and End take no lock when no commit is closing the running
// transaction: the running transaction is an atomic pointer and its open
// handles an atomic count (as jbd2's t_updates), so handles on different
// files do not serialise on the manager. The count is sharded over cache
// lines by the caller's key (BeginFor: the inode), so that handles on
// different files do not even write one shared line; Commit sums it.
//
// A handle must not wait for anything that may wait for a commit (for
// example an inode lock) while it is open: take such locks before Begin.
package txn

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
)

// Device is where blocks live.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
}

// Block is a frozen copy of a changed block, as handed to a Committer.
type Block struct {
	Nr   uint64
	Data []byte
}

// Committer makes a transaction's blocks durable. revokes lists blocks
// freed by the transaction whose earlier logged copies must not be
// replayed (see Handle.Revoke); a committer without a log ignores it.
type Committer interface {
	Commit(tid uint64, blocks []Block, revokes []uint64) error
}

// Logger is implemented by a Committer that keeps a log (jbd2): Frozen is
// called with a transaction's blocks while the transaction is closed and
// before the next one opens, so that Logged answers for them to every
// later handle; Logged reports the blocks of [start, start+n) that have a
// copy in the log which a replay could still write.
type Logger interface {
	Committer
	Frozen(tid uint64, blocks []Block)
	Logged(start, n uint64) []uint64
}

// InPlace is the Committer of a filesystem without a journal (and of a
// journalled one before its journal starts and after it stops): it writes each block to its home location, then syncs.
type InPlace struct {
	Dev       Device
	BlockSize int
	// NoSync skips the device sync after each commit (image building,
	// where only the final state matters).
	NoSync bool
}

// vectorWriter is a Device that writes pieces lying end to end with one
// call (dev.File's pwritev).
type vectorWriter interface {
	WriteVAt(pieces [][]byte, off int64) (int, error)
}

// maxVector bounds the blocks of one vectored write (IOV_MAX).
const maxVector = 1024

func (c *InPlace) Commit(_ uint64, blocks []Block, _ []uint64) error {
	vw, _ := c.Dev.(vectorWriter)
	var pieces [][]byte
	for i := 0; i < len(blocks); {
		b := blocks[i]
		off := int64(b.Nr) * int64(c.BlockSize)
		if vw == nil {
			if _, err := c.Dev.WriteAt(b.Data, off); err != nil {
				return fmt.Errorf("write block %d: %w", b.Nr, err)
			}
			i++
			continue
		}
		// blocks are sorted: a run of neighbours is one write.
		j := i + 1
		for j < len(blocks) && j-i < maxVector && blocks[j].Nr == blocks[j-1].Nr+1 {
			j++
		}
		pieces = pieces[:0]
		for _, r := range blocks[i:j] {
			pieces = append(pieces, r.Data)
		}
		if _, err := vw.WriteVAt(pieces, off); err != nil {
			return fmt.Errorf("write blocks %d-%d: %w", b.Nr, blocks[j-1].Nr, err)
		}
		i = j
	}
	if c.NoSync {
		return nil
	}
	return c.Dev.Sync()
}

// Options tune a Manager.
type Options struct {
	// MaxDirty is the number of changed blocks after which ending a handle
	// commits the running transaction (default 16384).
	MaxDirty int
	// CacheBlocks bounds the clean blocks kept in the cache (default 65536).
	CacheBlocks int
}

// Manager owns the block cache and the transactions of one filesystem.
type Manager struct {
	dev       Device
	bs        int
	nblocks   uint64
	committer atomic.Pointer[Committer] // replaced only under commitMu (SetCommitter)
	opts      Options
	cache     cache

	commitMu lockstat.Mutex[lockstat.MTxnCommit] // serialises Commit; protects nextTID

	mu      lockstat.Mutex[lockstat.MTxnManager] // the lock of cond
	cond    *sync.Cond                           // signalled when a locked transaction's updates drop to 0 or a new one runs
	running atomic.Pointer[Transaction]
	nextTID uint64
	err     atomic.Pointer[error] // a failed commit: the filesystem is no longer consistent on disk

	hooksMu lockstat.Mutex[lockstat.MTxnHooks]
	hooks   []func(tid uint64)
	// beforeFreeze, if set, runs in each commit once the transaction's
	// handles have ended and before its blocks are frozen (BeforeFreeze).
	beforeFreeze func(h *Handle) error

	committing  atomic.Bool
	maxDirty    atomic.Int64  // Options.MaxDirty, or as SetMaxDirty set it
	hardLimit   atomic.Int64  // a transaction this big takes no new handle until committed; 0: none
	commitCount atomic.Int64  // transactions handed to a committer
	committed   atomic.Uint64 // the last transaction whose commit has ended, hooks and all
}

// Transaction is a group of changes that reach the disk together.
type Transaction struct {
	tid uint64
	// A line before updates keeps the first count off tid, which every
	// handle reads (and Go's nil check of t reads the first bytes): two
	// fallocate2 files whose inodes fell in shards 0 and 2 bounced it.
	_       [pad.Line * pad.On]byte
	updates [updateShards]paddedCount // open handles, by BeginFor's key
	locked  atomic.Bool               // closed to new handles by Commit
	ndirty  atomic.Int64              // blocks in dirty, read without the shard locks
	nrevoke atomic.Int64              // revoke records, read without revokeMu

	_     [pad.Line * pad.On]byte // keeps dirty[0]'s lock off ndirty and nrevoke
	dirty [dirtyShards]dirtyShard

	revokeMu lockstat.Mutex[lockstat.MTxnRevoke]
	revokes  map[uint64]struct{} // freed blocks with logged copies (revokeMu)
}

const dirtyShards = 16

// updateShards spreads a transaction's open-handle count (a power of two).
const updateShards = 16

// paddedCount is a counter alone on its cache line.
type paddedCount struct {
	n atomic.Int64
	_ [56 * pad.On]byte
}

// openHandles sums the open-handle count; exact once t is locked and the
// handles backing out have done so.
func (t *Transaction) openHandles() int64 {
	var n int64
	for i := range t.updates {
		n += t.updates[i].n.Load()
	}
	return n
}

// dirtyShard holds the changed blocks of a transaction whose numbers fall
// in it.
type dirtyShard struct {
	mu lockstat.Mutex[lockstat.MTxnDirtyShard]
	m  map[uint64]*Buffer
	_  [pad.Line * pad.On]byte // keep shards on separate cache lines (pad.Apart)
}

func (t *Transaction) shard(nr uint64) *dirtyShard { return &t.dirty[shard.Index(nr, dirtyShards)] }

// addDirty records b (block nr) as changed by t.
func (t *Transaction) addDirty(nr uint64, b *Buffer) {
	s := t.shard(nr)
	s.mu.Lock()
	if s.m == nil {
		s.m = map[uint64]*Buffer{}
	}
	if _, ok := s.m[nr]; !ok {
		t.ndirty.Add(1)
		lockstat.Count(lockstat.TxnDirtyCount)
	}
	s.m[nr] = b
	s.mu.Unlock()
}

// dropDirty forgets block nr's change.
func (t *Transaction) dropDirty(nr uint64) {
	s := t.shard(nr)
	s.mu.Lock()
	if _, ok := s.m[nr]; ok {
		delete(s.m, nr)
		t.ndirty.Add(-1)
		lockstat.Count(lockstat.TxnDirtyCount)
	}
	s.mu.Unlock()
}

// TID returns the transaction's number.
func (t *Transaction) TID() uint64 { return t.tid }

// ErrAborted is returned once a commit has failed: the on-disk state may be
// inconsistent and no further change is accepted.
var ErrAborted = errors.New("txn: an earlier commit failed; filesystem is read-only")

// NewManager returns a Manager for a device of nblocks blocks of size bs.
func NewManager(d Device, bs int, nblocks uint64, c Committer, opts Options) *Manager {
	if opts.MaxDirty <= 0 {
		opts.MaxDirty = 16384
	}
	if opts.CacheBlocks <= 0 {
		opts.CacheBlocks = 65536
	}
	m := &Manager{dev: d, bs: bs, nblocks: nblocks, opts: opts, nextTID: 1}
	m.committer.Store(&c)
	m.maxDirty.Store(int64(opts.MaxDirty))
	m.cond = sync.NewCond(&m.mu)
	m.cache.init(opts.CacheBlocks)
	m.running.Store(m.newTransaction())
	return m
}

func (m *Manager) newTransaction() *Transaction {
	t := &Transaction{tid: m.nextTID}
	m.nextTID++
	return t
}

// SetCommitter makes c the committer of the transactions committed from
// now on. The change waits for a commit in progress, so every transaction
// goes through exactly one committer (the journal starts after the
// superblock that announces it is written in place, and stops before the
// one that says it is empty).
func (m *Manager) SetCommitter(c Committer) {
	m.commitMu.Lock()
	m.committer.Store(&c)
	m.commitMu.Unlock()
}

// SetLimits bounds transactions for a journal of limited size: ending a
// handle commits once the transaction has soft changed blocks
// (Options.MaxDirty), and a new handle waits for a commit while the
// running transaction is at hard (kernel: start_this_handle waiting for
// log space), so handles in flight cannot grow a transaction past what the
// journal holds. Revoke records count as 1/128 of a block.
func (m *Manager) SetLimits(soft, hard int) {
	if soft > 0 {
		m.maxDirty.Store(int64(soft))
	}
	m.hardLimit.Store(int64(max(hard, 0)))
}

// size is the transaction's weight against the limits.
func (t *Transaction) size() int64 { return t.ndirty.Load() + t.nrevoke.Load()/128 }

// SwitchCommitter runs stop (closing a journal) and makes c the committer
// with no commit in between: a commit waiting meanwhile goes through c,
// never through a committer half stopped.
func (m *Manager) SwitchCommitter(c Committer, stop func() error) error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	if err := stop(); err != nil {
		return err
	}
	m.committer.Store(&c)
	return nil
}

func (m *Manager) committerNow() Committer { return *m.committer.Load() }

// BlockSize returns the block size.
func (m *Manager) BlockSize() int { return m.bs }

// OnCommit registers fn to run after each commit with the committed
// transaction's number (e.g. to release blocks freed by it).
func (m *Manager) OnCommit(fn func(tid uint64)) {
	m.hooksMu.Lock()
	m.hooks = append(m.hooks, fn)
	m.hooksMu.Unlock()
}

// BeforeFreeze sets fn to run in every commit after the closing
// transaction's last handle has ended and before its blocks are frozen,
// with a handle of that transaction: the place for changes batched over
// a transaction, as jbd2 writes a buffer once however many changes it
// took. fn runs with no other handle open (new ones wait), so it must not
// begin one or commit; an error aborts the commit. Set it before the
// first handle.
func (m *Manager) BeforeFreeze(fn func(h *Handle) error) { m.beforeFreeze = fn }

// commitFull commits t, which reached the hard limit, or waits while
// another goroutine does.
func (m *Manager) commitFull(t *Transaction) error {
	if ok, err := m.commitOnce(t); ok {
		return err
	}
	m.mu.Lock()
	for m.running.Load() == t && m.committing.Load() && m.Err() == nil {
		m.cond.Wait()
	}
	m.mu.Unlock()
	return nil
}

// commitOnce commits t (CommitThrough) unless another commitFull or End is
// committing, and reports whether it did. Ending its turn it wakes the
// commitFull waiters: a waiter may wait on the next transaction (full
// already while this commit writes), and nobody else would wake it.
func (m *Manager) commitOnce(t *Transaction) (bool, error) {
	if !m.committing.CompareAndSwap(false, true) {
		return false, nil
	}
	err := m.CommitThrough(t.tid)
	m.committing.Store(false)
	m.mu.Lock()
	m.cond.Broadcast()
	m.mu.Unlock()
	return true, err
}

// endUpdate ends one open handle of t, waking a commit waiting for the
// last.
func (m *Manager) endUpdate(t *Transaction, c *paddedCount) {
	lockstat.Count(lockstat.TxnOpenCount)
	if c.n.Add(-1) == 0 && t.locked.Load() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	}
}

// Commit makes every change made so far durable. It waits for open handles
// of the running transaction to end; handles begun meanwhile join the next
// transaction.
func (m *Manager) Commit() error {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	return m.commitLocked()
}

// CommitThrough makes transaction tid and the ones before it durable, with
// no commit more than that takes: if tid is still running it is committed;
// if its commit is in progress, CommitThrough waits for that commit to end
// (its commit hooks have then run); if it has committed, it returns at
// once (kernel: jbd2_log_start_commit and jbd2_log_wait_commit of a tid,
// where Commit is jbd2_journal_force_commit). A tid no transaction has
// yet commits the running one.
func (m *Manager) CommitThrough(tid uint64) error {
	if m.committed.Load() >= tid {
		return m.Err()
	}
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	// Commits run in order under commitMu, and each opens the next
	// transaction before it ends: every transaction older than the
	// running one has committed (or the manager has aborted).
	if m.running.Load().tid > tid {
		return m.Err()
	}
	return m.commitLocked()
}

// commitLocked is Commit with m.commitMu held.
func (m *Manager) commitLocked() error {
	if err := m.Err(); err != nil {
		return err
	}

	m.mu.Lock()
	t := m.running.Load()
	t.locked.Store(true)
	for t.openHandles() > 0 {
		m.cond.Wait()
	}
	if m.beforeFreeze != nil {
		h := &Handle{m: m, t: t}
		err := m.beforeFreeze(h)
		h.ended = true
		if err != nil {
			// t's blocks may be half changed: nothing more may commit.
			aborted := fmt.Errorf("%w: %v", ErrAborted, err)
			m.err.CompareAndSwap(nil, &aborted)
			t.locked.Store(false)
			m.cond.Broadcast()
			m.mu.Unlock()
			return err
		}
	}
	// No handle can change t's blocks now: freeze them.
	n := t.ndirty.Load()
	var sumErr error // a deferred checksum that could not be computed
	blocks := make([]Block, 0, n)
	frozen := make([]*Buffer, 0, n)
	for i := range t.dirty {
		s := &t.dirty[i]
		s.mu.Lock()
		for nr, b := range s.m {
			b.mu.Lock()
			if err := b.settleSum(); err != nil && sumErr == nil {
				sumErr = fmt.Errorf("block %d: %w", nr, err)
			}
			blocks = append(blocks, Block{Nr: nr, Data: append([]byte(nil), b.data...)})
			b.tx = nil
			b.inflight++
			b.mu.Unlock()
			frozen = append(frozen, b)
		}
		s.m = nil
		s.mu.Unlock()
	}
	if sumErr != nil {
		// A block the transaction changed cannot be summed (its writer
		// left a malformed header): logging it would put a block with
		// a wrong checksum on disk. Nothing more may commit.
		for _, b := range frozen {
			b.mu.Lock()
			b.inflight--
			b.mu.Unlock()
		}
		aborted := fmt.Errorf("%w: %v", ErrAborted, sumErr)
		m.err.CompareAndSwap(nil, &aborted)
		t.locked.Store(false)
		m.cond.Broadcast()
		m.mu.Unlock()
		return sumErr
	}
	sortBlocks(blocks)
	committer := m.committerNow()
	if lg, ok := committer.(Logger); ok && len(blocks) > 0 {
		// Before any handle of the next transaction can free one of
		// these blocks and ask whether it needs a revoke.
		lg.Frozen(t.tid, blocks)
	}
	m.running.Store(m.newTransaction())
	m.cond.Broadcast()
	m.mu.Unlock()

	t.revokeMu.Lock()
	revokes := make([]uint64, 0, len(t.revokes))
	for nr := range t.revokes {
		revokes = append(revokes, nr)
	}
	t.revokeMu.Unlock()
	slices.Sort(revokes)
	var err error
	if len(blocks) > 0 || len(revokes) > 0 {
		m.commitCount.Add(1)
		err = committer.Commit(t.tid, blocks, revokes)
	}
	for _, b := range frozen {
		b.mu.Lock()
		b.inflight--
		b.mu.Unlock()
	}
	if err != nil {
		aborted := fmt.Errorf("%w: %v", ErrAborted, err)
		m.err.CompareAndSwap(nil, &aborted)
		return err
	}
	m.hooksMu.Lock()
	hooks := append([]func(uint64){}, m.hooks...)
	m.hooksMu.Unlock()
	for _, fn := range hooks {
		fn(t.tid)
	}
	m.committed.Store(t.tid)
	m.cache.trim()
	return nil
}

// Commits returns how many transactions have been handed to a committer.
func (m *Manager) Commits() int64 { return m.commitCount.Load() }

// Abort stops the manager without committing what is running: every later
// Begin and Commit returns an error wrapping ErrAborted and cause.
func (m *Manager) Abort(cause error) {
	aborted := fmt.Errorf("%w: %v", ErrAborted, cause)
	m.err.CompareAndSwap(nil, &aborted)
}

// Err returns the error that aborted the manager, if any.
func (m *Manager) Err() error {
	if p := m.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Cached reports whether the cache holds a buffer of block nr (for tests
// of what may be cached).
func (m *Manager) Cached(nr uint64) bool {
	b := m.cache.lookup(nr)
	if b == nil {
		return false
	}
	b.unpin()
	return true
}
