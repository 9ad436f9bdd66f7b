// Package ialloc chooses where new inodes go (kernel fs/ext4/ialloc.c):
// Orlov's allocator for directories, spreading top-level directories over
// the flex groups with the fewest directories and keeping the others near
// their parent within limits on directories, free inodes and free blocks;
// and, for files, the parent's flex group first, then the group the parent
// last allocated from. It then takes the first free inode of the chosen
// group (or of the next ones) from the inode bitmap.
//
// The filesystem plugs in through Store (inode bitmaps and descriptor
// counts; the on-disk format stays its business) and BlockCounts (the block
// allocator's free cluster counts, which Orlov weighs).
//
// Locking: each group has a mutex guarding its bitmap copy, held across
// the Store call that persists a change; per-group, per-flex and total
// counters are atomics read without locks (the choice of group is a
// heuristic; the bitmap, re-read under the lock, is the truth). A Dir's
// last-allocated group is an atomic. There is no global lock. Lock order:
// a group's mutex is taken inside an inode-table block's buffer lock
// (OnlyInUse, from txn.Handle.ModifyOrZero), and the Store's bitmap and
// descriptor buffers are locked inside a group's mutex; so a Store must
// never touch an inode-table block.
package ialloc

import (
	"errors"
	"fmt"
	"github.com/ext4go/ext4go/internal/pad"
	"hash/fnv"
	"math/bits"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Geometry is what the inode allocator needs of the superblock.
type Geometry struct {
	Groups           uint32 // block groups
	InodesPerGroup   uint32
	ClustersPerGroup uint32
	LogGroupsPerFlex uint8  // 0 without flex_bg
	FirstIno         uint32 // first non-reserved inode (s_first_ino; 11 on ext4)
}

// Tx is the journal transaction an allocation or free belongs to.
type Tx interface{ ID() uint64 }

// Store reads and writes the inode bitmaps and the inode counts of the
// group descriptors. Calls for one group are made with that group's lock
// held, in order; a Store must not call back into the Allocator.
type Store interface {
	// GroupCounts returns group's free inodes and used directories from
	// its descriptor. New calls it once per group.
	GroupCounts(group uint32) (freeInodes, usedDirs uint32, err error)
	// ReadInodeBitmap returns group's inode bitmap (one bit per inode, set
	// when in use; for an INODE_UNINIT group all clear).
	ReadInodeBitmap(group uint32) ([]byte, error)
	// UpdateInodeBitmap sets (used) or clears bit index of group's inode
	// bitmap in tx, for a directory inode if dir, and records the new
	// descriptor counts. The store also keeps bg_itable_unused, the
	// INODE_UNINIT flag and the checksums right.
	UpdateInodeBitmap(tx Tx, group, index uint32, used, dir bool, freeInodes, usedDirs uint32) error
}

// BlockCounts gives the free clusters Orlov weighs; *mballoc.Allocator
// implements it.
type BlockCounts interface {
	GroupFreeClusters(group uint32) uint32
	FlexFreeClusters(flex uint32) int64
	FreeClusters() int64
}

type noSpace struct{}

func (noSpace) Error() string   { return "ialloc: no free inodes" }
func (noSpace) Is(t error) bool { return t == syscall.ENOSPC }

// ErrNoSpace is returned when no inode is free; it matches syscall.ENOSPC.
var ErrNoSpace error = noSpace{}

// Dir is the in-memory state of a directory that inodes are created in.
type Dir struct {
	Ino    uint32
	Group  uint32 // the group of the directory's inode (i_block_group)
	Root   bool   // the filesystem's root directory
	TopDir bool   // EXT4_TOPDIR_FL: spread subdirectories like the root's

	lastAlloc atomic.Int64 // i_last_alloc_group; -1 none
}

// NewDir returns the state of directory ino in group.
func NewDir(ino, group uint32, root, topDir bool) *Dir {
	d := &Dir{Ino: ino, Group: group, Root: root, TopDir: topDir}
	d.lastAlloc.Store(-1)
	return d
}

// LastAllocGroup returns the group an inode was last allocated in under d,
// or -1.
func (d *Dir) LastAllocGroup() int64 { return d.lastAlloc.Load() }

// Options tune an Allocator.
type Options struct {
	// NameHash hashes a top-level directory's name to pick where to start
	// looking (the kernel uses half-MD4 with the filesystem's hash seed).
	// nil means FNV-1a.
	NameHash func(name []byte) uint32
	// Rand returns a number in [0, n) for unnamed top-level directories;
	// nil means math/rand/v2.
	Rand func(n uint32) uint32
}

type group struct {
	mu         sync.Mutex
	freeInodes atomic.Uint32
	usedDirs   atomic.Uint32
	loaded     bool
	bitmap     []uint64 // under mu
	_          [64 * pad.On]byte
}

type paddedI64 struct {
	v atomic.Int64
	_ [56 * pad.On]byte
}

// Allocator allocates inodes. Its methods are safe for concurrent use.
type Allocator struct {
	geo      Geometry
	flexSize uint32
	store    Store
	blocks   BlockCounts
	opts     Options
	groups   []group

	flexInodes, flexDirs []paddedI64
	freeInodes, dirs     atomic.Int64
}

// New makes an inode allocator; it reads every group's counts.
func New(geo Geometry, store Store, blocks BlockCounts, opts Options) (*Allocator, error) {
	if geo.Groups == 0 || geo.InodesPerGroup == 0 || geo.InodesPerGroup%8 != 0 || geo.LogGroupsPerFlex > 31 ||
		uint64(geo.Groups)*uint64(geo.InodesPerGroup) > 1<<32-1 {
		return nil, fmt.Errorf("ialloc: bad geometry %+v", geo)
	}
	if store == nil || blocks == nil {
		return nil, errors.New("ialloc: nil store or block counts")
	}
	if geo.FirstIno == 0 {
		geo.FirstIno = 11
	}
	if opts.NameHash == nil {
		opts.NameHash = func(b []byte) uint32 {
			h := fnv.New32a()
			h.Write(b)
			return h.Sum32()
		}
	}
	if opts.Rand == nil {
		opts.Rand = func(n uint32) uint32 { return rand.Uint32N(n) }
	}
	fs := uint32(1) << geo.LogGroupsPerFlex
	a := &Allocator{geo: geo, flexSize: fs, store: store, blocks: blocks, opts: opts,
		groups: make([]group, geo.Groups)}
	nflex := (geo.Groups + fs - 1) / fs
	a.flexInodes = make([]paddedI64, nflex)
	a.flexDirs = make([]paddedI64, nflex)
	for gi := range a.groups {
		fi, ud, err := store.GroupCounts(uint32(gi))
		if err != nil {
			return nil, fmt.Errorf("ialloc: group %d: %w", gi, err)
		}
		if fi > geo.InodesPerGroup || ud > geo.InodesPerGroup-fi {
			return nil, fserr.Corrupt(fmt.Sprintf("group descriptor %d", gi),
				"%d free inodes and %d directories in a group of %d inodes", fi, ud, geo.InodesPerGroup)
		}
		g := &a.groups[gi]
		g.freeInodes.Store(fi)
		g.usedDirs.Store(ud)
		f := uint32(gi) >> geo.LogGroupsPerFlex
		a.flexInodes[f].v.Add(int64(fi))
		a.flexDirs[f].v.Add(int64(ud))
		a.freeInodes.Add(int64(fi))
		a.dirs.Add(int64(ud))
	}
	return a, nil
}

// FreeInodes returns the free inodes of the filesystem (the superblock's
// s_free_inodes_count).
func (a *Allocator) FreeInodes() int64 { return a.freeInodes.Load() }

// Dirs returns the number of directories.
func (a *Allocator) Dirs() int64 { return a.dirs.Load() }

// GroupFreeInodes returns group gi's free inode count.
func (a *Allocator) GroupFreeInodes(gi uint32) uint32 { return a.groups[gi].freeInodes.Load() }

// GroupUsedDirs returns group gi's directory count.
func (a *Allocator) GroupUsedDirs(gi uint32) uint32 { return a.groups[gi].usedDirs.Load() }

// Allocate takes a free inode for a new file (or directory, if dir) named
// name in parent (kernel: __ext4_new_inode) and returns its number.
func (a *Allocator) Allocate(tx Tx, parent *Dir, dir bool, name []byte) (uint32, error) {
	start, err := a.FindGroup(parent, dir, name)
	if err != nil {
		return 0, err
	}
	parent.lastAlloc.Store(int64(start))
	ng := a.geo.Groups
	for i := uint32(0); i < ng; i++ {
		gi := (start + i) % ng
		if a.groups[gi].freeInodes.Load() == 0 {
			continue
		}
		ino, err := a.takeInGroup(tx, gi, dir)
		if err != nil {
			return 0, err
		}
		if ino != 0 {
			return ino, nil
		}
	}
	return 0, ErrNoSpace
}

func (a *Allocator) lockLoaded(gi uint32) (*group, error) {
	g := &a.groups[gi]
	g.mu.Lock()
	if !g.loaded {
		raw, err := a.store.ReadInodeBitmap(gi)
		if err != nil {
			g.mu.Unlock()
			return nil, fmt.Errorf("ialloc: reading inode bitmap of group %d: %w", gi, err)
		}
		n := a.geo.InodesPerGroup
		bm := make([]uint64, (n+63)/64)
		for i := uint32(0); i < n; i++ {
			if int(i/8) < len(raw) && raw[i/8]&(1<<(i%8)) != 0 {
				bm[i/64] |= 1 << (i % 64)
			}
		}
		used := uint32(0)
		for _, w := range bm {
			used += uint32(bits.OnesCount64(w))
		}
		if n-used != g.freeInodes.Load() {
			g.mu.Unlock()
			return nil, fserr.Corrupt(fmt.Sprintf("inode bitmap of group %d", gi),
				"bitmap has %d free inodes, descriptor says %d", n-used, g.freeInodes.Load())
		}
		g.bitmap, g.loaded = bm, true
	}
	return g, nil
}

// takeInGroup allocates the first free inode of group gi, or returns 0 if
// there is none.
func (a *Allocator) takeInGroup(tx Tx, gi uint32, dir bool) (uint32, error) {
	g, err := a.lockLoaded(gi)
	if err != nil {
		return 0, err
	}
	defer g.mu.Unlock()
	n := a.geo.InodesPerGroup
	first := uint32(0)
	if gi == 0 {
		first = a.geo.FirstIno - 1 // reserved inodes are never handed out
	}
	idx := n
	for i := first / 64; i < uint32(len(g.bitmap)); i++ {
		w := ^g.bitmap[i]
		if i == first/64 {
			w &^= 1<<(first%64) - 1
		}
		if w != 0 {
			idx = i*64 + uint32(bits.TrailingZeros64(w))
			break
		}
	}
	if idx >= n {
		return 0, nil
	}
	fi := g.freeInodes.Load() - 1
	ud := g.usedDirs.Load()
	if dir {
		ud++
	}
	if err := a.store.UpdateInodeBitmap(tx, gi, idx, true, dir, fi, ud); err != nil {
		return 0, err
	}
	g.bitmap[idx/64] |= 1 << (idx % 64)
	a.count(g, gi, -1, dir)
	return gi*n + idx + 1, nil
}

func (a *Allocator) count(g *group, gi uint32, d int64, dir bool) {
	f := gi >> a.geo.LogGroupsPerFlex
	g.freeInodes.Add(uint32(d))
	a.flexInodes[f].v.Add(d)
	a.freeInodes.Add(d)
	if dir {
		g.usedDirs.Add(uint32(-d))
		a.flexDirs[f].v.Add(-d)
		a.dirs.Add(-d)
	}
}

// Free releases inode ino (kernel: ext4_free_inode); dir says it was a
// directory.
func (a *Allocator) Free(tx Tx, ino uint32, dir bool) error {
	n := a.geo.InodesPerGroup
	if ino < a.geo.FirstIno || uint64(ino) > uint64(a.geo.Groups)*uint64(n) {
		return fserr.Corrupt("inode number", "freeing reserved or nonexistent inode %d", ino)
	}
	gi, idx := (ino-1)/n, (ino-1)%n
	g, err := a.lockLoaded(gi)
	if err != nil {
		return err
	}
	defer g.mu.Unlock()
	if g.bitmap[idx/64]&(1<<(idx%64)) == 0 {
		return fserr.Corrupt(fmt.Sprintf("inode bitmap of group %d", gi), "freeing inode %d which is already free", ino)
	}
	if dir && g.usedDirs.Load() == 0 {
		return fserr.Corrupt(fmt.Sprintf("group descriptor %d", gi), "freeing directory %d in a group with no directories", ino)
	}
	fi := g.freeInodes.Load() + 1
	ud := g.usedDirs.Load()
	if dir {
		ud--
	}
	if err := a.store.UpdateInodeBitmap(tx, gi, idx, false, dir, fi, ud); err != nil {
		return err
	}
	g.bitmap[idx/64] &^= 1 << (idx % 64)
	a.count(g, gi, 1, dir)
	return nil
}

// Load reads group gi's inode bitmap now if it is not loaded yet (see
// mballoc.Allocator.Load).
func (a *Allocator) Load(gi uint32) error {
	if int(gi) >= len(a.groups) {
		return fmt.Errorf("ialloc: group %d out of range", gi)
	}
	g, err := a.lockLoaded(gi)
	if err != nil {
		return err
	}
	g.mu.Unlock()
	return nil
}

// OnlyInUse reports whether ino is the only inode in use of the perBlock
// inodes that share its inode-table block (perBlock divides the inodes per
// group). A group whose bitmap is not loaded yet reports false: the
// question comes right after an allocation, from the group's loaded
// bitmap, and must not read one under the caller's locks.
func (a *Allocator) OnlyInUse(ino, perBlock uint32) bool {
	n := a.geo.InodesPerGroup
	if ino == 0 || perBlock == 0 || n%perBlock != 0 || (ino-1)/n >= uint32(len(a.groups)) {
		return false
	}
	gi, idx := (ino-1)/n, (ino-1)%n
	first := idx - idx%perBlock
	if gi == 0 && first < a.geo.FirstIno-1 {
		// The reserved inodes (the root, the journal, ...) count as in
		// use whatever a damaged bitmap says.
		return false
	}
	g := &a.groups[gi]
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.loaded {
		return false
	}
	for i := first; i < first+perBlock; i++ {
		if i != idx && g.bitmap[i/64]&(1<<(i%64)) != 0 {
			return false
		}
	}
	return true
}

// MarkUsed marks inode ino in use if it is free (kernel:
// ext4_mark_inode_used, for the fast-commit replay), counting it as a
// directory when dir is set, and reports whether it changed anything.
func (a *Allocator) MarkUsed(tx Tx, ino uint32, dir bool) (bool, error) {
	n := a.geo.InodesPerGroup
	if ino < a.geo.FirstIno || uint64(ino) > uint64(a.geo.Groups)*uint64(n) {
		return false, fserr.Corrupt("inode number", "marking reserved or nonexistent inode %d", ino)
	}
	gi, idx := (ino-1)/n, (ino-1)%n
	g, err := a.lockLoaded(gi)
	if err != nil {
		return false, err
	}
	defer g.mu.Unlock()
	if g.bitmap[idx/64]&(1<<(idx%64)) != 0 {
		return false, nil
	}
	fi := g.freeInodes.Load() - 1
	ud := g.usedDirs.Load()
	if dir {
		ud++
	}
	if err := a.store.UpdateInodeBitmap(tx, gi, idx, true, dir, fi, ud); err != nil {
		return false, err
	}
	g.bitmap[idx/64] |= 1 << (idx % 64)
	a.count(g, gi, -1, dir)
	return true, nil
}
