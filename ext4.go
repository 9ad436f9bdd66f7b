package ext4go

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go/internal/extent"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/syszone"
	"github.com/ext4go/ext4go/internal/txn"
)

// Options control how a filesystem is opened. The zero value (or nil) is
// the safe default: verify every checksum, refuse a journal that needs
// recovery.
type Options struct {
	// IgnoreChecksums reads structures whose checksum does not match
	// instead of failing with a *ChecksumError.
	IgnoreChecksums bool
	// IgnoreJournal reads a filesystem whose journal holds committed
	// changes not yet written back (needs_recovery) as it is on disk,
	// which may be stale or inconsistent. Without it such a filesystem is
	// refused until ext4go replays journals.
	IgnoreJournal bool
	// Writable opens the filesystem for changes. The image is locked
	// against other writers (flock on image files, O_EXCL on block
	// devices) until Close, which must be called to write everything back
	// and mark the filesystem clean.
	Writable bool
	// AllowInUse opens for writing an image the kernel has mounted (or
	// that backs a loop device). Unsafe: the kernel does not see the
	// changes and writes its own state over them, or the filesystem is
	// corrupted. Without it such an open fails with *InUseError.
	AllowInUse bool
	// AllowUnclean opens for writing a filesystem whose state says it was
	// not cleanly unmounted, or has errors. Without it such an open fails
	// (check it with e2fsck -f first); with it, Close marks it cleanly
	// unmounted, but the errors mark stays: only e2fsck clears it (as
	// the kernel, which writes s_state back with EXT4_ERROR_FS kept).
	AllowUnclean bool
	// NoJournal writes a filesystem that has a journal without it: each
	// commit writes its blocks in place, as on a filesystem without one.
	// Faster, but a crash or kill during a change may leave the
	// filesystem needing e2fsck. Without it, every change to such a
	// filesystem goes through the journal (see package documentation).
	NoJournal bool
	// CommitInterval is how often the changes made so far are committed
	// even if nothing asks for it (the kernel's commit= mount option;
	// default 5 s; negative: only on Sync, Close and when a transaction
	// grows large).
	CommitInterval time.Duration
	// MetadataCache bounds the bytes of clean metadata blocks (inode
	// tables, directories, extent trees, bitmaps) kept in memory; 0 is
	// the default, 65536 blocks. A long-running server over a host that
	// caches the device itself may want less.
	MetadataCache int64
	// Atime chooses when reads update access times (the kernel's
	// noatime, relatime and strictatime mount options): never (the
	// default, AtimeNever), when the access time is not after the
	// modification or change time or is a day old (AtimeRelative), or on
	// every read (AtimeStrict). Read-only opens never update them.
	Atime AtimeMode
	// Lazytime keeps changes that only move timestamps (access times of
	// reads, modification and change times of writes that overwrite
	// mapped blocks without changing the size or the mapping) in memory:
	// Stat shows them at once, the inode table gets them with the inode's
	// next real write or its inode-table block's, on Sync, File.Sync and
	// Close, and from the periodic commit once they are LazytimeExpire old
	// (the kernel's lazytime mount option). A crash loses at most such
	// times. See lazytime.go.
	Lazytime bool
	// LazytimeExpire is how long Lazytime keeps times in memory at most
	// (default 12 h, the kernel's dirtytime_expire_interval; negative:
	// until Sync, Close or a write of the inode). The periodic commit
	// writes them, so without one (negative CommitInterval) they wait
	// for those.
	LazytimeExpire time.Duration
	// replaying opens the view a fast-commit replay changes: no orphan
	// cleanup, no periodic commits.
	replaying bool
	// NoDelalloc allocates a file's blocks at each write instead of when
	// its data goes to disk (the kernel's nodelalloc mount option). See
	// delalloc.go.
	NoDelalloc bool
	// DelayedLimit bounds the bytes of delayed (written, not yet
	// allocated) data held in memory; past it writers flush their own
	// files and the background writeback flushes the rest (default 32
	// MiB).
	DelayedLimit int64
	// Errors is what a change that finds the filesystem corrupt does
	// besides failing (the kernel's errors= mount option): always record
	// the error in the superblock (so that e2fsck -p checks the
	// filesystem), then go on, or refuse later changes until Close. The
	// default is the superblock's s_errors (tune2fs -e). See ErrorsMode.
	Errors ErrorsMode
	// OnError, when set, is called once a change has recorded an error
	// in the superblock, after it is written (the kernel logs "EXT4-fs
	// error" then; FSError.KernelStyle formats that line). It runs in
	// the goroutine of the failed change, with no lock of the
	// filesystem held, and must not wait for another change.
	OnError func(*FSError)
	// UID and GID own the inodes OpenFile, Mkdir, Symlink and Mknod make
	// (default 0:0, root); in a setgid directory the group is the
	// directory's, as on Linux.
	UID, GID uint32
}

// FS is an opened ext4 filesystem. All methods are safe for concurrent use.
type FS struct {
	dev  dev.Device
	opts Options

	// Immutable after open.
	sb        *super.Superblock
	groups    []*super.GroupDesc
	blockSize int64
	inodeSize int
	seed      uint32 // metadata checksum seed
	csum      bool   // metadata_csum
	hugeFile  bool
	is64      bool

	tm *txn.Manager // metadata block cache and transactions
	// The lookups' readers of directory and extent tree blocks, lent
	// the cached block (blockViewer), made once.
	viewDirBlock, viewExtentBlock func(blk uint64, fn func(b []byte) error) error
	viewSealedExtentBlock         extent.SealedView // bound once, as the views above
	cache                         inodeCache
	w                             *writer // nil when read-only

	orphans    []*node // inodes on the orphan list, head first; w.orphanMu
	xattrCache xattrBlockCache
	eaValues   eaValueCache

	// reproducible makes new inodes' generations and the allocator's
	// choices depend only on the sequence of changes (image building).
	reproducible bool
	// clock, when set, replaces the time of day for every timestamp the
	// filesystem writes (reproducible builds with SOURCE_DATE_EPOCH).
	clock time.Time
	// wallBase is the time of day last read whole (coarseNow).
	wallBase atomic.Pointer[time.Time]

	closed atomic.Bool // Close was called: every method returns fs.ErrClosed

	replay *JournalReplay // the in-memory journal replay of a read-only open, or nil

	// zone is the system zone (systemzone.go): set at open, then with the
	// journal's blocks added; never nil after newFS.
	zone atomic.Pointer[syszone.Zone]

	// fault, when set (by tests), is asked before every block and inode
	// allocation and block read whether to fail it (fault injection).
	fault atomic.Pointer[func(kind string) error]

	// neighbourWait, set by a benchmark only (internal/benchknob), makes
	// the copying of neighbours' lazy times wait for busy neighbours
	// instead of skipping them (lazytime.go).
	neighbourWait time.Duration

	errMu sync.Mutex // protects err
	err   error      // first failure that left the on-disk state in doubt
}

// Open opens the ext4 filesystem in the image file or block device at path,
// for reading, or also for writing with Options.Writable.
func Open(path string, opts *Options) (*FS, error) {
	return openPath(path, opts, false)
}

func openPath(path string, opts *Options, reproducible bool) (*FS, error) {
	if opts != nil && opts.Writable && !opts.AllowInUse {
		if err := checkInUse(path); err != nil {
			return nil, err
		}
	}
	d, err := dev.Open(path, opts != nil && opts.Writable)
	if err != nil {
		return nil, err
	}
	f, err := newFS(d, opts, reproducible)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Device is storage that holds a filesystem, for OpenDevice: an image in
// memory, a disk image format's layer, a wrapper that records or fails
// writes. It is io.ReaderAt and io.WriterAt, safe for use by many
// goroutines at once (also on overlapping ranges, as an *os.File), with
// Size (bytes), Sync (makes what was written durable: the journal's commit
// order rests on it) and Close.
type Device = dev.Device

// OpenDevice opens the ext4 filesystem on d, for reading, or also for
// writing with Options.Writable. Closing the FS closes d. Unlike Open it
// cannot tell whether anyone else uses the storage (a kernel mount, another
// program): that is the caller's to know.
func OpenDevice(d Device, opts *Options) (*FS, error) {
	if d == nil {
		return nil, errors.New("ext4go: OpenDevice of a nil Device")
	}
	return newFS(d, opts, false)
}

// NewFS reads the ext4 filesystem held in the first size bytes of r.
// Closing the FS does not close r.
func NewFS(r io.ReaderAt, size int64, opts *Options) (*FS, error) {
	if opts != nil && opts.Writable {
		return nil, fmt.Errorf("ext4go: NewFS reads only; open the image with Open to write")
	}
	return newFS(dev.ReaderAt{R: r, N: size}, opts, false)
}

func newFS(d dev.Device, opts *Options, reproducible bool) (*FS, error) {
	f := &FS{dev: d, reproducible: reproducible, neighbourWait: neighbourWaitFromKnob()}
	if opts != nil {
		f.opts = *opts
	}
	buf := make([]byte, super.Size)
	if size := d.Size(); size < super.Offset+super.Size {
		return nil, &notExt4Error{fmt.Sprintf("%d bytes is too small to hold a superblock (at offset %d)", size, super.Offset)}
	}
	if err := f.readFull(buf, super.Offset, "superblock"); err != nil {
		return nil, err
	}
	if magic := binary.LittleEndian.Uint16(buf[0x38:]); magic != super.Magic {
		return nil, &notExt4Error{fmt.Sprintf("no superblock magic at offset %d (%#04x where %#04x belongs)", super.Offset, magic, super.Magic)}
	}
	decode := super.Decode
	if f.opts.IgnoreChecksums {
		decode = super.DecodeNoVerify
	}
	sb, err := decode(buf)
	if err != nil {
		return nil, fserr.At(err, 0, 0)
	}
	f.sb = sb
	if err := f.checkFeatures(); err != nil {
		return nil, err
	}
	f.blockSize = int64(sb.BlockSize())
	f.inodeSize = int(sb.InodeSize())
	f.seed = sb.ChecksumSeed()
	f.csum = sb.HasMetadataCsum()
	f.hugeFile = sb.HasROCompat(super.ROCompatHugeFile)
	f.is64 = sb.Is64Bit()
	if end := int64(sb.BlocksCount()) * f.blockSize; end > d.Size() {
		return nil, &CorruptError{What: "superblock", Block: 0,
			Detail: fmt.Sprintf("filesystem of %d bytes does not fit the %d-byte device", end, d.Size())}
	}
	commit := &txn.InPlace{Dev: d, BlockSize: int(f.blockSize)}
	var topts txn.Options
	if reproducible {
		// Building an image: only the final state matters (Close syncs
		// once), and a small cache keeps memory flat however many files
		// the source has.
		commit.NoSync = true
		topts = txn.Options{MaxDirty: 1024, CacheBlocks: 2048}
	} else if f.opts.MetadataCache > 0 {
		topts.CacheBlocks = int(max(f.opts.MetadataCache/f.blockSize, 256))
	}
	f.tm = txn.NewManager(metaDev{d, f}, int(f.blockSize), sb.BlocksCount(), commit, topts)
	f.viewDirBlock = f.blockViewer("directory block")
	f.viewExtentBlock = f.blockViewer("extent tree block")
	f.viewSealedExtentBlock = f.sealedExtentViewer()
	if err := f.loadGroups(); err != nil {
		return nil, err
	}
	zone, overlap := f.buildSystemZone()
	if overlap != nil && f.opts.Writable {
		// Read-only, such a filesystem is read as it is (the kernel
		// also mounts it read-only past ext4_check_descriptors).
		return nil, overlap
	}
	f.zone.Store(zone)
	// A journal that cannot be mapped stays out of the zone: reading goes
	// on without its protection, and a write through it (openJournal) or
	// a replay (recoverJournal) fails on the same mapping.
	_ = f.protectJournal()
	if sb.HasIncompat(super.IncompatRecover) && !f.opts.IgnoreJournal {
		// Read what the kernel would after its recovery: the journal
		// replayed into memory over the device, and everything read
		// again through it (the superblock may be in the journal too).
		j, err := f.recoverJournal()
		if err != nil {
			return nil, fmt.Errorf("%w: %w (Options.IgnoreJournal reads the on-disk state without it)", ErrJournalReplay, err)
		}
		rec := j.rec
		if rec.FastCommits != nil {
			fcBlocks, err := f.replayFastCommits(d, rec)
			if err != nil {
				return nil, fmt.Errorf("%w: replaying the fast commits: %w", ErrJournalReplay, err)
			}
			j.addBlocks(fcBlocks)
		}
		o := f.opts
		o.IgnoreJournal, o.Writable = true, false
		view, err := newFS(&overlayDev{Device: d, blocks: j.blocks, bs: f.blockSize}, &o, reproducible)
		if err != nil {
			return nil, fmt.Errorf("after replaying the journal: %w", err)
		}
		replay := &JournalReplay{Transactions: int(rec.EndSeq - rec.StartSeq), Blocks: len(rec.Blocks),
			Revoked: rec.RevokeHits, BadBlocks: len(rec.BadBlocks), FailedCommit: rec.FailedCommit}
		if rec.FastCommits != nil {
			replay.FastCommits = len(rec.FastCommits.Tags)
		}
		if !f.opts.Writable {
			view.opts.IgnoreJournal = f.opts.IgnoreJournal
			view.replay = replay
			return view, nil
		}
		// Writing: refuse what the replayed filesystem would be refused
		// for before anything is written, then make the replay real.
		view.opts = f.opts
		view.sb.FeatureIncompat &^= super.IncompatRecover // as it will be
		if err := view.prepareWriter(); err != nil {
			return nil, err
		}
		if len(rec.BadBlocks) > 0 {
			return nil, fmt.Errorf("%w: %w", ErrJournalReplay, &CorruptError{What: "journal", Block: -1, Ino: sb.JournalInum,
				Detail: fmt.Sprintf("%d logged blocks failed their checksums (the kernel refuses such a journal; check it with e2fsck -f)", len(rec.BadBlocks))})
		}
		if err := f.replayHome(d, j); err != nil {
			return nil, fmt.Errorf("writing the journal replay home: %w", err)
		}
		f2, err := newFS(d, &f.opts, reproducible)
		if err != nil {
			return nil, err
		}
		f2.replay = replay
		return f2, nil
	}
	root, err := f.inode(rootIno)
	if err != nil {
		return nil, err
	}
	if !root.isDir() {
		return nil, &CorruptError{What: "root inode", Block: -1, Ino: rootIno, Detail: "not a directory"}
	}
	if f.opts.Writable {
		if err := f.openWriter(commit); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// checkFeatures refuses what cannot be read correctly.
func (f *FS) checkFeatures() error {
	sb := f.sb
	if u := sb.UnknownIncompat(); u != 0 {
		return &UnsupportedError{Feature: fmt.Sprintf("incompat feature bits %#x", u), Detail: "unknown to ext4go"}
	}
	for _, x := range []struct {
		bit  uint32
		what string
	}{
		{super.IncompatCompression, "compression"},
		{super.IncompatDirData, "dirdata"},
	} {
		if sb.HasIncompat(x.bit) {
			return &UnsupportedError{Feature: "incompat feature " + x.what}
		}
	}
	if sb.HasIncompat(super.IncompatJournalDev) {
		return &UnsupportedError{Feature: "journal_dev", Detail: "this is an external journal device, not a filesystem"}
	}
	return nil
}

// readFull reads len(p) bytes at off; a short device is a corruption of
// what.
func (f *FS) readFull(p []byte, off int64, what string) error {
	n, err := f.dev.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		return &CorruptError{What: what, Block: off / max(f.blockSize, 1024), Detail: fmt.Sprintf("beyond the end of the device (%d bytes)", f.dev.Size())}
	}
	return fmt.Errorf("read %s at byte %d: %w", what, off, err)
}

// readBlock reads filesystem block blk, refusing blocks outside the
// filesystem.
func (f *FS) readBlock(blk uint64, what string) ([]byte, error) {
	if blk >= f.sb.BlocksCount() || (blk == 0 && f.blockSize > 1024 && what != "boot block") {
		return nil, &CorruptError{What: what, Block: int64(blk), Detail: fmt.Sprintf("block number outside the filesystem (%d blocks)", f.sb.BlocksCount())}
	}
	b, err := f.tm.Read(blk)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", what, err)
	}
	return b, nil
}

// touchBlock reads blk into the metadata cache, if it is not there, without
// copying it anywhere: for a caller that must see a read error now rather
// than half way through a change (prepareFree).
func (f *FS) touchBlock(blk uint64, what string) error {
	if err := f.checkMetaBlock(blk, what); err != nil {
		return err
	}
	if err := f.tm.View(blk, func([]byte) error { return nil }); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// readBlockInto is readBlock into b (a block long) instead of a new
// buffer.
func (f *FS) readBlockInto(blk uint64, what string, b []byte) error {
	if blk >= f.sb.BlocksCount() || (blk == 0 && f.blockSize > 1024 && what != "boot block") {
		return &CorruptError{What: what, Block: int64(blk), Detail: fmt.Sprintf("block number outside the filesystem (%d blocks)", f.sb.BlocksCount())}
	}
	if err := f.tm.View(blk, func(data []byte) error {
		copy(b, data)
		return nil
	}); err != nil {
		return fmt.Errorf("read %s: %w", what, err)
	}
	return nil
}

// metaDev is the device as the metadata cache reads it: each read (a
// cache miss) passes the fault hook first.
type metaDev struct {
	dev.Device
	f *FS
}

func (d metaDev) ReadAt(p []byte, off int64) (int, error) {
	if err := d.f.inject("read"); err != nil {
		return 0, err
	}
	return d.Device.ReadAt(p, off)
}

// inject returns the error a test's fault hook wants for this step of
// kind "read" (metadata), "write" (file data), "block" or "inode"
// (allocations), or nil.
func (f *FS) inject(kind string) error {
	if fn := f.fault.Load(); fn != nil {
		return (*fn)(kind)
	}
	return nil
}

// loadGroups reads and checks every group descriptor (kernel:
// ext4_check_descriptors).
func (f *FS) loadGroups() error {
	sb := f.sb
	n := sb.GroupCount()
	descSize := sb.DescSize()
	f.groups = make([]*super.GroupDesc, n)
	var blk uint64 = ^uint64(0)
	var buf []byte
	for g := uint32(0); g < n; g++ {
		b, off := sb.GroupDescLocation(g)
		if b != blk {
			var err error
			if buf, err = f.readBlock(b, "group descriptor block"); err != nil {
				return err
			}
			blk = b
		}
		raw := buf[off : off+descSize]
		gd, err := super.DecodeGroupDescNoVerify(sb, raw)
		if err == nil && !f.opts.IgnoreChecksums {
			err = super.VerifyGroupDesc(sb, raw, g)
		}
		if err == nil {
			err = super.CheckGroupDesc(sb, gd, g)
			if err != nil && !f.opts.Writable && super.CheckGroupDescCounts(sb, gd, g) != nil {
				// Wrong free counts do not stop reading (the kernel mounts
				// such images read-only); a layout error still does.
				layout := &super.GroupDesc{BlockBitmap: gd.BlockBitmap, InodeBitmap: gd.InodeBitmap, InodeTable: gd.InodeTable}
				if super.CheckGroupDesc(sb, layout, g) == nil {
					err = nil
				}
			}
		}
		if err != nil {
			return fserr.At(err, int64(b), 0)
		}
		f.groups[g] = gd
	}
	return nil
}

// Close writes back every change (for a writable filesystem, which it
// then marks clean) and releases the device. Files opened from the
// filesystem must not be used afterwards.
func (f *FS) Close() error {
	if f.closed.Swap(true) {
		return fs.ErrClosed
	}
	var err error
	if f.w != nil {
		err = f.closeWriter()
		if err == nil {
			err = f.panicError() // everything is written: errors=panic's error
		}
		if err == nil && f.reproducible {
			err = f.dev.Sync() // the commits of a build do not sync
		}
	}
	if e := f.dev.Close(); err == nil {
		err = e
	}
	return err
}

// now is the time stamped on changes.
func (f *FS) now() time.Time {
	if !f.clock.IsZero() {
		return f.clock
	}
	return f.coarseNow()
}

// wallRefresh is how long coarseNow goes on from one reading of the time
// of day: a jiffy at HZ=250, the kernel's granularity for the times it
// stamps on inodes (current_time reads the coarse clock).
const wallRefresh = 4 * time.Millisecond

// coarseNow is the time of day, read as the last full reading plus the
// monotonic time since: one clock read instead of time.Now's two (a
// tenth of a fallocate's CPU on this VM's kvm-clock). A step of the
// system clock shows within wallRefresh, and a slewing clock drifts from
// it by nanoseconds before the next full reading (measured: 12 ns at worst
// over a minute).
func (f *FS) coarseNow() time.Time {
	if b := f.wallBase.Load(); b != nil {
		if d := time.Since(*b); d >= 0 && d < wallRefresh {
			return b.Add(d)
		}
	}
	t := wallReading()
	f.wallBase.Store(&t)
	return t
}

// wallReading is time.Now for a base that later readings add monotonic
// time to. time.Now reads the wall clock, then the monotonic one; a
// thread that loses its CPU between the two gets a wall time behind its
// monotonic one by the gap, and every time coarseNow adds to it lags by
// as much: on this VM, under load, by tens of microseconds, so that an
// inode's mtime came out earlier than a time.Now taken before the change
// (TestModel). Of two readings, the one whose wall time is further ahead
// of its monotonic time had the shorter gap.
func wallReading() time.Time {
	t := time.Now()
	u := time.Now()
	if u.Round(0).Sub(t.Round(0)) > u.Sub(t) {
		return u
	}
	return t
}

// BlockSize returns the filesystem's block size in bytes.
func (f *FS) BlockSize() int { return int(f.blockSize) }
