package dir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/ext4go/ext4go/internal/fserr"
)

// BlockReader returns logical block lblk of a directory, f.BlockSize bytes.
// A hole returns (nil, nil). Dir reads each block through it once per use and
// does not keep or modify the slice.
type BlockReader func(lblk uint32) ([]byte, error)

// BlockViewer calls fn with logical block lblk of a directory (nil for a
// hole), which fn must neither keep nor change: the block may be the
// caller's cached copy, held read-locked while fn runs.
type BlockViewer func(lblk uint32, fn func(b []byte) error) error

// Dir is one directory as the walkers see it: its blocks, how many there are
// and how to verify them. It is a plain value; the walkers keep no state in
// it.
type Dir struct {
	Format
	Read BlockReader
	// View, when set, is how lookups read leaves: without the copy Read
	// makes, which was most of what a lookup allocated.
	View     BlockViewer
	NBlocks  uint32 // i_size / block size: blocks at or past it are never read
	Indexed  bool   // inode flag EXT4_INDEX_FL: block 0 is an htree root
	CsumSeed uint32 // the directory inode's checksum seed (with Format.Csum)
	Ino      uint32 // the directory's inode number, for error reports only
}

// Result locates a found entry.
type Result struct {
	Entry
	Block  uint32 // logical block holding the dirent
	Offset int    // byte offset of the dirent in that block
}

// errBadIndex marks htree structure errors after which the kernel falls
// back to a linear search (ERR_BAD_DX_DIR).
type errBadIndex struct{ err error }

func (e *errBadIndex) Error() string { return e.err.Error() }
func (e *errBadIndex) Unwrap() error { return e.err }

// block reads logical block lblk, refusing blocks past the directory end
// and, if mustExist, holes (kernel: __ext4_read_dirblock).
func (d *Dir) block(lblk uint32, what string, mustExist bool) ([]byte, error) {
	if lblk >= d.NBlocks {
		return nil, &fserr.CorruptError{What: what, Block: int64(lblk), Ino: d.Ino,
			Detail: fmt.Sprintf("block %d is past the directory's %d blocks", lblk, d.NBlocks)}
	}
	b, err := d.Read(lblk)
	if err != nil {
		return nil, err
	}
	if b == nil {
		if mustExist {
			return nil, &fserr.CorruptError{What: what, Block: int64(lblk), Ino: d.Ino, Detail: "directory hole"}
		}
		return nil, nil
	}
	if len(b) != d.BlockSize {
		return nil, fmt.Errorf("dir: block reader returned %d bytes for block %d, want %d", len(b), lblk, d.BlockSize)
	}
	return b, nil
}

// viewBlock calls fn with logical block lblk as block reads it (nil for a
// hole when !mustExist), through View when there is one; fn must not keep
// b.
func (d *Dir) viewBlock(lblk uint32, what string, mustExist bool, fn func(b []byte) error) error {
	if d.View == nil {
		b, err := d.block(lblk, what, mustExist)
		if err != nil {
			return err
		}
		return fn(b)
	}
	if lblk >= d.NBlocks {
		return &fserr.CorruptError{What: what, Block: int64(lblk), Ino: d.Ino,
			Detail: fmt.Sprintf("block %d is past the directory's %d blocks", lblk, d.NBlocks)}
	}
	return d.View(lblk, func(b []byte) error {
		if b == nil {
			if mustExist {
				return &fserr.CorruptError{What: what, Block: int64(lblk), Ino: d.Ino, Detail: "directory hole"}
			}
			return fn(nil)
		}
		if len(b) != d.BlockSize {
			return fmt.Errorf("dir: block viewer gave %d bytes for block %d, want %d", len(b), lblk, d.BlockSize)
		}
		return fn(b)
	})
}

// leaf reads, verifies and parses a leaf block; the names alias the block.
func (d *Dir) leaf(lblk uint32, mustExist bool) (*Block, error) {
	b, err := d.block(lblk, "directory block", mustExist)
	if b == nil || err != nil {
		return nil, err
	}
	return d.parseLeafView(lblk, b)
}

// parseLeaf verifies and parses leaf block lblk read as b.
func (d *Dir) parseLeaf(lblk uint32, b []byte) (*Block, error) {
	return d.parseLeafOpt(lblk, b, true)
}

// parseLeafView is parseLeaf with names aliasing b, for callers that only
// compare them before b changes.
func (d *Dir) parseLeafView(lblk uint32, b []byte) (*Block, error) {
	return d.parseLeafOpt(lblk, b, false)
}

func (d *Dir) parseLeafOpt(lblk uint32, b []byte, copyNames bool) (*Block, error) {
	if err := VerifyLeafChecksum(b, d.Format, d.CsumSeed); err != nil {
		return nil, fserr.At(err, int64(lblk), d.Ino)
	}
	blk, err := parseBlock(b, d.Format, copyNames)
	if err != nil {
		return nil, fserr.At(err, int64(lblk), d.Ino)
	}
	return blk, nil
}

// root reads, verifies and parses the htree root.
func (d *Dir) root() (*DxRoot, error) {
	r := new(DxRoot)
	if err := d.rootInto(r, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// rootInto is root into r, its entries in dst's array when it is large
// enough. The block is looked at in place: the parse copies what it keeps.
func (d *Dir) rootInto(r *DxRoot, dst []DxEntry) error {
	return d.viewBlock(0, "htree root", true, func(b []byte) error {
		if err := VerifyDxChecksum(b, d.Format, d.CsumSeed); err != nil {
			return fserr.At(err, 0, d.Ino)
		}
		if err := parseDxRoot(b, d.Format, r, dst); err != nil {
			var ce *fserr.CorruptError
			if errors.As(err, &ce) {
				return &errBadIndex{fserr.At(err, 0, d.Ino)}
			}
			return err
		}
		return nil
	})
}

// dxScratch holds what one lookup or insert walks through an htree with:
// the root and its entries (a 4 KiB block's root holds 508) and the path.
// Pooled: every lookup in an indexed directory parses its root, and
// allocating those entries each time was a quarter of a lookup's time.
type dxScratch struct {
	root    DxRoot
	entries [512]DxEntry
	node    DxNode
	levels  [dxMaxLevelsLarge - 1][512]DxEntry // the interior nodes' entries, by level
	frames  [dxMaxLevelsLarge]frame
}

var dxScratchPool = sync.Pool{New: func() any { return new(dxScratch) }}

func getDxScratch() *dxScratch { return dxScratchPool.Get().(*dxScratch) }

// putDxScratch returns sc to the pool; nothing may use it after.
func putDxScratch(sc *dxScratch) {
	sc.root.Entries, sc.node.Entries = nil, nil
	clear(sc.frames[:]) // drop interior nodes' entries read outside the arrays
	dxScratchPool.Put(sc)
}

// node reads, verifies and parses an interior htree block.
func (d *Dir) node(lblk uint32) (*DxNode, error) {
	n := new(DxNode)
	if err := d.nodeInto(lblk, n, nil); err != nil {
		return nil, err
	}
	return n, nil
}

// nodeInto is node into n, its entries in dst's array when it is large
// enough. The block is looked at in place: the parse copies what it keeps.
func (d *Dir) nodeInto(lblk uint32, n *DxNode, dst []DxEntry) error {
	return d.viewBlock(lblk, "htree node", true, func(b []byte) error {
		if err := VerifyDxChecksum(b, d.Format, d.CsumSeed); err != nil {
			return fserr.At(err, int64(lblk), d.Ino)
		}
		if err := parseDxNode(b, d.Format, n, dst); err != nil {
			return &errBadIndex{fserr.At(err, int64(lblk), d.Ino)}
		}
		return nil
	})
}

// frame is one level of an htree path: the entries of a root or node and
// the one followed.
type frame struct {
	block   uint32
	entries []DxEntry
	at      int
}

// probeInto is probe with the path appended to frames (its array reused
// when large enough) and, with sc, the interior nodes parsed into sc.
func (d *Dir) probeInto(r *DxRoot, hash uint32, frames []frame, sc *dxScratch) ([]frame, error) {
	frames = frames[:0]
	entries, blk := r.Entries, uint32(0)
	for level := 0; ; level++ {
		at := searchDx(entries, hash)
		frames = append(frames, frame{block: blk, entries: entries, at: at})
		next := entries[at].Block
		for _, fr := range frames {
			if fr.block == next {
				return nil, &errBadIndex{&fserr.CorruptError{What: "htree node", Block: int64(blk), Ino: d.Ino,
					Detail: fmt.Sprintf("tree cycle: block %d points back to block %d", blk, next)}}
			}
		}
		if level == int(r.IndirectLevels) {
			return frames, nil
		}
		if sc != nil && level < len(sc.levels) {
			if err := d.nodeInto(next, &sc.node, sc.levels[level][:0]); err != nil {
				return nil, err
			}
			entries, blk = sc.node.Entries, next
			continue
		}
		n, err := d.node(next)
		if err != nil {
			return nil, err
		}
		entries, blk = n.Entries, next
	}
}

// searchDx returns the index of the last entry whose hash is ≤ hash; entry 0
// covers everything below entry 1.
func searchDx(es []DxEntry, hash uint32) int {
	lo, hi := 1, len(es)-1
	for lo <= hi {
		m := lo + (hi-lo)/2
		if es[m].Hash > hash {
			hi = m - 1
		} else {
			lo = m + 1
		}
	}
	return lo - 1
}

// nextLeaf advances the path to the next leaf if its first hash continues
// hash (collision bit set, same hash), re-reading interior blocks below the
// level that moved (kernel: ext4_htree_next_block). It returns false at the
// end of the index or when the next leaf starts a different hash.
func (d *Dir) nextLeaf(frames []frame, hash uint32) (bool, error) {
	i := len(frames) - 1
	for {
		frames[i].at++
		if frames[i].at < len(frames[i].entries) {
			break
		}
		if i == 0 {
			return false, nil
		}
		i--
	}
	if frames[i].entries[frames[i].at].Hash&^1 != hash {
		return false, nil
	}
	for ; i < len(frames)-1; i++ {
		blk := frames[i].entries[frames[i].at].Block
		n, err := d.node(blk)
		if err != nil {
			return false, err
		}
		frames[i+1] = frame{block: blk, entries: n.Entries}
	}
	return true, nil
}

// findInLeaf reads and verifies leaf block lblk and finds the used entry
// called name in it (the name copied out); it checks the block as
// leaf does but builds no slot list (lookups and inserts do this for every
// name added).
func (d *Dir) findInLeaf(lblk uint32, name []byte) (Slot, bool, error) {
	var s Slot
	var ok bool
	err := d.viewBlock(lblk, "directory block", true, func(b []byte) error {
		var err error
		s, ok, err = d.findIn(lblk, b, name, false)
		s.Name = bytes.Clone(s.Name) // the block is only lent
		return err
	})
	return s, ok, err
}

// findIn finds the used entry called name in block lblk read as b. A leaf
// is verified first; with asDirents (index blocks in a linear search) the
// block is read as the dirents it pretends to be, unverified.
func (d *Dir) findIn(lblk uint32, b []byte, name []byte, asDirents bool) (Slot, bool, error) {
	region := b
	if !asDirents {
		if err := VerifyLeafChecksum(b, d.Format, d.CsumSeed); err != nil {
			return Slot{}, false, fserr.At(err, int64(lblk), d.Ino)
		}
		var err error
		if region, err = checkedLeafRegion(b, &d.Format); err != nil {
			return Slot{}, false, fserr.At(err, int64(lblk), d.Ino)
		}
	}
	var found Slot
	ok := false
	// Only the entry found has its inode number checked (kernel:
	// ext4_search_dir checks the matching entry in full): a bad number
	// in another entry does not hide the names around it.
	structure := d.Format
	structure.InodesCount = 0
	err := scanRegion(region, &structure, func(s Slot) bool {
		if s.Inode != 0 && bytes.Equal(s.Name, name) {
			found, ok = s, true
			return false
		}
		return true
	})
	if err != nil {
		return Slot{}, false, fserr.At(err, int64(lblk), d.Ino)
	}
	if ok {
		if err := d.checkEntryInode(found); err != nil {
			return Slot{}, false, fserr.At(err, int64(lblk), d.Ino)
		}
	}
	return found, ok, nil
}

// checkEntryInode refuses a used entry whose inode number is past
// InodesCount (kernel: __ext4_check_dir_entry, "inode out of bounds").
func (d *Dir) checkEntryInode(s Slot) error {
	if d.InodesCount == 0 || s.Inode <= d.InodesCount {
		return nil
	}
	return fserr.Corrupt("directory entry", "at offset %d: %q names inode %d, past the filesystem's %d (inode out of bounds)",
		s.Off, s.Name, s.Inode, d.InodesCount)
}

// isIndexBlock tells whether block lblk (read as b) of d is an htree root
// or interior node, which a linear search reads as plain dirents (kernel:
// is_dx_internal_node).
func (d *Dir) isIndexBlock(lblk uint32, b []byte) bool {
	return d.Indexed && (lblk == 0 || IsDxNode(b, d.Format))
}

func notFound(name []byte) error {
	return &notFoundError{string(name)}
}

// notFoundError is a missing name: what every create meets first, so it
// is built without fmt (a quarter of a create's allocations were this).
type notFoundError struct{ name string }

func (e *notFoundError) Error() string { return fmt.Sprintf("dir: %q: %v", e.name, fs.ErrNotExist) }
func (e *notFoundError) Unwrap() error { return fs.ErrNotExist }

// DxLookup finds name through the htree index (kernel: ext4_dx_find_entry):
// hash the name, walk to its leaf, and search following leaves while they
// continue the same hash. A missing name gives an error matching
// fs.ErrNotExist.
func (d *Dir) DxLookup(name []byte) (Result, error) {
	sc := getDxScratch()
	defer putDxScratch(sc)
	r := &sc.root
	if err := d.rootInto(r, sc.entries[:0]); err != nil {
		return Result{}, err
	}
	hash, _, err := hashName(name, EffectiveVersion(r.HashVersion, d.HashUnsigned), d.HashSeed)
	if err != nil {
		return Result{}, err
	}
	frames, err := d.probeInto(r, hash, sc.frames[:0], sc)
	if err != nil {
		return Result{}, err
	}
	for visited := uint32(0); ; visited++ {
		if visited >= d.NBlocks {
			return Result{}, &errBadIndex{&fserr.CorruptError{What: "htree", Block: -1, Ino: d.Ino,
				Detail: "more leaves for one hash than the directory has blocks"}}
		}
		last := frames[len(frames)-1]
		lblk := last.entries[last.at].Block
		s, ok, err := d.findInLeaf(lblk, name)
		if err != nil {
			return Result{}, err
		}
		if ok {
			return Result{Entry: s.Entry, Block: lblk, Offset: s.Off}, nil
		}
		more, err := d.nextLeaf(frames, hash)
		if err != nil {
			return Result{}, err
		}
		if !more {
			return Result{}, notFound(name)
		}
	}
}

// LinearLookup finds name by reading every block in turn (kernel: the
// non-htree path of __ext4_find_entry). Holes are skipped; in an indexed
// directory the root and interior blocks are read as the dirents they
// pretend to be.
func (d *Dir) LinearLookup(name []byte) (Result, error) {
	for lblk := uint32(0); lblk < d.NBlocks; lblk++ {
		var s Slot
		var ok bool
		err := d.viewBlock(lblk, "directory block", false, func(b []byte) error {
			if b == nil {
				return nil
			}
			var err error
			s, ok, err = d.findIn(lblk, b, name, d.isIndexBlock(lblk, b))
			s.Name = bytes.Clone(s.Name)
			return err
		})
		if err != nil {
			return Result{}, err
		}
		if ok {
			return Result{Entry: s.Entry, Block: lblk, Offset: s.Off}, nil
		}
	}
	return Result{}, notFound(name)
}

// Lookup finds name like the kernel's __ext4_find_entry: "." and ".." come
// from block 0; an indexed directory is searched through its htree, falling
// back to a linear search when the index itself is corrupt; other
// directories are searched linearly. A missing name gives an error matching
// fs.ErrNotExist.
func (d *Dir) Lookup(name []byte) (Result, error) {
	if len(name) == 0 || len(name) > MaxNameLen {
		return Result{}, notFound(name)
	}
	if string(name) == "." || string(name) == ".." {
		return d.lookupDots(name)
	}
	if d.Indexed {
		res, err := d.DxLookup(name)
		var bad *errBadIndex
		if !errors.As(err, &bad) {
			return res, err
		}
	}
	return d.LinearLookup(name)
}

// lookupDots finds "." or ".." in block 0, as a linear lookup there
// (findIn: a bad inode number in another entry does not hide them).
func (d *Dir) lookupDots(name []byte) (Result, error) {
	var s Slot
	found := false
	err := d.viewBlock(0, "directory block", false, func(b []byte) error {
		if b == nil {
			return nil
		}
		var err error
		s, found, err = d.findIn(0, b, name, d.isIndexBlock(0, b))
		s.Name = bytes.Clone(s.Name)
		return err
	})
	if err != nil {
		return Result{}, err
	}
	if !found {
		return Result{}, notFound(name)
	}
	return Result{Entry: s.Entry, Block: 0, Offset: s.Off}, nil
}

// Iterate calls fn for every used entry, "." and ".." included, in block
// order (the order of a linear readdir), with the logical block and offset of
// its dirent. Holes are skipped. In an indexed directory block 0 yields "."
// and ".." (the root's fake dirents) and interior index blocks yield nothing. If fn
// returns fs.SkipAll, Iterate stops and returns nil; any other error stops it
// and is returned.
func (d *Dir) Iterate(fn func(lblk uint32, off int, e Entry) error) error {
	for lblk := uint32(0); lblk < d.NBlocks; lblk++ {
		if err := d.iterateBlock(lblk, fn); err != nil {
			if err == fs.SkipAll {
				return nil
			}
			return err
		}
	}
	return nil
}

func (d *Dir) iterateBlock(lblk uint32, fn func(lblk uint32, off int, e Entry) error) error {
	b, err := d.block(lblk, "directory block", false)
	if b == nil || err != nil {
		return err
	}
	var slots []Slot
	if d.isIndexBlock(lblk, b) {
		// Like the kernel's linear search (is_dx_internal_node), index
		// blocks are read as the dirents they pretend to be, unverified:
		// "." and ".." in the root, one unused dirent in a node. This is
		// what lets Lookup fall back to a linear search past a bad index.
		slots, err = ParseRegion(b, d.Format)
	} else {
		var blk *Block
		blk, err = d.parseLeaf(lblk, b)
		if blk != nil {
			slots = blk.Slots
		}
	}
	if err != nil {
		return fserr.At(err, int64(lblk), d.Ino)
	}
	for _, s := range slots {
		if s.Inode == 0 {
			continue
		}
		if err := fn(lblk, s.Off, s.Entry); err != nil {
			return err
		}
	}
	return nil
}

// IterateSkipping is Iterate for a listing, which shows what it can
// (kernel: ext4_readdir, which skips to the next block past a bad dirent
// or a block that fails its checksum): fn gets every used entry it can
// read, in block order; skip gets, and the walk goes past, an entry
// whose inode number is past InodesCount (e set; the walk goes on in its
// block) and a block that cannot be read, fails its checksum or holds a
// bad dirent (e nil; the entries before the bad dirent went to fn, the
// rest of the block is left out). Names are copies. An error from fn or
// skip stops the walk and is returned; fs.SkipAll stops it with nil.
func (d *Dir) IterateSkipping(fn func(lblk uint32, off int, e Entry) error, skip func(lblk uint32, e *Entry, err error) error) error {
	err := d.iterateSkipping(fn, skip)
	if err == fs.SkipAll {
		return nil
	}
	return err
}

func (d *Dir) iterateSkipping(fn func(lblk uint32, off int, e Entry) error, skip func(lblk uint32, e *Entry, err error) error) error {
	structure := d.Format
	structure.InodesCount = 0 // checked per entry
	for lblk := uint32(0); lblk < d.NBlocks; lblk++ {
		b, err := d.block(lblk, "directory block", false)
		if err != nil {
			if err := skip(lblk, nil, fserr.At(err, int64(lblk), d.Ino)); err != nil {
				return err
			}
			continue
		}
		if b == nil {
			continue
		}
		region := b
		if !d.isIndexBlock(lblk, b) { // index blocks are read unverified, as in iterateBlock
			if err := VerifyLeafChecksum(b, d.Format, d.CsumSeed); err != nil {
				if err := skip(lblk, nil, fserr.At(err, int64(lblk), d.Ino)); err != nil {
					return err
				}
				continue
			}
			if region, err = checkedLeafRegion(b, &d.Format); err != nil {
				if err := skip(lblk, nil, fserr.At(err, int64(lblk), d.Ino)); err != nil {
					return err
				}
				continue
			}
		}
		var stop error
		err = scanRegion(region, &structure, func(s Slot) bool {
			if s.Inode == 0 {
				return true
			}
			e := Entry{Inode: s.Inode, FileType: s.FileType, Name: bytes.Clone(s.Name)}
			if bad := d.checkEntryInode(s); bad != nil {
				stop = skip(lblk, &e, fserr.At(bad, int64(lblk), d.Ino))
			} else {
				stop = fn(lblk, s.Off, e)
			}
			return stop == nil
		})
		if stop != nil {
			return stop
		}
		if err != nil {
			if err := skip(lblk, nil, fserr.At(err, int64(lblk), d.Ino)); err != nil {
				return err
			}
		}
	}
	return nil
}

// LeafRange is one leaf of an htree in hash order, with the hash range the
// index assigns to it.
type LeafRange struct {
	Block uint32 // logical block of the leaf
	Lo    uint32 // the index entry's hash (0 for the first leaf); low bit set: continues the previous leaf's last hash
	Hi    uint64 // the next leaf's Lo, or 1<<32 after the last leaf
}

// Holds reports whether a name hashing to h (low bit clear) may live in the
// leaf: Lo&^1 ≤ h, and h < Hi, or h == Hi&^1 when the next leaf continues
// that hash.
func (l LeafRange) Holds(h uint32) bool {
	if h < l.Lo&^1 {
		return false
	}
	if l.Hi > 0xFFFFFFFF || uint64(h) < l.Hi {
		return true
	}
	return l.Hi&1 == 1 && uint64(h) == l.Hi&^1
}

// DxLeaves walks the whole htree and returns its leaves in hash order (the
// order of an htree readdir). Interior blocks are verified; leaves are not
// read. The walk refuses blocks referenced twice and leaves that are index
// blocks.
func (d *Dir) DxLeaves() (*DxRoot, []LeafRange, error) {
	r, leaves, _, err := d.dxWalk()
	return r, leaves, err
}

// dxWalk is DxLeaves that also returns the set of index blocks (the root,
// block 0, included).
func (d *Dir) dxWalk() (*DxRoot, []LeafRange, map[uint32]bool, error) {
	r, err := d.root()
	if err != nil {
		return nil, nil, nil, err
	}
	var out []LeafRange
	seen := map[uint32]bool{0: true}
	var walk func(es []DxEntry, level int, lo uint32) error
	walk = func(es []DxEntry, level int, lo uint32) error {
		for i, e := range es {
			h := e.Hash
			if i == 0 {
				h = lo
			}
			if level == int(r.IndirectLevels) {
				out = append(out, LeafRange{Block: e.Block, Lo: h})
				continue
			}
			if seen[e.Block] {
				return &errBadIndex{&fserr.CorruptError{What: "htree node", Block: int64(e.Block), Ino: d.Ino, Detail: "referenced twice"}}
			}
			seen[e.Block] = true
			n, err := d.node(e.Block)
			if err != nil {
				return err
			}
			if err := walk(n.Entries, level+1, h); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(r.Entries, 0, 0); err != nil {
		return nil, nil, nil, err
	}
	leaves := make(map[uint32]bool, len(out))
	for _, l := range out {
		if seen[l.Block] || leaves[l.Block] {
			return nil, nil, nil, &errBadIndex{&fserr.CorruptError{What: "htree", Block: int64(l.Block), Ino: d.Ino,
				Detail: "leaf block referenced twice or also an index block"}}
		}
		leaves[l.Block] = true
	}
	for i := range out {
		if i+1 < len(out) {
			out[i].Hi = uint64(out[i+1].Lo)
		} else {
			out[i].Hi = 1 << 32
		}
	}
	return r, out, seen, nil
}
