package extent

import (
	"fmt"
	"sort"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/syszone"
)

// BlockReader returns the contents of one filesystem block (at least
// BlockSize bytes). The returned slice is only read, and not kept after the
// call that asked for it returns.
type BlockReader func(pblk uint64) ([]byte, error)

// Tree is the extent tree of one inode, read on demand through Read.
type Tree struct {
	Root []byte      // the inode's i_block; the first RootSize bytes are used
	Read BlockReader // needed only when the tree has depth > 0
	// View, if set, serves read-only walks (Lookup, Walk) without a copy
	// of each block: it calls fn with block blk's bytes, which fn must
	// not keep. The Editor reads through Read, for a copy to change.
	View func(blk uint64, fn func(b []byte) error) error
	// Sealed, if set, is preferred to View when Csum is: a cache that
	// remembers verified checksums lets a block's tail be verified once
	// per change of the block rather than on every read.
	Sealed    SealedView
	BlockSize int // filesystem block size, 1024..65536

	// Physical blocks named by the tree must lie after FirstDataBlock
	// (s_first_data_block) and, when BlocksCount is not 0, before
	// BlocksCount (kernel: ext4_inode_block_valid, without the system zone
	// check that needs the group layout).
	FirstDataBlock uint64
	BlocksCount    uint64
	// Zone, if set, is the filesystem's system zone: no extent nor index
	// may name a block of it but one the inode Ino owns (kernel: the
	// system zone check of ext4_inode_block_valid).
	Zone *syszone.Zone

	Csum bool   // verify the tails of block nodes (metadata_csum)
	Seed uint32 // the inode's checksum seed, inode.Seed(fsSeed, ino, generation)
	Ino  uint32 // inode number, for error reports

	// store reads blocks when Read is nil: an Editor's view, which binds
	// no method value per call.
	store Store
	// lender, in an Editor's view, lends decoded block nodes from a pool
	// the Editor takes back when its call ends.
	lender interface{ lendNode() *Node }
	// visit, in an Editor's view, is child's callback for View and
	// Sealed with its state, bound once: a closure made per call was two
	// or three allocations per tree level of every lookup.
	visit *childVisit
}

// childVisit is child's callback for Tree.View and Tree.Sealed and what it
// works on, for trees that keep one (an Editor's).
type childVisit struct {
	t           *Tree
	idx         Index
	parentDepth uint16
	end         uint64
	n           *Node
	decoded     bool
	sealedFn    func(b []byte, sealed bool) (bool, error)
	viewFn      func(b []byte) error
	boundTo     *childVisit
}

// bind makes v's callbacks refer to v (again, if v was copied).
func (v *childVisit) bind() {
	if v.boundTo != v {
		v.sealedFn, v.viewFn, v.boundTo = v.sealed, v.view, v
	}
}

func (v *childVisit) sealed(b []byte, sealed bool) (bool, error) {
	v.decoded = true
	// A tail that does not verify is left for decodeChild to report,
	// after the structural checks, as without a seal.
	t := v.t
	known := sealed || (len(b) >= t.BlockSize && VerifyChecksum(b[:t.BlockSize], t.Seed) == nil)
	var err error
	v.n, err = t.decodeChildKnown(v.idx, v.parentDepth, v.end, b, known)
	return known, err
}

func (v *childVisit) view(b []byte) error {
	v.decoded = true
	var err error
	v.n, err = v.t.decodeChild(v.idx, v.parentDepth, v.end, b)
	return err
}

// SealedView calls fn with block blk's bytes, which fn must not keep, and
// whether their checksum under seed is known good (sealed); fn returns
// whether it verified them now, so that the cache seals them (kernel:
// buffer_verified).
type SealedView func(blk uint64, seed uint32, fn func(b []byte, sealed bool) (bool, error)) error

// SealedStore is a Store that can say, with the copy ReadNode makes,
// whether the block's checksum under seed is known good; it verifies the
// tail itself (VerifyChecksum) when it is not known, and reports whether it
// holds. The Editor then skips its own verification of a sealed block.
type SealedStore interface {
	ReadNodeSealed(pblk uint64, seed uint32) (b []byte, sealed bool, err error)
}

// Mapping is where a file block lives, as Lookup reports it.
type Mapping struct {
	Logical uint32 // the block asked for
	// Len counts the blocks from Logical on that map the same way: the rest
	// of the extent, or for a hole the blocks up to the next extent (at most
	// up to MaxLogical+1; a hole may continue past an empty leaf).
	Len       uint64
	Physical  uint64 // physical block of Logical; 0 in a hole
	Unwritten bool   // in an unwritten extent: reads as zeros
	Extent    Extent // the whole extent; zero in a hole

	// For a hole, NearKnown says that the extents either side of it were
	// found in the leaf the lookup read: Left (if HasLeft) ends before
	// Logical, Right (if HasRight) starts after it, and a side without
	// one has none in the whole tree. When a neighbour may lie in another
	// leaf it is false: Editor.Neighbours looks there. A write into a hole
	// takes its allocation goal from them without a second walk.
	NearKnown         bool
	HasLeft, HasRight bool
	Left, Right       Extent
}

// Hole reports whether Logical is not mapped.
func (m Mapping) Hole() bool { return m.Physical == 0 }

// NodeInfo describes a node met by WalkNodes.
type NodeInfo struct {
	Block uint64 // physical block of the node; 0 for the root in the inode
	Node  *Node
	// The node covers file blocks [Logical, End): Logical is its parent's
	// index entry (0 for the root) and End the next one's (or 2^32).
	Logical uint32
	End     uint64
}

// RootNode returns the decoded and checked root node.
func (t *Tree) RootNode() (*Node, error) {
	n := &Node{}
	if err := t.rootInto(n); err != nil {
		return nil, err
	}
	return n, nil
}

// rootInto decodes and checks the root into n, reusing n's storage.
func (t *Tree) rootInto(n *Node) error {
	var err error
	n.Header, n.Extents, n.Indexes, err = t.decodeRoot(n.Extents[:0], n.Indexes[:0])
	return err
}

// decodeRoot decodes and checks the root, appending its entries to exts
// or idxs.
func (t *Tree) decodeRoot(exts []Extent, idxs []Index) (Header, []Extent, []Index, error) {
	if len(t.Root) < RootSize {
		return Header{}, exts, idxs, t.corrupt(-1, "i_block is %d bytes, want %d", len(t.Root), RootSize)
	}
	h, exts, idxs, err := decodeNodeIn(t.Root[:RootSize], exts, idxs)
	if err != nil {
		return h, exts, idxs, fserr.At(err, -1, t.Ino)
	}
	if h.Depth > MaxDepth {
		return h, exts, idxs, t.corrupt(-1, "depth %d exceeds %d", h.Depth, MaxDepth)
	}
	n := Node{Header: h, Extents: exts, Indexes: idxs}
	return h, exts, idxs, t.check(&n, -1, 0, 1<<32)
}

// child reads the node idx points to from a parent of depth parentDepth,
// covering file blocks [idx.Logical, end), and checks it.
func (t *Tree) child(idx Index, parentDepth uint16, end uint64) (*Node, error) {
	if t.View == nil && (t.Sealed == nil || !t.Csum) {
		n, _, err := t.readChild(idx, parentDepth, end)
		return n, err
	}
	if t.BlockSize < 1024 || t.BlockSize > 65536 {
		return nil, fmt.Errorf("extent tree of inode %d: bad block size %d", t.Ino, t.BlockSize)
	}
	v := t.visit
	if v == nil {
		v = new(childVisit)
	}
	v.bind()
	v.t, v.idx, v.parentDepth, v.end, v.n, v.decoded = t, idx, parentDepth, end, nil, false
	var err error
	if t.Csum && t.Sealed != nil {
		err = t.Sealed(idx.Child, t.Seed, v.sealedFn)
	} else {
		err = t.View(idx.Child, v.viewFn)
	}
	n, decoded := v.n, v.decoded
	v.t, v.n = nil, nil
	if err != nil && !decoded {
		return nil, fmt.Errorf("extent tree of inode %d: reading block %d: %w", t.Ino, idx.Child, err)
	}
	return n, err
}

// readChild is child that also returns the block's bytes (BlockSize of
// them, sharing the slice Read returned), for the Editor to change.
func (t *Tree) readChild(idx Index, parentDepth uint16, end uint64) (*Node, []byte, error) {
	read := t.Read
	if read == nil && t.store != nil {
		read = t.store.ReadNode
	}
	if read == nil {
		return nil, nil, fmt.Errorf("extent tree of inode %d: no block reader for depth %d", t.Ino, parentDepth)
	}
	if t.BlockSize < 1024 || t.BlockSize > 65536 {
		return nil, nil, fmt.Errorf("extent tree of inode %d: bad block size %d", t.Ino, t.BlockSize)
	}
	var b []byte
	var err error
	known := false
	if ss, ok := t.store.(SealedStore); ok && t.Read == nil && t.Csum {
		b, known, err = ss.ReadNodeSealed(idx.Child, t.Seed)
	} else {
		b, err = read(idx.Child)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("extent tree of inode %d: reading block %d: %w", t.Ino, idx.Child, err)
	}
	n, err := t.decodeChildKnown(idx, parentDepth, end, b, known)
	if err != nil {
		return nil, nil, err
	}
	return n, b[:t.BlockSize], nil
}

// decodeChild decodes and checks the node idx points to, from its block's
// bytes b.
func (t *Tree) decodeChild(idx Index, parentDepth uint16, end uint64, b []byte) (*Node, error) {
	return t.decodeChildKnown(idx, parentDepth, end, b, false)
}

// decodeChildKnown is decodeChild that skips the tail's verification when
// its checksum is known good.
func (t *Tree) decodeChildKnown(idx Index, parentDepth uint16, end uint64, b []byte, csumKnown bool) (*Node, error) {
	n := t.newNode()
	if err := t.decodeChildInto(idx, parentDepth, end, b, n, csumKnown); err != nil {
		return nil, err
	}
	return n, nil
}

// newNode is where decoded block nodes go: the Editor's pool for its
// view, else a new node.
func (t *Tree) newNode() *Node {
	if t.lender != nil {
		return t.lender.lendNode()
	}
	return &Node{}
}

// decodeChildInto is decodeChild into n's storage.
func (t *Tree) decodeChildInto(idx Index, parentDepth uint16, end uint64, b []byte, n *Node, csumKnown bool) error {
	blk := int64(idx.Child)
	if len(b) < t.BlockSize {
		return fmt.Errorf("extent tree of inode %d: block %d: read %d bytes, want %d", t.Ino, idx.Child, len(b), t.BlockSize)
	}
	b = b[:t.BlockSize]
	if err := decodeNodeInto(b, n); err != nil {
		return fserr.At(err, blk, t.Ino)
	}
	if n.Depth != parentDepth-1 {
		return t.corrupt(blk, "depth %d under a node of depth %d", n.Depth, parentDepth)
	}
	if err := t.check(n, blk, idx.Logical, end); err != nil {
		return err
	}
	if t.Csum && !csumKnown {
		if err := VerifyChecksum(b, t.Seed); err != nil {
			return fserr.At(err, blk, t.Ino)
		}
	}
	return nil
}

func (t *Tree) corrupt(blk int64, format string, a ...any) error {
	what := "extent node"
	if blk < 0 {
		what = "extent root"
	}
	return &fserr.CorruptError{What: what, Block: blk, Ino: t.Ino, Detail: fmt.Sprintf(format, a...)}
}

// validPhys applies the kernel's ext4_inode_block_valid bounds to count
// blocks from start.
func (t *Tree) validPhys(start, count uint64) bool {
	end := start + count
	return start > t.FirstDataBlock && end > start && (t.BlocksCount == 0 || end <= t.BlocksCount)
}

// outsideZone reports whether the tree may name count blocks from start
// as far as the system zone goes.
func (t *Tree) outsideZone(start, count uint64) bool {
	return t.Zone.Permits(t.Ino, start, count)
}

// check applies __ext4_ext_check and ext4_valid_extent_entries to a node at
// blk (-1 for the root) covering file blocks [lo, hi): eh_max fits its
// place, a block node's first entry starts at lo, entries are in order
// without overlap and inside [lo, hi), and name blocks inside the
// filesystem.
func (t *Tree) check(n *Node, blk int64, lo uint32, hi uint64) error {
	limit := MaxEntries(RootSize)
	if blk >= 0 {
		limit = MaxEntries(t.BlockSize)
	}
	switch {
	case n.Max == 0:
		return t.corrupt(blk, "eh_max is 0")
	case int(n.Max) > limit:
		return t.corrupt(blk, "eh_max %d exceeds %d", n.Max, limit)
	case n.Depth > 0 && len(n.Indexes) == 0:
		return t.corrupt(blk, "index node (depth %d) without entries", n.Depth)
	}
	if blk >= 0 && n.Len() > 0 {
		// The parent's index entry names the first block of the child.
		var first uint32
		if n.Leaf() {
			first = n.Extents[0].Logical
		} else {
			first = n.Indexes[0].Logical
		}
		if first != lo {
			return t.corrupt(blk, "first entry at block %d, parent index says %d", first, lo)
		}
	}
	next := uint64(lo) // no entry may start before this
	for i, e := range n.Extents {
		switch {
		case e.Len == 0:
			return t.corrupt(blk, "extent %d has length 0", i)
		case uint64(e.Logical) < next:
			return t.corrupt(blk, "extent %d at block %d overlaps or precedes the one before (next free %d)", i, e.Logical, next)
		case e.End() > MaxLogical || e.End() > hi:
			return t.corrupt(blk, "extent %d (blocks %d+%d) runs past block %d", i, e.Logical, e.Len, min(hi, MaxLogical))
		case !t.validPhys(e.Start, uint64(e.Len)):
			return t.corrupt(blk, "extent %d maps to blocks %d+%d outside the filesystem", i, e.Start, e.Len)
		case !t.outsideZone(e.Start, uint64(e.Len)):
			return t.corrupt(blk, "extent %d maps file blocks %d+%d to blocks %d+%d, which hold the filesystem's fixed metadata",
				i, e.Logical, e.Len, e.Start, e.Len)
		}
		next = e.End()
	}
	for i, x := range n.Indexes {
		switch {
		case uint64(x.Logical) < next:
			return t.corrupt(blk, "index %d at block %d is out of order", i, x.Logical)
		case uint64(x.Logical) >= hi:
			return t.corrupt(blk, "index %d at block %d is past the node's end %d", i, x.Logical, hi)
		case !t.validPhys(x.Child, 1):
			return t.corrupt(blk, "index %d names block %d outside the filesystem", i, x.Child)
		case !t.outsideZone(x.Child, 1):
			return t.corrupt(blk, "index %d (file blocks from %d) names block %d, which holds the filesystem's fixed metadata",
				i, x.Logical, x.Child)
		}
		next = uint64(x.Logical) + 1
	}
	return nil
}

// childEnd returns the end of the range index i of n covers: the next
// index's first block, or the end of n's own range.
func childEnd(n *Node, i int, hi uint64) uint64 {
	if i+1 < len(n.Indexes) {
		return uint64(n.Indexes[i+1].Logical)
	}
	return hi
}

// RootLeaf decodes and checks the root into buf and, when the root is
// the tree's only node (depth 0), returns its extents (in buf) and true;
// for a deeper tree it returns false. It reads no block and allocates
// nothing: for callers that only need a small file's extents.
func (t *Tree) RootLeaf(buf *[4]Extent) ([]Extent, bool, error) {
	var idxs [4]Index
	h, exts, _, err := t.decodeRoot(buf[:0], idxs[:0])
	if err != nil || h.Depth != 0 {
		return nil, false, err
	}
	return exts, true, nil
}

// Lookup maps file block lblk (kernel: ext4_find_extent followed by the
// lookup in ext4_ext_map_blocks). It reads at most one node per level.
func (t *Tree) Lookup(lblk uint32) (Mapping, error) {
	// The root holds at most four entries: decoded on the stack.
	var exts [4]Extent
	var idxs [4]Index
	var root Node
	var err error
	root.Header, root.Extents, root.Indexes, err = t.decodeRoot(exts[:0], idxs[:0])
	if err != nil {
		return Mapping{}, err
	}
	return t.lookupFrom(&root, lblk)
}

// lookupFrom is Lookup below a root already decoded and checked.
func (t *Tree) lookupFrom(n *Node, lblk uint32) (Mapping, error) {
	hi := uint64(1 << 32)
	leftmost := true // the path took every node's first index
	for !n.Leaf() {
		// The last index starting at or before lblk.
		i := sort.Search(len(n.Indexes), func(i int) bool { return n.Indexes[i].Logical > lblk }) - 1
		if i < 0 { // before the first index: only possible in the root
			return hole(lblk, uint64(n.Indexes[0].Logical)), nil
		}
		leftmost = leftmost && i == 0
		end := childEnd(n, i, hi)
		c, err := t.child(n.Indexes[i], n.Depth, end)
		if err != nil {
			return Mapping{}, err
		}
		n, hi = c, end
	}
	i := sort.Search(len(n.Extents), func(i int) bool { return n.Extents[i].Logical > lblk }) - 1
	if i >= 0 && uint64(lblk) < n.Extents[i].End() {
		e := n.Extents[i]
		off := uint64(lblk - e.Logical)
		return Mapping{Logical: lblk, Len: uint64(e.Len) - off, Physical: e.Start + off, Unwritten: e.Unwritten, Extent: e}, nil
	}
	m := hole(lblk, hi)
	if i+1 < len(n.Extents) {
		m = hole(lblk, uint64(n.Extents[i+1].Logical))
		m.HasRight, m.Right = true, n.Extents[i+1]
	}
	if i >= 0 {
		m.HasLeft, m.Left = true, n.Extents[i]
	}
	// A side with no extent in this leaf has none at all only if the leaf
	// is the tree's first (left) or last (right: it reaches block 2^32).
	m.NearKnown = (m.HasLeft || leftmost) && (m.HasRight || hi == 1<<32)
	return m, nil
}

func hole(lblk uint32, next uint64) Mapping {
	return Mapping{Logical: lblk, Len: next - uint64(lblk)}
}

// WalkNodes calls fn for every node of the tree, the root first and then
// depth first in file block order (parents before children). It detects a
// block that appears twice in the tree, so it ends on any input; every node
// is checked as Lookup checks it before fn sees it. An error from fn stops
// the walk and is returned.
func (t *Tree) WalkNodes(fn func(NodeInfo) error) error {
	return t.walk(fn, nil)
}

// Walk calls fn for every extent of the tree in file block order. The
// extents are checked not to overlap, also across leaves. An error from fn
// stops the walk and is returned.
func (t *Tree) Walk(fn func(Extent) error) error {
	return t.walk(nil, fn)
}

// Blocks returns the physical blocks of all the tree's nodes except the
// root (index and leaf blocks), in WalkNodes order: what the tree itself
// occupies besides the data.
func (t *Tree) Blocks() ([]uint64, error) {
	var out []uint64
	err := t.WalkNodes(func(ni NodeInfo) error {
		if ni.Block != 0 {
			out = append(out, ni.Block)
		}
		return nil
	})
	return out, err
}

// Extents returns all the extents of the tree in file block order.
func (t *Tree) Extents() ([]Extent, error) {
	var out []Extent
	err := t.Walk(func(e Extent) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

func (t *Tree) walk(nodeFn func(NodeInfo) error, extFn func(Extent) error) error {
	root, err := t.RootNode()
	if err != nil {
		return err
	}
	seen := map[uint64]bool{}
	var visit func(ni NodeInfo) error
	visit = func(ni NodeInfo) error {
		n := ni.Node
		if nodeFn != nil {
			if err := nodeFn(ni); err != nil {
				return err
			}
		}
		for _, e := range n.Extents {
			if extFn != nil {
				if err := extFn(e); err != nil {
					return err
				}
			}
		}
		for i, x := range n.Indexes {
			if seen[x.Child] {
				return t.corrupt(int64(ni.Block), "index %d names block %d, already in the tree", i, x.Child)
			}
			seen[x.Child] = true
			end := childEnd(n, i, ni.End)
			c, err := t.child(x, n.Depth, end)
			if err != nil {
				return err
			}
			if err := visit(NodeInfo{Block: x.Child, Node: c, Logical: x.Logical, End: end}); err != nil {
				return err
			}
		}
		return nil
	}
	// Depth is at most MaxDepth, so the recursion is shallow; the seen set
	// bounds the total work by the number of distinct blocks.
	return visit(NodeInfo{Node: root, End: 1 << 32})
}
