package ext4go

import (
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
	"github.com/ext4go/ext4go/internal/txn"
)

// Deferred inode writes (kernel: jbd2's one dirty buffer for many
// changes, as writeGroupDesc does for descriptors).
//
// An inode-table block holds 16 inodes at 4 KiB, so files written side by
// side share one: writing each change's inode into it made every write,
// fallocate and truncate of all those files take one buffer's lock and
// dirty its cache lines, besides an encode and a checksum per change. The
// hot paths (setInodeHot) therefore write a node's inode into its block
// only on its first change in a transaction, and register the node; later
// changes in that transaction only publish the new inode in memory, and
// the commit, before it freezes the transaction's blocks
// (txn.Manager.BeforeFreeze), encodes each registered node's current
// inode into its slot once (writeDeferredInodes).
//
// Invariants.
//   - n.deferTid is the transaction whose commit re-encodes n (0: none).
//     It is set under n.mu held exclusively, with a handle of that
//     transaction open, and cleared by that commit's BeforeFreeze, when no
//     handle is open: so while a handle of transaction T runs, deferTid ==
//     T means the commit of T will still write n, and the slot holds
//     n's inode as of its first change in T, all in T.
//   - The block joins the transaction at that first write, so the
//     journal's limits (txn.Manager.SetLimits) count it as before; the
//     commit's re-encode changes a block already in the transaction.
//   - The registry holds its nodes strongly until the commit has written
//     them: the inode cache may drop a node only once its changes are in
//     the block (cache.go), so a reload never reads an older inode.
//   - A freed node is not re-encoded: freeInodeIn writes the freed inode
//     at once (setInode), and its number may already be another node's.
//   - The re-encode checks the slot as setInode does: an in-use slot of
//     another generation belongs to another inode, and is left alone (and
//     counted, as every refused stale write).

const deferShards = 16

// deferShard is one shard of the nodes registered for re-encoding by the
// running transaction's commit.
type deferShard struct {
	mu    lockstat.Mutex[lockstat.MFSDeferred] // protects nodes
	nodes []*node
	_     [(pad.Line - 8) * pad.On]byte // neighbours a line apart (pad.Apart)
}

// setInodeHot is setInode for the hot paths (write, fallocate, truncate),
// which change one inode many times a transaction: only the first change
// of n in h's transaction writes the inode-table block; the others are
// left to the commit (see above). n.mu must be held exclusively.
func (f *FS) setInodeHot(h handle, n *node, in *inode.Inode) error {
	tid := h.TID()
	if n.deferTid.Load() != tid {
		if err := f.setInodeAs(h, n, in, true); err != nil {
			return err
		}
		n.deferTid.Store(tid)
		s := &f.w.deferred[shard.Index(uint64(n.ino), deferShards)]
		s.mu.Lock()
		s.nodes = append(s.nodes, n)
		s.mu.Unlock()
		return nil
	}
	blk, off, err := f.inodeLocation(n.ino)
	if err != nil {
		return err
	}
	if n.freed.Load() {
		return staleWrite(n.ino, "write through a node whose inode was freed")
	}
	f.truncateTimes(in)
	// Its Raw is not encoded: the commit encodes the fields over it, and
	// nothing else reads them from Raw (the in-inode xattrs, which it
	// holds, are current). Published, it is no one's to change.
	in.RawOwned = false
	// Recorded for the inode table: the commit writes it, times included.
	f.publishInode(n, n.inLocked(), in, blk, off, true)
	return nil
}

// writeDeferredInodes encodes the current inode of every node registered
// by setInodeHot in the closing transaction into its slot
// (txn.Manager.BeforeFreeze: no handle is open).
func (f *FS) writeDeferredInodes(h *txn.Handle) error {
	for i := range f.w.deferred {
		s := &f.w.deferred[i]
		s.mu.Lock()
		nodes := s.nodes
		s.nodes = nil
		s.mu.Unlock()
		for _, n := range nodes {
			if err := f.reencodeInode(h, n); err != nil {
				return err
			}
		}
		if cap(nodes) <= 1024 {
			// The slice serves the next transaction; no one registers
			// meanwhile (that takes an open handle).
			clear(nodes)
			s.mu.Lock()
			s.nodes = nodes[:0]
			s.mu.Unlock()
		}
	}
	return nil
}

// reencodeInode writes n's current inode into its inode-table slot, in h.
func (f *FS) reencodeInode(h *txn.Handle, n *node) error {
	n.deferTid.Store(0)
	cur := n.in()
	if cur == nil || n.freed.Load() {
		return nil
	}
	blk, off, err := f.inodeLocation(n.ino)
	if err != nil {
		return err
	}
	return h.Modify(blk, func(b []byte) error {
		slot := b[off : off+f.inodeSize]
		if inode.SlotInUse(slot) && inode.SlotGeneration(slot) != cur.Generation {
			staleWrites.Add(1)
			return nil
		}
		// Into the slot, not into cur.Raw: cur is published.
		if err := cur.Encode(slot); err != nil {
			return err
		}
		if f.csum {
			inode.SetChecksum(f.seed, n.ino, slot)
		}
		return nil
	})
}
