package ext4go

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
)

// orphanWork is what a crash left on the orphan list and in the orphan
// file, checked (collectOrphans) before anything is changed.
type orphanWork struct {
	list  []*node      // the orphan list, head first
	slots []orphanSlot // filled orphan file slots
	nodes []*node      // the slots' inodes, in order
}

// collectOrphans reads and checks the orphan list (s_last_orphan, chained
// through i_dtime) and the filled orphan file slots as the kernel's
// ext4_orphan_get does: each inode in range (not reserved), in use in its
// group's inode bitmap, listed once, the list without a loop. It changes
// nothing; a bad entry is a CorruptError that says to run e2fsck.
func (f *FS) collectOrphans() (*orphanWork, error) {
	wk := &orphanWork{}
	seen := map[uint32]bool{}
	check := func(what string, ino uint32) (*node, error) {
		if ino < f.sb.FirstInode() || ino > f.sb.InodesCount {
			return nil, &CorruptError{What: what, Block: -1, Ino: ino, Detail: "inode number out of range; check it with e2fsck -f"}
		}
		if seen[ino] {
			return nil, &CorruptError{What: what, Block: -1, Ino: ino, Detail: "inode listed twice (a loop); check it with e2fsck -f"}
		}
		seen[ino] = true
		used, err := f.inodeInUse(ino)
		if err != nil {
			return nil, err
		}
		if !used {
			return nil, &CorruptError{What: what, Block: -1, Ino: ino, Detail: "inode is free in its bitmap; check it with e2fsck -f"}
		}
		n, err := f.inode(ino)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if in := n.in(); in.LinksCount == 0 {
			if err := f.checkFreeable(n); err != nil {
				return nil, fmt.Errorf("%s: inode %d: %w", what, ino, err)
			}
		}
		return n, nil
	}
	for ino := f.sb.LastOrphan; ino != 0; {
		n, err := check("orphan list", ino)
		if err != nil {
			return nil, err
		}
		wk.list = append(wk.list, n)
		ino = n.in().Dtime
	}
	if of := f.w.orphanFile; of != nil {
		for _, s := range of.pending {
			n, err := check("orphan file", s.ino)
			if err != nil {
				return nil, err
			}
			wk.slots = append(wk.slots, s)
			wk.nodes = append(wk.nodes, n)
		}
	}
	return wk, nil
}

// inodeInUse reports whether ino's bit is set in its group's inode bitmap.
func (f *FS) inodeInUse(ino uint32) (bool, error) {
	g := (ino - 1) / f.sb.InodesPerGroup
	idx := (ino - 1) % f.sb.InodesPerGroup
	b, err := inodeStore{f}.ReadInodeBitmap(g)
	if err != nil {
		return false, err
	}
	return b[idx/8]&(1<<(idx%8)) != 0, nil
}

// cleanupOrphans finishes what a crash interrupted, as the kernel does at
// mount (kernel: ext4_orphan_cleanup): every inode collectOrphans found
// was unlinked while open, and is freed, or, when it still has links, was
// being truncated, and loses its blocks past i_size. It runs in the
// writable open, through the journal, before any other change.
func (f *FS) cleanupOrphans(wk *orphanWork) error {
	w := f.w
	if wk == nil || len(wk.list) == 0 && len(wk.slots) == 0 {
		return nil
	}
	w.orphanMu.Lock()
	for _, n := range wk.list {
		n.orphan = true
	}
	f.orphans = append(f.orphans, wk.list...)
	for i, s := range wk.slots {
		n := wk.nodes[i]
		w.fileOrphans[n] = struct{}{}
		n.orphan, n.orphanAt = true, s.idx+1
	}
	w.orphanMu.Unlock()
	if of := w.orphanFile; of != nil {
		of.pending = nil
	}
	for _, n := range append(append([]*node(nil), wk.list...), wk.nodes...) {
		if err := f.cleanupOrphan(n); err != nil {
			return fmt.Errorf("orphan inode %d: %w", n.ino, err)
		}
	}
	return nil
}

// cleanupOrphan frees or truncates one orphan and takes it off its list.
func (f *FS) cleanupOrphan(n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	in := n.in()
	if in.LinksCount == 0 {
		return f.removeOrphan(n, func(h handle) error { return f.freeInodeIn(h, n) })
	}
	if in.IsRegular() && !in.HasFlag(inode.FlagInlineData) {
		if err := f.truncateBeyondSize(n); err != nil {
			return err
		}
	}
	return f.removeOrphan(n, nil)
}

// truncateBeyondSize frees the blocks of n past i_size (kernel:
// ext4_truncate, as the orphan cleanup calls it for a truncate a crash cut
// short). n.mu must be held.
func (f *FS) truncateBeyondSize(n *node) error {
	bs := uint64(f.blockSize)
	first := (n.in().Size + bs - 1) / bs
	if first >= extent.MaxLogical {
		return nil
	}
	if err := f.prepareFree(n, first, false); err != nil {
		return err
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	in := editInode(n)
	if err := f.removeBlocksFrom(h, n, in, first); err != nil {
		return err
	}
	return f.setInode(h, n, in)
}
