package extent

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// This file checks the Editor against a model (file block -> physical
// block and state) with an in-memory Store that insists on the Store
// contract: reads only of live node blocks, every change written back, no
// double free.

var errNoSpace = errors.New("no space (test)")

// memStore is an in-memory Store. Node blocks live at nodeBase and up,
// data blocks below it, so a mix-up shows.
type memStore struct {
	bs        int
	nodes     map[uint64][]byte // live tree blocks
	free      []uint64          // freed node blocks, reused first
	next      uint64
	freed     []span // FreeData calls of the current operation
	failAlloc int    // AllocNode fails when this reaches 0 (negative: never)
	allocs    int
}

type span struct {
	start uint64
	n     uint32
}

const nodeBase = 1 << 32

func newMemStore(bs int) *memStore {
	return &memStore{bs: bs, nodes: map[uint64][]byte{}, next: nodeBase, failAlloc: -1}
}

func (m *memStore) ReadNode(p uint64) ([]byte, error) {
	b, ok := m.nodes[p]
	if !ok {
		return nil, fmt.Errorf("read of block %d, not a live node", p)
	}
	return slices.Clone(b), nil
}

func (m *memStore) WriteNode(p uint64, b []byte) error {
	if _, ok := m.nodes[p]; !ok {
		return fmt.Errorf("write of block %d, not a live node", p)
	}
	if len(b) != m.bs {
		return fmt.Errorf("write of %d bytes", len(b))
	}
	m.nodes[p] = slices.Clone(b)
	return nil
}

func (m *memStore) AllocNode(goal uint64) (uint64, error) {
	if m.failAlloc == 0 {
		return 0, errNoSpace
	}
	if m.failAlloc > 0 {
		m.failAlloc--
	}
	m.allocs++
	var p uint64
	if n := len(m.free); n > 0 {
		p, m.free = m.free[n-1], m.free[:n-1]
	} else {
		p = m.next
		m.next++
	}
	b := make([]byte, m.bs)
	for i := range b {
		b[i] = 0xA5 // the editor must not rely on a zeroed block
	}
	m.nodes[p] = b
	return p, nil
}

func (m *memStore) FreeNode(p uint64) error {
	if _, ok := m.nodes[p]; !ok {
		return fmt.Errorf("free of block %d, not a live node", p)
	}
	delete(m.nodes, p)
	m.free = append(m.free, p)
	return nil
}

func (m *memStore) FreeData(p uint64, n uint32) error {
	if p >= nodeBase || n == 0 {
		return fmt.Errorf("FreeData(%d, %d)", p, n)
	}
	m.freed = append(m.freed, span{p, n})
	return nil
}

// mb is the model of one mapped file block.
type mb struct {
	phys uint64
	unw  bool
}

// harness runs operations on an Editor and on the model side by side.
type harness struct {
	t        testing.TB
	ed       *Editor
	st       *memStore
	root     [RootSize]byte
	model    map[uint32]mb
	used     map[uint64]bool // data blocks ever handed out
	nextData uint64
	r        *rand.Rand
	maxDepth int
}

func newHarness(t testing.TB, bs, nodeMax int, csum bool, seed uint64) *harness {
	h := &harness{t: t, st: newMemStore(bs), model: map[uint32]mb{}, used: map[uint64]bool{}, nextData: 1000,
		r: rand.New(rand.NewPCG(seed, 99))}
	if err := NewRoot().Encode(h.root[:]); err != nil {
		t.Fatal(err)
	}
	h.ed = &Editor{Root: &h.root, Store: h.st, BlockSize: bs, Csum: csum, Seed: 0xBEEF, Ino: 12,
		FirstDataBlock: 1, BlocksCount: 1 << 40, nodeMax: nodeMax}
	return h
}

func (h *harness) mapped(from, to uint64) bool {
	if to-from > uint64(len(h.model)) {
		for l := range h.model {
			if uint64(l) >= from && uint64(l) < to {
				return true
			}
		}
		return false
	}
	for l := from; l < to; l++ {
		if _, ok := h.model[uint32(l)]; ok {
			return true
		}
	}
	return false
}

// insert inserts x and checks the outcome against the model.
func (h *harness) insert(x Extent) {
	h.t.Helper()
	overlap := h.mapped(uint64(x.Logical), x.End())
	var before snap
	if overlap || h.st.failAlloc >= 0 {
		before = h.snapshot()
	}
	err := h.ed.Insert(x)
	switch {
	case overlap:
		if !errors.Is(err, ErrMapped) {
			h.t.Fatalf("insert %+v over mapped blocks: %v", x, err)
		}
		h.same(before)
		return
	case errors.Is(err, errNoSpace):
		h.same(before)
		return
	case err != nil:
		h.t.Fatalf("insert %+v: %v", x, err)
	}
	for i := range x.Len {
		h.model[x.Logical+i] = mb{x.Start + uint64(i), x.Unwritten}
		h.used[x.Start+uint64(i)] = true
	}
	// Fresh blocks are handed out from nextData up: never these again.
	h.nextData = max(h.nextData, x.Start+uint64(x.Len))
}

// remove removes [from, to) and checks FreeData got exactly the blocks.
func (h *harness) remove(from, to uint32) {
	h.t.Helper()
	want := map[uint64]bool{}
	for l, b := range h.model {
		if l >= from && l < to {
			want[b.phys] = true
		}
	}
	var before snap
	if h.st.failAlloc >= 0 {
		before = h.snapshot()
	}
	h.st.freed = nil
	err := h.ed.Remove(from, to)
	if errors.Is(err, errNoSpace) {
		h.same(before)
		if len(h.st.freed) > 0 {
			h.t.Fatalf("failed remove freed %+v", h.st.freed)
		}
		return
	}
	if err != nil {
		h.t.Fatalf("remove [%d, %d): %v", from, to, err)
	}
	for _, r := range h.st.freed {
		for p := r.start; p < r.start+uint64(r.n); p++ {
			if !want[p] {
				h.t.Fatalf("remove [%d, %d): freed block %d not in the range (or twice)", from, to, p)
			}
			delete(want, p)
		}
	}
	if len(want) > 0 {
		h.t.Fatalf("remove [%d, %d): %d blocks not freed", from, to, len(want))
	}
	for l := range h.model {
		if l >= from && l < to {
			delete(h.model, l)
		}
	}
}

// convert converts [from, from+n); a failure for want of space may leave
// part of the range converted, never anything else changed.
func (h *harness) convert(from, n uint32, written bool) {
	h.t.Helper()
	err := h.ed.Convert(from, n, written)
	switch {
	case errors.Is(err, errNoSpace):
		got := h.extentsMap()
		for l, b := range h.model {
			g, ok := got[l]
			if !ok || g.phys != b.phys || (l < from || uint64(l) >= uint64(from)+uint64(n)) && g.unw != b.unw {
				h.t.Fatalf("failed convert [%d+%d) changed block %d: %+v -> %+v", from, n, l, b, g)
			}
			h.model[l] = g
		}
		return
	case err != nil:
		h.t.Fatalf("convert %d+%d: %v", from, n, err)
	}
	for l, b := range h.model {
		if l >= from && uint64(l) < uint64(from)+uint64(n) {
			b.unw = !written
			h.model[l] = b
		}
	}
}

type snap struct {
	root  [RootSize]byte
	nodes map[uint64][]byte
}

func (h *harness) snapshot() snap {
	s := snap{root: h.root, nodes: map[uint64][]byte{}}
	for p, b := range h.st.nodes {
		s.nodes[p] = slices.Clone(b)
	}
	return s
}

// same checks that a failed operation changed nothing the tree names.
func (h *harness) same(s snap) {
	h.t.Helper()
	if h.root != s.root {
		h.t.Fatal("failed operation changed the root")
	}
	blocks, err := h.ed.Tree().Blocks()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, p := range blocks {
		if !slices.Equal(h.st.nodes[p], s.nodes[p]) {
			h.t.Fatalf("failed operation changed node %d", p)
		}
	}
}

func (h *harness) extentsMap() map[uint32]mb {
	got := map[uint32]mb{}
	exts, err := h.ed.Tree().Extents()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range exts {
		for i := range e.Len {
			got[e.Logical+i] = mb{e.Start + uint64(i), e.Unwritten}
		}
	}
	return got
}

// check validates the whole tree: the read side's structural checks (with
// checksums), node headers, no empty block node, no root that could take
// its only child, the node blocks equal to the live ones (no leak, no
// double use), and the mapping equal to the model.
func (h *harness) check() {
	h.t.Helper()
	tr := h.ed.Tree()
	live := maps.Clone(h.st.nodes)
	count := 0
	err := tr.WalkNodes(func(ni NodeInfo) error {
		n := ni.Node
		if ni.Block == 0 {
			if n.Max != 4 {
				return fmt.Errorf("root eh_max %d", n.Max)
			}
			h.maxDepth = max(h.maxDepth, int(n.Depth))
			if !n.Leaf() && len(n.Indexes) == 1 {
				b, _ := h.st.ReadNode(n.Indexes[0].Child)
				if c, err := DecodeNode(b); err == nil && c.Len() <= 4 {
					return fmt.Errorf("root with one child of %d entries", c.Len())
				}
			}
			return nil
		}
		if _, ok := live[ni.Block]; !ok {
			return fmt.Errorf("tree names block %d, not live", ni.Block)
		}
		delete(live, ni.Block)
		if int(n.Max) != int(h.ed.blockMax()) {
			return fmt.Errorf("block %d eh_max %d", ni.Block, n.Max)
		}
		if n.Len() == 0 {
			return fmt.Errorf("empty block node %d", ni.Block)
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("tree: %v", err)
	}
	if len(live) > 0 {
		h.t.Fatalf("%d node blocks allocated but not in the tree", len(live))
	}
	err = tr.Walk(func(e Extent) error {
		for i := range e.Len {
			l := e.Logical + i
			if b, ok := h.model[l]; !ok || b.phys != e.Start+uint64(i) || b.unw != e.Unwritten {
				return fmt.Errorf("block %d: tree %d/%v, model %+v (%v)", l, e.Start+uint64(i), e.Unwritten, b, ok)
			}
			count++
		}
		return nil
	})
	if err != nil {
		h.t.Fatalf("extents: %v", err)
	}
	if count != len(h.model) {
		h.t.Fatalf("tree maps %d blocks, model %d", count, len(h.model))
	}
}

// freeData reports whether data blocks [p, p+n) were never handed out.
func (h *harness) freeData(p uint64, n uint32) bool {
	if p < 1000 || p+uint64(n) > nodeBase {
		return false
	}
	for i := range uint64(n) {
		if h.used[p+i] {
			return false
		}
	}
	return true
}

// dataFor picks physical blocks for n file blocks at l: often continuing
// the neighbour's blocks, to exercise merging, else fresh ones.
func (h *harness) dataFor(l uint32, n uint32) uint64 {
	switch h.r.IntN(4) {
	case 0:
		if b, ok := h.model[l-1]; ok && l > 0 && h.freeData(b.phys+1, n) {
			return b.phys + 1
		}
	case 1:
		if b, ok := h.model[l+n]; ok && b.phys >= uint64(n) && h.freeData(b.phys-uint64(n), n) {
			return b.phys - uint64(n)
		}
	}
	p := h.nextData + uint64(h.r.IntN(3))
	h.nextData = p + uint64(n) + 40 // room for neighbours to grow into
	return p
}

func (h *harness) randLen(max uint32) uint32 {
	if h.r.IntN(50) == 0 {
		return 1 + h.r.Uint32N(max)
	}
	return 1 + h.r.Uint32N(min(max, 6))
}

func (h *harness) lastMapped() uint32 {
	var last uint32
	for l := range h.model {
		last = max(last, l)
	}
	return last
}

// step runs one random operation over file blocks [0, span).
func (h *harness) step(span uint32) {
	r := h.r
	if r.IntN(40) == 0 {
		h.st.failAlloc = r.IntN(2)
		defer func() { h.st.failAlloc = -1 }()
	}
	switch k := r.IntN(100); {
	case k < 35: // sparse insert, sometimes overlapping
		l := r.Uint32N(span)
		unw := r.IntN(3) == 0
		n := h.randLen(maxLen(unw))
		if r.IntN(4) != 0 {
			n = 1
			for n < 8 && !h.mapped(uint64(l), uint64(l+n+1)) {
				n++
			}
		}
		h.insert(Extent{Logical: l, Len: n, Start: h.dataFor(l, n), Unwritten: unw})
	case k < 55: // append
		l := h.lastMapped() + 1 + uint32(r.IntN(3))
		if len(h.model) == 0 {
			l = r.Uint32N(span)
		}
		n := h.randLen(16)
		h.insert(Extent{Logical: l, Len: n, Start: h.dataFor(l, n), Unwritten: r.IntN(4) == 0})
	case k < 70: // punch
		l := r.Uint32N(span)
		h.remove(l, l+h.randLen(40))
	case k < 72: // truncate, mostly a little
		last := h.lastMapped()
		h.remove(last-min(last, r.Uint32N(last/8+2)), MaxLogical)
	case k < 73:
		if r.IntN(8) == 0 {
			h.remove(0, MaxLogical)
		} else {
			h.remove(r.Uint32N(h.lastMapped()+2), MaxLogical)
		}
	default: // convert
		l := r.Uint32N(span)
		h.convert(l, h.randLen(60), r.IntN(2) == 0)
	}
	h.check()
}

func TestEditorModel(t *testing.T) {
	for _, c := range []struct {
		bs, nodeMax, steps int
		span               uint32
		csum               bool
		prefill            uint32 // extents appended first, with holes between
	}{
		{1024, 5, 3000, 3000, true, 0},
		{1024, 6, 3000, 20000, false, 0},
		{1024, 0, 1500, 4000, true, 1500},
		{4096, 7, 2000, 5000, true, 0},
	} {
		t.Run(fmt.Sprintf("bs%d-max%d", c.bs, c.nodeMax), func(t *testing.T) {
			h := newHarness(t, c.bs, c.nodeMax, c.csum, uint64(c.nodeMax*7+c.bs))
			for i := range c.prefill {
				h.insert(Extent{Logical: 2 * i, Len: 1, Start: h.dataFor(2*i, 1)})
			}
			for range c.steps {
				h.step(c.span)
			}
			t.Logf("max depth %d, %d blocks mapped at the end, %d node allocations", h.maxDepth, len(h.model), h.st.allocs)
			if c.nodeMax == 0 && h.maxDepth < 2 {
				t.Errorf("reached depth %d only", h.maxDepth)
			}
			if c.nodeMax != 0 && h.maxDepth < 3 {
				t.Errorf("reached depth %d only", h.maxDepth)
			}
			h.remove(0, MaxLogical)
			h.check()
			if h.root != mustEncodeRoot(t, NewRoot()) {
				t.Errorf("root after removing everything: %x", h.root)
			}
		})
	}
}

func mustEncodeRoot(t testing.TB, n *Node) [RootSize]byte {
	var b [RootSize]byte
	if err := n.Encode(b[:]); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEditorDeep builds a tree of depth 3 with real 1 KiB nodes (84
// entries) from sequential appends, checks appends fill nodes, then
// punches and converts in the middle and removes it all.
func TestEditorDeep(t *testing.T) {
	h := newHarness(t, 1024, 0, true, 5)
	const n = 4*84*84 + 10
	for i := range uint32(n) {
		// Every other block: no two extents can merge.
		x := Extent{Logical: 2 * i, Len: 1, Start: 1000 + 2*uint64(i), Unwritten: i%3 == 0}
		if err := h.ed.Insert(x); err != nil {
			t.Fatal(err)
		}
		h.model[x.Logical] = mb{x.Start, x.Unwritten}
	}
	h.check()
	if h.maxDepth != 3 {
		t.Fatalf("depth %d after %d appends", h.maxDepth, n)
	}
	// Appending in order leaves every node but the last on each level full.
	perDepth := map[uint16][]int{}
	h.ed.Tree().WalkNodes(func(ni NodeInfo) error {
		if ni.Block != 0 {
			perDepth[ni.Node.Depth] = append(perDepth[ni.Node.Depth], ni.Node.Len())
		}
		return nil
	})
	for d, counts := range perDepth {
		for i, c := range counts[:len(counts)-1] {
			if c != 84 {
				t.Fatalf("depth %d node %d has %d entries", d, i, c)
			}
		}
	}
	for i := range 300 {
		if i%50 == 0 {
			h.check()
		}
		l := h.r.Uint32N(2 * n)
		switch h.r.IntN(3) {
		case 0:
			h.remove(l, l+h.r.Uint32N(300))
		case 1:
			h.convert(l, h.r.Uint32N(300), h.r.IntN(2) == 0)
		default:
			if !h.mapped(uint64(l), uint64(l)+1) {
				h.insert(Extent{Logical: l, Len: 1, Start: 1000 + uint64(l)})
			}
		}
	}
	h.check()
	h.remove(1000, MaxLogical)
	h.check()
	h.remove(0, MaxLogical)
	h.check()
	if h.root != mustEncodeRoot(t, NewRoot()) || len(h.st.nodes) != 0 {
		t.Fatalf("not empty: %d nodes", len(h.st.nodes))
	}
}

func TestEditorTooDeep(t *testing.T) {
	h := newHarness(t, 1024, 5, true, 6)
	var err error
	i := uint32(0)
	for ; err == nil; i++ {
		err = h.ed.Insert(Extent{Logical: 2 * i, Len: 1, Start: 1000 + 2*uint64(i)})
		if err == nil {
			h.model[2*i] = mb{1000 + 2*uint64(i), false}
		}
	}
	if !errors.Is(err, ErrTooDeep) {
		t.Fatalf("after %d extents: %v", i, err)
	}
	h.check()
	if h.maxDepth != MaxDepth {
		t.Fatalf("depth %d", h.maxDepth)
	}
	t.Logf("full at %d extents", i-1)
}

// TestEditorCases checks the shape of the tree after specific changes.
func TestEditorCases(t *testing.T) {
	E := func(l, n uint32, p uint64, unw bool) Extent {
		return Extent{Logical: l, Len: n, Start: p, Unwritten: unw}
	}
	type op func(ed *Editor) error
	ins := func(x Extent) op { return func(ed *Editor) error { return ed.Insert(x) } }
	rm := func(a, b uint32) op { return func(ed *Editor) error { return ed.Remove(a, b) } }
	cv := func(a, n uint32, w bool) op { return func(ed *Editor) error { return ed.Convert(a, n, w) } }
	for _, c := range []struct {
		name  string
		ops   []op
		want  []Extent
		freed []span
		err   error
	}{
		{name: "merge left", ops: []op{ins(E(0, 4, 100, false)), ins(E(4, 2, 104, false))}, want: []Extent{E(0, 6, 100, false)}},
		{name: "merge right", ops: []op{ins(E(4, 4, 104, false)), ins(E(0, 4, 100, false))}, want: []Extent{E(0, 8, 100, false)}},
		{name: "merge both", ops: []op{ins(E(0, 4, 100, false)), ins(E(8, 4, 108, false)), ins(E(4, 4, 104, false))},
			want: []Extent{E(0, 12, 100, false)}},
		{name: "no merge of kinds", ops: []op{ins(E(0, 4, 100, false)), ins(E(4, 4, 104, true))},
			want: []Extent{E(0, 4, 100, false), E(4, 4, 104, true)}},
		{name: "no merge physically apart", ops: []op{ins(E(0, 4, 100, false)), ins(E(4, 4, 105, false))},
			want: []Extent{E(0, 4, 100, false), E(4, 4, 105, false)}},
		{name: "merge up to init max", ops: []op{ins(E(0, InitMaxLen-1, 100, false)), ins(E(InitMaxLen-1, 2, 100+InitMaxLen-1, false))},
			want: []Extent{E(0, InitMaxLen-1, 100, false), E(InitMaxLen-1, 2, 100+InitMaxLen-1, false)}},
		{name: "merge to init max", ops: []op{ins(E(0, InitMaxLen-1, 100, false)), ins(E(InitMaxLen-1, 1, 100+InitMaxLen-1, false))},
			want: []Extent{E(0, InitMaxLen, 100, false)}},
		{name: "unwritten max", ops: []op{ins(E(0, UnwrittenMaxLen, 100, true)), ins(E(UnwrittenMaxLen, 1, 100+UnwrittenMaxLen, true))},
			want: []Extent{E(0, UnwrittenMaxLen, 100, true), E(UnwrittenMaxLen, 1, 100+UnwrittenMaxLen, true)}},
		{name: "overlap", ops: []op{ins(E(10, 4, 100, false)), ins(E(8, 3, 200, false))}, want: []Extent{E(10, 4, 100, false)}, err: ErrMapped},
		{name: "zero length", ops: []op{ins(E(10, 0, 100, false))}, err: ErrInvalid},
		{name: "too long unwritten", ops: []op{ins(E(10, InitMaxLen, 100, true))}, err: ErrInvalid},
		{name: "past last block", ops: []op{ins(E(MaxLogical-1, 2, 100, false))}, err: ErrInvalid},
		{name: "last block", ops: []op{ins(E(MaxLogical-1, 1, 100, false))}, want: []Extent{E(MaxLogical-1, 1, 100, false)}},
		{name: "physical 0", ops: []op{ins(E(0, 1, 0, false))}, err: ErrInvalid},
		{name: "punch middle", ops: []op{ins(E(0, 10, 100, false)), rm(3, 5)},
			want: []Extent{E(0, 3, 100, false), E(5, 5, 105, false)}, freed: []span{{103, 2}}},
		{name: "punch across", ops: []op{ins(E(0, 10, 100, false)), ins(E(20, 10, 200, true)), rm(5, 25)},
			want: []Extent{E(0, 5, 100, false), E(25, 5, 205, true)}, freed: []span{{105, 5}, {200, 5}}},
		{name: "truncate", ops: []op{ins(E(0, 10, 100, false)), ins(E(20, 10, 200, false)), rm(5, MaxLogical)},
			want: []Extent{E(0, 5, 100, false)}, freed: []span{{105, 5}, {200, 10}}},
		{name: "remove hole", ops: []op{ins(E(0, 10, 100, false)), rm(10, 20)}, want: []Extent{E(0, 10, 100, false)}},
		{name: "convert middle", ops: []op{ins(E(0, 10, 100, true)), cv(3, 4, true)},
			want: []Extent{E(0, 3, 100, true), E(3, 4, 103, false), E(7, 3, 107, true)}},
		{name: "convert head merges left", ops: []op{ins(E(0, 5, 100, false)), ins(E(5, 10, 105, true)), cv(5, 3, true)},
			want: []Extent{E(0, 8, 100, false), E(8, 7, 108, true)}},
		{name: "convert tail merges right", ops: []op{ins(E(0, 10, 100, true)), ins(E(10, 5, 110, false)), cv(7, 3, true)},
			want: []Extent{E(0, 7, 100, true), E(7, 8, 107, false)}},
		{name: "convert all merges both", ops: []op{ins(E(0, 5, 100, false)), ins(E(5, 5, 105, true)), ins(E(10, 5, 110, false)), cv(0, 20, true)},
			want: []Extent{E(0, 15, 100, false)}},
		{name: "convert skips holes", ops: []op{ins(E(0, 5, 100, true)), ins(E(10, 5, 200, true)), cv(2, 10, true)},
			want: []Extent{E(0, 2, 100, true), E(2, 3, 102, false), E(10, 2, 200, false), E(12, 3, 202, true)}},
		{name: "convert max to unwritten", ops: []op{ins(E(0, InitMaxLen, 100, false)), cv(0, InitMaxLen, false)},
			want: []Extent{E(0, UnwrittenMaxLen, 100, true), E(UnwrittenMaxLen, 1, 100+UnwrittenMaxLen, true)}},
		{name: "convert and back", ops: []op{ins(E(0, 10, 100, false)), cv(2, 3, false), cv(0, 10, true)},
			want: []Extent{E(0, 10, 100, false)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 1024, 0, true, 1)
			var err error
			for _, o := range c.ops {
				if err = o(h.ed); err != nil {
					break
				}
			}
			if !errors.Is(err, c.err) {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			got, err := h.ed.Tree().Extents()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("extents\n got %+v\nwant %+v", got, c.want)
			}
			if !slices.Equal(h.st.freed, c.freed) {
				t.Errorf("freed %+v, want %+v", h.st.freed, c.freed)
			}
		})
	}
}

func TestEditorNeighbours(t *testing.T) {
	h := newHarness(t, 1024, 5, true, 3)
	if l, r, err := h.ed.Neighbours(7); l != nil || r != nil || err != nil {
		t.Fatalf("empty tree: %v %v %v", l, r, err)
	}
	var exts []Extent
	for i := range uint32(200) {
		x := Extent{Logical: 10 + 5*i, Len: 2, Start: 1000 + 10*uint64(i)}
		exts = append(exts, x)
		h.insert(x)
	}
	h.check()
	if h.maxDepth < 2 {
		t.Fatalf("depth %d", h.maxDepth)
	}
	for l := uint32(0); l < 1020; l++ {
		left, right, err := h.ed.Neighbours(l)
		if err != nil {
			t.Fatal(err)
		}
		var wl, wr *Extent
		for i := range exts {
			if exts[i].Logical <= l {
				wl = &exts[i]
			} else if wr == nil {
				wr = &exts[i]
			}
		}
		if (left == nil) != (wl == nil) || left != nil && *left != *wl || (right == nil) != (wr == nil) || right != nil && *right != *wr {
			t.Fatalf("Neighbours(%d) = %v, %v; want %v, %v", l, left, right, wl, wr)
		}
	}
}

// TestEditorForeignTree edits trees built outside the Editor (the
// read-side tests' builder, with partly filled nodes) and an Editor set up
// wrongly.
func TestEditorForeignTree(t *testing.T) {
	m := newMemFS(1024)
	exts := sampleExtents(500)
	root := m.build(t, exts, 30)
	st := newMemStore(1024)
	for p, b := range m.blocks {
		st.nodes[p] = b
	}
	h := newHarness(t, 1024, 0, true, 8)
	h.st = st
	copy(h.root[:], root)
	h.ed.Store, h.ed.Seed = st, m.seed
	for _, e := range exts {
		for i := range e.Len {
			h.model[e.Logical+i] = mb{e.Start + uint64(i), e.Unwritten}
			h.used[e.Start+uint64(i)] = true
		}
	}
	h.nextData = 2_000_000
	h.check()
	// The builder's nodes have eh_max 84 as ours, so check() applies.
	for range 1500 {
		h.step(3000)
	}
	bad := &Editor{Root: &h.root, BlockSize: 1024}
	if err := bad.Insert(Extent{Logical: 1, Len: 1, Start: 5}); !errors.Is(err, ErrInvalid) {
		t.Errorf("editor without store: %v", err)
	}
	bad = &Editor{Store: st, BlockSize: 1024}
	if err := bad.Remove(0, 5); !errors.Is(err, ErrInvalid) {
		t.Errorf("editor without root: %v", err)
	}
}

// FuzzEditor runs op sequences from the input against the model.
func FuzzEditor(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("append append append punch convert truncate"))
	f.Add(slices.Repeat([]byte{3, 0, 1, 2}, 64))
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		h := newHarness(t, 1024, 5, true, 1)
		next := func() uint32 {
			if len(ops) == 0 {
				return 0
			}
			b := ops[0]
			ops = ops[1:]
			return uint32(b)
		}
		for len(ops) > 0 {
			op, a, b := next(), next(), next()
			h.st.failAlloc = -1
			if op&0x80 != 0 {
				h.st.failAlloc = int(op>>6) & 1
			}
			switch op % 6 {
			case 0, 1: // insert into a hole, or over mapped blocks
				l := a * 2
				n := b%9 + 1
				unw := op&8 != 0
				var p uint64
				if m, ok := h.model[l-1]; ok && l > 0 && op&16 != 0 && h.freeData(m.phys+1, n) {
					p = m.phys + 1
				} else {
					p = h.nextData
					h.nextData += uint64(n) + 20
				}
				if h.mapped(uint64(l), uint64(l+n)) && op&32 == 0 {
					continue
				}
				h.insert(Extent{Logical: l, Len: n, Start: p, Unwritten: unw})
			case 2: // append
				l := h.lastMapped() + 1 + a%3
				h.insert(Extent{Logical: l, Len: b%17 + 1, Start: h.nextData, Unwritten: op&8 != 0})
				h.nextData += uint64(b%17+1) + uint64(a&1)
			case 3:
				h.remove(a*2, a*2+b%64+1)
			case 4:
				if b < 8 {
					h.remove(a*2, MaxLogical)
				} else {
					h.convert(a*2, b%64+1, op&8 != 0)
				}
			case 5:
				h.convert(a, b, op&8 != 0)
			}
			h.st.failAlloc = -1
			h.check()
		}
	})
}
