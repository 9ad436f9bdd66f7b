package ext4go

import (
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/pad"
)

// inodeLocation returns the inode table block holding ino and the byte
// offset in it.
func (f *FS) inodeLocation(ino uint32) (uint64, int, error) {
	group, index, ok := f.sb.GroupOfInode(ino)
	if !ok {
		return 0, 0, &CorruptError{What: "inode number", Block: -1, Ino: ino, Detail: "out of range"}
	}
	byteOff := uint64(index) * uint64(f.inodeSize)
	return f.groups[group].InodeTable + byteOff/uint64(f.blockSize), int(byteOff % uint64(f.blockSize)), nil
}

// setInode records in as n's new inode in h and publishes it. n.mu must
// be held exclusively (or n not yet visible to anyone else).
func (f *FS) setInode(h handle, n *node, in *inode.Inode) error {
	return f.setInodeAs(h, n, in, false)
}

// setInodeAs is setInode; hot as for node.publish.
func (f *FS) setInodeAs(h handle, n *node, in *inode.Inode, hot bool) error {
	blk, off, err := f.inodeLocation(n.ino)
	if err != nil {
		return err
	}
	f.truncateTimes(in)
	// An inode from editInode owns its Raw: encode into it in place.
	raw := in.Raw
	if !in.RawOwned || len(raw) != f.inodeSize {
		raw = make([]byte, f.inodeSize)
	}
	if f.csum {
		err = in.EncodeChecksum(raw, f.seed, n.ino)
	} else {
		err = in.Encode(raw)
	}
	if err != nil {
		return err
	}
	// Published, the inode is read by lock-free readers: nothing may
	// write its Raw again.
	in.Raw, in.RawOwned = raw, false
	if n.freed.Load() {
		return staleWrite(n.ino, "write through a node whose inode was freed")
	}
	old := n.inLocked()
	// The other inodes of the block whose times wait in memory go with
	// this write (lazytime.go).
	neighbours := f.neighbourTimes(blk, n)
	// A new inode alone in its block need not read the block: the other
	// slots are free, and a free slot's bytes mean nothing (kernel:
	// __ext4_get_inode_loc with in_mem). A mkfs -d of /usr/local/go read
	// 885 blocks, most of its metadata reads, for nothing.
	var zero func() bool
	if old == nil && !f.opts.replaying { // the kernel's replay reads too
		zero = func() bool { return f.w.ialloc.OnlyInUse(n.ino, uint32(f.blockSize)/uint32(f.inodeSize)) }
	}
	err = h.ModifyOrZero(blk, zero, func(b []byte) error {
		// The slot must still hold this node's inode: a generation that
		// changed under an in-use inode means a new owner wrote it.
		if old != nil && inode.SlotGeneration(b[off:]) != old.Generation && inode.SlotInUse(b[off:]) {
			return staleWrite(n.ino, "the inode table slot belongs to another inode generation")
		}
		copy(b[off:], raw)
		if len(neighbours) > 0 {
			f.copyNeighbourTimes(b, blk, neighbours)
		}
		return nil
	})
	if err != nil {
		return err
	}
	f.publishInode(n, old, in, blk, off, hot)
	return nil
}

// publishInode makes in, which replaces old, n's inode for every reader,
// once it is recorded for the inode table (at blk, byte off): its times
// are no longer dirty, and a block map built from old goes. n.mu is held
// exclusively; hot as for node.publish.
func (f *FS) publishInode(n *node, old, in *inode.Inode, blk uint64, off int, hot bool) {
	// The block map changes with i_block, the flags or the size, and with
	// edits of the extent tree's blocks, which extStore records. Decided
	// before publish, which may recycle old.
	drop := old == nil || old.Block != in.Block || old.Flags != in.Flags || old.Size != in.Size
	n.publish(in, hot)
	if f.w != nil {
		f.timesWritten(blk, off, n)
	}
	if n.treeChanged.Swap(false) || drop {
		n.mapping.Store(nil)
	}
}

// editInode copies n's inode for a change, with its own Raw, in one
// allocation where the inode is of the usual sizes.
func editInode(n *node) *inode.Inode {
	old := n.in()
	if len(old.Raw) <= inodeCopyRaw {
		c := new(inodeCopy)
		c.in = *old
		c.in.Raw = c.raw[:copy(c.raw[:], old.Raw):len(old.Raw)]
		c.in.RawOwned = true
		return &c.in
	}
	c := *old
	c.Raw = append([]byte(nil), c.Raw...)
	c.RawOwned = true
	return &c
}

// editInodeHot copies n's inode for a change that setInodeHot or
// setTimesLazily publishes: its Raw stays the published inode's, which
// nothing writes again, since neither encodes into the inode's own Raw
// (setInodeHot's first write of a transaction encodes into a new one, the
// commit into the slot). Half the bytes of editInode's copy, on every
// write, fallocate and truncate.
//
// The copy reuses the inode an earlier hot change published and a later
// one replaced, when no reader kept it (node.publish): fallocate2's
// steps allocate nothing. n.mu must be held exclusively.
func editInodeHot(n *node) *inode.Inode {
	c := n.spare
	if c != nil {
		n.spare = nil
	} else {
		c = &new(hotInode).in
	}
	*c = *n.inLocked()
	c.RawOwned = false
	return c
}

// hotInode is an inode alone in whole cache lines: recycled, the copies
// of two files' inodes are written by two goroutines on every change, and
// 240-byte objects packed side by side would share a line (256 bytes is
// a size class whose objects start on line boundaries).
type hotInode struct {
	in inode.Inode
	_  [16 * pad.On]byte
}

// inodeCopyRaw is the largest Raw an inodeCopy holds: 256 bytes, mke2fs's
// default inode size.
const inodeCopyRaw = 256

// inodeCopy is an inode and the bytes of its Raw, allocated together.
type inodeCopy struct {
	in  inode.Inode
	raw [inodeCopyRaw]byte
}
