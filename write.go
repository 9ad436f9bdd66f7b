package ext4go

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/ialloc"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/journal"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/txn"
)

// ErrReadOnly is returned by changes to a filesystem opened without
// Options.Writable.
var ErrReadOnly = errors.New("filesystem opened read-only")

// writer is the state of a writable filesystem.
type writer struct {
	balloc *mballoc.Allocator
	ialloc *ialloc.Allocator

	// gdMu[g] protects f.groups[g]'s mutable fields and the encoding of
	// its on-disk descriptor. Taken inside bitmap buffer locks, never
	// while holding a descriptor block's buffer.
	gdMu []groupDescLock

	// deferred holds the nodes whose inodes the running transaction's
	// commit encodes into the inode table (inode_defer.go).
	_        [pad.Line * pad.On]byte // keeps deferred[0]'s lock off the fields above, read by every allocation
	deferred [deferShards]deferShard

	sbMu     lockstat.Mutex[lockstat.MFSSuper]   // protects the superblock fields writers change
	renameMu sync.Mutex                          // serialises cross-directory renames (kernel: s_vfs_rename_mutex)
	orphanMu lockstat.Mutex[lockstat.MFSOrphans] // protects the orphan list and fileOrphans
	closed   bool

	// Errors found by changes (fserrors.go): errorsMu serialises their
	// recording, lastNoted is the last error recorded (one error is
	// recorded once), errorsRO is set once changes are refused
	// (errors=remount-ro or panic).
	errorsMu  sync.Mutex
	lastNoted error
	errorsRO  atomic.Pointer[ErrorsReadOnlyError]

	// orphanFile is the orphan file (feature orphan_file), else nil;
	// fileOrphans are the nodes recorded in it (orphanMu).
	orphanFile  *orphanFile
	fileOrphans map[*node]struct{}

	// journal logs every commit when the filesystem has a journal (and
	// the open did not ask for NoJournal), else nil; inPlace is the
	// committer without it (used before the journal starts and after it
	// stops).
	journal *journal.Journal
	inPlace txn.Committer
	// stopCommits ends the periodic commits; commitsDone is closed when
	// they have ended.
	stopCommits, commitsDone chan struct{}

	// exclude, during a fast-commit replay, names blocks the allocator
	// must not hand out (the ones the fast commits map).
	exclude func(start, n uint64) (end uint64, hit bool)

	// groupDescsBatched: descriptors reach their blocks at commit
	// (writeGroupDesc), once the commit hook that does it is set.
	groupDescsBatched bool
	// bitmapsBatched: block bitmaps changed again in a transaction reach
	// their buffers at its commit (writeDirtyBlockBitmaps).
	bitmapsBatched bool

	// lazyTimes are the nodes whose timestamps wait in memory
	// (Options.Lazytime); flushTimes asks the periodic committer to
	// write them all now (more than lazyTimesLimit wait: maxLazyTimes,
	// less in tests).
	lazyTimes  lazyTimes
	flushTimes chan struct{}
	// kickCommit asks the periodic committer for a commit now: the
	// clusters freed by the running transaction, unusable until it
	// commits, have grown large against the free space (kickIfPending).
	kickCommit     chan struct{}
	lazyTimesLimit atomic.Int64
	// neighbourCopies and neighbourSkips count the neighbours whose lazy
	// times a write carried, and those it left because they were busy.
	neighbourCopies, neighbourSkips atomic.Int64

	// Delayed allocation (delalloc.go). daReserved: clusters reserved for
	// delayed data and its metadata (kernel: s_dirtyclusters_counter);
	// daBytes: bytes of delayed data held, bounded by daLimit; daShards:
	// the nodes holding some; daKick asks the background writeback
	// (daStop, daDone) for a flush of all.
	daReserved, daBytes atomic.Int64
	daLimit             int64
	daKick              chan struct{}
	daStop, daDone      chan struct{}
	daPool              sync.Pool // block buffers
	daShards            [daShardCount]daShard
}

// groupDescLock is a group's gdMu, with what it protects besides
// f.groups[g], on cache lines of its own.
type groupDescLock struct {
	sync.Mutex
	// bitmapCrc is the whole crc32c of the group's block bitmap as last
	// written, when bitmapCrcOK: a change of a few bits updates it
	// (csum.UpdateCRC32C) instead of reading all the bitmap again. The
	// descriptor keeps only its low 16 bits with 32-byte descriptors.
	bitmapCrc   uint32
	bitmapCrcOK bool
	// descDirty: f.groups[g] changed since its descriptor was last
	// encoded into its block (writeGroupDesc).
	descDirty atomic.Bool
	// bitmapTx is the transaction whose handle last wrote the group's
	// block bitmap into its buffer; bitmapDirty says that changes made
	// since in that transaction are only in the block allocator's copy
	// and reach the buffer, the free count and the checksums at its
	// commit (writeDirtyBlockBitmaps). Both change under the allocator's
	// lock of the group, which every UpdateBlockBitmap holds.
	bitmapTx    atomic.Uint64
	bitmapDirty atomic.Bool
	_           [(pad.Line - 8) * pad.On]byte // neighbours a line apart (pad.Apart)
}

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

// checkWritable refuses to write what ext4go cannot keep consistent.
func (f *FS) checkWritable() error {
	sb := f.sb
	if u := sb.UnknownROCompat(); u != 0 {
		return &UnsupportedError{Feature: fmt.Sprintf("ro_compat feature bits %#x", u), Detail: "unknown to ext4go; the filesystem can only be read"}
	}
	for _, x := range []struct {
		ro   bool
		bit  uint32
		what string
	}{
		{true, super.ROCompatBigalloc, "bigalloc"},
		{true, super.ROCompatQuota, "quota"},
		{true, super.ROCompatProject, "project quota"},
		{true, super.ROCompatReadonly, "read-only"},
		{true, super.ROCompatSharedBlocks, "shared_blocks"},
		{true, super.ROCompatReplica, "replica"},
		{true, super.ROCompatHasSnapshot, "snapshot"},
		{false, super.IncompatMMP, "mmp"},
		{false, super.IncompatEncrypt, "encrypt"},
		{false, super.IncompatCasefold, "casefold"},
	} {
		has := sb.HasIncompat(x.bit)
		if x.ro {
			has = sb.HasROCompat(x.bit)
		}
		if has {
			return &UnsupportedError{Feature: "writing with feature " + x.what}
		}
	}
	if sb.HasROCompat(super.ROCompatOrphanPresent) && !sb.HasCompat(super.CompatOrphanFile) {
		return &CorruptError{What: "superblock", Block: 0, Detail: "ro_compat orphan_present is set without feature orphan_file; run e2fsck"}
	}
	if sb.HasIncompat(super.IncompatRecover) {
		return &UnsupportedError{Feature: "journal replay", Detail: "the journal must be recovered before the filesystem can be changed"}
	}
	if sb.State&super.StateError != 0 && !f.opts.AllowUnclean {
		return &CorruptError{What: "superblock", Block: 0, Detail: "the filesystem is marked as having errors; check it with e2fsck -f first"}
	}
	if sb.State&super.StateValid == 0 && !f.opts.AllowUnclean {
		// Left so by a crash, a kill or a mount without a journal to
		// replay: writing would mark it clean and hide that it needs a
		// check.
		return &CorruptError{What: "superblock", Block: 0, Detail: "the filesystem was not cleanly unmounted (state \"not clean\"); check it with e2fsck -f first"}
	}
	return nil
}

// openWriter prepares a filesystem for changes: after the checks, the
// superblock is marked as being changed (needs_recovery with a journal, "not
// clean" without) in place, then commits go through the journal, if any.
func (f *FS) openWriter(inPlace txn.Committer) error {
	if err := f.prepareWriter(); err != nil {
		return err
	}
	w := f.w
	w.inPlace = inPlace
	if err := f.openJournal(); err != nil {
		return err
	}
	var orphans *orphanWork
	if !f.opts.replaying {
		var err error
		if orphans, err = f.collectOrphans(); err != nil {
			return err
		}
	}
	// The superblock as it is on disk, for a cleanup that fails.
	before := make([]byte, super.Size)
	if err := f.readFull(before, super.Offset, "superblock"); err != nil {
		return err
	}
	if err := f.markChanging(); err != nil {
		return err
	}
	if w.journal != nil {
		f.tm.SetCommitter(w.journal)
		f.tm.SetLimits(w.journal.MaxTransaction(), w.journal.Capacity()/2)
	}
	commits := f.tm.Commits()
	if err := f.cleanupOrphans(orphans); err != nil {
		// Nothing of the cleanup committed: put the superblock back as
		// it was, so the failed open leaves the image unchanged.
		// (Otherwise what committed is whole, and a replay finishes
		// it.)
		f.tm.Abort(err)
		if f.tm.Commits() == commits {
			if _, werr := f.dev.WriteAt(before, super.Offset); werr == nil {
				f.dev.Sync()
			}
		}
		return err
	}
	if !f.opts.replaying {
		f.startCommits()
		f.startDelayedWriteback()
	}
	return nil
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

// prepareWriter checks that the filesystem can be changed and sets up the
// writer (allocators, orphan file) without writing anything: a failure
// here leaves the image as it was.
func (f *FS) prepareWriter() error {
	if err := f.checkWritable(); err != nil {
		return err
	}
	sb := f.sb
	w := &writer{gdMu: make([]groupDescLock, len(f.groups)), fileOrphans: map[*node]struct{}{},
		flushTimes: make(chan struct{}, 1), kickCommit: make(chan struct{}, 1), daKick: make(chan struct{}, 1)}
	w.lazyTimesLimit.Store(maxLazyTimes)
	w.daLimit = f.opts.DelayedLimit
	if w.daLimit <= 0 {
		w.daLimit = defaultDelayedLimit
	}
	if sb.HasCompat(super.CompatOrphanFile) {
		of, err := f.loadOrphanFile()
		if err != nil {
			return err
		}
		w.orphanFile = of
	}
	f.w = w
	geo := mballoc.Geometry{
		BlockSize:      sb.BlockSize(),
		ClusterRatio:   sb.ClusterRatio(),
		BlocksPerGroup: sb.BlocksPerGroup,
		BlocksCount:    sb.BlocksCount(),
		FirstDataBlock: sb.FirstDataBlock,
		InodesPerGroup: sb.InodesPerGroup,
	}
	if sb.HasIncompat(super.IncompatFlexBG) {
		geo.LogGroupsPerFlex = sb.LogGroupsPerFlex
	}
	var err error
	cfg := mballoc.Config{}
	if f.reproducible {
		cfg.CPUs = 4 // not the machine's: the same image everywhere
	}
	if w.balloc, err = mballoc.New(geo, blockStore{f}, cfg); err != nil {
		// The geometry comes from the superblock: a bad one is corrupt.
		return &CorruptError{What: "superblock", Block: 0, Detail: err.Error()}
	}
	igeo := ialloc.Geometry{
		Groups:           uint32(len(f.groups)),
		InodesPerGroup:   sb.InodesPerGroup,
		ClustersPerGroup: sb.ClustersPerGroup,
		LogGroupsPerFlex: geo.LogGroupsPerFlex,
		FirstIno:         sb.FirstInode(),
	}
	hashVersion := dir.EffectiveVersion(sb.DefHashVersion, sb.Flags&super.FlagUnsignedHash != 0)
	nameHash := func(name []byte) uint32 {
		h, _, err := dir.Hash(name, hashVersion, sb.HashSeed)
		if err != nil {
			return 0
		}
		return h
	}
	if w.ialloc, err = ialloc.New(igeo, inodeStore{f}, w.balloc, ialloc.Options{NameHash: nameHash}); err != nil {
		return &CorruptError{What: "superblock", Block: 0, Detail: err.Error()}
	}
	f.tm.OnCommit(func(tid uint64) {
		if err := w.balloc.ReleaseDeferred(tid); err != nil {
			f.setError(err)
		}
	})
	f.tm.BeforeFreeze(func(h *txn.Handle) error {
		if err := f.writeDeferredInodes(h); err != nil {
			return err
		}
		if err := f.writeDirtyBlockBitmaps(h); err != nil {
			return err
		}
		return f.writeDirtyGroupDescs(h)
	})
	w.groupDescsBatched = true
	w.bitmapsBatched = true
	return nil
}

// markChanging marks the filesystem as being changed until Close marks it
// clean again, so a crash leaves it flagged for e2fsck.
func (f *FS) markChanging() error {
	w, sb := f.w, f.sb
	h, err := f.begin()
	if err != nil {
		return err
	}
	w.sbMu.Lock()
	if w.journal != nil {
		// As the kernel: the state stays clean while mounted, and a
		// crash leaves needs_recovery for the journal's replay.
		sb.FeatureIncompat |= super.IncompatRecover
	} else {
		sb.State &^= super.StateValid
	}
	f.setOrphanPresent(true)
	w.sbMu.Unlock()
	if err := f.writeSuper(h); err != nil {
		h.End()
		return err
	}
	if err := h.End(); err != nil {
		return err
	}
	return f.tm.Commit()
}

// freeBlocks frees blocks [start, start+n) in h's transaction, whatever
// they held: the allocator takes them back (and hands them out again only
// after the transaction commits), then their cached copies are forgotten
// and, where the journal holds a copy of one, revoked (txn.Handle.Revoke).
func (f *FS) freeBlocks(h handle, start, n uint64, flags mballoc.FreeFlags) error {
	// Free first: a refused free (corrupt range, bitmap read error) must
	// not drop the block's changes or revoke a block that stays in use.
	// The allocator keeps the blocks until the transaction commits, so
	// the revoke is always in time.
	if err := f.w.balloc.Free(h, start, n, flags); err != nil {
		return err
	}
	h.Revoke(start, n)
	f.kickIfPending(h)
	return nil
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

// freeFileData is freeBlocks for a regular file's data blocks, which the
// metadata cache never holds (file data goes to the device directly): no
// buffer to forget, only the revokes (txn.Handle.RevokeUncached).
func (f *FS) freeFileData(h handle, start, n uint64) error {
	if err := f.w.balloc.Free(h, start, n, mballoc.FreeReuseFresh); err != nil {
		return err
	}
	h.RevokeUncached(start, n)
	f.kickIfPending(h)
	return nil
}

// setError records a failure that leaves the on-disk state in doubt.
func (f *FS) setError(err error) {
	f.errMu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.errMu.Unlock()
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

// superLocation returns the block and offset of the primary superblock.
func (f *FS) superLocation() (uint64, int) {
	if f.blockSize == 1024 {
		return 1, 0
	}
	return 0, super.Offset
}

// writeSuper records the superblock, with the current free counts, in h.
func (f *FS) writeSuper(h handle) error {
	w := f.w
	w.sbMu.Lock()
	defer w.sbMu.Unlock()
	sb := f.sb
	sb.SetFreeBlocksCount(uint64(w.balloc.FreeClusters()) * uint64(sb.ClusterRatio()))
	sb.FreeInodesCount = uint32(w.ialloc.FreeInodes())
	sb.SetWriteTime(f.now())
	raw := sb.Encode()
	blk, off := f.superLocation()
	return h.Modify(blk, func(b []byte) error {
		copy(b[off:], raw)
		return nil
	})
}

// writeGroupDesc records that group g's descriptor changed in h's
// transaction; w.gdMu[g] must be held. The descriptor is encoded into its
// block once, when the transaction commits (writeDirtyGroupDescs), not on
// every allocation: a descriptor block holds the descriptors of many
// groups, so writing it per change made every allocation and free of all
// files lock and dirty one shared buffer (issue 13: jbd2's one dirty
// buffer for many changes).
func (f *FS) writeGroupDesc(h handle, g uint32) error {
	if f.w.groupDescsBatched {
		f.w.gdMu[g].descDirty.Store(true)
		return nil
	}
	return f.encodeGroupDesc(h, g)
}

// encodeGroupDesc writes group g's descriptor into its block in h;
// w.gdMu[g] must be held.
func (f *FS) encodeGroupDesc(h handle, g uint32) error {
	blk, off := f.sb.GroupDescLocation(g)
	return h.Modify(blk, func(b []byte) error {
		super.PutGroupDesc(f.sb, f.groups[g], g, b[off:])
		return nil
	})
}

// writeDirtyGroupDescs encodes the descriptors that changed in the
// closing transaction into their blocks (txn.Manager.BeforeFreeze): no
// handle is open, so no descriptor changes meanwhile.
func (f *FS) writeDirtyGroupDescs(h *txn.Handle) error {
	w := f.w
	for g := range w.gdMu {
		l := &w.gdMu[g]
		if !l.descDirty.Load() {
			continue
		}
		l.Lock()
		l.descDirty.Store(false)
		err := f.encodeGroupDesc(handle{h}, uint32(g))
		l.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
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
	h, err := f.begin()
	if err != nil {
		return err
	}
	err = f.writeSuper(h)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	return f.tm.Commit()
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

func (f *FS) firstError() error {
	f.errMu.Lock()
	defer f.errMu.Unlock()
	return f.err
}

// closeWriter discards preallocations, marks the filesystem clean and
// commits.
func (f *FS) closeWriter() error {
	w := f.w
	if w.closed {
		return nil
	}
	w.closed = true
	f.stopDelayedWriteback()
	f.stopCommitLoop()
	if err := f.firstError(); err != nil {
		f.dropAllDelayed()
		return err
	}
	// Delayed data goes before the final commits; what cannot be written
	// is dropped with its reservation, so the image closes consistent,
	// and reported.
	daErr := f.flushAllDelayed(time.Time{}, true)
	if daErr != nil {
		f.dropAllDelayed()
		daErr = fmt.Errorf("%w: %w", errDelayedLost, daErr)
	}
	if err := f.writeDirtyTimes(time.Time{}); err != nil {
		return err
	}
	w.balloc.DiscardPreallocations()
	if err := f.releaseOrphans(); err != nil {
		return err
	}
	// Deferred frees of the last transaction are released by its commit;
	// commit once for them, then once more with the final counts.
	if err := f.tm.Commit(); err != nil {
		return err
	}
	if w.journal != nil {
		// Everything is committed: write it all home, empty the log,
		// and write the final superblock in place (kernel:
		// jbd2_journal_destroy, then ext4_put_super's commit).
		if err := f.tm.SwitchCommitter(w.inPlace, w.journal.Close); err != nil {
			return err
		}
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	w.sbMu.Lock()
	f.sb.State |= super.StateValid
	f.sb.FeatureIncompat &^= super.IncompatRecover
	f.setOrphanPresent(false)
	w.sbMu.Unlock()
	err = f.writeSuper(h)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	if err := f.tm.Commit(); err != nil {
		return err
	}
	return daErr
}

// blockStore is how the block allocator reads and changes block bitmaps.
type blockStore struct{ f *FS }

func (s blockStore) GroupFree(g uint32) (uint32, error) {
	return s.f.groups[g].FreeBlocksCount, nil
}

func (s blockStore) ReadBlockBitmap(g uint32) ([]byte, error) {
	f := s.f
	return f.readBitmap(g, "block bitmap", super.BGBlockUninit,
		func(gd *super.GroupDesc) uint64 { return gd.BlockBitmap },
		func(b []byte) { f.initBlockBitmap(g, b) },
		func(gd *super.GroupDesc, b []byte) error { return super.VerifyBlockBitmap(f.sb, gd, g, b) })
}

// readBitmap reads group g's block or inode bitmap (what names it, uninit
// its BG_*_UNINIT flag, where finds its block): a group not yet
// initialised gets the bitmap init would write, others are read and their
// checksum verified.
func (f *FS) readBitmap(g uint32, what string, uninitFlag uint16, where func(*super.GroupDesc) uint64,
	initBitmap func([]byte), verify func(*super.GroupDesc, []byte) error) ([]byte, error) {
	f.w.gdMu[g].Lock()
	gd := f.groups[g]
	uninit := gd.Flags&uninitFlag != 0 && f.sb.HasGroupDescCsum()
	blk := where(gd)
	f.w.gdMu[g].Unlock()
	if uninit {
		b := make([]byte, f.blockSize)
		initBitmap(b)
		return b, nil
	}
	b, err := f.readBlock(blk, what)
	if err != nil {
		return nil, err
	}
	if f.csum && !f.opts.IgnoreChecksums {
		if err := verify(gd, b); err != nil {
			return nil, fserr.At(err, int64(blk), 0)
		}
	}
	return b, nil
}

func (s blockStore) UpdateBlockBitmap(tx mballoc.Tx, g, start, count uint32, used bool, free uint32) error {
	f := s.f
	h, own, err := f.txHandle(tx)
	if err != nil {
		return err
	}
	if own {
		defer h.End()
	}
	gd := f.groups[g]
	gdl := &f.w.gdMu[g]
	tid := h.TID()
	if !own && f.w.bitmapsBatched && gdl.bitmapTx.Load() == tid {
		// The buffer is in this transaction already: the commit copies
		// the allocator's bitmap into it once (jbd2's one dirty buffer
		// for many changes). Files streaming side by side in one group
		// shared the buffer's lock and lines, and a crc, on every change.
		if !gdl.bitmapDirty.Load() {
			gdl.bitmapDirty.Store(true)
		}
		return nil
	}
	err = h.Modify(gd.BlockBitmap, func(b []byte) error {
		gdl.Lock()
		defer gdl.Unlock()
		if gd.Flags&super.BGBlockUninit != 0 {
			f.initBlockBitmap(g, b)
			gd.Flags &^= super.BGBlockUninit
			gdl.bitmapCrcOK = false
		}
		gd.FreeBlocksCount = free
		var lo, hi uint32
		if count > 0 {
			lo, hi = start/8, (start+count-1)/8+1
		}
		// The checksum follows the change when it knows the bitmap's and
		// nobody wrote another since (the descriptor still holds it).
		var old [64]byte
		incremental := f.csum && count > 0 && gdl.bitmapCrcOK && hi-lo <= uint32(len(old)) &&
			super.BlockBitmapChecksumStored(f.sb, gd, gdl.bitmapCrc)
		if incremental {
			copy(old[:], b[lo:hi])
		}
		for k := start; k < start+count; k++ {
			if used {
				b[k/8] |= 1 << (k % 8)
			} else {
				b[k/8] &^= 1 << (k % 8)
			}
		}
		if f.csum {
			var crc uint32
			if incremental {
				crc = csum.UpdateCRC32C(gdl.bitmapCrc, int(f.sb.ClustersPerGroup/8), int(lo), old[:hi-lo], b[lo:hi])
			} else {
				crc = super.BlockBitmapChecksum(f.sb, b)
			}
			gdl.bitmapCrc, gdl.bitmapCrcOK = crc, true
			super.StoreBlockBitmapChecksum(f.sb, gd, crc)
		}
		return f.writeGroupDesc(h, g)
	})
	if err == nil && !own {
		gdl.bitmapTx.Store(tid)
	}
	return err
}

// writeDirtyBlockBitmaps copies the block allocator's bitmap of each group
// changed in the closing transaction since its buffer joined it into that
// buffer, with the group's free count and checksums
// (txn.Manager.BeforeFreeze: no handle is open, so no allocation or free
// is in flight). It must run before writeDirtyGroupDescs.
func (f *FS) writeDirtyBlockBitmaps(h *txn.Handle) error {
	w := f.w
	var scratch []byte
	for g := range w.gdMu {
		l := &w.gdMu[g]
		if !l.bitmapDirty.Load() {
			continue
		}
		l.bitmapDirty.Store(false)
		if scratch == nil {
			scratch = getScratch(int(f.blockSize))
			defer putScratch(scratch)
		}
		gd := f.groups[g]
		// The allocator's group lock is not taken inside the buffer's
		// (UpdateBlockBitmap takes them the other way round): the bitmap
		// is put together first, then written.
		if err := f.tm.View(gd.BlockBitmap, func(b []byte) error { copy(scratch, b); return nil }); err != nil {
			return err
		}
		free, ok := w.balloc.CopyDiskBitmap(uint32(g), scratch)
		if !ok {
			return fmt.Errorf("block bitmap of group %d changed, but the block allocator has not loaded it", g)
		}
		err := h.Modify(gd.BlockBitmap, func(b []byte) error {
			copy(b, scratch)
			l.Lock()
			defer l.Unlock()
			gd.FreeBlocksCount = free
			if f.csum {
				crc := super.BlockBitmapChecksum(f.sb, b)
				l.bitmapCrc, l.bitmapCrcOK = crc, true
				super.StoreBlockBitmapChecksum(f.sb, gd, crc)
			}
			return f.writeGroupDesc(handle{h}, uint32(g))
		})
		if err != nil {
			return err
		}
	}
	return nil
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

// initBlockBitmap fills b with the bitmap of a BLOCK_UNINIT group: its
// fixed metadata and the bits past its end in use (kernel:
// ext4_init_block_bitmap).
func (f *FS) initBlockBitmap(g uint32, b []byte) {
	clear(b)
	sb := f.sb
	ratio := uint64(sb.ClusterRatio())
	first := sb.GroupFirstBlock(g)
	set := func(blk, n uint64) {
		for i := uint64(0); i < n; i++ {
			if blk+i < first {
				continue
			}
			c := (blk + i - first) / ratio
			if c < uint64(len(b))*8 {
				b[c/8] |= 1 << (c % 8)
			}
		}
	}
	set(first, uint64(sb.GroupOverhead(g).Blocks()))
	gd := f.groups[g]
	end := first + uint64(sb.GroupBlocks(g))
	in := func(blk uint64) bool { return blk >= first && blk < end }
	if in(gd.BlockBitmap) {
		set(gd.BlockBitmap, 1)
	}
	if in(gd.InodeBitmap) {
		set(gd.InodeBitmap, 1)
	}
	for i := uint64(0); i < uint64(sb.InodeTableBlocks()); i++ {
		if in(gd.InodeTable + i) {
			set(gd.InodeTable+i, 1)
		}
	}
	clusters := (uint64(sb.GroupBlocks(g)) + ratio - 1) / ratio
	for c := clusters; c < uint64(len(b))*8; c++ {
		b[c/8] |= 1 << (c % 8)
	}
}

// inodeStore is how the inode allocator reads and changes inode bitmaps.
type inodeStore struct{ f *FS }

func (s inodeStore) GroupCounts(g uint32) (uint32, uint32, error) {
	gd := s.f.groups[g]
	return gd.FreeInodesCount, gd.UsedDirsCount, nil
}

func (s inodeStore) ReadInodeBitmap(g uint32) ([]byte, error) {
	f := s.f
	return f.readBitmap(g, "inode bitmap", super.BGInodeUninit,
		func(gd *super.GroupDesc) uint64 { return gd.InodeBitmap },
		f.initInodeBitmap,
		func(gd *super.GroupDesc, b []byte) error { return super.VerifyInodeBitmap(f.sb, gd, g, b) })
}

// initInodeBitmap fills b as an INODE_UNINIT group's bitmap: no inode in
// use, the bits past inodes_per_group set (kernel: ext4_init_inode_bitmap).
func (f *FS) initInodeBitmap(b []byte) {
	clear(b)
	for i := uint64(f.sb.InodesPerGroup); i < uint64(len(b))*8; i++ {
		b[i/8] |= 1 << (i % 8)
	}
}

func (s inodeStore) UpdateInodeBitmap(tx ialloc.Tx, g, index uint32, used, isDir bool, freeInodes, usedDirs uint32) error {
	f := s.f
	h, own, err := f.txHandle(tx)
	if err != nil {
		return err
	}
	if own {
		defer h.End()
	}
	gd := f.groups[g]
	if used {
		// A group whose inodes come into use gets its block bitmap
		// initialised too (kernel: __ext4_new_inode).
		f.w.gdMu[g].Lock()
		blockUninit := gd.Flags&super.BGBlockUninit != 0
		f.w.gdMu[g].Unlock()
		if blockUninit {
			err := h.Modify(gd.BlockBitmap, func(b []byte) error {
				f.w.gdMu[g].Lock()
				defer f.w.gdMu[g].Unlock()
				if gd.Flags&super.BGBlockUninit == 0 {
					return nil
				}
				f.initBlockBitmap(g, b)
				gd.Flags &^= super.BGBlockUninit
				super.SetBlockBitmapChecksum(f.sb, gd, b)
				f.w.gdMu[g].bitmapCrcOK = false
				return f.writeGroupDesc(h, g)
			})
			if err != nil {
				return err
			}
		}
	}
	return h.Modify(gd.InodeBitmap, func(b []byte) error {
		f.w.gdMu[g].Lock()
		defer f.w.gdMu[g].Unlock()
		if gd.Flags&super.BGInodeUninit != 0 {
			f.initInodeBitmap(b)
			gd.Flags &^= super.BGInodeUninit
		}
		if used {
			b[index/8] |= 1 << (index % 8)
			if f.sb.HasGroupDescCsum() {
				if unusedFrom := f.sb.InodesPerGroup - gd.ItableUnused; index >= unusedFrom {
					gd.ItableUnused = f.sb.InodesPerGroup - index - 1
				}
			}
		} else {
			b[index/8] &^= 1 << (index % 8)
		}
		gd.FreeInodesCount = freeInodes
		gd.UsedDirsCount = usedDirs
		super.SetInodeBitmapChecksum(f.sb, gd, b)
		return f.writeGroupDesc(h, g)
	})
}

// inodeLocation returns the inode table block holding ino and the byte
// offset in it.
func (f *FS) inodeLocation(ino uint32) (uint64, int, error) {
	group, index, ok := f.sb.GroupOfInode(ino)
	if !ok {
		return 0, 0, &CorruptError{What: "inode number", Block: -1, Ino: ino, Detail: "out of range"}
	}
	byteOff := uint64(index) * uint64(f.inodeSize)
	return f.groups[group].InodeTable + byteOff/uint64(f.blockSize), int(byteOff % uint64(f.blockSize)), nil
}

// setInode records in as n's new inode in h and publishes it. n.mu must
// be held exclusively (or n not yet visible to anyone else).
func (f *FS) setInode(h handle, n *node, in *inode.Inode) error {
	return f.setInodeAs(h, n, in, false)
}

// setInodeAs is setInode; hot as for node.publish.
func (f *FS) setInodeAs(h handle, n *node, in *inode.Inode, hot bool) error {
	blk, off, err := f.inodeLocation(n.ino)
	if err != nil {
		return err
	}
	f.truncateTimes(in)
	// An inode from editInode owns its Raw: encode into it in place.
	raw := in.Raw
	if !in.RawOwned || len(raw) != f.inodeSize {
		raw = make([]byte, f.inodeSize)
	}
	if f.csum {
		err = in.EncodeChecksum(raw, f.seed, n.ino)
	} else {
		err = in.Encode(raw)
	}
	if err != nil {
		return err
	}
	// Published, the inode is read by lock-free readers: nothing may
	// write its Raw again.
	in.Raw, in.RawOwned = raw, false
	if n.freed.Load() {
		return staleWrite(n.ino, "write through a node whose inode was freed")
	}
	old := n.inLocked()
	// The other inodes of the block whose times wait in memory go with
	// this write (lazytime.go).
	neighbours := f.neighbourTimes(blk, n)
	// A new inode alone in its block need not read the block: the other
	// slots are free, and a free slot's bytes mean nothing (kernel:
	// __ext4_get_inode_loc with in_mem). A mkfs -d of /usr/local/go read
	// 885 blocks, most of its metadata reads, for nothing.
	var zero func() bool
	if old == nil && !f.opts.replaying { // the kernel's replay reads too
		zero = func() bool { return f.w.ialloc.OnlyInUse(n.ino, uint32(f.blockSize)/uint32(f.inodeSize)) }
	}
	err = h.ModifyOrZero(blk, zero, func(b []byte) error {
		// The slot must still hold this node's inode: a generation that
		// changed under an in-use inode means a new owner wrote it.
		if old != nil && inode.SlotGeneration(b[off:]) != old.Generation && inode.SlotInUse(b[off:]) {
			return staleWrite(n.ino, "the inode table slot belongs to another inode generation")
		}
		copy(b[off:], raw)
		if len(neighbours) > 0 {
			f.copyNeighbourTimes(b, blk, neighbours)
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.publishInode(n, old, in, blk, off, hot)
	return nil
}

// publishInode makes in, which replaces old, n's inode for every reader,
// once it is recorded for the inode table (at blk, byte off): its times
// are no longer dirty, and a block map built from old goes. n.mu is held
// exclusively; hot as for node.publish.
func (f *FS) publishInode(n *node, old, in *inode.Inode, blk uint64, off int, hot bool) {
	// The block map changes with i_block, the flags or the size, and with
	// edits of the extent tree's blocks, which extStore records. Decided
	// before publish, which may recycle old.
	drop := old == nil || old.Block != in.Block || old.Flags != in.Flags || old.Size != in.Size
	n.publish(in, hot)
	if f.w != nil {
		f.timesWritten(blk, off, n)
	}
	if n.treeChanged.Swap(false) || drop {
		n.mapping.Store(nil)
	}
}

// editInode copies n's inode for a change, with its own Raw, in one
// allocation where the inode is of the usual sizes.
func editInode(n *node) *inode.Inode {
	old := n.in()
	if len(old.Raw) <= inodeCopyRaw {
		c := new(inodeCopy)
		c.in = *old
		c.in.Raw = c.raw[:copy(c.raw[:], old.Raw):len(old.Raw)]
		c.in.RawOwned = true
		return &c.in
	}
	c := *old
	c.Raw = append([]byte(nil), c.Raw...)
	c.RawOwned = true
	return &c
}

// editInodeHot copies n's inode for a change that setInodeHot or
// setTimesLazily publishes: its Raw stays the published inode's, which
// nothing writes again, since neither encodes into the inode's own Raw
// (setInodeHot's first write of a transaction encodes into a new one, the
// commit into the slot). Half the bytes of editInode's copy, on every
// write, fallocate and truncate.
//
// The copy reuses the inode an earlier hot change published and a later
// one replaced, when no reader kept it (node.publish): fallocate2's
// steps allocate nothing. n.mu must be held exclusively.
func editInodeHot(n *node) *inode.Inode {
	c := n.spare
	if c != nil {
		n.spare = nil
	} else {
		c = &new(hotInode).in
	}
	*c = *n.inLocked()
	c.RawOwned = false
	return c
}

// hotInode is an inode alone in whole cache lines: recycled, the copies
// of two files' inodes are written by two goroutines on every change, and
// 240-byte objects packed side by side would share a line (256 bytes is
// a size class whose objects start on line boundaries).
type hotInode struct {
	in inode.Inode
	_  [16 * pad.On]byte
}

// inodeCopyRaw is the largest Raw an inodeCopy holds: 256 bytes, mke2fs's
// default inode size.
const inodeCopyRaw = 256

// inodeCopy is an inode and the bytes of its Raw, allocated together.
type inodeCopy struct {
	in  inode.Inode
	raw [inodeCopyRaw]byte
}

// allocBlocks is the block allocator's Allocate, behind the fault hook,
// for an allocation that no delayed-data reservation pays for.
func (f *FS) allocBlocks(tx mballoc.Tx, req mballoc.Request) (mballoc.Extent, error) {
	return f.allocBlocksFor(tx, req, false)
}

// allocBlocksFor is allocBlocks; claimed says that the blocks were
// reserved by delayed data being flushed. Others may only take the
// clusters free beyond the reservations (kernel: ext4_claim_free_clusters
// against s_dirtyclusters_counter, skipped for
// EXT4_MB_DELALLOC_RESERVED).
func (f *FS) allocBlocksFor(tx mballoc.Tx, req mballoc.Request, claimed bool) (mballoc.Extent, error) {
	if err := f.inject("block"); err != nil {
		return mballoc.Extent{}, err
	}
	if r := f.w.daReserved.Load(); r > 0 && !claimed {
		avail := f.w.balloc.FreeClusters() - r
		if avail <= 0 {
			return mballoc.Extent{}, &mballoc.NoSpaceError{}
		}
		if int64(req.Len) > avail {
			req.Len = uint32(avail)
		}
	}
	if f.w.exclude == nil {
		return f.w.balloc.Allocate(tx, req)
	}
	// Set aside what the replay must not use, and give it back after;
	// the next try starts past the range hit (kernel:
	// ext4_mb_new_blocks_simple skipping excluded blocks).
	var held []mballoc.Extent
	defer func() {
		for _, e := range held {
			if err := f.w.balloc.Free(tx, e.Start, uint64(e.Len), mballoc.FreeNoDefer); err != nil {
				f.setError(err)
			}
		}
	}()
	for {
		e, err := f.w.balloc.Allocate(tx, req)
		if err != nil {
			return e, err
		}
		end, hit := f.w.exclude(e.Start, uint64(e.Len))
		if !hit {
			return e, nil
		}
		held = append(held, e)
		if len(held) > 4096 {
			return mballoc.Extent{}, &mballoc.NoSpaceError{}
		}
		req.Goal = end
		req.LeftPhysical, req.RightPhysical = 0, 0
	}
}
