package mballoc

import (
	"errors"
	"fmt"
	"math/bits"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Flags qualify a Request (kernel: EXT4_MB_HINT_*).
type Flags uint32

const (
	// FlagData marks regular file data: it enables preallocation,
	// normalization and the "best available length" criterion.
	FlagData Flags = 1 << iota
	// FlagNoPrealloc allocates exactly what is asked, no preallocation.
	FlagNoPrealloc
	// FlagGoalOnly fails unless the goal block itself is free.
	FlagGoalOnly
	// FlagMerge accepts a shorter extent at the goal (to merge with the
	// extent before it) rather than a full one elsewhere.
	FlagMerge
	// FlagTryGoal tries the goal extent before scanning.
	FlagTryGoal
	// FlagAppend marks space asked for ahead of a file's data past its
	// end (fallocate appends): the file is growing, so the request
	// streams however small the file still is, instead of going to a
	// locality group as the kernel sends a 16-block file (ext4go's own:
	// otherwise every fallocate appender starts with a stray extent).
	FlagAppend

	publicFlags = FlagData | FlagNoPrealloc | FlagGoalOnly | FlagMerge | FlagTryGoal | FlagAppend
)

// Internal flags.
const (
	flagStream     Flags = 1 << (16 + iota) // EXT4_MB_STREAM_ALLOC
	flagGroupAlloc                          // EXT4_MB_HINT_GROUP_ALLOC: locality group
	flagFirst                               // EXT4_MB_HINT_FIRST: take the first extent found
	flagStrict                              // EXT4_MB_STRICT_CHECK: do not skip busy groups
)

// Request asks for blocks for one file or for metadata (kernel:
// ext4_allocation_request). Logical and physical block numbers are in
// blocks; a zero physical neighbour means there is none.
type Request struct {
	Inode   uint32 // owner; 0 for none (no preallocation, goal hashing by 0)
	Logical uint64 // first logical block wanted
	Len     uint32 // blocks wanted; the allocation may return fewer
	Goal    uint64 // preferred physical block; 0 derives one from the neighbours or the inode
	Flags   Flags

	FileSize     uint64 // i_size in bytes
	OpenForWrite bool   // the file is open for writing (stream allocation)

	LeftLogical, LeftPhysical   uint64 // nearest mapped block before Logical
	RightLogical, RightPhysical uint64 // nearest mapped block after Logical
}

// Extent is a run of blocks.
type Extent struct {
	Start uint64
	Len   uint32
}

// End returns the block after the extent.
func (e Extent) End() uint64 { return e.Start + uint64(e.Len) }

// fex is a free extent in allocator units (kernel: ext4_free_extent).
type fex struct {
	group, start, len uint32
	logical           uint64 // logical cluster
}

type acStatus uint8

const (
	acContinue acStatus = iota
	acFound
	acBreak
)

// allocCtx is one allocation in progress (kernel: ext4_allocation_context).
type allocCtx struct {
	a     *Allocator
	t     *Tunables
	tx    Tx
	ino   uint32
	flags Flags

	fileSize      uint64
	open          bool
	lleft, lright uint64 // neighbours, logical clusters
	pleft, pright uint64 // neighbours, physical blocks (0: none)
	o, g, b, f    fex    // original request, goal, best found, final
	gStart        bool   // g.start is meaningful (false for stream goals)
	origGoalLen   uint32
	cr            Criterion
	order2        int
	found         int
	crFound       [numCriteria]int
	status        acStatus
	groupsScanned int
	busy          int // groups passed over because their lock was busy
	considered    int // groups whose lock it tried or took (the goal, preallocations, scans)
	firstErr      error
	lg            *localityGroup
	used          fex       // what the caller gets
	newPA         *prealloc // created by this allocation
	emptied       *prealloc // used up by this allocation
	streamStart   int64     // group a stream allocation started from, -1 if none
}

// Allocate finds and marks used up to req.Len blocks (kernel:
// ext4_mb_new_blocks). The returned extent may be shorter than asked for;
// the caller asks again for the rest. On failure the error matches
// ErrNoSpace (and syscall.ENOSPC); see NoSpaceError.
func (a *Allocator) Allocate(tx Tx, req Request) (Extent, error) {
	if req.Len == 0 {
		return Extent{}, errors.New("mballoc: zero-length request")
	}
	ac := allocCtx{a: a, t: a.tun.Load(), tx: tx, ino: req.Inode, flags: req.Flags & publicFlags,
		fileSize: req.FileSize, open: req.OpenForWrite, streamStart: -1}
	if err := ac.init(&req); err != nil {
		return Extent{}, err
	}
	ac.groupOrFile()
	ok, err := ac.useInodePrealloc()
	if !ok && err == nil && ac.flags&flagGroupAlloc != 0 {
		// Taken only now, after the file's own preallocation, which may
		// wait for its group: held across that wait, the locality group
		// would make every small file of the others wait too.
		ac.lg = a.lockLocalityGroup(ac.ino)
		defer ac.lg.mu.Unlock()
		ok, err = ac.useGroupPrealloc()
	}
	if err != nil {
		return Extent{}, err
	}
	if !ok {
		ac.normalize()
		for retries := 0; ; {
			if err := ac.regular(); err != nil {
				return Extent{}, err
			}
			if ac.status == acFound {
				break
			}
			retries++
			if retries < 3 && ac.discardShouldRetry() {
				ac.resetForRetry()
				continue
			}
			return Extent{}, &NoSpaceError{Pending: a.pending.Sum()}
		}
		ac.collectStats()
	}
	ac.finish()
	if a.afterAlloc != nil {
		a.afterAlloc(ac.considered, ac.busy)
	}
	u := ac.used
	start := a.geo.blockOf(u.group, u.start)
	n := u.len << a.geo.clusterBits
	if a.zone != nil && a.zone.InSystemZone(start, uint64(n)) {
		return Extent{}, fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", u.group),
			"allocated blocks %d+%d overlap filesystem metadata", start, n)
	}
	return Extent{Start: start, Len: n}, nil
}

// init sets up the original request and the goal (kernel:
// ext4_mb_initialize_context, with the goal derivation of
// ext4_ext_find_goal).
func (ac *allocCtx) init(req *Request) error {
	gm := ac.a.geo
	cb := gm.clusterBits
	n := (uint64(req.Len) + uint64(gm.ClusterRatio) - 1) >> cb
	n = min(n, uint64(gm.cpg))
	goal := req.Goal
	if goal == 0 {
		switch {
		case req.LeftPhysical != 0 && req.Logical > req.LeftLogical:
			goal = req.LeftPhysical + (req.Logical - req.LeftLogical)
		case req.RightPhysical != 0 && req.RightLogical > req.Logical && req.RightPhysical >= req.RightLogical-req.Logical:
			goal = req.RightPhysical - (req.RightLogical - req.Logical)
		default:
			goal = ac.a.InodeGoal(req.Inode, req.Flags&FlagData != 0)
		}
	}
	if goal < uint64(gm.FirstDataBlock) || goal >= gm.BlocksCount {
		goal = uint64(gm.FirstDataBlock)
	}
	gi, off := gm.locate(goal)
	if off >= gm.clustersIn(gi) {
		off = 0
	}
	// Claim: shrink the request to what is free (kernel:
	// ext4_claim_free_clusters halving ar->len).
	// The centres' approximate values decide unless the request comes
	// within their slack of the free space (kernel: ext4_has_free_clusters
	// and its watermark).
	free, pending := ac.a.free, ac.a.pending
	avail := free.Read() - pending.Read()
	if avail-free.Slack()-pending.Slack() < int64(n) {
		avail = free.Sum() - pending.Sum()
	}
	for n > 0 && int64(n) > avail {
		n >>= 1
	}
	if n == 0 {
		return &NoSpaceError{Pending: ac.a.pending.Sum()}
	}
	ac.o = fex{group: gi, start: off, len: uint32(n), logical: req.Logical >> cb}
	ac.g = ac.o
	ac.gStart = true
	ac.origGoalLen = ac.g.len
	ac.lleft, ac.pleft = req.LeftLogical>>cb, req.LeftPhysical
	ac.lright, ac.pright = req.RightLogical>>cb, req.RightPhysical
	return nil
}

// groupOrFile decides between a locality group, stream allocation with an
// inode preallocation, and no preallocation (kernel: ext4_mb_group_or_file,
// with Jan Kara's fix sending small closed files to the locality group).
func (ac *allocCtx) groupOrFile() {
	if ac.flags&FlagData == 0 || ac.flags&FlagGoalOnly != 0 {
		return
	}
	gm := ac.a.geo
	groupOK := ac.t.GroupPrealloc > 0
	inodeOK := true
	size := ac.o.logical + uint64(ac.o.len)
	csize := uint64(gm.BlockSize) << gm.clusterBits
	isize := (ac.fileSize + csize - 1) / csize
	if size == isize && !ac.open {
		inodeOK = false
	}
	size = max(size, isize)
	if size<<gm.clusterBits > uint64(ac.t.StreamReq) || ac.flags&FlagAppend != 0 {
		groupOK = false
	}
	if !groupOK {
		if inodeOK {
			ac.flags |= flagStream
			ac.tryContinuation()
		} else {
			ac.flags |= FlagNoPrealloc
		}
		return
	}
	ac.flags |= flagGroupAlloc // Allocate takes the locality group
}

// tryContinuation makes a stream request that continues its file (the
// logical block right after the left neighbour, with the goal derived from
// it) try the blocks right after the neighbour before the stream goal.
// Normalized requests already do (normalize aims their window there);
// this is for the ones that are not normalized, fallocate's above all.
// The kernel sends them to the stream goal group's first free chunk,
// where the other streams of that goal get theirs, so concurrent
// fallocate appenders interleave block by block, and every allocation
// then meets the others at one group's lock. Part of
// Tunables.StreamSpread: off, and in the legacy allocator, streams go
// where the kernel sends them.
func (ac *allocCtx) tryContinuation() {
	if !ac.t.StreamSpread || ac.a.legacy || ac.flags&FlagTryGoal != 0 {
		return
	}
	if ac.pleft == 0 || ac.lleft+1 != ac.o.logical || !ac.gStart {
		return
	}
	if ac.a.geo.blockOf(ac.g.group, ac.g.start) != ac.pleft+1 {
		return // the caller chose another goal
	}
	ac.flags |= FlagTryGoal
}

// normalize grows a data request to a window the file is likely to fill,
// the extra becoming an inode preallocation (kernel:
// ext4_mb_normalize_request).
func (ac *allocCtx) normalize() {
	if ac.flags&FlagData == 0 || ac.flags&(FlagGoalOnly|FlagNoPrealloc) != 0 {
		return
	}
	gm := ac.a.geo
	if ac.flags&flagGroupAlloc != 0 {
		ac.g.len = min(max(ac.t.GroupPrealloc, ac.o.len), gm.cpg)
		ac.origGoalLen = ac.g.len
		return
	}
	cbits := gm.blkBits + gm.clusterBits // bytes per cluster, log2
	const kib, mib = 1 << 10, 1 << 20
	size := (ac.o.logical + uint64(ac.o.len)) << cbits
	size = max(size, ac.fileSize)
	maxb := uint64(2) << gm.blkBits
	nrl := func(req, limit, chunk uint64) bool { return req <= limit || maxb <= chunk }
	var startOff uint64
	lbyte := ac.o.logical << cbits
	switch {
	case size <= 16*kib:
		size = 16 * kib
	case size <= 32*kib:
		size = 32 * kib
	case size <= 64*kib:
		size = 64 * kib
	case size <= 128*kib:
		size = 128 * kib
	case size <= 256*kib:
		size = 256 * kib
	case size <= 512*kib:
		size = 512 * kib
	case size <= mib:
		size = mib
	case nrl(size, 4*mib, 2*kib):
		startOff = lbyte >> 21 << 21
		size = 2 * mib
	case nrl(size, 8*mib, 4*kib):
		startOff = lbyte >> 22 << 22
		size = 4 * mib
	case nrl(uint64(ac.o.len)<<gm.clusterBits, (8*mib)>>gm.blkBits, 8*kib):
		startOff = lbyte >> 23 << 23
		size = 8 * mib
	default:
		startOff = lbyte
		size = uint64(ac.o.len) << cbits
	}
	sz := max(size>>cbits, 1)
	start := startOff >> cbits
	// Stay within the group-sized window of the logical block.
	if gs := ac.o.logical - ac.o.logical%uint64(gm.cpg); start < gs {
		start = gs
	}
	const maxLogical = 1<<32 - 1 // EXT_MAX_BLOCKS
	if start+sz > maxLogical>>gm.clusterBits {
		sz = maxLogical>>gm.clusterBits - start
	}
	// Do not cover mapped neighbours.
	if ac.pleft != 0 && start <= ac.lleft {
		if ac.lleft+1-start >= sz {
			return
		}
		sz -= ac.lleft + 1 - start
		start = ac.lleft + 1
	}
	if ac.pright != 0 && start+sz-1 >= ac.lright {
		if start+sz-ac.lright >= sz {
			return
		}
		sz -= start + sz - ac.lright
	}
	sz = min(sz, uint64(gm.cpg))
	end := start + sz
	// Nor existing preallocations of the inode.
	if is := ac.a.inodeState(ac.ino, false); is != nil {
		var ok bool
		if start, end, ok = is.adjustOverlap(ac.o.logical, start, end); !ok {
			return
		}
	}
	if end <= start || start > ac.o.logical || end <= ac.o.logical || end-start < uint64(ac.o.len) {
		return
	}
	ac.g.logical = start
	ac.g.len = uint32(end - start)
	ac.origGoalLen = ac.g.len
	// A window that ends where the right neighbour starts, or starts right
	// after the left one, aims at the physically adjacent blocks.
	rb := uint64(ac.g.len) << gm.clusterBits
	if ac.pright != 0 && ac.lright == end && ac.pright >= rb && ac.pright-rb >= uint64(gm.FirstDataBlock) {
		ac.setGoalBlock(ac.pright - rb)
	}
	if ac.pleft != 0 && ac.lleft+1 == start && ac.pleft+1 < gm.BlocksCount {
		ac.setGoalBlock(ac.pleft + 1)
	}
}

func (ac *allocCtx) setGoalBlock(block uint64) {
	gm := ac.a.geo
	if block < uint64(gm.FirstDataBlock) || block >= gm.BlocksCount {
		return
	}
	gi, off := gm.locate(block)
	if off >= gm.clustersIn(gi) {
		return
	}
	ac.g.group, ac.g.start = gi, off
	ac.gStart = true
	ac.flags |= FlagTryGoal
}

// regular is the search over groups (kernel: ext4_mb_regular_allocator).
func (ac *allocCtx) regular() error {
	a := ac.a
	if err := ac.findByGoal(); err != nil || ac.status == acFound {
		return err
	}
	if ac.flags&FlagGoalOnly != 0 {
		return nil
	}
	ac.order2 = 0
	if i := bits.Len32(ac.g.len); uint32(i) >= ac.t.Order2Req && i <= a.geo.numOrders() && ac.g.len&(ac.g.len-1) == 0 {
		ac.order2 = i - 1
	}
	if ac.flags&flagStream != 0 {
		ac.g.group, ac.g.start, ac.gStart = a.loadStreamGoal(ac.ino)
		ac.flags &^= FlagTryGoal
		ac.streamStart = int64(ac.g.group)
		if ac.t.StreamSpread && !a.legacy {
			if err := ac.spreadStream(); err != nil || ac.status == acFound {
				return err
			}
		}
	}
	ac.cr = CrGoalLenFast
	if ac.order2 > 0 {
		ac.cr = CrPower2Aligned
	}
	for {
		for ac.cr < numCriteria {
			if err := ac.scanGroups(); err != nil {
				return err
			}
			if ac.status != acContinue {
				break
			}
		}
		if ac.b.len > 0 && ac.status != acFound && ac.flags&flagFirst == 0 {
			// The best extent seen was not taken (limits reached or a
			// later group was better but smaller): take it now if nobody
			// else did meanwhile.
			if err := ac.tryBestFound(); err != nil {
				return err
			}
			if ac.status != acFound {
				a.stats.lostChunks.Add(1)
				ac.b = fex{}
				ac.status = acContinue
				ac.flags |= flagFirst
				ac.cr = CrAnyFree
				continue
			}
		}
		if ac.status != acFound && ac.busy > 0 && ac.flags&flagStrict == 0 {
			// Nothing was found but busy groups were passed over: go
			// over the groups once more, waiting for each lock (the
			// bounded wait that ends every search; see the package
			// comment on progress).
			ac.b = fex{}
			ac.status = acContinue
			ac.flags |= flagStrict | flagFirst
			ac.cr = CrAnyFree
			continue
		}
		break
	}
	if ac.status == acFound && ac.t.Stats {
		a.stats.hits[min(ac.cr, CrAnyFree)].Add(1)
	}
	if ac.status != acFound && ac.firstErr != nil {
		return ac.firstErr
	}
	return nil
}

// findByGoal tries the goal extent itself (kernel: ext4_mb_find_by_goal).
func (ac *allocCtx) findByGoal() error {
	if ac.flags&(FlagTryGoal|FlagGoalOnly) == 0 || !ac.gStart {
		return nil
	}
	gi := ac.g.group
	g := &ac.a.groups[gi]
	if g.free.Load() == 0 || g.corrupt.Load() {
		return nil
	}
	ac.considered++
	// The goal is the file's own continuation (or where its caller wants
	// it): giving it up would cut the file, for good, to save a wait that
	// ends when the holder runs again. So this waits, as the kernel does,
	// but parked (groupLock.Lock), never spinning.
	g, err := ac.a.lockLoaded(gi)
	if err != nil {
		if ac.flags&FlagGoalOnly != 0 {
			return err
		}
		return nil
	}
	defer g.mu.Unlock()
	if g.corrupt.Load() {
		return nil
	}
	n, err := g.b.findExtent(ac.g.start, ac.g.len)
	if err != nil {
		ac.markCorrupt(g, gi, err)
		return nil
	}
	if n >= ac.g.len || (n > 0 && ac.flags&FlagMerge != 0) {
		ac.found++
		ac.b = fex{group: gi, start: ac.g.start, len: n}
		return ac.useBestFound(g, gi)
	}
	return nil
}

// tryBestFound takes the best extent seen if it is still free (kernel:
// ext4_mb_try_best_found).
func (ac *allocCtx) tryBestFound() error {
	gi := ac.b.group
	g := &ac.a.groups[gi]
	ac.considered++
	if !ac.a.lockLoadedSoon(g, gi) {
		// Taken as lost: the last criterion, which waits, comes next.
		ac.a.countTryLockMiss(ac.t)
		return nil
	}
	defer g.mu.Unlock()
	if g.corrupt.Load() {
		return nil
	}
	n, err := g.b.findExtent(ac.b.start, ac.b.len)
	if err != nil {
		ac.markCorrupt(g, gi, err)
		return nil
	}
	if n > 0 {
		ac.b.len = n
		return ac.useBestFound(g, gi)
	}
	return nil
}

func (ac *allocCtx) markCorrupt(g *group, gi uint32, err error) {
	g.corrupt.Store(true)
	ac.a.publishLocked(g, gi)
	if ac.firstErr == nil {
		ac.firstErr = fserr.Corrupt(fmt.Sprintf("block bitmap of group %d", gi), "%v", err)
	}
}

// useBestFound takes ac.b from group gi, whose lock is held: it marks the
// extent used in the buddy, persists the part the caller gets and turns the
// rest into a preallocation (kernel: ext4_mb_use_best_found,
// ext4_mb_new_preallocation, ext4_mb_mark_diskspace_used).
func (ac *allocCtx) useBestFound(g *group, gi uint32) error {
	a := ac.a
	ac.b.len = min(ac.b.len, ac.g.len)
	ac.b.logical = ac.g.logical
	g.b.markUsed(ac.b.start, ac.b.len)
	used := ac.b
	var pa *prealloc
	if ac.o.len < ac.b.len {
		pa = &prealloc{group: gi, ino: ac.ino, bucket: -1}
		if ac.flags&flagGroupAlloc != 0 {
			pa.kind = paGroup
			pa.lg = ac.lg
			used.len = ac.o.len
			pa.start.Store(ac.b.start + used.len)
			pa.free.Store(ac.b.len - used.len)
		} else {
			pa.kind = paInode
			pa.lstart = ac.inodePAStart()
			pa.start.Store(ac.b.start)
			pa.len = ac.b.len
			off := uint32(ac.o.logical - pa.lstart)
			used.start = ac.b.start + off
			used.len = min(ac.b.len-off, ac.o.len)
			used.logical = ac.o.logical
			pa.free.Store(ac.b.len - used.len)
		}
		g.pas = append(g.pas, pa)
	}
	if err := a.markDiskLocked(ac.tx, g, gi, used.start, used.len, true); err != nil {
		if pa != nil {
			g.pas = g.pas[:len(g.pas)-1]
		}
		if ferr := g.b.freeRange(ac.b.start, ac.b.len); ferr != nil {
			g.corrupt.Store(true)
		}
		a.publishLocked(g, gi)
		return err
	}
	a.publishLocked(g, gi)
	ac.f = ac.b
	ac.used = used
	ac.newPA = pa
	ac.status = acFound
	if ac.flags&flagStream != 0 {
		a.storeStreamGoal(ac.ino, gi, ac.b.start)
	}
	if pa != nil && ac.t.Stats {
		a.stats.preallocated.Add(uint64(pa.free.Load()))
	}
	return nil
}

// inodePAStart chooses the logical start of a new inode preallocation of
// ac.b.len clusters so that it covers the request and lies within the
// normalized window (kernel: ext4_mb_new_inode_pa).
func (ac *allocCtx) inodePAStart() uint64 {
	if ac.b.len >= ac.origGoalLen {
		return ac.g.logical
	}
	goalEnd := ac.g.logical + uint64(ac.origGoalLen)
	n := uint64(ac.b.len)
	if goalEnd >= n {
		if l := goalEnd - n; ac.o.logical >= l {
			return l
		}
	}
	if ac.o.logical+uint64(ac.o.len) <= ac.g.logical+n {
		return ac.g.logical
	}
	return ac.o.logical
}

// discardShouldRetry frees preallocations after a failed search and says
// whether searching again may help (kernel:
// ext4_mb_discard_preallocations_should_retry).
func (ac *allocCtx) discardShouldRetry() bool {
	if freed := ac.a.discardPreallocations(ac.o.len); freed > 0 {
		ac.a.stats.enospcRetries.Add(1)
		return true
	}
	if ac.flags&flagStrict == 0 {
		ac.flags |= flagStrict
		ac.a.stats.enospcRetries.Add(1)
		return true
	}
	return false
}

func (ac *allocCtx) resetForRetry() {
	ac.status = acContinue
	ac.b = fex{}
	ac.found = 0
	ac.g.len = ac.origGoalLen
}

// collectStats adds a finished search to the counters (kernel:
// ext4_mb_collect_stats).
func (ac *allocCtx) collectStats() {
	if !ac.t.Stats {
		return
	}
	s := &ac.a.stats
	s.requests.Add(1)
	s.allocated.Add(uint64(ac.used.len))
	if ac.used.len >= ac.o.len {
		s.success.Add(1)
	}
	s.extentsScanned.Add(uint64(ac.found))
	for i, n := range ac.crFound {
		if n > 0 {
			s.crExtents[i].Add(uint64(n))
		}
	}
	s.groupsScanned.Add(uint64(ac.groupsScanned))
	if ac.streamStart >= 0 {
		if int64(ac.f.group) == ac.streamStart {
			s.streamGoals.Add(1)
		}
	} else if ac.gStart && ac.g.start == ac.f.start && ac.g.group == ac.f.group {
		s.goals.Add(1)
	}
	if ac.f.len == ac.origGoalLen {
		s.lenGoals.Add(1)
	}
	if ac.found > int(ac.t.MaxToScan) {
		s.breaks.Add(1)
	}
}

func bitsLen(x uint32) int { return bits.Len32(x) }
