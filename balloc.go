package ext4go

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/txn"
)

// freeBlocks frees blocks [start, start+n) in h's transaction, whatever
// they held: the allocator takes them back (and hands them out again only
// after the transaction commits), then their cached copies are forgotten
// and, where the journal holds a copy of one, revoked (txn.Handle.Revoke).
func (f *FS) freeBlocks(h handle, start, n uint64, flags mballoc.FreeFlags) error {
	// Free first: a refused free (corrupt range, bitmap read error) must
	// not drop the block's changes or revoke a block that stays in use.
	// The allocator keeps the blocks until the transaction commits, so
	// the revoke is always in time.
	if err := f.w.balloc.Free(h, start, n, flags); err != nil {
		return err
	}
	h.Revoke(start, n)
	f.kickIfPending(h)
	return nil
}

// freeFileData is freeBlocks for a regular file's data blocks, which the
// metadata cache never holds (file data goes to the device directly): no
// buffer to forget, only the revokes (txn.Handle.RevokeUncached).
func (f *FS) freeFileData(h handle, start, n uint64) error {
	if err := f.w.balloc.Free(h, start, n, mballoc.FreeReuseFresh); err != nil {
		return err
	}
	h.RevokeUncached(start, n)
	f.kickIfPending(h)
	return nil
}

// blockStore is how the block allocator reads and changes block bitmaps.
type blockStore struct{ f *FS }

func (s blockStore) GroupFree(g uint32) (uint32, error) {
	return s.f.groups[g].FreeBlocksCount, nil
}

func (s blockStore) ReadBlockBitmap(g uint32) ([]byte, error) {
	f := s.f
	return f.readBitmap(g, "block bitmap", super.BGBlockUninit,
		func(gd *super.GroupDesc) uint64 { return gd.BlockBitmap },
		func(b []byte) { f.initBlockBitmap(g, b) },
		func(gd *super.GroupDesc, b []byte) error { return super.VerifyBlockBitmap(f.sb, gd, g, b) })
}

// readBitmap reads group g's block or inode bitmap (what names it, uninit
// its BG_*_UNINIT flag, where finds its block): a group not yet
// initialised gets the bitmap init would write, others are read and their
// checksum verified.
func (f *FS) readBitmap(g uint32, what string, uninitFlag uint16, where func(*super.GroupDesc) uint64,
	initBitmap func([]byte), verify func(*super.GroupDesc, []byte) error) ([]byte, error) {
	f.w.gdMu[g].Lock()
	gd := f.groups[g]
	uninit := gd.Flags&uninitFlag != 0 && f.sb.HasGroupDescCsum()
	blk := where(gd)
	f.w.gdMu[g].Unlock()
	if uninit {
		b := make([]byte, f.blockSize)
		initBitmap(b)
		return b, nil
	}
	b, err := f.readBlock(blk, what)
	if err != nil {
		return nil, err
	}
	if f.csum && !f.opts.IgnoreChecksums {
		if err := verify(gd, b); err != nil {
			return nil, fserr.At(err, int64(blk), 0)
		}
	}
	return b, nil
}

func (s blockStore) UpdateBlockBitmap(tx mballoc.Tx, g, start, count uint32, used bool, free uint32) error {
	f := s.f
	h, own, err := f.txHandle(tx)
	if err != nil {
		return err
	}
	if own {
		defer h.End()
	}
	gd := f.groups[g]
	gdl := &f.w.gdMu[g]
	tid := h.TID()
	if !own && f.w.bitmapsBatched && gdl.bitmapTx.Load() == tid {
		// The buffer is in this transaction already: the commit copies
		// the allocator's bitmap into it once (jbd2's one dirty buffer
		// for many changes). Files streaming side by side in one group
		// shared the buffer's lock and lines, and a crc, on every change.
		if !gdl.bitmapDirty.Load() {
			gdl.bitmapDirty.Store(true)
		}
		return nil
	}
	err = h.Modify(gd.BlockBitmap, func(b []byte) error {
		gdl.Lock()
		defer gdl.Unlock()
		if gd.Flags&super.BGBlockUninit != 0 {
			f.initBlockBitmap(g, b)
			gd.Flags &^= super.BGBlockUninit
			gdl.bitmapCrcOK = false
		}
		gd.FreeBlocksCount = free
		var lo, hi uint32
		if count > 0 {
			lo, hi = start/8, (start+count-1)/8+1
		}
		// The checksum follows the change when it knows the bitmap's and
		// nobody wrote another since (the descriptor still holds it).
		var old [64]byte
		incremental := f.csum && count > 0 && gdl.bitmapCrcOK && hi-lo <= uint32(len(old)) &&
			super.BlockBitmapChecksumStored(f.sb, gd, gdl.bitmapCrc)
		if incremental {
			copy(old[:], b[lo:hi])
		}
		for k := start; k < start+count; k++ {
			if used {
				b[k/8] |= 1 << (k % 8)
			} else {
				b[k/8] &^= 1 << (k % 8)
			}
		}
		if f.csum {
			var crc uint32
			if incremental {
				crc = csum.UpdateCRC32C(gdl.bitmapCrc, int(f.sb.ClustersPerGroup/8), int(lo), old[:hi-lo], b[lo:hi])
			} else {
				crc = super.BlockBitmapChecksum(f.sb, b)
			}
			gdl.bitmapCrc, gdl.bitmapCrcOK = crc, true
			super.StoreBlockBitmapChecksum(f.sb, gd, crc)
		}
		return f.writeGroupDesc(h, g)
	})
	if err == nil && !own {
		gdl.bitmapTx.Store(tid)
	}
	return err
}

// writeDirtyBlockBitmaps copies the block allocator's bitmap of each group
// changed in the closing transaction since its buffer joined it into that
// buffer, with the group's free count and checksums
// (txn.Manager.BeforeFreeze: no handle is open, so no allocation or free
// is in flight). It must run before writeDirtyGroupDescs.
func (f *FS) writeDirtyBlockBitmaps(h *txn.Handle) error {
	w := f.w
	var scratch []byte
	for g := range w.gdMu {
		l := &w.gdMu[g]
		if !l.bitmapDirty.Load() {
			continue
		}
		l.bitmapDirty.Store(false)
		if scratch == nil {
			scratch = getScratch(int(f.blockSize))
			defer putScratch(scratch)
		}
		gd := f.groups[g]
		// The allocator's group lock is not taken inside the buffer's
		// (UpdateBlockBitmap takes them the other way round): the bitmap
		// is put together first, then written.
		if err := f.tm.View(gd.BlockBitmap, func(b []byte) error { copy(scratch, b); return nil }); err != nil {
			return err
		}
		free, ok := w.balloc.CopyDiskBitmap(uint32(g), scratch)
		if !ok {
			return fmt.Errorf("block bitmap of group %d changed, but the block allocator has not loaded it", g)
		}
		err := h.Modify(gd.BlockBitmap, func(b []byte) error {
			copy(b, scratch)
			l.Lock()
			defer l.Unlock()
			gd.FreeBlocksCount = free
			if f.csum {
				crc := super.BlockBitmapChecksum(f.sb, b)
				l.bitmapCrc, l.bitmapCrcOK = crc, true
				super.StoreBlockBitmapChecksum(f.sb, gd, crc)
			}
			return f.writeGroupDesc(handle{h}, uint32(g))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// initBlockBitmap fills b with the bitmap of a BLOCK_UNINIT group: its
// fixed metadata and the bits past its end in use (kernel:
// ext4_init_block_bitmap).
func (f *FS) initBlockBitmap(g uint32, b []byte) {
	clear(b)
	sb := f.sb
	ratio := uint64(sb.ClusterRatio())
	first := sb.GroupFirstBlock(g)
	set := func(blk, n uint64) {
		for i := uint64(0); i < n; i++ {
			if blk+i < first {
				continue
			}
			c := (blk + i - first) / ratio
			if c < uint64(len(b))*8 {
				b[c/8] |= 1 << (c % 8)
			}
		}
	}
	set(first, uint64(sb.GroupOverhead(g).Blocks()))
	gd := f.groups[g]
	end := first + uint64(sb.GroupBlocks(g))
	in := func(blk uint64) bool { return blk >= first && blk < end }
	if in(gd.BlockBitmap) {
		set(gd.BlockBitmap, 1)
	}
	if in(gd.InodeBitmap) {
		set(gd.InodeBitmap, 1)
	}
	for i := uint64(0); i < uint64(sb.InodeTableBlocks()); i++ {
		if in(gd.InodeTable + i) {
			set(gd.InodeTable+i, 1)
		}
	}
	clusters := (uint64(sb.GroupBlocks(g)) + ratio - 1) / ratio
	for c := clusters; c < uint64(len(b))*8; c++ {
		b[c/8] |= 1 << (c % 8)
	}
}

// allocBlocks is the block allocator's Allocate, behind the fault hook,
// for an allocation that no delayed-data reservation pays for.
func (f *FS) allocBlocks(tx mballoc.Tx, req mballoc.Request) (mballoc.Extent, error) {
	return f.allocBlocksFor(tx, req, false)
}

// allocBlocksFor is allocBlocks; claimed says that the blocks were
// reserved by delayed data being flushed. Others may only take the
// clusters free beyond the reservations (kernel: ext4_claim_free_clusters
// against s_dirtyclusters_counter, skipped for
// EXT4_MB_DELALLOC_RESERVED).
func (f *FS) allocBlocksFor(tx mballoc.Tx, req mballoc.Request, claimed bool) (mballoc.Extent, error) {
	if err := f.inject("block"); err != nil {
		return mballoc.Extent{}, err
	}
	if r := f.w.daReserved.Load(); r > 0 && !claimed {
		avail := f.w.balloc.FreeClusters() - r
		if avail <= 0 {
			return mballoc.Extent{}, &mballoc.NoSpaceError{}
		}
		if int64(req.Len) > avail {
			req.Len = uint32(avail)
		}
	}
	if f.w.exclude == nil {
		return f.w.balloc.Allocate(tx, req)
	}
	// Set aside what the replay must not use, and give it back after;
	// the next try starts past the range hit (kernel:
	// ext4_mb_new_blocks_simple skipping excluded blocks).
	var held []mballoc.Extent
	defer func() {
		for _, e := range held {
			if err := f.w.balloc.Free(tx, e.Start, uint64(e.Len), mballoc.FreeNoDefer); err != nil {
				f.setError(err)
			}
		}
	}()
	for {
		e, err := f.w.balloc.Allocate(tx, req)
		if err != nil {
			return e, err
		}
		end, hit := f.w.exclude(e.Start, uint64(e.Len))
		if !hit {
			return e, nil
		}
		held = append(held, e)
		if len(held) > 4096 {
			return mballoc.Extent{}, &mballoc.NoSpaceError{}
		}
		req.Goal = end
		req.LeftPhysical, req.RightPhysical = 0, 0
	}
}
