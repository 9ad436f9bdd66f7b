package ext4go

import (
	"syscall"

	"github.com/ext4go/ext4go/internal/blockmap"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
)

// maxAllocChunk bounds one allocation (and so one transaction handle) of a
// large write: an extent holds at most 32768 blocks anyway.
const maxAllocChunk = 32768

// addBlocks moves in's i_blocks by delta filesystem blocks.
func (f *FS) addBlocks(in *inode.Inode, delta int64) error {
	sectors := int64(in.Sectors(uint32(f.blockSize), f.hugeFile)) + delta*(f.blockSize/512)
	if sectors < 0 {
		return &CorruptError{What: "inode", Block: -1, Detail: "i_blocks below zero"}
	}
	return in.SetSectors(uint64(sectors), uint32(f.blockSize), f.hugeFile)
}

// maxFileSize is the largest size of a file (kernel: ext4_max_size): 2^32-1
// blocks with extents; with a block map, what the map can address and,
// without huge_file, what i_blocks can count (kernel:
// ext4_max_bitmap_size, here without its allowance for indirect blocks
// in i_blocks, which only matters for files of almost 2 TiB).
func (f *FS) maxFileSize(n *node) int64 {
	if n.inLocked().HasFlag(inode.FlagExtents) { // n.mu is held, as checkDataWritable
		return (1<<32 - 1) * f.blockSize
	}
	size := int64(blockmap.MaxBlocks(int(f.blockSize))) * f.blockSize
	if !f.hugeFile {
		size = min(size, (1<<32-1)*512-int64(blockmap.MaxBlocks(int(f.blockSize))/uint64(f.blockSize/4)+3)*f.blockSize)
	}
	return size
}

// checkDataWritable refuses data changes ext4go cannot make to n.
func (f *FS) checkDataWritable(n *node) error {
	in := n.inLocked() // n.mu is held: writeAt, truncate, fallocate, reserve
	switch {
	case !in.IsRegular():
		return syscall.EINVAL
	case in.HasFlag(inode.FlagImmutable):
		return syscall.EPERM
	case in.HasFlag(inode.FlagVerity) || in.HasFlag(inode.FlagEncrypt):
		return syscall.EPERM
	}
	return nil
}

// writeAt writes p at off into regular file n, allocating blocks for holes
// (or, with delay and a file that allows it, delaying them: delalloc.go)
// and converting unwritten extents it writes into. n.mu must be held
// exclusively. It returns the bytes written (all of p unless an error).
func (f *FS) writeAt(n *node, p []byte, off int64, openForWrite, delay bool) (int, error) {
	if err := f.checkDataWritable(n); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, syscall.EINVAL
	}
	end := off + int64(len(p))
	if end > f.maxFileSize(n) || end < off {
		return 0, syscall.EFBIG
	}
	if len(p) == 0 {
		return 0, nil
	}
	// inodeWritten: the write changed the inode beyond its times (the
	// mapping), so the times go with that change, not lazily.
	inodeWritten := false
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return 0, err
		}
		inodeWritten = true
	}
	delay = delay && f.delayable(n.inLocked())
	if !delay && n.hasDelayed() {
		// Writing past the delayed blocks would map their holes.
		if err := f.flushDelayed(n, openForWrite); err != nil {
			return 0, err
		}
	}
	done := 0
	retries := 0
	delayed := false
	// settle handles a step that wrote m bytes and failed: one that wrote
	// nothing for want of space is tried again once a commit released
	// some (retry); otherwise the size covers what was written and the
	// write ends.
	settle := func(m int, err error) (retry bool) {
		if m == 0 && f.retryAfterCommit(err, &retries) {
			return true
		}
		if done > 0 {
			f.extendSize(n, off+int64(done), false)
		}
		return false
	}
	// flushNow writes the delayed blocks out in the middle of the write:
	// the size first covers what it wrote, so that no block is mapped
	// past i_size.
	flushNow := func() error {
		if done > 0 {
			if err := f.extendSize(n, off+int64(done), false); err != nil {
				return err
			}
		}
		return f.flushDelayed(n, openForWrite)
	}
	for done < len(p) {
		pos := off + int64(done)
		if delay {
			m, handled, lowSpace, err := f.daWrite(n, p[done:], pos)
			if lowSpace {
				// Allocate at once from here on (delay stays off for
				// this write); what is delayed goes first, so that
				// writeChunk's holes are holes.
				delay = false
				if err := flushNow(); err != nil {
					return done, err
				}
				continue
			}
			if handled {
				done += m
				delayed = delayed || m > 0
				if err != nil {
					if settle(m, err) {
						continue
					}
					return done, err
				}
				if f.w.daBytes.Load() > f.w.daLimit && done < len(p) {
					// A write larger than the bound: its own blocks
					// go as it goes.
					if err := flushNow(); err != nil {
						return done, err
					}
				}
				continue
			}
		}
		m, wrote, err := f.writeChunk(n, p[done:], pos, openForWrite)
		inodeWritten = inodeWritten || wrote
		done += m
		if err != nil {
			if settle(m, err) {
				continue
			}
			return done, err
		}
	}
	if delayed {
		defer f.daPressure(n)
	}
	return done, f.extendSize(n, end, !inodeWritten)
}

// extendSize raises i_size to at least size and sets mtime and ctime.
// When timesOnly (the write only overwrote mapped, written blocks) and
// the size stays, that is a time-only change, which Options.Lazytime
// keeps in memory (kernel: file_update_time with SB_LAZYTIME).
func (f *FS) extendSize(n *node, size int64, timesOnly bool) error {
	now := inode.FromTime(f.now())
	if timesOnly && uint64(size) <= n.inLocked().Size && f.lazytime() {
		in := editInodeHot(n)
		in.Mtime, in.Ctime = now, now
		f.setTimesLazily(n, in)
		return nil
	}
	h, err := f.beginHot(n) // writeAt holds n.mu exclusively; writeChunk's handle has ended
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	if uint64(size) > in.Size {
		in.Size = uint64(size)
	}
	in.Mtime, in.Ctime = now, now
	return f.setInodeHot(h, n, in)
}

// writeChunk writes the part of p at pos that one mapping covers: an
// existing extent, or a hole it allocates blocks for. It returns the bytes
// written and whether it wrote the inode (the mapping changed): a plain
// overwrite of written blocks does not.
func (f *FS) writeChunk(n *node, p []byte, pos int64, openForWrite bool) (int, bool, error) {
	bs := f.blockSize
	lblk := uint64(pos / bs)
	lastBlk := uint64((pos + int64(len(p)) - 1) / bs)
	in := editInodeHot(n)
	h, err := f.beginHot(n)
	if err != nil {
		return 0, false, err
	}
	defer h.End()
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	mp, err := ed.Lookup(uint32(lblk))
	if err != nil {
		return 0, false, err
	}
	if !mp.Hole() {
		nblk := min(mp.Len, lastBlk-lblk+1)
		m := min(int64(len(p)), int64(lblk+nblk)*bs-pos)
		if err := f.writeData(mp.Physical, lblk, p[:m], pos, mp.Unwritten); err != nil {
			return 0, false, err
		}
		if mp.Unwritten {
			if err := ed.Convert(uint32(lblk), uint32(nblk), true); err != nil {
				return 0, true, err
			}
			if err := f.addBlocks(in, s.delta); err != nil {
				return 0, true, err
			}
			if err := f.setInodeHot(h, n, in); err != nil {
				return 0, true, err
			}
			return int(m), true, nil
		}
		// A plain overwrite leaves the inode to extendSize: the copy,
		// never published, is nobody's and becomes the spare again.
		n.spare = in
		return int(m), false, nil
	}
	want := min(mp.Len, lastBlk-lblk+1, maxAllocChunk)
	req := mballoc.Request{
		Inode: n.ino, Logical: lblk, Len: uint32(want), Flags: mballoc.FlagData,
		FileSize: in.Size, OpenForWrite: openForWrite,
	}
	var m int64
	_, err = f.mapNew(h, in, s, ed, req, &mp, false, func(ext mballoc.Extent) error {
		m = min(int64(len(p)), int64(lblk+uint64(ext.Len))*bs-pos)
		return f.writeData(ext.Start, lblk, p[:m], pos, true)
	})
	if err != nil {
		return 0, true, err
	}
	if uint64(pos+m) > in.Size {
		in.Size = uint64(pos + m)
	}
	return int(m), true, f.setInodeHot(h, n, in)
}

// writeData writes p, the file bytes at pos, into the blocks from pblk
// (which maps logical block lblk). When fresh, the blocks hold no data
// yet: the parts of the first and last block that p does not cover are
// written as zeros.
func (f *FS) writeData(pblk, lblk uint64, p []byte, pos int64, fresh bool) error {
	if err := f.inject("write"); err != nil {
		return err
	}
	bs := f.blockSize
	start := int64(pblk)*bs + (pos - int64(lblk)*bs)
	if err := f.checkDataWrite(start, int64(len(p))); err != nil {
		return err
	}
	if !fresh {
		_, err := f.dev.WriteAt(p, start)
		return err
	}
	head := pos % bs
	tail := (bs - (pos+int64(len(p)))%bs) % bs
	if head == 0 && tail == 0 {
		_, err := f.dev.WriteAt(p, start)
		return err
	}
	buf := getScratch(int(head + int64(len(p)) + tail))
	clear(buf[:head])
	copy(buf[head:], p)
	clear(buf[head+int64(len(p)):])
	_, err := f.dev.WriteAt(buf, start-head)
	putScratch(buf)
	return err
}

// zeroData writes zeros over file bytes [from, to) where they are mapped
// and written (used for the partial blocks at the edges of truncates and
// punches).
func (f *FS) zeroData(n *node, in *inode.Inode, from, to int64) error {
	if from >= to {
		return nil
	}
	bs := f.blockSize
	s := &extStore{f: f}
	ed := f.editor(n, in, s)
	for pos := from; pos < to; {
		lblk := uint64(pos / bs)
		mp, err := ed.Lookup(uint32(lblk))
		if err != nil {
			return err
		}
		chunk := min(to-pos, int64(lblk+mp.Len)*bs-pos)
		if !mp.Hole() && !mp.Unwritten {
			if err := f.checkDataWrite(int64(mp.Physical)*bs+pos%bs, chunk); err != nil {
				return err
			}
			zeros := make([]byte, chunk)
			if _, err := f.dev.WriteAt(zeros, int64(mp.Physical)*bs+pos%bs); err != nil {
				return err
			}
		}
		pos += chunk
	}
	return nil
}

// zeroEdges zeros the parts of [off, end) that lie in partial blocks at
// its edges (all of it when it sits inside one block); whole blocks are
// left to the caller, which frees or converts them.
func (f *FS) zeroEdges(n *node, in *inode.Inode, off, end int64) error {
	bs := f.blockSize
	firstFull, endFull := (off+bs-1)/bs, end/bs
	if firstFull > endFull {
		return f.zeroData(n, in, off, end)
	}
	if err := f.zeroData(n, in, off, firstFull*bs); err != nil {
		return err
	}
	return f.zeroData(n, in, endFull*bs, end)
}

// Fallocate modes (Linux FALLOC_FL_*).
const (
	FallocKeepSize  = 0x01
	FallocPunchHole = 0x02
	FallocZeroRange = 0x10
)

var _ = super.Size
