package ext4go

import (
	"fmt"
	"io"
	"io/fs"
	"sort"
	"syscall"

	"github.com/ext4go/ext4go/internal/blockmap"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/inode"
)

// run is a stretch of a file's logical blocks mapped to consecutive
// physical blocks, from an extent or from a block map.
type run struct {
	logical   uint64
	physical  uint64
	length    uint64
	unwritten bool
}

// Extent is a run of a file's blocks stored contiguously, in blocks of
// FS.BlockSize bytes, as filefrag reports it.
type Extent struct {
	Logical   uint64 // first block of the file
	Physical  uint64 // first block on the device
	Length    uint64 // blocks
	Unwritten bool   // allocated but reads as zeros (fallocate)
}

// Range is a byte range of a file.
type Range struct {
	Off, Len int64
}

func (f *FS) blockReader(what string) func(uint64) ([]byte, error) {
	return func(b uint64) ([]byte, error) { return f.readBlock(b, what) }
}

// blockViewer is blockReader without the copy: fn sees the cached block
// and must not keep it.
func (f *FS) blockViewer(what string) func(uint64, func([]byte) error) error {
	return func(b uint64, fn func([]byte) error) error {
		if err := f.checkMetaBlock(b, what); err != nil {
			return err
		}
		var fnErr error
		if err := f.tm.View(b, func(p []byte) error { fnErr = fn(p); return nil }); err != nil {
			return fmt.Errorf("read %s: %w", what, err)
		}
		return fnErr
	}
}

// sealedExtentViewer is blockViewer for extent.Tree.Sealed.
func (f *FS) sealedExtentViewer() extent.SealedView {
	return func(b uint64, seed uint32, fn func([]byte, bool) (bool, error)) error {
		if err := f.checkMetaBlock(b, "extent tree block"); err != nil {
			return err
		}
		var fnErr error
		if err := f.tm.ViewSealed(b, seed, func(p []byte, sealed bool) (bool, error) {
			var ok bool
			ok, fnErr = fn(p, sealed)
			return ok, nil
		}); err != nil {
			return fmt.Errorf("read extent tree block: %w", err)
		}
		return fnErr
	}
}

// readBlockSealed copies block blk into b, as readBlockInto does, and
// reports whether its extent-tree tail checksum under seed holds: known
// from the cache's seal, or verified now (and then sealed).
func (f *FS) readBlockSealed(blk uint64, what string, seed uint32, b []byte) (bool, error) {
	if err := f.checkMetaBlock(blk, what); err != nil {
		return false, err
	}
	known := false
	if err := f.tm.ViewSealed(blk, seed, func(data []byte, sealed bool) (bool, error) {
		copy(b, data)
		known = sealed || extent.VerifyChecksum(data[:f.blockSize], seed) == nil
		return known, nil
	}); err != nil {
		return false, fmt.Errorf("read %s: %w", what, err)
	}
	return known, nil
}

// checkMetaBlock refuses a metadata block number outside the filesystem.
func (f *FS) checkMetaBlock(b uint64, what string) error {
	if b >= f.sb.BlocksCount() || (b == 0 && f.blockSize > 1024) {
		return &CorruptError{What: what, Block: int64(b), Detail: fmt.Sprintf("block number outside the filesystem (%d blocks)", f.sb.BlocksCount())}
	}
	return nil
}

// hasInlineData reports whether n's data lives in the inode (inline_data).
func (n *node) hasInlineData() bool { return n.in().HasFlag(inode.FlagInlineData) }

// mapping returns n's block runs, reading its extent tree or block map on
// first use.
func (f *FS) mapping(n *node) ([]run, error) {
	ms := f.mapState(n)
	return ms.runs, ms.err
}

// mapState returns n's block runs, built if nobody has since n's inode
// last changed. The state returned is published (n.mapping) only when the
// inode did not change while it was built; either way it describes one
// inode.
func (f *FS) mapState(n *node) *mapState {
	if ms := n.mapping.Load(); ms != nil {
		return ms
	}
	in := n.in()
	runs, err := f.buildMapping(n, in)
	ms := &mapState{runs: runs, err: err}
	// Publish only if the inode did not change meanwhile.
	if n.in() == in && !n.mapping.CompareAndSwap(nil, ms) {
		if cur := n.mapping.Load(); cur != nil {
			return cur
		}
	}
	return ms
}

// extentTree is the extent tree of in (n's inode, or a copy being changed)
// for reading.
func (f *FS) extentTree(n *node, in *inode.Inode) *extent.Tree {
	return &extent.Tree{
		Root: in.Block[:], Read: extent.BlockReader(f.blockReader("extent tree block")),
		View: f.viewExtentBlock, Sealed: f.viewSealedExtentBlock,
		BlockSize: int(f.blockSize), FirstDataBlock: uint64(f.sb.FirstDataBlock),
		BlocksCount: f.sb.BlocksCount(), Zone: f.zone.Load(), Csum: f.csum && !f.opts.IgnoreChecksums,
		Seed: inode.Seed(f.seed, n.ino, in.Generation), Ino: n.ino,
	}
}

// blockMap is the indirect block map of in (n's inode, or a copy being
// changed) for reading.
func (f *FS) blockMap(n *node, in *inode.Inode) *blockmap.Map {
	return &blockmap.Map{
		Root: in.Block[:], Read: blockmap.BlockReader(f.blockReader("indirect block")),
		BlockSize: int(f.blockSize), FirstDataBlock: uint64(f.sb.FirstDataBlock),
		BlocksCount: f.sb.BlocksCount(), Zone: f.zone.Load(), Ino: n.ino,
	}
}

func (f *FS) buildMapping(n *node, in *inode.Inode) ([]run, error) {
	if n.hasInlineData() || (n.isSymlink() && f.isFastSymlink(n)) {
		return nil, nil
	}
	switch in.FileType() {
	case inode.TypeRegular, inode.TypeDir, inode.TypeSymlink:
	default:
		return nil, nil // devices, fifos and sockets have no data
	}
	if in.HasFlag(inode.FlagEncrypt) {
		return nil, &UnsupportedError{Feature: "encrypted files", Detail: fmt.Sprintf("inode %d", n.ino)}
	}
	var runs []run
	if in.HasFlag(inode.FlagExtents) {
		t := f.extentTree(n, in)
		err := t.Walk(func(e extent.Extent) error {
			runs = appendRun(runs, run{uint64(e.Logical), e.Start, uint64(e.Len), e.Unwritten})
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else {
		m := f.blockMap(n, in)
		err := m.Walk(func(r blockmap.Run) error {
			if r.Level == 0 {
				runs = appendRun(runs, run{uint64(r.Logical), r.Physical, uint64(r.Len), false})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for i := 1; i < len(runs); i++ {
		if runs[i].logical < runs[i-1].logical+runs[i-1].length {
			return nil, &CorruptError{What: "block map", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("logical block %d mapped twice", runs[i].logical)}
		}
	}
	return runs, nil
}

// appendRun adds r, merging it into the previous run when both continue
// each other logically and physically.
func appendRun(runs []run, r run) []run {
	if k := len(runs) - 1; k >= 0 {
		p := &runs[k]
		if p.unwritten == r.unwritten && p.logical+p.length == r.logical && p.physical+p.length == r.physical {
			p.length += r.length
			return runs
		}
	}
	return append(runs, r)
}

// readAt reads file data: mapped blocks from the device, holes and
// unwritten extents as zeros, inline data from the inode.
func (f *FS) readAt(n *node, p []byte, off int64) (int, error) {
	size := n.size()
	if off >= size {
		return 0, io.EOF
	}
	want := len(p)
	if int64(want) > size-off {
		p = p[:size-off]
	}
	if n.hasInlineData() {
		data, err := f.inlineData(n)
		if err != nil {
			return 0, err
		}
		m := 0
		if off < int64(len(data)) {
			m = copy(p, data[off:])
		}
		clear(p[m:])
	} else {
		runs, err := f.mapping(n)
		if err != nil {
			return 0, err
		}
		if err := f.readRuns(n, runs, p, off); err != nil {
			return 0, err
		}
		// Delayed blocks are holes in the tree; their data is in memory.
		f.daOverlay(n, p, off)
	}
	if len(p) < want {
		return len(p), io.EOF
	}
	return len(p), nil
}

// readRuns fills p with the file bytes at off, one device read per run.
func (f *FS) readRuns(n *node, runs []run, p []byte, off int64) error {
	bs := f.blockSize
	for len(p) > 0 {
		lblk := uint64(off / bs)
		inBlock := off % bs
		i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > lblk })
		if i == len(runs) || runs[i].logical > lblk {
			// A hole up to the next run (or the end of p).
			end := int64(len(p))
			if i < len(runs) {
				end = min(end, int64(runs[i].logical)*bs-off)
			}
			clear(p[:end])
			p, off = p[end:], off+end
			continue
		}
		r := runs[i]
		avail := int64(r.logical+r.length-lblk)*bs - inBlock
		chunk := min(int64(len(p)), avail)
		if r.unwritten {
			clear(p[:chunk])
		} else {
			pblk := r.physical + (lblk - r.logical)
			if pblk+uint64((inBlock+chunk+bs-1)/bs) > f.sb.BlocksCount() {
				return &CorruptError{What: "file data", Block: int64(pblk), Ino: n.ino, Detail: "mapped outside the filesystem"}
			}
			if err := f.readFull(p[:chunk], int64(pblk)*bs+inBlock, "file data"); err != nil {
				return fserr.At(err, int64(pblk), n.ino)
			}
		}
		p, off = p[chunk:], off+chunk
	}
	return nil
}

// Extents returns the extents of the named file (not following a final
// symbolic link), merged where they continue each other as filefrag does.
// Files with inline data or no data have none.
func (f *FS) Extents(name string) ([]Extent, error) {
	n, err := f.resolve("extents", name, false)
	if err != nil {
		return nil, err
	}
	return f.extentsOf(n)
}

// Extents is FS.Extents of the open file (for a walk that has the files
// open, or their inode numbers: OpenInode, and resolves no paths).
func (fl *File) Extents() ([]Extent, error) {
	if err := fl.checkOpen("extents"); err != nil {
		return nil, err
	}
	return fl.fsys.extentsOf(fl.n)
}

func (f *FS) extentsOf(n *node) ([]Extent, error) {
	// The tree's blocks must not change while it is walked, and delayed
	// blocks get theirs first (kernel: FIEMAP writes dirty data back
	// before it reports, filemap_write_and_wait).
	unlock, err := f.daMapped(n)
	defer unlock()
	if err != nil {
		return nil, err
	}
	runs, err := f.mapping(n)
	if err != nil {
		return nil, err
	}
	out := make([]Extent, len(runs))
	for i, r := range runs {
		out[i] = Extent{r.logical, r.physical, r.length, r.unwritten}
	}
	return out, nil
}

// DataRanges returns the byte ranges of the file that hold written data,
// in order; everything else reads as zeros. Copying only these keeps holes.
func (fl *File) DataRanges() ([]Range, error) {
	if err := fl.checkOpen("dataranges"); err != nil {
		return nil, err
	}
	return fl.dataRanges()
}

// dataRanges is DataRanges without the open check (Seek holds fl.mu).
func (fl *File) dataRanges() ([]Range, error) {
	n, f := fl.n, fl.fsys
	// As extentsOf: a stable tree, delayed blocks mapped first.
	unlock, err := f.daMapped(n)
	defer unlock()
	if err != nil {
		return nil, err
	}
	size := n.size()
	if n.hasInlineData() || (n.isSymlink() && f.isFastSymlink(n)) {
		if size == 0 {
			return nil, nil
		}
		return []Range{{0, size}}, nil
	}
	runs, err := f.mapping(n)
	if err != nil {
		return nil, err
	}
	var out []Range
	for _, r := range runs {
		if r.unwritten {
			continue
		}
		start := int64(r.logical) * f.blockSize
		end := min(start+int64(r.length)*f.blockSize, size)
		if start >= end {
			continue
		}
		if k := len(out) - 1; k >= 0 && out[k].Off+out[k].Len == start {
			out[k].Len += end - start
			continue
		}
		out = append(out, Range{start, end - start})
	}
	return out, nil
}

// seekData is File.seekData on n: the first run that ends past off is
// found by binary search in n's block runs (built once per change of the
// inode, as readAt uses them), and only the runs from there on that
// continue the answer are looked at. Delayed blocks get theirs first, as
// for DataRanges (kernel: ext4_iomap_begin_report reports delalloc as
// data; here the data is mapped instead). kernel: ext4_llseek,
// iomap_seek_data, iomap_seek_hole.
func (f *FS) seekData(n *node, off int64, data bool) (int64, error) {
	n.mu.RLock()
	if !n.hasDelayed() {
		// daMapped's path without its unlock func, which allocates.
		defer n.mu.RUnlock()
		return f.seekMapped(n, off, data)
	}
	n.mu.RUnlock()
	unlock, err := f.daMapped(n)
	defer unlock()
	if err != nil {
		return 0, err
	}
	return f.seekMapped(n, off, data)
}

// seekMapped is seekData with n.mu held and no delayed blocks.
func (f *FS) seekMapped(n *node, off int64, data bool) (int64, error) {
	size := n.size()
	if off >= size {
		return 0, syscall.ENXIO
	}
	if n.hasInlineData() || (n.isSymlink() && f.isFastSymlink(n)) {
		if data {
			return off, nil
		}
		return size, nil
	}
	runs, err := f.mapping(n)
	if err != nil {
		return 0, err
	}
	return seekRuns(runs, f.blockSize, size, off, data)
}

// seekRuns is seekData over block runs in logical order: off is below
// size.
func seekRuns(runs []run, bs, size, off int64, data bool) (int64, error) {
	lblk := uint64(off / bs)
	i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > lblk })
	for ; i < len(runs); i++ {
		r := runs[i]
		start := int64(r.logical) * bs
		if start >= size {
			break
		}
		if r.unwritten {
			continue // a hole that reads as zeros
		}
		if data {
			return max(off, start), nil
		}
		if off < start {
			return off, nil
		}
		// Inside data: the hole starts at its end, unless the next run
		// continues it.
		off = min(start+int64(r.length)*bs, size)
	}
	if data {
		return 0, syscall.ENXIO
	}
	return min(off, size), nil
}

// readLocked is readAt under n's shared lock, so the blocks it reads are
// not freed (and reused) by a concurrent truncate or punch meanwhile.
func (f *FS) readLocked(n *node, p []byte, off int64) (int, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.freed.Load() {
		// Only a path read racing an unlink, or a closed File, gets here:
		// the blocks may be another file's now.
		return 0, fs.ErrNotExist
	}
	return f.readAt(n, p, off)
}
