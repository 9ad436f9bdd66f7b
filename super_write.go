package ext4go

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/ialloc"
	"github.com/ext4go/ext4go/internal/journal"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/pad"
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

// setError records a failure that leaves the on-disk state in doubt.
func (f *FS) setError(err error) {
	f.errMu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.errMu.Unlock()
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
// files lock and dirty one shared buffer (kernel: jbd2's one dirty
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
