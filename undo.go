package ext4go

import (
	"slices"

	"github.com/ext4go/ext4go/internal/inode"
)

// undoLog lets a change of directories fail at any step without a trace.
// Transaction handles have no rollback (the blocks a handle changes are
// shared with the other handles of its transaction), so an operation that
// edits directories records, inside its handle, what it did to blocks
// only it may touch (those of the directories and inodes it holds
// locked): the original contents of every block it rewrites, the blocks it
// allocates and the inodes it sets. On failure, undo puts the blocks
// back, frees the allocations and restores the inodes, leaving the
// filesystem as it was before the operation (the allocators' counters
// included; freed blocks become reusable after the commit, as any free).
type undoLog struct {
	f      *FS
	h      handle
	saved  map[uint64][]byte // block -> contents before the first change
	order  []uint64          // saved blocks in order of first change
	fresh  []uint64          // blocks allocated by the operation
	inodes []savedInode
	nodes  []*node // whose block maps the operation changed
}

type savedInode struct {
	n   *node
	old *inode.Inode
}

func newUndo(f *FS, h handle) *undoLog {
	return &undoLog{f: f, h: h}
}

// modify changes block pblk with fn in the handle, keeping its contents
// from before the operation's first change of it.
func (u *undoLog) modify(pblk uint64, fn func(b []byte) error) error {
	return u.h.Modify(pblk, func(b []byte) error {
		if _, ok := u.saved[pblk]; !ok && !slices.Contains(u.fresh, pblk) {
			if u.saved == nil {
				u.saved = map[uint64][]byte{} // most changes never rewrite a block
			}
			u.saved[pblk] = append(getScratch(len(b))[:0], b...)
			u.order = append(u.order, pblk)
		}
		return fn(b)
	})
}

// allocated records a block the operation allocated.
func (u *undoLog) allocated(pblk uint64) {
	if u != nil {
		u.fresh = append(u.fresh, pblk)
	}
}

// freed notes that the operation freed pblk again itself.
func (u *undoLog) freed(pblk uint64) {
	if u != nil {
		if i := slices.Index(u.fresh, pblk); i >= 0 {
			u.fresh = slices.Delete(u.fresh, i, i+1)
		}
	}
}

// touched records that n's block map may change (its cached map is
// dropped on undo).
func (u *undoLog) touched(n *node) {
	if u != nil && !slices.Contains(u.nodes, n) {
		u.nodes = append(u.nodes, n)
	}
}

// setInode sets n's inode, keeping the one it replaces.
func (u *undoLog) setInode(n *node, in *inode.Inode) error {
	if !slices.ContainsFunc(u.inodes, func(s savedInode) bool { return s.n == n }) {
		u.inodes = append(u.inodes, savedInode{n, n.in()})
	}
	return u.f.setInode(u.h, n, in)
}

// release gives the saved block copies back to the scratch pool once the
// operation is over (after undo, if it failed).
func (u *undoLog) release() {
	for _, b := range u.saved {
		putScratch(b)
	}
	u.saved = nil
}

// undo reverts everything recorded. A failure here leaves the on-disk
// state in doubt and is recorded as the filesystem's error.
func (u *undoLog) undo() {
	if u == nil {
		return
	}
	f, h := u.f, u.h
	fail := func(err error) {
		if err != nil {
			f.setError(err)
		}
	}
	for i := len(u.inodes) - 1; i >= 0; i-- {
		s := u.inodes[i]
		old := *s.old
		old.Raw = append([]byte(nil), old.Raw...)
		fail(f.setInode(h, s.n, &old))
	}
	for i := len(u.order) - 1; i >= 0; i-- {
		blk := u.order[i]
		orig := u.saved[blk]
		fail(h.Modify(blk, func(b []byte) error { copy(b, orig); return nil }))
	}
	for _, blk := range u.fresh {
		fail(f.freeBlocks(h, blk, 1, 0))
	}
	for _, n := range u.nodes {
		n.mapping.Store(nil)
	}
	u.release()
	*u = undoLog{f: f, h: h}
}
