package mballoc

// Tx is the journal transaction an allocation or a free belongs to. The
// allocator only needs its ID: data freed in transaction N stays
// unallocatable until ReleaseDeferred(N) reports that N has committed.
type Tx interface {
	ID() uint64
}

// Store is how the allocator reads and writes what the filesystem keeps on
// disk: the block bitmaps and the free-cluster counts of the group
// descriptors. The filesystem implements it; it owns the on-disk format
// (checksums, BLOCK_UNINIT, journalling the changed buffers).
//
// The allocator calls ReadBlockBitmap and UpdateBlockBitmap with the
// group's lock held, so calls for one group never overlap and come in the
// order the changes were made; calls for different groups may run at once.
// A Store must not call back into the Allocator.
type Store interface {
	// GroupFree returns the free clusters the descriptor of group records.
	// New calls it once per group.
	GroupFree(group uint32) (uint32, error)

	// ReadBlockBitmap returns the block bitmap of group: one bit per
	// cluster, set when in use. For a BLOCK_UNINIT group it returns the
	// bitmap that initialising the group would write (its metadata marked).
	// The allocator keeps its own copy and does not retain the slice.
	ReadBlockBitmap(group uint32) ([]byte, error)

	// UpdateBlockBitmap sets (used) or clears clusters [start, start+count)
	// of group's bitmap as part of tx (nil without a journal), and records
	// free as the group's free cluster count in its descriptor. The store
	// clears BLOCK_UNINIT, updates the bitmap and descriptor checksums and
	// marks the buffers dirty in tx; it may instead, once the bitmap's
	// buffer is in tx, leave later changes of tx to its commit, which
	// copies them from the allocator (Allocator.CopyDiskBitmap). The
	// allocator has already moved its own counters (see
	// Allocator.FreeClusters, FlexFreeClusters).
	UpdateBlockBitmap(tx Tx, group, start, count uint32, used bool, free uint32) error
}

// SystemZone may be implemented by a Store that knows where the
// filesystem's fixed metadata lies (superblocks, descriptors, bitmaps, inode
// tables). The allocator then refuses to free such blocks and reports an
// allocation that would hand one out as corruption (kernel:
// ext4_inode_block_valid).
type SystemZone interface {
	InSystemZone(block, count uint64) bool
}
