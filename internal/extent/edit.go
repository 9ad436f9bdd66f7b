package extent

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/ext4go/ext4go/internal/syszone"
)

// Errors of the Editor besides those of the read side and of its Store.
var (
	// ErrMapped: Insert was given a range with a block already mapped.
	ErrMapped = errors.New("extent: range already mapped")
	// ErrInvalid: an argument no extent tree can hold (zero or too long
	// extent, block numbers out of range), or an Editor set up wrongly.
	ErrInvalid = errors.New("extent: invalid argument")
	// ErrTooDeep: the change needs a tree deeper than MaxDepth.
	ErrTooDeep = errors.New("extent: tree would exceed the maximum depth")
)

// Store is what an Editor changes a tree through; the filesystem implements
// it inside one transaction. The Editor calls it only from the goroutine
// that called the Editor's method.
type Store interface {
	// ReadNode returns the current content of tree block pblk (at least
	// BlockSize bytes). The Editor may change the buffer in place; it
	// passes every buffer it changed to WriteNode before it returns.
	ReadNode(pblk uint64) ([]byte, error)
	// WriteNode stores the new content of tree block pblk, tail checksum
	// included. b is a buffer ReadNode returned or a new one.
	WriteNode(pblk uint64, b []byte) error
	// AllocNode allocates a block for a new tree node, near goal (the
	// physical block of the data or node the new node sits beside, 0 when
	// there is none: kernel ext4_ext_find_goal / ext4_ext_new_meta_block).
	AllocNode(goal uint64) (uint64, error)
	// FreeNode releases a tree block the tree no longer uses.
	FreeNode(pblk uint64) error
	// FreeData releases n data blocks from pblk that Remove unmapped.
	FreeData(pblk uint64, n uint32) error
}

// Editor changes the extent tree of one inode: the write side of Tree
// (kernel fs/ext4/extents.c). Root is the inode's i_block, changed in
// place (the caller writes the inode back, and keeps i_blocks in step with
// the AllocNode, FreeNode and FreeData calls it sees). Every node it writes
// has a correct header (eh_max 4 in the root, (BlockSize-12)/12 in a new
// block), sorted non-overlapping entries, index keys equal to the first
// block of their child, no empty block node, and its checksum tail when
// Csum is set. Trees from elsewhere are checked as Tree checks them on the
// path an operation reads.
//
// Insert, and the splits Remove and Convert need, allocate every new node
// before changing anything: when AllocNode fails the tree is unchanged.
// An error from ReadNode, WriteNode or a Free call may leave a change half
// done, as an I/O error inside a kernel transaction does; the caller is
// expected to abort the transaction.
//
// An Editor keeps nothing between calls but scratch storage (the decoded
// root, the path, the Tree view), so that the hot paths allocate nothing
// for a tree that fits in the inode; it must not be used from several
// goroutines at once, and its fields must not change while a call runs.
type Editor struct {
	Root      *[RootSize]byte // the inode's i_block, changed in place
	Store     Store
	BlockSize int // filesystem block size, 1024..65536

	Csum bool // write (and verify) tail checksums: metadata_csum
	// DeferSum leaves the tail checksum of the blocks it writes to the
	// Store, which promises to compute it (SetChecksum) before anything
	// reads the tail: a block changed by every append of a transaction is
	// then summed once per transaction rather than once per change.
	DeferSum bool
	Seed     uint32 // the inode's checksum seed, inode.Seed(fsSeed, ino, generation)
	Ino      uint32 // inode number, for error reports

	// Bounds of physical block numbers, and the system zone, as in Tree.
	FirstDataBlock, BlocksCount uint64
	Zone                        *syszone.Zone

	// View, if set, is given to the Tree view (Tree.View): read-only
	// lookups through it borrow blocks instead of copying them.
	View func(blk uint64, fn func(b []byte) error) error
	// Sealed, if set, is given to the Tree view as Tree.Sealed.
	Sealed SealedView

	// nodeMax, when set, caps the capacity of new block nodes: tests use
	// it to reach deep trees with few extents (it must be at least 5).
	nodeMax int

	// Scratch reused from call to call.
	tree     Tree
	root     Node // the decoded root of the current call
	rootExts [4]Extent
	rootIdxs [4]Index
	pathBuf  [MaxDepth + 1]level
	left     Extent // what Neighbours returns
	right    Extent
	// lent are the pooled nodes the current call decoded blocks into;
	// release gives them back when a public method returns.
	lent  [2 * (MaxDepth + 1)]*Node
	nlent int
	// visit is the view's child callback (Tree.visit).
	visit childVisit

	// The last root decodeRoot decoded and checked, by its bytes and the
	// bounds and zone it was checked against: most edits read the root several
	// times, and one whose bytes are the same is copied instead of
	// decoded and checked again. A copy, not the node the call works on,
	// which edits may change without writing it back.
	memo struct {
		ok     bool
		key    [RootSize]byte
		bounds [2]uint64
		zone   *syszone.Zone
		hdr    Header
		exts   [4]Extent
		idxs   [4]Index
		ne, ni uint8
	}
}

// Clear drops what the Editor refers to (its configuration, and the
// blocks and nodes its last call looked at) and keeps its scratch, so that
// a pooled Editor neither keeps memory alive nor pays to zero its arrays
// on every use; set the exported fields again before the next call.
func (ed *Editor) Clear() {
	ed.Root, ed.Store, ed.View, ed.Sealed, ed.Zone = nil, nil, nil, nil, nil
	ed.tree = Tree{}
	ed.root = Node{}
	for i := range ed.pathBuf {
		ed.pathBuf[i].buf, ed.pathBuf[i].node = nil, nil
	}
	ed.release()
}

// nodePool recycles decoded block nodes: a leaf block holds up to 340
// extents, so decoding one per level per call was most of what a write
// to a file of many extents allocated.
var nodePool = sync.Pool{New: func() any { return new(Node) }}

// lendNode returns a node for a decoded block, from the pool while the
// Editor can remember to give it back.
func (ed *Editor) lendNode() *Node {
	if ed.nlent == len(ed.lent) {
		return &Node{}
	}
	n := nodePool.Get().(*Node)
	ed.lent[ed.nlent] = n
	ed.nlent++
	return n
}

// release gives back the nodes lent during a call; nothing of the call
// may refer to them after (results are copied out).
func (ed *Editor) release() {
	for i := range ed.nlent {
		n := ed.lent[i]
		n.Extents, n.Indexes = n.Extents[:0], n.Indexes[:0]
		nodePool.Put(n)
		ed.lent[i] = nil
	}
	ed.nlent = 0
}

// Lookup maps file block lblk as Tree.Lookup does, giving back the nodes
// it decoded.
func (ed *Editor) Lookup(lblk uint32) (Mapping, error) {
	defer ed.release()
	// The root through the memo: an edit's Lookup and the Insert after
	// it decode and check it once.
	root, err := ed.decodeRoot()
	if err != nil {
		return Mapping{}, err
	}
	return ed.Tree().lookupFrom(root, lblk)
}

// Tree returns a read-only view of the tree, for Lookup and Walk. The view
// belongs to the Editor: it is valid until the Editor's fields change, and
// the nodes it decodes are lent from the Editor's pool until the Editor's
// next Insert, Remove, Convert, Neighbours or Lookup returns (Walk's
// NodeInfo.Node must not be kept).
func (ed *Editor) Tree() *Tree {
	ed.tree = Tree{
		store: ed.Store, View: ed.View, Sealed: ed.Sealed, lender: ed,
		BlockSize:      ed.BlockSize,
		FirstDataBlock: ed.FirstDataBlock, BlocksCount: ed.BlocksCount, Zone: ed.Zone,
		Csum: ed.Csum, Seed: ed.Seed, Ino: ed.Ino, visit: &ed.visit,
	}
	if ed.Root != nil {
		ed.tree.Root = ed.Root[:]
	}
	return &ed.tree
}

// decodeRoot decodes and checks the root into the Editor's own storage
// (valid until the next decodeRoot).
func (ed *Editor) decodeRoot() (*Node, error) {
	m := &ed.memo
	bounds := [2]uint64{ed.FirstDataBlock, ed.BlocksCount}
	if m.ok && ed.Root != nil && *ed.Root == m.key && m.bounds == bounds && m.zone == ed.Zone {
		ed.root.Header = m.hdr
		ed.root.Extents = append(ed.rootExts[:0], m.exts[:m.ne]...)
		ed.root.Indexes = append(ed.rootIdxs[:0], m.idxs[:m.ni]...)
		return &ed.root, nil
	}
	m.ok = false
	var err error
	ed.root.Header, ed.root.Extents, ed.root.Indexes, err = ed.Tree().decodeRoot(ed.rootExts[:0], ed.rootIdxs[:0])
	if err != nil {
		return nil, err
	}
	if ed.Root != nil && len(ed.root.Extents) <= len(m.exts) && len(ed.root.Indexes) <= len(m.idxs) {
		m.key, m.bounds, m.zone, m.hdr = *ed.Root, bounds, ed.Zone, ed.root.Header
		m.ne = uint8(copy(m.exts[:], ed.root.Extents))
		m.ni = uint8(copy(m.idxs[:], ed.root.Indexes))
		m.ok = true
	}
	return &ed.root, nil
}

// level is one node on the path from the root to a leaf.
type level struct {
	blk  uint64 // 0 for the root
	buf  []byte // the block's bytes; nil for the root
	node *Node
	// pos is the index entry followed, or in a leaf the extent at or
	// before the block looked for (-1: none).
	pos int
	lo  uint32 // first file block the node covers (its key in the parent)
	hi  uint64 // file block where the node's range ends
}

// path runs from the root (path[0]) to a leaf (kernel: struct ext4_ext_path).
type path []level

func (p path) leaf() *level { return &p[len(p)-1] }

// entry is an entry of either kind, for code shared by leaves and index
// nodes.
type entry struct {
	ext Extent
	idx Index
}

func (n *Node) insert(pos int, en entry) {
	if n.Leaf() {
		n.Extents = slices.Insert(n.Extents, pos, en.ext)
	} else {
		n.Indexes = slices.Insert(n.Indexes, pos, en.idx)
	}
}

func (n *Node) remove(pos int) {
	if n.Leaf() {
		n.Extents = slices.Delete(n.Extents, pos, pos+1)
	} else {
		n.Indexes = slices.Delete(n.Indexes, pos, pos+1)
	}
}

// mergeAround merges leaf extent j with its neighbours where they
// continue it (same state, adjacent on disk and in the file).
func (n *Node) mergeAround(j int) {
	if j+1 < len(n.Extents) && canMerge(n.Extents[j], n.Extents[j+1]) {
		n.Extents[j].Len += n.Extents[j+1].Len
		n.remove(j + 1)
	}
	if j > 0 && canMerge(n.Extents[j-1], n.Extents[j]) {
		n.Extents[j-1].Len += n.Extents[j].Len
		n.remove(j)
	}
}

// firstKey returns the first file block of a non-empty node.
func (n *Node) firstKey() uint32 {
	if n.Leaf() {
		return n.Extents[0].Logical
	}
	return n.Indexes[0].Logical
}

// maxLen returns the longest extent of the kind.
func maxLen(unwritten bool) uint32 {
	if unwritten {
		return UnwrittenMaxLen
	}
	return InitMaxLen
}

// canMerge reports whether b can be appended to a (kernel:
// ext4_can_extents_be_merged).
func canMerge(a, b Extent) bool {
	return a.Unwritten == b.Unwritten && a.End() == uint64(b.Logical) &&
		a.Start+uint64(a.Len) == b.Start && a.Len+b.Len <= maxLen(a.Unwritten)
}

func (ed *Editor) blockMax() uint16 {
	m := MaxEntries(ed.BlockSize)
	if ed.nodeMax >= 5 && ed.nodeMax < m {
		m = ed.nodeMax
	}
	return uint16(m)
}

func (ed *Editor) setupErr() error {
	switch {
	case ed.Root == nil:
		return fmt.Errorf("%w: editor without a root", ErrInvalid)
	case ed.Store == nil:
		return fmt.Errorf("%w: editor without a store", ErrInvalid)
	case ed.BlockSize < 1024 || ed.BlockSize > 65536:
		return fmt.Errorf("%w: block size %d", ErrInvalid, ed.BlockSize)
	}
	return nil
}

// checkExtent rejects an extent no tree may hold.
func (ed *Editor) checkExtent(x Extent) error {
	t := ed.Tree()
	switch {
	case x.Len == 0 || x.Len > maxLen(x.Unwritten):
		return fmt.Errorf("%w: extent length %d (unwritten %v)", ErrInvalid, x.Len, x.Unwritten)
	case x.End() > MaxLogical:
		return fmt.Errorf("%w: extent %d+%d ends past block %d", ErrInvalid, x.Logical, x.Len, uint64(MaxLogical))
	case x.Start >= 1<<48 || !t.validPhys(x.Start, uint64(x.Len)):
		return fmt.Errorf("%w: extent maps to blocks %d+%d outside the filesystem", ErrInvalid, x.Start, x.Len)
	case !t.outsideZone(x.Start, uint64(x.Len)):
		return fmt.Errorf("%w: extent maps to blocks %d+%d, which hold the filesystem's fixed metadata", ErrInvalid, x.Start, x.Len)
	}
	return nil
}

// find returns the path to the leaf that holds or would hold file block
// lblk (kernel: ext4_find_extent). Below the root it follows the last index
// starting at or before lblk, or the first one.
func (ed *Editor) find(lblk uint32) (path, error) {
	root, err := ed.decodeRoot()
	if err != nil {
		return nil, err
	}
	// The path lives in the Editor: a second find replaces the first.
	p := path(append(ed.pathBuf[:0], level{node: root, hi: 1 << 32}))
	for {
		l := p.leaf()
		n := l.node
		if n.Leaf() {
			l.pos = sort.Search(len(n.Extents), func(i int) bool { return n.Extents[i].Logical > lblk }) - 1
			return p, nil
		}
		l.pos = max(0, sort.Search(len(n.Indexes), func(i int) bool { return n.Indexes[i].Logical > lblk })-1)
		if p, err = ed.down(p); err != nil {
			return nil, err
		}
	}
}

// down appends to p the child its last level's pos names.
func (ed *Editor) down(p path) (path, error) {
	l := p.leaf()
	n := l.node
	idx := n.Indexes[l.pos]
	end := childEnd(n, l.pos, l.hi)
	c, buf, err := ed.Tree().readChild(idx, n.Depth, end)
	if err != nil {
		return nil, err
	}
	return append(p, level{blk: idx.Child, buf: buf, node: c, lo: idx.Logical, hi: end}), nil
}

// sideLeaf returns the path to the leaf after (next) or before p's leaf,
// or nil at the end of the tree. In the new leaf pos is -1 (next) or the
// last extent (previous).
func (ed *Editor) sideLeaf(p path, next bool) (path, error) {
	for i := len(p) - 2; i >= 0; i-- {
		l := p[i]
		if next && l.pos+1 < len(l.node.Indexes) || !next && l.pos > 0 {
			q := slices.Clone(p[:i+1])
			if next {
				q[i].pos++
			} else {
				q[i].pos--
			}
			for {
				var err error
				if q, err = ed.down(q); err != nil {
					return nil, err
				}
				c := q.leaf()
				last := c.node.Len() - 1
				if c.node.Leaf() {
					if next {
						c.pos = -1
					} else {
						c.pos = last
					}
					return q, nil
				}
				if next {
					c.pos = 0
				} else {
					c.pos = last
				}
			}
		}
	}
	return nil, nil
}

// write stores a node: the root into Root, a block through the Store with
// stale entries cleared and the tail checksum set.
func (ed *Editor) write(l *level) error {
	n := l.node
	if l.blk == 0 {
		var b [RootSize]byte
		if err := n.Encode(b[:]); err != nil {
			return err
		}
		*ed.Root = b
		return nil
	}
	b := l.buf
	if err := n.Encode(b); err != nil {
		return err
	}
	clear(b[HeaderSize+EntrySize*n.Len() : HeaderSize+EntrySize*int(n.Max)])
	if ed.Csum && !ed.DeferSum {
		if err := SetChecksum(b, ed.Seed); err != nil {
			return err
		}
	}
	return ed.Store.WriteNode(l.blk, b)
}

// writeExtent stores leaf l after its extent pos alone changed, encoding
// that entry into the block's bytes, which hold the rest of the node as
// read, instead of the whole node: an append that extends the last extent
// changes its length only. Stale entries past the last are left as they
// are, as the kernel leaves them.
func (ed *Editor) writeExtent(l *level, pos int) error {
	if l.blk == 0 || len(l.buf) < HeaderSize+(pos+1)*EntrySize {
		return ed.write(l)
	}
	b := l.buf
	if err := putExtent(b[HeaderSize+pos*EntrySize:], l.node.Extents[pos]); err != nil {
		return err
	}
	if ed.Csum && !ed.DeferSum {
		if err := SetChecksum(b, ed.Seed); err != nil {
			return err
		}
	}
	return ed.Store.WriteNode(l.blk, b)
}

// fixKeys makes the index entries above level i name the first block of
// their child again, after the first entry of node i changed (kernel:
// ext4_ext_correct_indexes).
func (ed *Editor) fixKeys(p path, i int) error {
	for ; i > 0; i-- {
		key := p[i].node.firstKey()
		par := &p[i-1]
		if par.node.Indexes[par.pos].Logical == key {
			return nil
		}
		par.node.Indexes[par.pos].Logical = key
		p[i].lo = key
		if err := ed.write(par); err != nil {
			return err
		}
		if par.pos != 0 {
			return nil
		}
	}
	return nil
}

// reserve allocates, before anything changes, the nodes that inserting one
// entry into level i of p needs: one per full node from i up, the root
// counting once for growing the tree (kernel: ext4_ext_create_new_leaf).
func (ed *Editor) reserve(p path, i int) ([]uint64, error) {
	need := 0
	for ; i >= 0; i-- {
		n := p[i].node
		if n.Len() < int(n.Max) {
			break
		}
		if i == 0 && n.Depth >= MaxDepth {
			return nil, fmt.Errorf("%w (inode %d)", ErrTooDeep, ed.Ino)
		}
		need++
	}
	if need == 0 {
		return nil, nil
	}
	goal := ed.goal(p)
	t := ed.Tree()
	pool := make([]uint64, 0, need)
	for range need {
		b, err := ed.Store.AllocNode(goal)
		if err == nil && (b >= 1<<48 || !t.validPhys(b, 1) || !t.outsideZone(b, 1)) {
			err = fmt.Errorf("extent: AllocNode gave block %d outside the filesystem or in its fixed metadata", b)
		}
		if err != nil {
			for _, b := range pool {
				err = errors.Join(err, ed.Store.FreeNode(b))
			}
			return nil, err
		}
		pool = append(pool, b)
	}
	return pool, nil
}

// goal returns where a new node of p should go: by the data of the nearest
// extent, else by the leaf (kernel: ext4_ext_find_goal).
func (ed *Editor) goal(p path) uint64 {
	l := p.leaf()
	if exts := l.node.Extents; len(exts) > 0 {
		return exts[max(l.pos, 0)].Start
	}
	for i := len(p) - 1; i >= 0; i-- {
		if p[i].blk != 0 {
			return p[i].blk
		}
	}
	return 0
}

// insertSplit inserts en at level i, position pos, of p with the nodes
// reserve allocated, and checks that it used them all.
func (ed *Editor) insertSplit(p path, i, pos int, en entry, pool []uint64) error {
	if err := ed.insertAt(p, i, pos, en, &pool); err != nil {
		return err
	}
	if len(pool) != 0 {
		return fmt.Errorf("extent: internal error: %d reserved nodes unused", len(pool))
	}
	return nil
}

// insertAt inserts en at position pos of node i of p. A full node is split
// in two and the new one's index inserted into the parent, up to the root,
// which grows the tree when it is full (kernel: ext4_ext_insert_extent,
// ext4_ext_split, ext4_ext_grow_indepth). New nodes come from pool. p is
// stale afterwards.
func (ed *Editor) insertAt(p path, i, pos int, en entry, pool *[]uint64) error {
	l := &p[i]
	n := l.node
	if n.Len() < int(n.Max) {
		n.insert(pos, en)
		if err := ed.write(l); err != nil {
			return err
		}
		return ed.fixKeys(p, i)
	}
	take := func() (uint64, error) {
		if len(*pool) == 0 {
			return 0, errors.New("extent: internal error: no reserved node")
		}
		b := (*pool)[0]
		*pool = (*pool)[1:]
		return b, nil
	}
	blk, err := take()
	if err != nil {
		return err
	}
	if i == 0 {
		// The root is full: its entries move to a new block and the root
		// becomes an index with one entry, one level up.
		child := &Node{Header: Header{Magic: Magic, Max: ed.blockMax(), Depth: n.Depth}, Extents: n.Extents, Indexes: n.Indexes}
		cl := level{blk: blk, buf: make([]byte, ed.BlockSize), node: child, pos: l.pos, lo: child.firstKey(), hi: l.hi}
		if err := ed.write(&cl); err != nil {
			return err
		}
		root := &Node{Header: Header{Magic: Magic, Max: uint16(MaxEntries(RootSize)), Depth: n.Depth + 1, Generation: n.Generation},
			Indexes: []Index{{Logical: cl.lo, Child: blk}}}
		np := path{{node: root, hi: 1 << 32}, cl}
		if err := ed.write(&np[0]); err != nil {
			return err
		}
		return ed.insertAt(append(np, p[1:]...), 1, pos, en, pool)
	}
	// Split. Appending past the end of the rightmost node starts a new,
	// otherwise empty node, so that a file written in order gets full
	// nodes; anywhere else the node splits in half.
	rightmost := pos == n.Len()
	for j := range i {
		rightmost = rightmost && p[j].pos == p[j].node.Len()-1
	}
	right := &Node{Header: Header{Magic: Magic, Max: ed.blockMax(), Depth: n.Depth}}
	if rightmost {
		right.insert(0, en)
	} else {
		n.insert(pos, en)
		k := n.Len() / 2
		if n.Leaf() {
			right.Extents = slices.Clone(n.Extents[k:])
			n.Extents = n.Extents[:k]
		} else {
			right.Indexes = slices.Clone(n.Indexes[k:])
			n.Indexes = n.Indexes[:k]
		}
	}
	rl := level{blk: blk, buf: make([]byte, ed.BlockSize), node: right}
	if err := ed.write(&rl); err != nil {
		return err
	}
	// The left node is written even when the new entry went right: the
	// caller may have changed it (splitAt shortens the extent it splits).
	if err := ed.write(l); err != nil {
		return err
	}
	if err := ed.fixKeys(p, i); err != nil {
		return err
	}
	return ed.insertAt(p, i-1, p[i-1].pos+1, entry{idx: Index{Logical: right.firstKey(), Child: blk}}, pool)
}

// deleteAt removes entry pos of node i of p. A block node left empty is
// freed and its index removed from the parent, recursively; an empty root
// becomes an empty leaf (kernel: ext4_ext_rm_idx, and the end of
// ext4_ext_remove_space). p is stale afterwards.
func (ed *Editor) deleteAt(p path, i, pos int) error {
	l := &p[i]
	l.node.remove(pos)
	if l.node.Len() > 0 {
		if err := ed.write(l); err != nil {
			return err
		}
		return ed.fixKeys(p, i)
	}
	if i == 0 {
		l.node = &Node{Header: Header{Magic: Magic, Max: uint16(MaxEntries(RootSize)), Generation: l.node.Generation}}
		return ed.write(l)
	}
	if err := ed.deleteAt(p, i-1, p[i-1].pos); err != nil {
		return err
	}
	return ed.Store.FreeNode(l.blk)
}

// shrink moves the only child of the root into the root while it fits,
// freeing the child's block (kernel: ext4_ext_try_to_merge_up, here for
// any depth).
func (ed *Editor) shrink() error {
	t := ed.Tree()
	for {
		root, err := ed.decodeRoot()
		if err != nil {
			return err
		}
		if root.Leaf() || len(root.Indexes) != 1 {
			return nil
		}
		c, _, err := t.readChild(root.Indexes[0], root.Depth, 1<<32)
		if err != nil {
			return err
		}
		if c.Len() > MaxEntries(RootSize) {
			return nil
		}
		c.Max = uint16(MaxEntries(RootSize))
		c.Generation = root.Generation
		if err := ed.write(&level{node: c}); err != nil {
			return err
		}
		if err := ed.Store.FreeNode(root.Indexes[0].Child); err != nil {
			return err
		}
	}
}

// Insert maps the range of x, which must be a hole. It extends the extent
// before or after when x continues it logically and physically with the
// same written state (kernel: ext4_ext_insert_extent with
// ext4_can_extents_be_merged), else adds an entry, splitting full nodes
// and growing the tree as needed. A range with a mapped block gives
// ErrMapped; the tree is then unchanged.
func (ed *Editor) Insert(x Extent) error {
	if err := ed.setupErr(); err != nil {
		return err
	}
	defer ed.release()
	if err := ed.checkExtent(x); err != nil {
		return err
	}
	p, err := ed.find(x.Logical)
	if err != nil {
		return err
	}
	d := len(p) - 1
	leaf := p.leaf()
	n := leaf.node
	pos := leaf.pos
	overlap := func(y Extent) error {
		return fmt.Errorf("%w: inserting blocks %d+%d over extent %d+%d (inode %d)", ErrMapped, x.Logical, x.Len, y.Logical, y.Len, ed.Ino)
	}
	if pos >= 0 && n.Extents[pos].End() > uint64(x.Logical) {
		return overlap(n.Extents[pos])
	}
	var next path // the following leaf, when x goes after the last extent
	if pos+1 < len(n.Extents) {
		if y := n.Extents[pos+1]; x.End() > uint64(y.Logical) {
			return overlap(y)
		}
	} else if d > 0 {
		if next, err = ed.sideLeaf(p, true); err != nil {
			return err
		}
		for q := next; q != nil; {
			if exts := q.leaf().node.Extents; len(exts) > 0 {
				if x.End() > uint64(exts[0].Logical) {
					return overlap(exts[0])
				}
				break
			}
			if q, err = ed.sideLeaf(q, true); err != nil {
				return err
			}
		}
		if x.End() > leaf.hi {
			// Only an empty leaf (which this package never writes)
			// leaves a gap between index keys and extents.
			return fmt.Errorf("extent: inode %d: blocks %d+%d cross the index key %d of an empty leaf", ed.Ino, x.Logical, x.Len, leaf.hi)
		}
	}
	exts := n.Extents
	switch {
	case pos >= 0 && canMerge(exts[pos], x):
		exts[pos].Len += x.Len
		joined := pos+1 < len(exts) && canMerge(exts[pos], exts[pos+1])
		if !joined {
			return ed.writeExtent(leaf, pos)
		}
		exts[pos].Len += exts[pos+1].Len
		n.remove(pos + 1)
		if err := ed.write(leaf); err != nil {
			return err
		}
		return ed.shrink()
	case pos+1 < len(exts) && canMerge(x, exts[pos+1]):
		y := &exts[pos+1]
		y.Logical, y.Start, y.Len = x.Logical, x.Start, y.Len+x.Len
		if err := ed.write(leaf); err != nil {
			return err
		}
		return ed.fixKeys(p, d)
	}
	if next != nil {
		// x goes between this leaf and the next: extend the next leaf's
		// first extent backwards, or take a free slot there rather than
		// splitting this leaf (kernel: ext4_ext_insert_extent's next leaf).
		nl := next.leaf()
		nn := nl.node
		if len(nn.Extents) > 0 && canMerge(x, nn.Extents[0]) {
			y := &nn.Extents[0]
			y.Logical, y.Start, y.Len = x.Logical, x.Start, y.Len+x.Len
			if err := ed.write(nl); err != nil {
				return err
			}
			return ed.fixKeys(next, d)
		}
		if n.Len() == int(n.Max) && nn.Len() < int(nn.Max) {
			return ed.insertAt(next, d, 0, entry{ext: x}, nil)
		}
	}
	pool, err := ed.reserve(p, d)
	if err != nil {
		return err
	}
	return ed.insertSplit(p, d, pos+1, entry{ext: x}, pool)
}
