package ext4go

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/pad"
)

// Delayed allocation (kernel: fs/ext4/inode.c ext4_da_write_begin,
// ext4_da_reserve_space, ext4_da_writepages / mpage_map_and_submit_extent,
// and the delayed extents of fs/ext4/extents_status.c).
//
// A write into a hole of a regular, extent-mapped file allocates nothing:
// it reserves the space (w.daReserved, the kernel's
// s_dirtyclusters_counter, with an allowance for the extent-tree blocks
// the later insert may need) and keeps the data in memory, block by block,
// in the node's daState. A write that the free space cannot cover fails
// there with ENOSPC, as it would have allocating. The blocks are chosen
// when the data goes to disk (flushDelayed), one allocation request per
// contiguous dirty run with the file's size known, so a file written in
// many small writes and closed gets one extent: a small closed file goes
// to the locality group, a big one streams (mballoc's groupOrFile sees
// FileSize and OpenForWrite).
//
// Not delayed (delayable): block-mapped files (ext2/ext3 lay out their
// indirect blocks with the data, placeIndirect, which needs the allocation
// at the write), inline data (the data lives in the inode until it
// outgrows it; uninlineFile writes it out directly), data-journalled files
// (their data goes through the journal, as the kernel's
// ext4_should_journal_data refuses delalloc), EA inodes, fast-commit
// replays and reproducible image builds (their allocations must follow the
// sequence of changes only). Writes over mapped blocks overwrite them in
// place and unwritten (fallocated) blocks are converted at the write, as
// before: only holes are delayed. Near a full filesystem, writes stop
// delaying (kernel: ext4_nonda_switch) so the last free blocks are handed
// out exactly.
//
// When delayed data goes to disk:
//   - File.Close of a File that may write (kernel: writeback after the
//     last close; here at once, which keeps a closed file's layout known);
//   - File.Sync, FS.Sync, FS.Close;
//   - memory pressure: past Options.DelayedLimit bytes a writer flushes its
//     own file and kicks the background writeback for the rest;
//   - the background writeback (daFlusher), for data delayed longer than
//     the commit interval (kernel: dirty_expire_centisecs);
//   - before anything that needs the real mapping: fallocate (all modes:
//     preallocation, punch, zero range), File.Extents, DataRanges and
//     SEEK_DATA/SEEK_HOLE, a write that does not delay into a file that has
//     delayed blocks. Truncate does not flush: it drops the delayed blocks
//     past the new size and zeros the tail of a delayed last block (kernel:
//     ext4_truncate over delayed extents), as freeing an inode drops them
//     all with their reservation.
//
// Crash safety (data=ordered): a flush writes the data into the new blocks
// before the extent that maps them is inserted (mapNew's fill before
// Insert), in the same handle as the allocation, so a committed extent
// never shows a block whose data was not written. i_size is written at the
// write, not at the flush (unlike the kernel's i_disksize): a crash
// before the flush leaves the file its size with holes where the delayed
// data was, which reads as zeros and is consistent for e2fsck; never
// another file's stale data, because nothing was mapped.
//
// Reservation. w.daReserved counts the clusters promised to delayed data
// and their metadata allowance. Every allocation that does not spend such
// a promise (allocBlocksFor with claimed false: directories, xattrs,
// fallocate, non-delayed writes) may only take what is free beyond it, so
// a flush does not run out of space for data whose write succeeded. A
// flush that does fail (an I/O error, or space that was only free once a
// commit released it and did not come back) gives back its blocks (mapNew),
// keeps the data and its reservation for the next try, and records the
// error in daState.err: the next File.Sync, File.Close or FS.Sync reports
// it once (kernel: the mapping's errseq). FS.Close, the last chance, drops
// what it cannot write and reports it.
//
// Locks and ownership:
//   - A node's daState is owned by its mu: blocks are added, flushed and
//     dropped only under mu held exclusively, and read (readAt's overlay)
//     under mu shared. Its count is also atomic, for stat.
//   - A flush holds the node's mu exclusively, then begins the node's own
//     transaction handle (beginHot), as a write does: inode lock before
//     handle, handle before the allocator's locks. It never takes another
//     inode's lock, so writeback of one inode needs no other's.
//   - The set of nodes with delayed data (w.daShards) is sharded by inode
//     number, each shard a leaf lock taken under or without a node's mu,
//     never held while taking one. It holds its nodes strongly, so a node
//     with delayed data stays the inode's node in the cache (as the lazy
//     times' set does).
//   - Flushes of many files (FS.Sync, Close, daFlusher) take a snapshot of
//     the set, then lock each node in turn, holding no other lock or
//     handle meanwhile. A writer over the memory bound flushes only its own
//     node (whose mu it holds) and never waits for the background one.

// defaultDelayedLimit is Options.DelayedLimit's default.
const defaultDelayedLimit = 32 << 20

// daWatermark is the free clusters below which (beyond those reserved)
// writes stop delaying (kernel: EXT4_FREECLUSTERS_WATERMARK).
const daWatermark = 256

// daState is a node's delayed data.
type daState struct {
	blocks []daBlock    // sorted by lblk, each a hole in the extent tree; n.mu
	count  atomic.Int64 // len(blocks), for stat without n.mu
	meta   int64        // metadata clusters reserved for them; n.mu
	since  atomic.Int64 // when blocks last became non-empty (unix ns)
	err    error        // a flush error not yet reported; n.mu
}

// daBlock is one delayed block: its whole content (zeros where not
// written), kept from the write to the flush.
type daBlock struct {
	lblk uint32
	buf  *[]byte
}

// daShardCount shards the set of nodes with delayed data.
const daShardCount = 64

type daShard struct {
	mu    sync.Mutex
	nodes map[*node]struct{}
	_     [(pad.Line - 16) * pad.On]byte
}

// delayedBlocks is the number of n's blocks written but not yet allocated,
// counted in stat's blocks (kernel: ext4_getattr adds
// i_reserved_data_blocks).
func (n *node) delayedBlocks() int64 {
	if st := n.da.Load(); st != nil {
		return st.count.Load()
	}
	return 0
}

// hasDelayed reports whether n holds delayed blocks; n.mu is held.
func (n *node) hasDelayed() bool {
	st := n.da.Load()
	return st != nil && len(st.blocks) > 0
}

// delayable reports whether writes into holes of n may be delayed (see
// above for why the others are not). n.mu is held.
func (f *FS) delayable(in *inode.Inode) bool {
	if f.w == nil || f.opts.NoDelalloc || f.reproducible || f.opts.replaying || f.w.exclude != nil {
		return false
	}
	return in.IsRegular() && in.HasFlag(inode.FlagExtents) &&
		!in.HasFlag(inode.FlagInlineData) && !in.HasFlag(inode.FlagJournalData) && !in.HasFlag(inode.FlagEAInode)
}

// daMeta is the metadata allowance for k delayed blocks: in the worst
// case each becomes an extent of its own, so a leaf per extents-per-leaf,
// and two more for an index block and a new tree level (kernel: the old
// ext4_calc_metadata_amount, here per inode).
func (f *FS) daMeta(k int64) int64 {
	if k == 0 {
		return 0
	}
	perLeaf := (f.blockSize - 12) / 12
	return (k+perLeaf-1)/perLeaf + 2
}

// daLowSpace reports whether free space is low against the reservations,
// so that writes allocate at once (kernel: ext4_nonda_switch).
func (f *FS) daLowSpace() bool {
	free := f.w.balloc.FreeClusters()
	dirty := f.w.daReserved.Load()
	return 2*free < 3*dirty || free < dirty+daWatermark
}

// daReserve reserves k more blocks for n's delayed data (kernel:
// ext4_da_reserve_space): ENOSPC when the free space, less what is
// reserved already, cannot hold them and their metadata allowance.
func (f *FS) daReserve(st *daState, k int64) error {
	meta := f.daMeta(int64(len(st.blocks)) + k)
	need := k + meta - st.meta
	free := f.w.balloc.FreeClusters()
	if r := f.w.daReserved.Add(need); r > free {
		f.w.daReserved.Add(-need)
		return syscall.ENOSPC
	}
	st.meta = meta
	return nil
}

// daRelease gives back the reservation of k blocks leaving n's delayed
// data (flushed or dropped), with the metadata allowance they no longer
// need. The blocks must already be gone from st.blocks.
func (f *FS) daRelease(st *daState, k int64) {
	f.daReleaseRest(st, k, 0)
}

// daReleaseRest is daRelease when paid of the k blocks' data reservation
// were given back already.
func (f *FS) daReleaseRest(st *daState, k, paid int64) {
	meta := f.daMeta(int64(len(st.blocks)))
	f.w.daReserved.Add(-(k - paid + st.meta - meta))
	st.meta = meta
	st.count.Store(int64(len(st.blocks)))
	f.w.daBytes.Add(-k * f.blockSize)
}

// daBuf returns a block buffer for delayed data. An empty pool is
// refilled a slab at a time: two allocations for daSlab buffers (the
// append path allocates nothing per write, TestHotPathAllocs).
func (f *FS) daBuf() *[]byte {
	if b, ok := f.w.daPool.Get().(*[]byte); ok {
		return b
	}
	bs := int(f.blockSize)
	mem := make([]byte, daSlab*bs)
	bufs := make([][]byte, daSlab)
	for i := range bufs {
		bufs[i] = mem[i*bs : (i+1)*bs : (i+1)*bs]
		if i > 0 {
			f.w.daPool.Put(&bufs[i])
		}
	}
	return &bufs[0]
}

// daSlab is the number of block buffers daBuf makes at once.
const daSlab = 16

// daSearch returns the index of the first block of st at or after lblk.
func (st *daState) search(lblk uint32) int {
	return sort.Search(len(st.blocks), func(i int) bool { return st.blocks[i].lblk >= lblk })
}

// daWrite writes what it can of p at pos as delayed data: into blocks
// already delayed, or into a hole, reserving it. handled false means pos
// is in a mapped block, for writeChunk; lowSpace that the free space is
// too low to delay more (kernel: ext4_nonda_switch), so the caller must
// flush what is delayed and allocate at once. n.mu is held exclusively
// and f.delayable(n's inode).
func (f *FS) daWrite(n *node, p []byte, pos int64) (m int, handled, lowSpace bool, err error) {
	bs := f.blockSize
	lblk := uint32(pos / bs)
	lastBlk := uint32((pos + int64(len(p)) - 1) / bs)
	st := n.da.Load()
	if st == nil {
		st = new(daState)
		n.da.Store(st)
	}
	i := st.search(lblk)
	var nblk uint32
	if i < len(st.blocks) && st.blocks[i].lblk == lblk {
		// Already delayed: as many following delayed blocks as p covers.
		nblk = 1
		for i+int(nblk) < len(st.blocks) && lblk+nblk <= lastBlk && st.blocks[i+int(nblk)].lblk == lblk+nblk {
			nblk++
		}
		m := min(int64(len(p)), int64(lblk+nblk)*bs-pos)
		f.daCopy(st.blocks[i:i+int(nblk)], p[:m], pos)
		return int(m), true, false, nil
	}
	// Not delayed: what the tree has there. A lookup reads the tree
	// without a handle (nothing changes).
	s := pooledExtStore(f, handle{}, n.ino)
	ed := f.editor(n, n.inLocked(), s)
	mp, err := ed.Lookup(lblk)
	putExtStore(s)
	if err != nil {
		return 0, true, false, err
	}
	if !mp.Hole() {
		return 0, false, false, nil
	}
	if f.daLowSpace() {
		f.kickDelayed() // the other files' reservations too
		return 0, false, true, nil
	}
	nblk = uint32(min(uint64(lastBlk-lblk+1), mp.Len))
	if i < len(st.blocks) {
		nblk = min(nblk, st.blocks[i].lblk-lblk) // up to the next delayed block
	}
	nblk = min(nblk, uint32(max(f.w.daLimit/bs, 1)))
	// What fits, if not all: a short write, as the kernel's page by page
	// reservation gives.
	for {
		err := f.daReserve(st, int64(nblk))
		if err == nil {
			break
		}
		if nblk == 1 {
			return 0, true, false, err
		}
		nblk /= 2
	}
	// Insert nblk new blocks at i.
	old := len(st.blocks)
	st.blocks = slices.Grow(st.blocks, int(nblk))[:old+int(nblk)]
	copy(st.blocks[i+int(nblk):], st.blocks[i:old])
	for k := range nblk {
		b := f.daBuf()
		clear(*b)
		st.blocks[i+int(k)] = daBlock{lblk: lblk + k, buf: b}
	}
	if old == 0 {
		st.since.Store(time.Now().UnixNano())
		f.daRegister(n)
	}
	st.count.Store(int64(len(st.blocks)))
	f.w.daBytes.Add(int64(nblk) * bs)
	m = int(min(int64(len(p)), int64(lblk+nblk)*bs-pos))
	f.daCopy(st.blocks[i:i+int(nblk)], p[:m], pos)
	return m, true, false, nil
}

// daCopy copies p, the file bytes at pos, into the consecutive delayed
// blocks bl, the first of which holds pos.
func (f *FS) daCopy(bl []daBlock, p []byte, pos int64) {
	bs := f.blockSize
	off := pos % bs
	for _, b := range bl {
		if len(p) == 0 {
			return
		}
		c := copy((*b.buf)[off:], p)
		p, off = p[c:], 0
	}
}

// daOverlay copies into p (the file bytes at off, as read from the tree,
// where delayed blocks are holes) the delayed blocks it covers. n.mu is
// held, shared at least.
func (f *FS) daOverlay(n *node, p []byte, off int64) {
	st := n.da.Load()
	if st == nil || len(st.blocks) == 0 || len(p) == 0 {
		return
	}
	bs := f.blockSize
	end := off + int64(len(p))
	for i := st.search(uint32(off / bs)); i < len(st.blocks); i++ {
		b := st.blocks[i]
		start := int64(b.lblk) * bs
		if start >= end {
			return
		}
		from, to := max(start, off), min(start+bs, end)
		copy(p[from-off:to-off], (*b.buf)[from-start:to-start])
	}
}

// maxWritebackExtent bounds the blocks mapped by one allocation at
// writeback, as the kernel maps at most MAX_WRITEPAGES_EXTENT_LEN (2048)
// blocks per ext4_map_blocks call in ext4_writepages. A larger file is
// still laid out in one piece: the first request is normalized to a
// window (4 or 8 MiB) whose rest becomes the inode's preallocation, which
// the next requests continue. Asking for the whole dirty run at once
// instead (up to a group) sends a big file's first request after a free
// chunk of that size: at 1 KiB blocks only groups without superblock
// backups have one, and each big file starts a group of its own.
const maxWritebackExtent = 2048

// flushDelayed allocates and writes all of n's delayed blocks (kernel:
// ext4_da_writepages -> mpage_map_and_submit_extent), one allocation per
// contiguous run, with open telling the allocator whether the file is
// still being written. n.mu is held exclusively and no handle is open. A
// failure keeps the blocks not written delayed (and reserved) and is also
// recorded for the next File.Sync, File.Close or FS.Sync (daTakeErr).
func (f *FS) flushDelayed(n *node, open bool) error {
	st := n.da.Load()
	if st == nil || len(st.blocks) == 0 {
		return nil
	}
	done, retries := 0, 0
	var paid int64
	var err error
	for done < len(st.blocks) {
		run := st.blocks[done:]
		k := 1
		for k < len(run) && k < maxWritebackExtent && run[k].lblk == run[k-1].lblk+1 {
			k++
		}
		var got int
		got, err = f.daFlushRun(n, run[:k], open)
		if err != nil && got == 0 && f.retryAfterCommit(err, &retries) {
			continue
		}
		for _, b := range run[:got] {
			f.w.daPool.Put(b.buf)
		}
		// The blocks are allocated: their reservation goes at once, so
		// that they do not count twice against the free space.
		f.w.daReserved.Add(-int64(got))
		paid += int64(got)
		done += got
		if err != nil {
			break
		}
		retries = 0
	}
	// Compact what is left.
	rest := copy(st.blocks, st.blocks[done:])
	clear(st.blocks[rest:])
	st.blocks = st.blocks[:rest]
	if rest == 0 && cap(st.blocks) > 1024 {
		st.blocks = nil // a big file's array is not kept for the next
	}
	f.daReleaseRest(st, int64(done), paid)
	if rest == 0 {
		f.daUnregister(n)
	}
	if err != nil {
		err = fmt.Errorf("writing delayed data of inode %d: %w", n.ino, err)
		if st.err == nil {
			st.err = err
		}
	}
	return err
}

// daFlushRun maps and writes a prefix of run, consecutive delayed blocks,
// in one handle, and returns how many blocks it wrote.
func (f *FS) daFlushRun(n *node, run []daBlock, open bool) (int, error) {
	in := editInodeHot(n)
	h, err := f.beginHot(n)
	if err != nil {
		return 0, err
	}
	defer h.End()
	s := pooledExtStore(f, h, n.ino)
	s.claimed = true // the data's reservation pays for its blocks and tree
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	lblk := run[0].lblk
	mp, err := ed.Lookup(lblk)
	if err != nil {
		return 0, err
	}
	if !mp.Hole() {
		return 0, &CorruptError{What: "inode", Block: -1, Ino: n.ino,
			Detail: fmt.Sprintf("delayed file block %d is mapped already", lblk)}
	}
	req := mballoc.Request{
		Inode: n.ino, Logical: uint64(lblk), Len: uint32(min(uint64(len(run)), mp.Len)), Flags: mballoc.FlagData,
		FileSize: in.Size, OpenForWrite: open,
	}
	if mp.NearKnown && mp.HasLeft && mp.HasRight {
		// A hole between two extents: its whole dirty run is known, so
		// exactly it, where the neighbours put it first (the goal of
		// ext4_ext_find_goal), so that the file reads as one run once the
		// hole is filled. A preallocation window would be clipped to the
		// hole anyway, and the stream goal is elsewhere.
		req.Flags |= mballoc.FlagTryGoal | mballoc.FlagNoPrealloc
	}
	ext, err := f.mapNew(h, in, s, ed, req, &mp, false, func(ext mballoc.Extent) error {
		return f.daWriteBlocks(ext.Start, run[:ext.Len])
	})
	if err != nil {
		return 0, err
	}
	return int(ext.Len), f.setInodeHot(h, n, in)
}

// daWriteBlocks writes the delayed blocks bl into the consecutive blocks
// from pblk, gathered into large writes.
func (f *FS) daWriteBlocks(pblk uint64, bl []daBlock) error {
	if err := f.inject("write"); err != nil {
		return err
	}
	bs := int(f.blockSize)
	per := max(1, min(len(bl), (1<<20)/bs))
	buf := getScratch(per * bs)
	defer putScratch(buf)
	for len(bl) > 0 {
		k := min(len(bl), per)
		for i := range k {
			copy(buf[i*bs:], *bl[i].buf)
		}
		if err := f.checkDataWrite(int64(pblk)*int64(bs), int64(k*bs)); err != nil {
			return err
		}
		if _, err := f.dev.WriteAt(buf[:k*bs], int64(pblk)*int64(bs)); err != nil {
			return err
		}
		pblk += uint64(k)
		bl = bl[k:]
	}
	return nil
}

// daTruncate drops n's delayed blocks from file block first on, with
// their reservation, and zeros the delayed block holding byte size past
// it (kernel: truncate over delayed extents drops them, and
// ext4_block_truncate_page zeros the page's tail). n.mu is held
// exclusively.
func (f *FS) daTruncate(n *node, size int64) {
	st := n.da.Load()
	if st == nil || len(st.blocks) == 0 {
		return
	}
	bs := f.blockSize
	first := uint32(min((size+bs-1)/bs, int64(extent.MaxLogical)))
	i := st.search(first)
	if size%bs != 0 && i > 0 && st.blocks[i-1].lblk == uint32(size/bs) {
		clear((*st.blocks[i-1].buf)[size%bs:])
	}
	gone := len(st.blocks) - i
	if gone == 0 {
		return
	}
	for _, b := range st.blocks[i:] {
		f.w.daPool.Put(b.buf)
	}
	clear(st.blocks[i:])
	st.blocks = st.blocks[:i]
	f.daRelease(st, int64(gone))
	if i == 0 {
		f.daUnregister(n)
	}
}

// daTakeErr returns and forgets n's unreported flush error. n.mu is held
// exclusively.
func (f *FS) daTakeErr(n *node) error {
	st := n.da.Load()
	if st == nil || st.err == nil {
		return nil
	}
	err := st.err
	st.err = nil
	return err
}

// daSync flushes n's delayed data and returns what a flush of it failed
// with since last asked (File.Sync, File.Close). n.mu is held
// exclusively.
func (f *FS) daSync(n *node, open bool) error {
	f.flushDelayed(n, open) // recorded in st.err
	return f.daTakeErr(n)
}

// daMapped makes n's extent tree complete (its delayed blocks flushed)
// for a caller that reads or changes the mapping, taking n.mu exclusively
// only if there is something to flush; it returns with n.mu held shared
// (unlock is n.mu.RUnlock) or exclusively (n.mu.Unlock).
func (f *FS) daMapped(n *node) (unlock func(), err error) {
	n.mu.RLock()
	if !n.hasDelayed() {
		return n.mu.RUnlock, nil
	}
	n.mu.RUnlock()
	n.mu.Lock()
	if !n.freed.Load() {
		err = f.flushDelayed(n, n.writers.Load() > 0)
	}
	return n.mu.Unlock, err
}

func (f *FS) daRegister(n *node) {
	sh := &f.w.daShards[n.ino%daShardCount]
	sh.mu.Lock()
	if sh.nodes == nil {
		sh.nodes = map[*node]struct{}{}
	}
	sh.nodes[n] = struct{}{}
	sh.mu.Unlock()
}

func (f *FS) daUnregister(n *node) {
	sh := &f.w.daShards[n.ino%daShardCount]
	sh.mu.Lock()
	delete(sh.nodes, n)
	sh.mu.Unlock()
}

// daNodes returns the nodes with delayed data (a snapshot).
func (f *FS) daNodes() []*node {
	var out []*node
	for i := range f.w.daShards {
		sh := &f.w.daShards[i]
		sh.mu.Lock()
		for n := range sh.nodes {
			out = append(out, n)
		}
		sh.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ino < out[j].ino })
	return out
}

// flushAllDelayed flushes the delayed data of every node (or, with
// olderThan set, of those delayed before it), taking each node's mu in
// turn and holding nothing else. report: return (and forget) the flush
// errors recorded, as FS.Sync does; else they stay for the files' own
// Sync or Close.
func (f *FS) flushAllDelayed(olderThan time.Time, report bool) error {
	if f.w == nil {
		return nil
	}
	var first error
	for _, n := range f.daNodes() {
		st := n.da.Load()
		if !olderThan.IsZero() && st != nil && st.since.Load() > olderThan.UnixNano() {
			continue
		}
		n.mu.Lock()
		if !n.freed.Load() {
			f.flushDelayed(n, n.writers.Load() > 0)
			if report {
				if err := f.daTakeErr(n); err != nil && first == nil {
					first = err
				}
			}
		}
		n.mu.Unlock()
	}
	return first
}

// dropAllDelayed gives up the delayed data of every node, with its
// reservation (FS.Close after a flush failed).
func (f *FS) dropAllDelayed() {
	for _, n := range f.daNodes() {
		n.mu.Lock()
		f.daTruncate(n, 0)
		n.mu.Unlock()
	}
}

// kickDelayed asks the background writeback to flush everything now.
func (f *FS) kickDelayed() {
	select {
	case f.w.daKick <- struct{}{}:
	default:
	}
}

// daPressure is called by a writer after it delayed data of n: past the
// memory bound it flushes n (whose mu it holds exclusively) and kicks the
// background writeback for the other files; it never waits for them.
func (f *FS) daPressure(n *node) {
	w := f.w
	if w.daBytes.Load() <= w.daLimit {
		return
	}
	f.flushDelayed(n, n.writers.Load() > 0) // an error is recorded for the file's Sync or Close
	if w.daBytes.Load() > w.daLimit/2 {
		f.kickDelayed()
	}
}

// startDelayedWriteback starts the background writeback of delayed data
// (kernel: the flusher threads' periodic and background writeback): data
// delayed longer than the commit interval goes on each tick, all of it
// when a writer kicks.
func (f *FS) startDelayedWriteback() {
	w := f.w
	if f.reproducible || f.opts.NoDelalloc {
		return
	}
	every := f.opts.CommitInterval
	if every == 0 {
		every = 5 * time.Second
	}
	w.daStop, w.daDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(w.daDone)
		var tick <-chan time.Time
		if every > 0 {
			t := time.NewTicker(every)
			defer t.Stop()
			tick = t.C
		}
		for {
			select {
			case <-w.daStop:
				return
			case <-tick:
				f.flushAllDelayed(time.Now().Add(-every), false)
			case <-w.daKick:
				f.flushAllDelayed(time.Time{}, false)
			}
		}
	}()
}

// stopDelayedWriteback ends the background writeback and waits for it.
func (f *FS) stopDelayedWriteback() {
	w := f.w
	if w.daStop != nil {
		close(w.daStop)
		<-w.daDone
		w.daStop = nil
	}
}

// errDelayedLost wraps the error of a flush at Close that lost data.
var errDelayedLost = errors.New("delayed data could not be written and was dropped")
