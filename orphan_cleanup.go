package ext4go

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
)

// cleanupOrphans finishes what a crash interrupted, as the kernel does at
// mount (kernel: ext4_orphan_cleanup): every inode on the orphan list
// (s_last_orphan, chained through i_dtime) and in the orphan file was
// unlinked while open, and is freed, or, when it still has links, was
// being truncated, and loses its blocks past i_size. It runs in the
// writable open, through the journal, before any other change; the list
// is checked for inodes out of range, repeats and loops first, and a bad
// one stops the open with nothing changed.
func (f *FS) cleanupOrphans() error {
	w := f.w
	var list []*node
	seen := map[uint32]bool{}
	for ino := f.sb.LastOrphan; ino != 0; {
		if ino < f.sb.FirstInode() && ino != rootIno || ino > f.sb.InodesCount {
			return &CorruptError{What: "orphan list", Block: -1, Ino: ino, Detail: "inode number out of range; check it with e2fsck -f"}
		}
		if seen[ino] {
			return &CorruptError{What: "orphan list", Block: -1, Ino: ino, Detail: "the list loops; check it with e2fsck -f"}
		}
		seen[ino] = true
		n, err := f.inode(ino)
		if err != nil {
			return fmt.Errorf("orphan list: %w", err)
		}
		list = append(list, n)
		ino = n.in().Dtime
	}
	var fileSlots []orphanSlot
	if of := w.orphanFile; of != nil {
		fileSlots, of.pending = of.pending, nil
	}
	if len(list) == 0 && len(fileSlots) == 0 {
		return nil
	}
	w.orphanMu.Lock()
	for _, n := range list {
		n.orphan = true
	}
	f.orphans = append(f.orphans, list...)
	w.orphanMu.Unlock()
	for _, s := range fileSlots {
		if s.ino > f.sb.InodesCount || seen[s.ino] {
			return &CorruptError{What: "orphan file", Block: -1, Ino: s.ino, Detail: "inode out of range or listed twice; check it with e2fsck -f"}
		}
		seen[s.ino] = true
		n, err := f.inode(s.ino)
		if err != nil {
			return fmt.Errorf("orphan file: %w", err)
		}
		w.orphanMu.Lock()
		w.fileOrphans[n] = struct{}{}
		n.orphan, n.orphanAt = true, s.idx+1
		w.orphanMu.Unlock()
	}
	all := append([]*node(nil), list...)
	for _, s := range fileSlots {
		n, _ := f.inode(s.ino)
		all = append(all, n)
	}
	for _, n := range all {
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
		if err := f.checkFreeable(n); err != nil {
			return err
		}
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
	s := &extStore{f: f, h: h, ino: n.ino}
	if err := f.editor(n, in, s).Remove(uint32(first), extent.MaxLogical); err != nil {
		return err
	}
	if err := f.addBlocks(in, s.delta); err != nil {
		return err
	}
	return f.setInode(h, n, in)
}
