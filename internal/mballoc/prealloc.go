package mballoc

import (
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

type paKind uint8

const (
	paInode paKind = iota // MB_INODE_PA: a window of one file, used by logical block
	paGroup               // MB_GROUP_PA: locality group space, used from its start
)

// prealloc is a preallocation (kernel: ext4_prealloc_space): clusters
// marked used in the buddy but not on disk, kept for later requests.
//
// kind, group, ino, lstart, len and lg never change. free, start (for
// locality-group ones) and deleted change only under the group's lock;
// they are atomics so that lookups may read them as hints without it.
type prealloc struct {
	kind   paKind
	group  uint32
	ino    uint32
	lstart uint64 // inode PA: logical cluster of start
	len    uint32 // inode PA: clusters covered
	lg     *localityGroup

	start   atomic.Uint32 // first cluster (inode PA) or first unused cluster (group PA)
	free    atomic.Uint32 // unused clusters
	deleted atomic.Bool

	bucket int // locality group list it is on, under lg.listMu; -1 none
}

// paBuckets is the number of locality-group lists, by order of free space
// (kernel: PREALLOC_TB_SIZE).
const paBuckets = 10

// localityGroup holds preallocations shared by small files (kernel:
// ext4_locality_group, one per CPU). mu is held across a whole small-file
// allocation; listMu guards the lists, which others touch when they discard
// preallocations.
type localityGroup struct {
	mu     lockstat.Mutex[lockstat.MAllocLocality]
	listMu lockstat.Mutex[lockstat.MAllocLocality]
	lists  [paBuckets][]*prealloc
	_      [cacheLine * pad.On]byte
}

// lockLocalityGroup picks and locks a locality group for a small-file
// allocation of inode ino. The kernel uses the current CPU's; Go has no CPU
// identity, so the inode number picks it: a file's small allocations share
// one group, and writers of different files mostly use different ones. A
// busy group is passed over for a free one rather than waited for.
func (a *Allocator) lockLocalityGroup(ino uint32) *localityGroup {
	n := uint32(len(a.lgs))
	h := ino % n
	for i := uint32(0); i < n; i++ {
		if lg := &a.lgs[(h+i)%n]; lg.mu.TryLock() {
			return lg
		}
	}
	a.lgs[h].mu.Lock()
	return &a.lgs[h]
}

// inodeState holds one file's preallocations, sorted by logical start
// (kernel: i_prealloc_node under i_prealloc_lock). Deleted ones are pruned
// lazily.
type inodeState struct {
	mu  sync.Mutex
	pas []*prealloc
	// A line of its own (64 bytes, a size class whose objects start 64
	// bytes apart): the states of files created one after the other
	// shared lines, and their writers took each other's lock line on
	// every allocation. Sized from the fields: a slice is 12 bytes on
	// 32-bit systems, 24 on 64-bit.
	_ [(cacheLine - unsafe.Sizeof(sync.Mutex{}) - unsafe.Sizeof([]*prealloc(nil))) * pad.On]byte
}

type inodeShard struct {
	mu lockstat.Mutex[lockstat.MAllocInodePA]
	m  map[uint32]*inodeState
	_  [cacheLine * pad.On]byte
}

func (a *Allocator) inodeState(ino uint32, create bool) *inodeState {
	sh := &a.inodes[shard.Index(uint64(ino), len(a.inodes))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	is := sh.m[ino]
	if is == nil && create {
		is = &inodeState{}
		sh.m[ino] = is
		a.streams.Add(uint64(ino), 1)
		lockstat.Count(lockstat.AllocStreams)
	}
	return is
}

func (is *inodeState) prune() {
	is.pas = slices.DeleteFunc(is.pas, func(p *prealloc) bool { return p.deleted.Load() })
}

// find returns the live preallocation covering logical cluster l.
func (is *inodeState) find(l uint64) *prealloc {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.prune()
	i, _ := slices.BinarySearchFunc(is.pas, l, func(p *prealloc, l uint64) int {
		if p.lstart <= l {
			return -1
		}
		return 1
	})
	if i == 0 {
		return nil
	}
	p := is.pas[i-1]
	if l < p.lstart+uint64(p.len) {
		return p
	}
	return nil
}

// adjustOverlap trims the window [start, end) so that it does not cover
// the inode's live preallocations around logical cluster l (kernel:
// ext4_mb_pa_adjust_overlap). It reports false if one covers l itself.
func (is *inodeState) adjustOverlap(l, start, end uint64) (uint64, uint64, bool) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.prune()
	for _, p := range is.pas {
		pe := p.lstart + uint64(p.len)
		switch {
		case p.lstart <= l && l < pe:
			return start, end, false
		case pe <= l && pe > start:
			start = pe
		case p.lstart > l && p.lstart < end:
			end = p.lstart
		}
	}
	return start, end, true
}

func (is *inodeState) insert(pa *prealloc) {
	is.mu.Lock()
	defer is.mu.Unlock()
	i, _ := slices.BinarySearchFunc(is.pas, pa.lstart, func(p *prealloc, l uint64) int {
		if p.lstart < l {
			return -1
		}
		return 1
	})
	is.pas = slices.Insert(is.pas, i, pa)
}

func (is *inodeState) remove(pa *prealloc) {
	is.mu.Lock()
	defer is.mu.Unlock()
	if i := slices.Index(is.pas, pa); i >= 0 {
		is.pas = slices.Delete(is.pas, i, i+1)
	}
}

// useInodePrealloc serves the request from the file's own preallocation if
// one covers its logical block (kernel: ext4_mb_use_preallocated, the
// inode half; the locality-group half is useGroupPrealloc).
func (ac *allocCtx) useInodePrealloc() (bool, error) {
	if ac.flags&FlagData == 0 {
		return false, nil
	}
	if is := ac.a.inodeState(ac.ino, false); is != nil {
		if pa := is.find(ac.o.logical); pa != nil {
			return ac.useInodePA(pa)
		}
	}
	return false, nil
}

// useGroupPrealloc serves a small-file request, with its locality group
// locked: from a hole (Tunables.HoleFit), or from the group's
// preallocations.
func (ac *allocCtx) useGroupPrealloc() (bool, error) {
	if ac.flags&FlagData == 0 {
		return false, nil
	}
	if ac.t.HoleFit && !ac.a.legacy {
		if ok, err := ac.holeFit(); ok || err != nil {
			return ok, err
		}
	}
	return ac.useGroupPA()
}

// useInodePA allocates the clusters of pa that correspond to the request's
// logical blocks (kernel: ext4_mb_use_inode_pa).
func (ac *allocCtx) useInodePA(pa *prealloc) (bool, error) {
	a := ac.a
	gi := pa.group
	g := &a.groups[gi]
	ac.considered++
	// The file's own blocks, which nobody else may take: waited for
	// (parked, see findByGoal) rather than given up for an extent
	// elsewhere.
	g.mu.Lock()
	defer g.mu.Unlock()
	if pa.deleted.Load() || pa.free.Load() == 0 {
		return false, nil
	}
	off := uint32(ac.o.logical - pa.lstart)
	start := pa.start.Load() + off
	n := min(pa.len-off, ac.o.len)
	if ac.flags&FlagGoalOnly != 0 && (gi != ac.g.group || start != ac.g.start || n < ac.g.len) {
		return false, nil
	}
	if n > pa.free.Load() {
		return false, nil
	}
	if err := a.markDiskLocked(ac.tx, g, gi, start, n, true); err != nil {
		return false, err
	}
	if pa.free.Add(^(n - 1)) == 0 {
		a.deletePALocked(g, pa)
		ac.emptied = pa
	}
	ac.used = fex{group: gi, start: start, len: n, logical: ac.o.logical}
	ac.status = acFound
	if ac.t.Stats { // a shared line: not written per allocation unless asked
		a.stats.inodePAHits.Add(1)
	}
	return true, nil
}

// useGroupPA allocates from the front of the locality group's
// preallocation nearest the goal that has room (kernel:
// ext4_mb_use_group_pa, ext4_mb_check_group_pa).
func (ac *allocCtx) useGroupPA() (bool, error) {
	a, lg := ac.a, ac.lg
	order := min(bits.Len32(ac.o.len)-1, paBuckets-1)
	goal := a.geo.blockOf(ac.g.group, ac.g.start)
	var best *prealloc
	var bestDist uint64
	lg.listMu.Lock()
	for i := order; i < paBuckets; i++ {
		for _, pa := range lg.lists[i] {
			if pa.deleted.Load() || pa.free.Load() < ac.o.len {
				continue
			}
			p := a.geo.blockOf(pa.group, pa.start.Load())
			d := max(p, goal) - min(p, goal)
			if best == nil || d < bestDist {
				best, bestDist = pa, d
			}
		}
	}
	lg.listMu.Unlock()
	if best == nil {
		return false, nil
	}
	pa := best
	gi := pa.group
	g := &a.groups[gi]
	ac.considered++
	if !g.mu.lockSoon() {
		// The holder is not running: a new preallocation is carved
		// elsewhere rather than waiting for it.
		a.countTryLockMiss(ac.t)
		return false, nil
	}
	if pa.deleted.Load() || pa.free.Load() < ac.o.len {
		g.mu.Unlock()
		return false, nil
	}
	start := pa.start.Load()
	if err := a.markDiskLocked(ac.tx, g, gi, start, ac.o.len, true); err != nil {
		g.mu.Unlock()
		return false, err
	}
	pa.start.Store(start + ac.o.len)
	if pa.free.Add(^(ac.o.len - 1)) == 0 {
		a.deletePALocked(g, pa)
		ac.emptied = pa
	}
	g.mu.Unlock()
	if ac.emptied == nil {
		// Refile by its new free size (kernel: ext4_mb_add_n_trim).
		ac.a.addToLocalityGroup(lg, pa)
	}
	ac.used = fex{group: gi, start: start, len: ac.o.len, logical: ac.o.logical}
	ac.status = acFound
	if ac.t.Stats {
		a.stats.groupPAHits.Add(1)
	}
	return true, nil
}

// finish links a new preallocation to its owner and unlinks one used up.
func (ac *allocCtx) finish() {
	a := ac.a
	if pa := ac.emptied; pa != nil {
		a.unlinkPA(pa)
	}
	pa := ac.newPA
	if pa == nil {
		return
	}
	if pa.kind == paInode {
		a.inodeState(pa.ino, true).insert(pa)
	} else {
		a.addToLocalityGroup(ac.lg, pa)
	}
}

// addToLocalityGroup files pa by its free space, smallest first, and trims
// a list that grew past 8 entries down to 5 (kernel: ext4_mb_add_n_trim,
// ext4_mb_discard_lg_preallocations). The caller holds lg.mu.
func (a *Allocator) addToLocalityGroup(lg *localityGroup, pa *prealloc) {
	var victims []*prealloc
	lg.listMu.Lock()
	if pa.bucket >= 0 {
		lg.lists[pa.bucket] = slices.DeleteFunc(lg.lists[pa.bucket], func(p *prealloc) bool { return p == pa })
		pa.bucket = -1
	}
	if !pa.deleted.Load() {
		free := pa.free.Load()
		o := min(max(bits.Len32(free)-1, 0), paBuckets-1)
		l := slices.DeleteFunc(lg.lists[o], func(p *prealloc) bool { return p.deleted.Load() })
		i := 0
		for i < len(l) && l[i].free.Load() <= free {
			i++
		}
		l = slices.Insert(l, i, pa)
		pa.bucket = o
		if len(l) > 8 {
			for len(l) > 5 {
				v := l[0]
				if v == pa {
					break
				}
				v.bucket = -1
				victims = append(victims, v)
				l = l[1:]
			}
		}
		lg.lists[o] = l
	}
	lg.listMu.Unlock()
	for _, v := range victims {
		a.discardPA(v)
	}
}

// discardPA gives an unlinked preallocation's unused clusters back.
func (a *Allocator) discardPA(pa *prealloc) int {
	g, err := a.lockLoaded(pa.group)
	if err != nil {
		return 0
	}
	n := 0
	if !pa.deleted.Load() {
		n = a.releasePALocked(g, pa)
		a.deletePALocked(g, pa)
		a.publishLocked(g, pa.group)
	}
	g.mu.Unlock()
	return n
}

// deletePALocked marks pa deleted and takes it off its group's list.
func (a *Allocator) deletePALocked(g *group, pa *prealloc) {
	pa.deleted.Store(true)
	if i := slices.Index(g.pas, pa); i >= 0 {
		g.pas = slices.Delete(g.pas, i, i+1)
	}
}

// unlinkPA takes a deleted pa off its inode's or locality group's list.
func (a *Allocator) unlinkPA(pa *prealloc) {
	if pa.kind == paInode {
		if is := a.inodeState(pa.ino, false); is != nil {
			is.remove(pa)
		}
		return
	}
	lg := pa.lg
	lg.listMu.Lock()
	if pa.bucket >= 0 {
		lg.lists[pa.bucket] = slices.DeleteFunc(lg.lists[pa.bucket], func(p *prealloc) bool { return p == pa })
		pa.bucket = -1
	}
	lg.listMu.Unlock()
}

// releasePALocked returns pa's unused clusters to the buddy (kernel:
// ext4_mb_release_inode_pa, ext4_mb_release_group_pa). For an inode
// preallocation the unused clusters are those clear on disk.
func (a *Allocator) releasePALocked(g *group, pa *prealloc) int {
	freed := 0
	start := pa.start.Load()
	if pa.kind == paGroup {
		n := pa.free.Load()
		if n > 0 {
			if err := g.b.freeRange(start, n); err != nil {
				g.corrupt.Store(true)
			} else {
				freed = int(n)
			}
		}
	} else {
		end := start + pa.len
		for c := start; c < end; {
			c = nextZero(g.disk, c, end)
			if c >= end {
				break
			}
			e := nextOne(g.disk, c, end)
			if err := g.b.freeRange(c, e-c); err != nil {
				g.corrupt.Store(true)
			} else {
				freed += int(e - c)
			}
			c = e
		}
	}
	pa.free.Store(0)
	a.stats.discarded.Add(uint64(freed))
	return freed
}

// discardGroupPAs discards all preallocations of group gi (kernel:
// ext4_mb_discard_group_preallocations) and returns the clusters freed.
func (a *Allocator) discardGroupPAs(gi uint32) int {
	g := &a.groups[gi]
	g.mu.Lock()
	if len(g.pas) == 0 {
		g.mu.Unlock()
		return 0
	}
	victims := g.pas
	g.pas = nil
	freed := 0
	for _, pa := range victims {
		if !pa.deleted.Load() {
			freed += a.releasePALocked(g, pa)
			pa.deleted.Store(true)
		}
	}
	a.publishLocked(g, gi)
	g.mu.Unlock()
	for _, pa := range victims {
		a.unlinkPA(pa)
	}
	return freed
}

// discardPreallocations discards preallocations group by group until
// needed clusters came back (kernel: ext4_mb_discard_preallocations).
func (a *Allocator) discardPreallocations(needed uint32) int {
	freed := 0
	for gi := uint32(0); gi < a.geo.groups && freed < int(needed); gi++ {
		freed += a.discardGroupPAs(gi)
	}
	return freed
}

// DiscardPreallocations discards every preallocation and returns the
// clusters given back.
func (a *Allocator) DiscardPreallocations() int {
	freed := 0
	for gi := uint32(0); gi < a.geo.groups; gi++ {
		freed += a.discardGroupPAs(gi)
	}
	return freed
}

// DiscardInodePreallocOpen gives back the unused preallocated blocks of
// inode ino (kernel: ext4_discard_preallocations) and keeps its state: the
// file is still open and still a stream. The filesystem calls it before
// truncating or punching a hole in it; fallocate2's loop truncates every
// 128 steps, and forgetting the state made each truncate's next
// allocation allocate it again.
func (a *Allocator) DiscardInodePreallocOpen(ino uint32) {
	is := a.inodeState(ino, false)
	if is == nil {
		return
	}
	// Discarded after is.mu is released, as DiscardInodePrealloc does; a
	// file has a few, so a buffer on the stack holds them.
	var buf [8]*prealloc
	is.mu.Lock()
	pas := append(buf[:0], is.pas...)
	clear(is.pas)
	is.pas = is.pas[:0]
	is.mu.Unlock()
	for _, pa := range pas {
		a.discardPA(pa)
	}
}

// DiscardInodePrealloc gives back the unused preallocated blocks of inode
// ino (kernel: ext4_discard_preallocations) and forgets its state: it no
// longer counts as a stream. The filesystem calls it on the last close of
// a file that was written and when the inode is freed.
func (a *Allocator) DiscardInodePrealloc(ino uint32) {
	sh := &a.inodes[shard.Index(uint64(ino), len(a.inodes))]
	sh.mu.Lock()
	is := sh.m[ino]
	delete(sh.m, ino)
	sh.mu.Unlock()
	if is == nil {
		return
	}
	a.streams.Add(uint64(ino), -1)
	lockstat.Count(lockstat.AllocStreams)
	is.mu.Lock()
	pas := is.pas
	is.pas = nil
	is.mu.Unlock()
	for _, pa := range pas {
		a.discardPA(pa)
	}
}

// loadStreamGoal returns where a stream allocation for ino starts (kernel:
// s_mb_last_groups[ino % n], read with READ_ONCE; before the 2025 series a
// single s_mb_last_group/start under s_md_lock).
func (a *Allocator) loadStreamGoal(ino uint32) (uint32, uint32, bool) {
	if a.legacy {
		a.legacyGoal.Lock()
		defer a.legacyGoal.Unlock()
		return a.legacyGoal.group, a.legacyGoal.start, true
	}
	return a.goals[ino%uint32(len(a.goals))].v.Load(), 0, false
}

func (a *Allocator) storeStreamGoal(ino, gi, start uint32) {
	if a.legacy {
		a.legacyGoal.Lock()
		a.legacyGoal.group, a.legacyGoal.start = gi, start
		a.legacyGoal.Unlock()
		return
	}
	// Written only when it changes: the streams sharing a slot would
	// otherwise take the line from each other on every allocation, though
	// they mostly store the group it already holds.
	if slot := &a.goals[ino%uint32(len(a.goals))].v; slot.Load() != gi {
		slot.Store(gi)
		lockstat.Count(lockstat.AllocStreamGoal)
	}
}
