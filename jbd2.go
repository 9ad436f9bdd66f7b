package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/journal"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/txn"
)

// handle is a transaction handle as the allocators see it.
type handle struct{ *txn.Handle }

func (h handle) ID() uint64 { return h.TID() }

// begin opens a transaction handle.
func (f *FS) begin() (handle, error) { return f.beginFor(0) }

// beginFor opens a transaction handle for a change to inode ino: the hot
// paths (writes, fallocate, truncate) pass theirs, so that handles on
// different files count themselves open in different cache lines.
func (f *FS) beginFor(ino uint32) (handle, error) {
	if f.w == nil {
		return handle{}, ErrReadOnly
	}
	h, err := f.tm.BeginFor(uint64(ino))
	if err != nil {
		return handle{}, err
	}
	return handle{h}, nil
}

// beginHot opens n's own handle (node.hot) for a change to n made with
// n.mu held exclusively and ended before it is released, nothing else
// using the handle meanwhile: beginFor without an allocation.
func (f *FS) beginHot(n *node) (handle, error) {
	if f.w == nil {
		return handle{}, ErrReadOnly
	}
	if err := f.tm.BeginInto(&n.hot, uint64(n.ino)); err != nil {
		return handle{}, err
	}
	return handle{&n.hot}, nil
}

// openJournal sets up the journal writer, reading only: a filesystem
// with a journal is changed through it unless Options.NoJournal (or an
// image build, where only the final state matters).
func (f *FS) openJournal() error {
	sb := f.sb
	if !sb.HasCompat(super.CompatHasJournal) || f.opts.NoJournal || f.reproducible {
		return nil
	}
	jf, err := f.openJournalFile()
	if err != nil {
		var u *UnsupportedError
		if errors.As(err, &u) && u.Feature == "external journal" {
			return &UnsupportedError{Feature: "writing with an external journal", Detail: "Options.NoJournal (--no-journal) writes without it"}
		}
		return fmt.Errorf("opening the journal: %w", err)
	}
	jsb := jf.sb
	switch {
	case jsb.Start != 0:
		return &CorruptError{What: "journal", Block: -1, Ino: sb.JournalInum,
			Detail: "the journal holds transactions but the superblock does not say it needs recovery; check it with e2fsck -f"}
	case jsb.Errno != 0:
		return &CorruptError{What: "journal", Block: -1, Ino: sb.JournalInum,
			Detail: fmt.Sprintf("the journal was aborted (errno %d); check it with e2fsck -f", -jsb.Errno)}
	case jsb.UnknownROCompat() != 0:
		return &UnsupportedError{Feature: fmt.Sprintf("writing a journal with ro_compat features %#x", jsb.UnknownROCompat())}
	case jsb.NrUsers > 1:
		return &UnsupportedError{Feature: "writing a shared journal", Detail: fmt.Sprintf("%d filesystems use it", jsb.NrUsers)}
	case uint64(jsb.MaxLen) > jf.mapped:
		return &CorruptError{What: "journal inode", Block: -1, Ino: sb.JournalInum,
			Detail: fmt.Sprintf("the journal superblock says %d blocks, the inode maps %d", jsb.MaxLen, jf.mapped)}
	}
	if len(f.zone.Load().Owned(sb.JournalInum)) == 0 {
		// Mapped now but not at open: a fault there, gone since.
		if err := f.protectJournal(); err != nil {
			return err
		}
	}
	j, err := journal.Open(f.dev, int(f.blockSize), jsb, jf.phys, f.now, f.is64)
	if err != nil {
		return &CorruptError{What: "journal", Block: -1, Ino: sb.JournalInum, Detail: err.Error()}
	}
	f.w.journal = j
	return nil
}

// startCommits commits every Options.CommitInterval (kernel: the jbd2
// thread's commit timer), first writing the lazy timestamps that have
// waited long enough (kernel: the flusher's dirtytime expiry, here on the
// same timer), or all of them when asked to (too many wait).
func (f *FS) startCommits() {
	w := f.w
	every := f.opts.CommitInterval
	if every == 0 {
		every = 5 * time.Second
	}
	if every < 0 || f.reproducible {
		return
	}
	w.stopCommits, w.commitsDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.commitsDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-w.stopCommits:
				return
			case <-w.flushTimes:
				// Best effort, as the kernel's writeback: times that
				// fail to go stay dirty for the next try.
				f.writeDirtyTimes(time.Time{})
			case <-t.C:
				f.writeExpiredTimes()
				if err := f.tm.Commit(); err != nil {
					f.setError(err)
					return
				}
			case <-w.kickCommit:
				if err := f.tm.Commit(); err != nil {
					f.setError(err)
					return
				}
			}
		}
	}()
}

// stopCommitLoop ends the periodic commits and waits for the last.
func (f *FS) stopCommitLoop() {
	w := f.w
	if w.stopCommits != nil {
		close(w.stopCommits)
		<-w.commitsDone
		w.stopCommits = nil
	}
}

// kickIfPending asks the committer for an early commit when the clusters
// freed but held until the running transaction commits reach a quarter
// of the free ones (both read approximately, from their counters'
// centres). A workload that frees as fast as it allocates (truncate and
// refill, fallocate2) otherwise fills the filesystem with frees waiting
// for the 5 s commit, and every allocation meanwhile takes scraps: files
// written side by side came out in dozens of extents (kernel: jbd2 commits
// early as its journal fills, and ext4_should_retry_alloc on ENOSPC).
//
// At half of the free clusters the freeing handle commits as it ends
// (txn.Handle.CommitOnEnd; TestPendingFreesCommitAtHalf), as a handle
// waits for a commit when the journal is full: the writer waits for the
// commit it made necessary, and the frees never stay the most of the free
// space for long. Otherwise a writer that truncates and refills faster
// than the committer commits takes the space each commit releases and
// frees it again into the running transaction, and the other writers'
// allocations find all the free space waiting for a commit and need many
// retries: three or four writers churning filesystems 75% to 87% full of
// their files got ENOSPC after 8 in 1 run of 4, and in none of 8 with
// this.
func (f *FS) kickIfPending(h handle) {
	b := f.w.balloc
	if !b.PendingPressure(4) {
		return
	}
	if b.PendingPressure(2) {
		h.CommitOnEnd()
		return
	}
	select {
	case f.w.kickCommit <- struct{}{}:
	default:
	}
}

// retryAfterCommit reports whether an operation that failed with err
// should be tried again, and prepares that (kernel:
// ext4_should_retry_alloc). It retries, up to maxAllocRetries times
// (*retries counts), an operation that ran out of space while blocks
// freed by uncommitted transactions wait for their commit: it first waits
// for the commit of the oldest transaction holding such frees, making
// that commit itself if the transaction is still running. With no frees
// waiting it retries at once if any cluster is free: a commit released
// them since the failure (the failing handle's own End may have waited
// for it: kickIfPending).
//
// It used to commit the running transaction, as jbd2_journal_force_commit
// does, and to give up when no frees were waiting. With another writer's
// commit in progress, the one made then came after the commit that
// released the space and released nothing, while that writer took the
// space and freed it again into the running transaction; three such
// retries in a row failed a fallocate with all the free space waiting for
// a commit (TestChurnNoENOSPC).
//
// The caller must have no handle open (it may hold inode locks: handles
// never wait for those).
func (f *FS) retryAfterCommit(err error, retries *int) bool {
	if f.w == nil || !errors.Is(err, syscall.ENOSPC) || *retries >= maxAllocRetries {
		return false
	}
	b := f.w.balloc
	tid, ok := b.OldestPending()
	if !ok {
		switch {
		case b.PendingFrees() > 0:
			// A free registering now: the running transaction holds it.
			tid = math.MaxUint64
		case b.FreeClusters() > 0:
			*retries++
			return true
		default:
			return false
		}
	}
	*retries++
	return f.tm.CommitThrough(tid) == nil
}

// maxAllocRetries bounds the retries of an allocation that ran out of
// space (kernel: ext4_should_retry_alloc's 3), each after at most one
// commit, so that a full filesystem fails promptly however busy
// (TestENOSPCFullWithChurn). It is higher than the kernel's, whose commits
// come from a thread of their own: here the writers that refill what a
// commit released run on while the retrying one wakes, and they took it
// from the retry up to six times in a row on a filesystem 85% full of
// their files (TestChurnNoENOSPC failed 1 run in 8 with 3 retries).
const maxAllocRetries = 8

// retryAlloc runs op, and again while retryAfterCommit says so. op must
// leave nothing changed when it fails.
func (f *FS) retryAlloc(op func() error) error {
	err := op()
	for retries := 0; err != nil && f.retryAfterCommit(err, &retries); {
		err = op()
	}
	return err
}

// Sync writes every change made so far to the device and flushes it.
// Under ErrorsPanic, once a change found the filesystem corrupt, it
// returns the *ErrorsReadOnlyError after writing.
func (f *FS) Sync() (err error) {
	defer f.noteError("FS.Sync", &err)
	defer func() {
		if err == nil {
			err = f.panicError()
		}
	}()
	if f.closed.Load() {
		return fs.ErrClosed
	}
	if f.w == nil {
		return nil
	}
	if err := f.firstError(); err != nil {
		return err
	}
	// Delayed data first (kernel: sync_filesystem writes the dirty
	// pages back before sync_fs), reporting what failed to go since the
	// last Sync.
	if err := f.flushAllDelayed(time.Time{}, true); err != nil {
		return err
	}
	// Lazy timestamps first, so the commit holds them (kernel: sync_fs
	// writes the dirty-time inodes).
	if err := f.writeDirtyTimes(time.Time{}); err != nil {
		return err
	}
	return f.writeSuperNow()
}

// syncFile makes a file's changes durable (fsync): n's lazy timestamps
// are written, the running transaction is committed (the commit flushes
// the data written before it); when it changed nothing, only the device
// is flushed. Unlike Sync it does not log the superblock's free counts,
// which the next open or Close recomputes (kernel: ext4_sync_file,
// jbd2_complete_transaction). No lock of n may be held.
func (f *FS) syncFile(n *node) error {
	if f.closed.Load() {
		return fs.ErrClosed
	}
	if f.w == nil {
		return nil
	}
	if err := f.firstError(); err != nil {
		return err
	}
	// The file's delayed data (kernel: ext4_sync_file's
	// file_write_and_wait_range), and an earlier flush's failure.
	n.mu.Lock()
	err := f.daSync(n, n.writers.Load() > 0)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	if err := f.writeTimes(n); err != nil {
		return err
	}
	// Commit waits for a commit in progress (which may hold the file's
	// changes) and commits what is running; when that was nothing, the
	// data written since the last commit still needs a flush.
	before := f.tm.Commits()
	if err := f.tm.Commit(); err != nil {
		return err
	}
	if f.tm.Commits() != before {
		return nil
	}
	return f.dev.Sync()
}

// txHandle returns the handle of tx, or opens one when the allocator works
// outside a transaction (tx nil).
func (f *FS) txHandle(tx interface{ ID() uint64 }) (handle, bool, error) {
	if h, ok := tx.(handle); ok {
		return h, false, nil
	}
	h, err := f.begin()
	return h, true, err
}
