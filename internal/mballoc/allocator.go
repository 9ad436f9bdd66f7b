package mballoc

import (
	"errors"
	"fmt"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"math"
	"math/bits"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/shard"
)

const cacheLine = 64

// counterBatch is the drift, in clusters, at which a shard of the free and
// pending counters folds into the centre: with 2-cluster allocations about
// every hundredth one writes the shared line (kernel: percpu_counter_batch).
const counterBatch = 256

// groupFields is the per-group state (kernel: ext4_group_info).
type groupFields struct {
	mu groupLock

	// Read without the lock by scanners; written under it. For a group not
	// loaded yet they are optimistic guesses from its descriptor (all free
	// space in one run), so that the scanners come and load it.
	free      atomic.Uint32 // free clusters in the buddy (bb_free)
	fragments atomic.Uint32 // free runs (bb_fragments)
	largest   atomic.Int32  // largest free order, -1 if none
	diskFree  atomic.Uint32 // free clusters on disk (descriptor count)
	loaded    atomic.Bool
	corrupt   atomic.Bool // bitmap and counters disagree: never allocate here

	// Under mu.
	lfoOrder, avgOrder int8 // where the group is filed in the indexes, -1 nowhere
	b                  *buddy
	disk               []uint64      // the on-disk bitmap, as told to the Store
	pending            []pendingFree // freed, waiting for their transaction, sorted by start
	pas                []*prealloc   // preallocations with space in this group
	// fresh are the runs of clusters transaction freshTid allocated here
	// and has not freed since (fresh.go).
	fresh    []freshRun
	freshTid uint64
	// flexDelta is the change of diskFree not yet added to the flex
	// group's count (see markDiskLocked).
	flexDelta int64
}

// group pads groupFields to whole cache lines so that two groups' locks and
// counters never share one. The pad is never empty: a zero-size last field
// makes Go pad the struct (so that its address stays inside it), off the
// line boundary.
type group struct {
	groupFields
	_ [(cacheLine - unsafe.Sizeof(groupFields{})%cacheLine) * pad.On]byte
}

type pendingFree struct {
	start, n uint32
	tid      uint64
}

type paddedU32 struct {
	v atomic.Uint32
	_ [(cacheLine - 4) * pad.On]byte
}

type paddedI64 struct {
	v atomic.Int64
	_ [(cacheLine - 8) * pad.On]byte
}

// Config chooses the allocator's behaviour at creation.
type Config struct {
	// Legacy behaves like ext4 before the 2025 scalability series (see the
	// package comment), for benchmarks.
	Legacy bool
	// CPUs sizes the stream goals (min(CPUs, ceil(groups/4))) and the
	// locality groups; 0 means runtime.GOMAXPROCS(0).
	CPUs int
	// Tunables; nil means DefaultTunables.
	Tunables *Tunables
}

// Allocator is the block allocator of one filesystem. All methods are safe
// for concurrent use.
type Allocator struct {
	geo    *geo
	store  Store
	zone   SystemZone
	legacy bool
	tun    atomic.Pointer[Tunables]

	groups   []group
	lfo, avg *orderIndex

	goals      []paddedU32 // stream goals: s_mb_last_groups
	legacyGoal struct {
		legacyLock // s_md_lock, a spinlock in the kernel
		group      uint32
		start      uint32
	}

	lgs []localityGroup

	_      [pad.Line * pad.On]byte // keeps inodes[0]'s lock off lgs
	inodes [64]inodeShard
	// streams counts the inodes with preallocation state: files streaming
	// now (the state goes at their last close), which stream spreading
	// keeps apart. Sharded by inode, as pending by group, so that a
	// truncate and the next allocation write no line shared by all files.
	streams  *shard.Counter
	deferred [16]deferShard
	pending  *shard.Counter // clusters freed by uncommitted transactions

	free     *shard.Counter // free clusters on disk (s_freeclusters_counter)
	flexFree []paddedI64

	stats statCounters

	// afterAlloc, set by tests only, is told after each successful
	// allocation how many groups its criteria looked at and how many of
	// them were passed over busy.
	afterAlloc func(considered, busy int)
}

// New makes an allocator for a filesystem of geometry gm whose bitmaps and
// descriptors store serves. It reads every group's free count (not the
// bitmaps: a group's bitmap is read the first time the group is scanned,
// allocated from or freed into).
func New(gm Geometry, store Store, cfg Config) (*Allocator, error) {
	g, err := newGeo(gm)
	if err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("mballoc: nil store")
	}
	t := DefaultTunables(g.ClusterRatio)
	if cfg.Tunables != nil {
		t = *cfg.Tunables
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	cpus := cfg.CPUs
	if cpus <= 0 {
		cpus = runtime.GOMAXPROCS(0)
	}
	a := &Allocator{
		geo:    g,
		store:  store,
		legacy: cfg.Legacy,
		groups: make([]group, g.groups),
		lfo:    newOrderIndex(g.numOrders(), g.groups, cfg.Legacy),
		avg:    newOrderIndex(g.numOrders(), g.groups, cfg.Legacy),
		// Free and pending clusters are read approximately on every
		// allocation's claim (Read), so they fold into their centre.
		// Streams are counted exactly (Sum), on a stream's goal miss.
		free:    shard.NewCounter(max(16, 4*cpus), counterBatch, lockstat.AllocCounterFold),
		pending: shard.NewCounter(max(16, 4*cpus), counterBatch, lockstat.AllocCounterFold),
		streams: shard.NewCounter(max(16, 4*cpus), math.MaxInt64, lockstat.AllocStreams),
	}
	a.zone, _ = store.(SystemZone)
	a.tun.Store(&t)
	// kernel: s_mb_nr_global_goals = min(CPUs, ceil(groups/4))
	a.goals = make([]paddedU32, max(1, min(cpus, int((g.groups+3)/4))))
	a.lgs = make([]localityGroup, cpus)
	for i := range a.inodes {
		a.inodes[i].m = make(map[uint32]*inodeState)
	}
	for i := range a.deferred {
		a.deferred[i].m = make(map[uint64][]uint32)
	}
	a.flexFree = make([]paddedI64, g.flexCount())
	for gi := range a.groups {
		grp := &a.groups[gi]
		grp.lfoOrder, grp.avgOrder = -1, -1
		free, err := store.GroupFree(uint32(gi))
		if err != nil {
			return nil, fmt.Errorf("mballoc: group %d: %w", gi, err)
		}
		if free > g.clustersIn(uint32(gi)) {
			return nil, fserr.Corrupt(fmt.Sprintf("group descriptor %d", gi),
				"%d free clusters in a group of %d", free, g.clustersIn(uint32(gi)))
		}
		grp.diskFree.Store(free)
		a.free.Add(uint64(gi), int64(free))
		a.flexFree[g.flexOf(uint32(gi))].v.Add(int64(free))
		a.guessUnloaded(grp, uint32(gi), free)
	}
	return a, nil
}

// guessUnloaded files a group whose bitmap was not read yet as if all its
// free space were one run.
func (a *Allocator) guessUnloaded(g *group, gi, free uint32) {
	g.free.Store(free)
	lo, avg := -1, -1
	if free > 0 {
		g.fragments.Store(1)
		lo = min(bits.Len32(free)-1, a.geo.maxOrder)
		avg = avgFragOrder(free, a.geo.numOrders())
	}
	g.largest.Store(int32(lo))
	a.lfo.move(gi, &g.lfoOrder, lo)
	a.avg.move(gi, &g.avgOrder, avg)
}

// loadLocked reads group gi's bitmap and builds its buddy (kernel:
// ext4_mb_init_group). No preallocation or deferred free can exist in a
// group before it is loaded, so the bitmap is all there is.
func (a *Allocator) loadLocked(g *group, gi uint32) error {
	raw, err := a.store.ReadBlockBitmap(gi)
	if err != nil {
		return fmt.Errorf("mballoc: reading block bitmap of group %d: %w", gi, err)
	}
	disk := make([]uint64, a.geo.bitmapBits/64)
	wordsFromBytes(disk, raw)
	n := a.geo.clustersIn(gi)
	setRange(disk, n, a.geo.bitmapBits-n)
	b := newBuddy(n, a.geo.bitmapBits, a.geo.maxOrder)
	b.generate(disk)
	g.disk, g.b = disk, b
	g.loaded.Store(true)
	a.stats.buddies.Add(1)
	if b.free != g.diskFree.Load() {
		g.corrupt.Store(true)
		a.publishLocked(g, gi)
		return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi),
			"bitmap has %d free clusters, descriptor says %d", b.free, g.diskFree.Load())
	}
	a.publishLocked(g, gi)
	return nil
}

// lockLoaded locks group gi and loads it if needed.
func (a *Allocator) lockLoaded(gi uint32) (*group, error) {
	g := &a.groups[gi]
	g.mu.Lock()
	if !g.loaded.Load() {
		if err := a.loadLocked(g, gi); err != nil {
			g.mu.Unlock()
			return nil, err
		}
	}
	return g, nil
}

// tryLockLoaded takes group gi's lock if it is free and loads the group
// if needed; it reports false, holding nothing, when the lock is busy or
// the group cannot be loaded (the scanners that try groups pass over it).
func (a *Allocator) tryLockLoaded(g *group, gi uint32) bool {
	return g.mu.TryLock() && a.loadedOrUnlock(g, gi)
}

// lockLoadedSoon is tryLockLoaded that waits a little for a busy lock
// (groupLock.lockSoon).
func (a *Allocator) lockLoadedSoon(g *group, gi uint32) bool {
	return g.mu.lockSoon() && a.loadedOrUnlock(g, gi)
}

// loadedOrUnlock loads locked group gi if needed; if it cannot be loaded
// it unlocks it and reports false.
func (a *Allocator) loadedOrUnlock(g *group, gi uint32) bool {
	if g.loaded.Load() {
		return true
	}
	if err := a.loadLocked(g, gi); err != nil {
		g.mu.Unlock()
		return false
	}
	return true
}

func (a *Allocator) countTryLockMiss(t *Tunables) {
	if t.Stats {
		a.stats.trylockMisses.Add(1)
	}
}

// publishLocked copies a group's buddy counters to its lock-free fields and
// refiles it in the order indexes (kernel: mb_set_largest_free_order,
// mb_update_avg_fragment_size).
func (a *Allocator) publishLocked(g *group, gi uint32) {
	b := g.b
	free, frags := b.free, b.fragments
	if g.corrupt.Load() {
		free, frags = 0, 0
	}
	g.free.Store(free)
	g.fragments.Store(frags)
	lo := b.largestOrder()
	g.largest.Store(int32(lo))
	if free == 0 {
		lo = -1
	}
	a.lfo.move(gi, &g.lfoOrder, lo)
	avg := -1
	if frags > 0 {
		avg = avgFragOrder(free/frags, a.geo.numOrders())
	}
	a.avg.move(gi, &g.avgOrder, avg)
}

// markDiskLocked persists a change of clusters [start, start+n) of group
// gi through the Store and moves the free counters.
func (a *Allocator) markDiskLocked(tx Tx, g *group, gi, start, n uint32, used bool) error {
	if n == 0 {
		return nil
	}
	old := g.diskFree.Load()
	var nf uint32
	if used {
		if ok, at := allClear(g.disk, start, n); !ok {
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "allocating cluster %d which is in use", at)
		}
		nf = old - n
	} else {
		if ok, at := allSet(g.disk, start, n); !ok {
			return fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "freeing cluster %d which is free", at)
		}
		nf = old + n
	}
	if err := a.store.UpdateBlockBitmap(tx, gi, start, n, used, nf); err != nil {
		return err
	}
	d := int64(n)
	if used {
		if tx != nil {
			g.noteFresh(tx.ID(), start, n)
		}
		setRange(g.disk, start, n)
		d = -d
	} else {
		clearRange(g.disk, start, n)
	}
	g.diskFree.Store(nf)
	a.free.Add(uint64(gi), d)
	// The flex group's count is shared by all its groups' writers and is
	// read only to place new directories (Orlov): it takes each group's
	// changes in batches, as percpu_counter does.
	g.flexDelta += d
	if g.flexDelta >= flexBatch || g.flexDelta <= -flexBatch {
		a.flexFree[a.geo.flexOf(gi)].v.Add(g.flexDelta)
		g.flexDelta = 0
		lockstat.Count(lockstat.AllocFlexFree)
	}
	lockstat.Count(lockstat.AllocFreeCount)
	return nil
}

// flexBatch is how far a group's free count may run ahead of its flex
// group's before the change is added there.
const flexBatch = 256

// FreeClusters returns the free clusters on disk: the value for the
// superblock's free count. It includes preallocated but unused clusters
// and clusters freed by transactions that have not committed.
func (a *Allocator) FreeClusters() int64 { return a.free.Sum() }

// GroupFreeClusters returns group gi's free clusters on disk (its
// descriptor's count).
func (a *Allocator) GroupFreeClusters(gi uint32) uint32 {
	if gi >= a.geo.groups {
		return 0
	}
	return a.groups[gi].diskFree.Load()
}

// CopyDiskBitmap writes the bits of group gi's clusters from the
// allocator's copy of its on-disk bitmap into dst (on-disk bitmap bytes,
// at least the group's clusters long), under the group's lock, leaving the
// bits past the group's clusters as they are. It returns gi's free
// clusters on disk with them, and false (writing nothing) when the group
// is not loaded: no change of it has reached the Store then. A Store that
// batches its bitmap
// writes per transaction (as jbd2 keeps one dirty buffer for many
// changes) calls it when no change can be in flight.
func (a *Allocator) CopyDiskBitmap(gi uint32, dst []byte) (free uint32, ok bool) {
	if gi >= a.geo.groups {
		return 0, false
	}
	g := &a.groups[gi]
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.loaded.Load() {
		return 0, false
	}
	n := a.geo.clustersIn(gi)
	full := int(n / 8)
	bytesFromWords(dst[:full], g.disk)
	if rest := n % 8; rest != 0 {
		mask := byte(1)<<rest - 1
		dst[full] = dst[full]&^mask | byte(g.disk[full/8]>>(8*(full%8)))&mask
	}
	return g.diskFree.Load(), true
}

// FlexFreeClusters returns the free clusters on disk of flex group f, to
// within flexBatch clusters per group of it.
func (a *Allocator) FlexFreeClusters(f uint32) int64 {
	if f >= uint32(len(a.flexFree)) {
		return 0
	}
	return a.flexFree[f].v.Load()
}

// Streams returns how many files hold allocator state (a stream goal
// slot's share, inode preallocations): each from its first stream
// allocation until DiscardInodePrealloc. Stream spreading starts when
// more than one does.
func (a *Allocator) Streams() int64 { return a.streams.Sum() }

// PendingFrees returns the clusters freed by transactions that have not
// committed yet (kernel: s_mb_free_pending).
func (a *Allocator) PendingFrees() int64 { return a.pending.Sum() }

// PendingPressure reports, from one load of each counter's centre
// (approximate), whether the clusters freed by uncommitted transactions
// are at least 1/frac of the free clusters they are counted in: the point
// where a commit, which makes them allocatable, is worth its cost.
func (a *Allocator) PendingPressure(frac int64) bool {
	p := a.pending.Read()
	return p > 0 && p*frac >= a.free.Read()
}

// Groups returns the number of block groups.
func (a *Allocator) Groups() uint32 { return a.geo.groups }

// GlobalGoals returns the number of stream goals.
func (a *Allocator) GlobalGoals() int { return len(a.goals) }

// GroupOf returns the group holding block.
func (a *Allocator) GroupOf(block uint64) uint32 {
	gi, _ := a.geo.locate(block)
	return gi
}

// InodeGoal returns the goal for the first block of a file or directory
// with no blocks yet (kernel: ext4_inode_to_goal_block with delalloc): the
// start of the inode's flex group, its second group for regular files when
// flex groups have at least 4 groups. Without InodesPerGroup in the
// geometry it returns the first data block.
func (a *Allocator) InodeGoal(ino uint32, regular bool) uint64 {
	ipg := a.geo.InodesPerGroup
	if ipg == 0 || ino == 0 {
		return uint64(a.geo.FirstDataBlock)
	}
	gi := (ino - 1) / ipg
	if a.geo.flexSize >= 4 {
		gi &^= a.geo.flexSize - 1
		if regular {
			gi++
		}
	}
	if gi >= a.geo.groups {
		gi = a.geo.groups - 1
	}
	return a.geo.blockOf(gi, 0)
}

// Load reads group gi's bitmap now if it is not loaded yet, so that a
// later Free or Allocate in the group does not meet a read error half way
// through a change (callers load what a change will touch first).
func (a *Allocator) Load(gi uint32) error {
	if gi >= a.geo.groups {
		return fmt.Errorf("mballoc: group %d out of range", gi)
	}
	g, err := a.lockLoaded(gi)
	if err != nil {
		return err
	}
	g.mu.Unlock()
	return nil
}
