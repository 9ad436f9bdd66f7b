package ext4go

import (
	"fmt"
	"syscall"

	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
)

// truncate sets the size of regular file n, freeing blocks past it,
// for c, whose truncation drops n's privileges (kernel: do_truncate; a
// size refused drops nothing, the privileges going in the same setattr).
// n.mu must be held exclusively.
func (f *FS) truncate(n *node, size int64, c privCaller) error {
	if err := f.checkDataWritable(n); err != nil {
		return err
	}
	if size < 0 {
		return syscall.EINVAL
	}
	if size > f.maxFileSize(n) {
		return syscall.EFBIG
	}
	if _, err := f.removePrivs(n, c); err != nil {
		return err
	}
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return err
		}
	}
	f.w.balloc.DiscardInodePreallocOpen(n.ino)
	bs := f.blockSize
	first := uint64((size + bs - 1) / bs)
	if size < int64(n.inLocked().Size) {
		if err := f.prepareFree(n, first, false); err != nil {
			return err
		}
	}
	h, err := f.beginHot(n) // n.mu is held exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	if size < int64(in.Size) {
		if err := f.removeBlocksFrom(h, n, in, first); err != nil {
			return err
		}
		// Keep "bytes past i_size in the last block are zero" true; after
		// the removal, so that a failed one leaves the data as it was.
		if size%bs != 0 {
			if err := f.zeroData(n, in, size, min(int64(in.Size), (size/bs+1)*bs)); err != nil {
				return err
			}
		}
	}
	in.Size = uint64(size)
	now := inode.FromTime(f.now())
	in.Mtime, in.Ctime = now, now
	if err := f.setInodeHot(h, n, in); err != nil {
		return err
	}
	// Delayed blocks past the size go without being written, once the
	// truncate cannot fail any more.
	f.daTruncate(n, size)
	return nil
}

// removeBlocksFrom unmaps and frees n's blocks from logical block first
// to the end, in h, and takes them off in's block count. n.mu must be
// held exclusively, and prepareFree called for first.
func (f *FS) removeBlocksFrom(h handle, n *node, in *inode.Inode, first uint64) error {
	if first >= extent.MaxLogical {
		return nil
	}
	return f.removeBlocks(h, n, in, uint32(first), extent.MaxLogical)
}

// fallocate implements File.Fallocate for c, whose change drops n's
// privileges once the arguments passed (kernel: file_modified in
// ext4_fallocate and its modes); n.mu must be held exclusively.
func (f *FS) fallocate(n *node, mode int, off, length int64, c privCaller) error {
	if err := f.checkDataWritable(n); err != nil {
		return err
	}
	// Argument checks in the order of Linux's vfs_fallocate.
	if off < 0 || length <= 0 {
		return syscall.EINVAL
	}
	if mode&^(FallocKeepSize|FallocPunchHole|FallocZeroRange) != 0 {
		return &UnsupportedError{Feature: fmt.Sprintf("fallocate mode %#x", mode)}
	}
	if mode&FallocPunchHole != 0 && (mode&FallocKeepSize == 0 || mode&FallocZeroRange != 0) {
		return syscall.EOPNOTSUPP // as Linux: punch needs KEEP_SIZE, excludes ZERO_RANGE
	}
	end := off + length
	if end > f.maxFileSize(n) || end < off {
		return syscall.EFBIG
	}
	if !n.inLocked().HasFlag(inode.FlagExtents) && !n.inLocked().HasFlag(inode.FlagInlineData) && mode&FallocPunchHole == 0 {
		return syscall.EOPNOTSUPP // as Linux: preallocation needs extents; punching does not
	}
	if _, err := f.removePrivs(n, c); err != nil {
		return err
	}
	if n.inLocked().HasFlag(inode.FlagInlineData) {
		if err := f.uninlineFile(n); err != nil {
			return err
		}
	}
	// Every mode reads or changes the mapping over the range: delayed
	// blocks get theirs first (preallocating over a delayed hole would map
	// it twice).
	if err := f.flushDelayed(n, true); err != nil {
		return err
	}
	if mode&(FallocPunchHole|FallocZeroRange) != 0 {
		// Their blocks change under the preallocation's window; a plain
		// allocation keeps it, so fallocate appends use it as the
		// kernel's do and grow the file in one run.
		f.w.balloc.DiscardInodePreallocOpen(n.ino)
	}
	bs := f.blockSize
	firstFull := uint64((off + bs - 1) / bs)
	endFull := uint64(end / bs) // whole blocks [firstFull, endFull)
	switch {
	case mode&FallocPunchHole != 0:
		if end > int64(n.inLocked().Size) {
			end = int64(n.inLocked().Size)
		}
		return f.punch(n, off, end)
	case mode&FallocZeroRange != 0:
		if err := f.zeroRange(n, off, end, firstFull, endFull); err != nil {
			return err
		}
	}
	// Allocate unwritten extents over every hole in the range.
	first, last := uint64(off/bs), uint64((end-1)/bs)
	// The size and times change with the chunk that reaches the end of
	// the range, in its transaction, as the kernel's
	// ext4_alloc_file_blocks updates the inode in each handle: one
	// transaction for the usual small fallocate.
	finish := func(in *inode.Inode) {
		if mode&FallocKeepSize == 0 && uint64(end) > in.Size {
			in.Size = uint64(end)
		}
		// Every mode moves both, whatever it allocated and with
		// FALLOC_FL_KEEP_SIZE too, as the kernel's ext4_fallocate does
		// (Linux 6.18: TestFallocateTimesMatchKernel).
		in.Ctime = inode.FromTime(f.now())
		in.Mtime = in.Ctime
	}
	retries, finished := 0, false
	for lblk := first; lblk <= last; {
		adv, done, err := f.fallocChunk(n, lblk, last, finish)
		if err != nil && f.retryAfterCommit(err, &retries) {
			continue
		}
		if err != nil {
			return err
		}
		lblk += adv
		finished = done
	}
	if finished {
		return nil
	}
	h, err := f.beginHot(n) // n.mu is held exclusively; fallocChunk's handle has ended
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	finish(in)
	return f.setInodeHot(h, n, in)
}

// fallocChunk maps the hole at lblk (up to last) with unwritten blocks, or
// skips the extent there. It returns how many blocks it advanced and
// whether it applied finish, which it does to the inode it writes when
// the new blocks reach last.
func (f *FS) fallocChunk(n *node, lblk, last uint64, finish func(*inode.Inode)) (uint64, bool, error) {
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
	want := min(mp.Len, last-lblk+1)
	if !mp.Hole() {
		// Mapped already: the copy, never published, is nobody's.
		n.spare = in
		return want, false, nil
	}
	// Open for write: fallocate needs a file opened for writing. Space
	// past the end is an append: the file is growing.
	flags := mballoc.FlagData
	if lblk*uint64(f.blockSize) >= in.Size {
		flags |= mballoc.FlagAppend
	}
	req := mballoc.Request{Inode: n.ino, Logical: lblk, Len: uint32(min(want, extent.UnwrittenMaxLen)), Flags: flags,
		FileSize: in.Size, OpenForWrite: true}
	ext, err := f.mapNew(h, in, s, ed, req, &mp, true, nil)
	if err != nil {
		return 0, false, err
	}
	done := lblk+uint64(ext.Len) > last
	if done {
		finish(in)
	}
	return uint64(ext.Len), done, f.setInodeHot(h, n, in)
}

// punch frees the blocks wholly inside [off, end) and zeros the partial
// blocks at its edges.
func (f *FS) punch(n *node, off, end int64) error {
	if off >= end {
		return nil
	}
	bs := f.blockSize
	firstFull := (off + bs - 1) / bs
	endFull := end / bs
	if firstFull < endFull {
		if err := f.prepareFree(n, uint64(firstFull), false); err != nil {
			return err
		}
	}
	h, err := f.beginHot(n) // fallocate holds n.mu exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	// The blocks first: a removal that fails (ENOSPC for the split of an
	// extent) changes nothing, and only then are the edges zeroed.
	if firstFull < endFull {
		if err := f.removeBlocks(h, n, in, uint32(firstFull), uint32(endFull)); err != nil {
			return err
		}
	}
	if err := f.zeroEdges(n, in, off, end); err != nil {
		return err
	}
	now := inode.FromTime(f.now())
	in.Mtime, in.Ctime = now, now
	return f.setInodeHot(h, n, in)
}

// removeBlocks unmaps and frees n's blocks [from, to) in h and takes them
// off in's block count; n.mu is held exclusively.
func (f *FS) removeBlocks(h handle, n *node, in *inode.Inode, from, to uint32) error {
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	if err := f.editor(n, in, s).Remove(from, to); err != nil {
		return err
	}
	return f.addBlocks(in, s.delta)
}

// zeroRange makes [off, end) read as zeros: whole written blocks become
// unwritten, partial edge blocks are zeroed in place.
func (f *FS) zeroRange(n *node, off, end int64, firstFull, endFull uint64) error {
	h, err := f.beginHot(n) // fallocate holds n.mu exclusively; nothing below begins another
	if err != nil {
		return err
	}
	defer h.End()
	in := editInodeHot(n)
	// As in punch: the conversion (which may fail) before the zeroing.
	if firstFull < endFull {
		s := pooledExtStore(f, h, n.ino)
		defer putExtStore(s)
		if err := f.editor(n, in, s).Convert(uint32(firstFull), uint32(endFull-firstFull), false); err != nil {
			return err
		}
		if err := f.addBlocks(in, s.delta); err != nil {
			return err
		}
	}
	if err := f.zeroEdges(n, in, off, end); err != nil {
		return err
	}
	if firstFull < endFull {
		return f.setInodeHot(h, n, in)
	}
	// Only edges zeroed: the copy, never published, is nobody's.
	n.spare = in
	return nil
}
