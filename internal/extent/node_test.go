package extent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/fserr"
)

func TestLenEncoding(t *testing.T) {
	for _, c := range []struct {
		raw       uint16
		len       uint32
		unwritten bool
	}{
		{1, 1, false},
		{100, 100, false},
		{32768, 32768, false},
		{32769, 1, true},
		{40000, 40000 - 32768, true},
		{65535, 32767, true},
		{0, 0, false},
	} {
		b := make([]byte, RootSize)
		Header{Magic: Magic, Entries: 1, Max: 4}.put(b)
		binary.LittleEndian.PutUint16(b[HeaderSize+4:], c.raw)
		binary.LittleEndian.PutUint32(b[HeaderSize+8:], 1234)
		binary.LittleEndian.PutUint16(b[HeaderSize+6:], 0x5)
		n, err := DecodeNode(b)
		if err != nil {
			t.Fatal(err)
		}
		e := n.Extents[0]
		if e.Len != c.len || e.Unwritten != c.unwritten || e.Start != 5<<32|1234 {
			t.Errorf("raw %d: %+v", c.raw, e)
		}
		out := make([]byte, RootSize)
		err = n.Encode(out)
		if c.len == 0 {
			if err == nil {
				t.Errorf("raw 0: encoded a zero-length extent")
			}
			continue
		}
		if err != nil || !bytes.Equal(out, b) {
			t.Errorf("raw %d: round trip %v\n%x\n%x", c.raw, err, out, b)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	leaf := func(e ...Extent) *Node {
		return &Node{Header: Header{Magic: Magic, Max: 4}, Extents: e}
	}
	for name, n := range map[string]*Node{
		"zero length":        leaf(Extent{Logical: 1, Len: 0, Start: 10}),
		"init too long":      leaf(Extent{Len: InitMaxLen + 1, Start: 10}),
		"unwritten too long": leaf(Extent{Len: InitMaxLen, Start: 10, Unwritten: true}),
		"start beyond 48":    leaf(Extent{Len: 1, Start: 1 << 48}),
		"too many":           leaf(make([]Extent, 5)...),
		"max too big":        {Header: Header{Max: 5}},
		"mixed":              {Header: Header{Max: 4}, Indexes: []Index{{}}},
		"child beyond 48":    {Header: Header{Max: 4, Depth: 1}, Indexes: []Index{{Child: 1 << 48}}},
	} {
		if err := n.Encode(make([]byte, RootSize)); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	good := make([]byte, RootSize)
	Header{Magic: Magic, Entries: 2, Max: 4}.put(good)
	for name, mod := range map[string]func(b []byte) []byte{
		"short":         func(b []byte) []byte { return b[:11] },
		"magic":         func(b []byte) []byte { b[0] = 0; return b },
		"entries > max": func(b []byte) []byte { b[2] = 5; return b },
		"max too big":   func(b []byte) []byte { b[4] = 5; return b },
		"max too big for slice": func(b []byte) []byte {
			return b[:HeaderSize+EntrySize*2]
		},
	} {
		b := mod(append([]byte(nil), good...))
		if _, err := DecodeNode(b); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeNode(good); err != nil {
		t.Fatal(err)
	}
}

func TestNodeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		bs := 1024 << r.IntN(4)
		n := &Node{Header: Header{Magic: Magic, Max: uint16(MaxEntries(bs)), Depth: uint16(r.IntN(6)), Generation: r.Uint32()}}
		count := r.IntN(int(n.Max) + 1)
		for range count {
			if n.Depth == 0 {
				un := r.IntN(2) == 0
				l := 1 + r.Uint32N(InitMaxLen)
				if un {
					l = 1 + r.Uint32N(UnwrittenMaxLen)
				}
				n.Extents = append(n.Extents, Extent{Logical: r.Uint32(), Len: l, Start: r.Uint64N(1 << 48), Unwritten: un})
			} else {
				n.Indexes = append(n.Indexes, Index{Logical: r.Uint32(), Child: r.Uint64N(1 << 48), Unused: uint16(r.Uint32())})
			}
		}
		b := make([]byte, bs)
		if err := n.Encode(b); err != nil {
			t.Fatal(err)
		}
		if err := SetChecksum(b, 77); err != nil {
			t.Fatal(err)
		}
		if err := VerifyChecksum(b, 77); err != nil {
			t.Fatal(err)
		}
		got, err := DecodeNode(b)
		if err != nil {
			t.Fatal(err)
		}
		n.Entries = uint16(count)
		if !reflect.DeepEqual(got, n) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, n)
		}
		b[r.IntN(HeaderSize+EntrySize*int(n.Max)+TailSize)] ^= 1 << r.IntN(8)
		var ke *fserr.ChecksumError
		if err := VerifyChecksum(b, 77); !errors.As(err, &ke) {
			// A flipped eh_max can also move the tail out of the block.
			if !errors.Is(err, fserr.ErrCorrupt) {
				t.Fatalf("corrupted node: %v", err)
			}
		}
	}
	if _, err := Checksum(make([]byte, 1024), 0); err == nil {
		t.Error("checksum of a node without magic")
	}
	b := make([]byte, 1024)
	Header{Magic: Magic, Max: 85}.put(b) // 12+85*12 = 1032: no room
	if err := SetChecksum(b, 0); err == nil {
		t.Error("tail outside the block accepted")
	}
}

// memFS is an in-memory block device for synthetic trees.
type memFS struct {
	bs     int
	blocks map[uint64][]byte
	next   uint64
	reads  int
	seed   uint32
}

func newMemFS(bs int) *memFS {
	return &memFS{bs: bs, blocks: map[uint64][]byte{}, next: 100, seed: 0xC0FFEE}
}

func (m *memFS) read(p uint64) ([]byte, error) {
	m.reads++
	b, ok := m.blocks[p]
	if !ok {
		return nil, fmt.Errorf("no block %d", p)
	}
	return b, nil
}

// build makes a tree of the extents with at most fan entries per block
// node and returns the 60-byte root.
func (m *memFS) build(t testing.TB, exts []Extent, fan int) []byte {
	type ent struct {
		logical uint32
		blk     uint64
	}
	write := func(n *Node) uint64 {
		b := make([]byte, m.bs)
		n.Magic, n.Max = Magic, uint16(MaxEntries(m.bs))
		if err := n.Encode(b); err != nil {
			t.Fatal(err)
		}
		if err := SetChecksum(b, m.seed); err != nil {
			t.Fatal(err)
		}
		p := m.next
		m.next++
		m.blocks[p] = b
		return p
	}
	root := make([]byte, RootSize)
	if len(exts) <= 4 {
		n := &Node{Header: Header{Magic: Magic, Max: 4}, Extents: exts}
		if err := n.Encode(root); err != nil {
			t.Fatal(err)
		}
		return root
	}
	var level []ent
	for i := 0; i < len(exts); i += fan {
		chunk := exts[i:min(i+fan, len(exts))]
		level = append(level, ent{chunk[0].Logical, write(&Node{Extents: chunk})})
	}
	depth := uint16(1)
	for len(level) > 4 {
		var up []ent
		for i := 0; i < len(level); i += fan {
			var idx []Index
			for _, e := range level[i:min(i+fan, len(level))] {
				idx = append(idx, Index{Logical: e.logical, Child: e.blk})
			}
			up = append(up, ent{idx[0].Logical, write(&Node{Header: Header{Depth: depth}, Indexes: idx})})
		}
		level = up
		depth++
	}
	n := &Node{Header: Header{Magic: Magic, Max: 4, Depth: depth}}
	for _, e := range level {
		n.Indexes = append(n.Indexes, Index{Logical: e.logical, Child: e.blk})
	}
	if err := n.Encode(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func (m *memFS) tree(root []byte) *Tree {
	return &Tree{Root: root, Read: m.read, BlockSize: m.bs, FirstDataBlock: 0, BlocksCount: 1 << 40, Csum: true, Seed: m.seed, Ino: 12}
}

// sampleExtents returns n extents with gaps, some unwritten.
func sampleExtents(n int) []Extent {
	var out []Extent
	l := uint32(5)
	for i := range n {
		e := Extent{Logical: l, Len: uint32(1 + i%7), Start: uint64(1_000_000 + 10*i), Unwritten: i%5 == 3}
		out = append(out, e)
		l = uint32(e.End()) + uint32(i%3)
	}
	return out
}

func TestTreeWalkLookup(t *testing.T) {
	for _, c := range []struct {
		n, fan, depth int
	}{
		{0, 3, 0}, {3, 3, 0}, {4, 3, 0}, {5, 3, 1}, {12, 3, 1}, {13, 3, 2}, {40, 3, 3}, {200, 3, 4}, {700, 3, 5}, {2000, 84, 2},
	} {
		m := newMemFS(1024)
		exts := sampleExtents(c.n)
		root := m.build(t, exts, c.fan)
		tr := m.tree(root)
		rn, err := tr.RootNode()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if int(rn.Depth) != c.depth {
			t.Errorf("%+v: depth %d", c, rn.Depth)
		}
		got, err := tr.Extents()
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if len(exts) == 0 {
			exts = nil
		}
		if !reflect.DeepEqual(got, exts) {
			t.Fatalf("%+v: walk differs", c)
		}
		blocks, err := tr.Blocks()
		if err != nil || len(blocks) != len(m.blocks) {
			t.Errorf("%+v: %d blocks of %d (%v)", c, len(blocks), len(m.blocks), err)
		}
		// Lookup every block around every extent, and compare with a scan.
		for _, e := range exts {
			for _, l := range []uint32{e.Logical - 1, e.Logical, e.Logical + e.Len/2, uint32(e.End()) - 1, uint32(e.End())} {
				checkLookup(t, tr, exts, l)
			}
		}
		checkLookup(t, tr, exts, 0)
		checkLookup(t, tr, exts, MaxLogical)
		if c.depth > 0 {
			m.reads = 0
			checkLookup(t, tr, exts, exts[len(exts)/2].Logical)
			if m.reads != c.depth {
				t.Errorf("%+v: lookup read %d blocks", c, m.reads)
			}
		}
	}
}

// checkLookup compares Lookup with a linear scan of the extent list.
func checkLookup(t *testing.T, tr *Tree, exts []Extent, l uint32) {
	t.Helper()
	want := Mapping{Logical: l, Len: 1<<32 - uint64(l)}
	for _, e := range exts {
		if l >= e.Logical && uint64(l) < e.End() {
			off := uint64(l - e.Logical)
			want = Mapping{Logical: l, Len: uint64(e.Len) - off, Physical: e.Start + off, Unwritten: e.Unwritten, Extent: e}
			break
		}
		if e.Logical > l {
			want.Len = uint64(e.Logical - l)
			break
		}
	}
	got, err := tr.Lookup(l)
	core := got
	core.NearKnown, core.HasLeft, core.HasRight, core.Left, core.Right = false, false, false, Extent{}, Extent{}
	if err != nil || core != want {
		t.Errorf("Lookup(%d) = %+v, %v; want %+v", l, got, err, want)
	}
	if got.Hole() != (want.Physical == 0) {
		t.Errorf("Lookup(%d): Hole() wrong", l)
	}
	if !got.NearKnown {
		return
	}
	if !got.Hole() {
		t.Errorf("Lookup(%d): neighbours reported for a mapped block", l)
		return
	}
	// The neighbours a hole's lookup reports, by a scan.
	var left, right *Extent
	for i := range exts {
		if exts[i].End() <= uint64(l) {
			left = &exts[i]
		} else if exts[i].Logical > l && right == nil {
			right = &exts[i]
		}
	}
	if got.HasLeft != (left != nil) || left != nil && got.Left != *left {
		t.Errorf("Lookup(%d): left %v %+v, by a scan %+v", l, got.HasLeft, got.Left, left)
	}
	if got.HasRight != (right != nil) || right != nil && got.Right != *right {
		t.Errorf("Lookup(%d): right %v %+v, by a scan %+v", l, got.HasRight, got.Right, right)
	}
}

// TestTreeCorruption damages a valid depth-2 tree in one way at a time.
func TestTreeCorruption(t *testing.T) {
	setup := func() (*memFS, *Tree, *Node) {
		m := newMemFS(1024)
		root := m.build(t, sampleExtents(40), 3)
		tr := m.tree(root)
		rn, err := tr.RootNode()
		if err != nil {
			t.Fatal(err)
		}
		return m, tr, rn
	}
	// rewrite decodes block p, applies f and writes it back with a good checksum.
	rewrite := func(t *testing.T, m *memFS, p uint64, f func(n *Node)) {
		n, err := DecodeNode(m.blocks[p])
		if err != nil {
			t.Fatal(err)
		}
		f(n)
		b := make([]byte, m.bs)
		if err := n.Encode(b); err != nil {
			t.Fatal(err)
		}
		SetChecksum(b, m.seed)
		m.blocks[p] = b
	}
	firstLeaf := func(m *memFS, rn *Node) uint64 {
		p := rn.Indexes[0].Child
		for {
			n, _ := DecodeNode(m.blocks[p])
			if n.Leaf() {
				return p
			}
			p = n.Indexes[0].Child
		}
	}
	cases := map[string]func(t *testing.T, m *memFS, tr *Tree, rn *Node){
		"root magic":   func(t *testing.T, m *memFS, tr *Tree, rn *Node) { tr.Root[0] = 1 },
		"root depth 6": func(t *testing.T, m *memFS, tr *Tree, rn *Node) { tr.Root[6] = 6 },
		"root max 5":   func(t *testing.T, m *memFS, tr *Tree, rn *Node) { tr.Root[4] = 5 },
		"root max 0":   func(t *testing.T, m *memFS, tr *Tree, rn *Node) { tr.Root[4], tr.Root[2] = 0, 0 },
		"root no entries at depth>0": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			tr.Root[2] = 0
		},
		"checksum": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			m.blocks[rn.Indexes[1].Child][1020] ^= 1
		},
		"child depth": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, rn.Indexes[0].Child, func(n *Node) { n.Depth = 3 })
		},
		"child first entry": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, firstLeaf(m, rn), func(n *Node) { n.Extents[0].Logical++ })
		},
		"overlap": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, firstLeaf(m, rn), func(n *Node) { n.Extents[0].Len += 10 })
		},
		"past parent range": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, firstLeaf(m, rn), func(n *Node) { n.Extents[len(n.Extents)-1].Len += 100 })
		},
		"index order": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, rn.Indexes[0].Child, func(n *Node) { n.Indexes[1].Logical = n.Indexes[0].Logical })
		},
		"physical past end": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, firstLeaf(m, rn), func(n *Node) { n.Extents[1].Start = 1<<40 - 1 })
		},
		"physical zero": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, firstLeaf(m, rn), func(n *Node) { n.Extents[1].Start = 0 })
		},
		"child past end": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, rn.Indexes[0].Child, func(n *Node) { n.Indexes[1].Child = 1 << 41 })
		},
		"shared child": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			rewrite(t, m, rn.Indexes[0].Child, func(n *Node) { n.Indexes[1].Child = n.Indexes[0].Child })
		},
		"leaf max too big": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			b := m.blocks[firstLeaf(m, rn)]
			binary.LittleEndian.PutUint16(b[4:], 85)
		},
		"zero length": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			b := m.blocks[firstLeaf(m, rn)]
			binary.LittleEndian.PutUint16(b[HeaderSize+EntrySize+4:], 0)
			SetChecksum(b, m.seed)
		},
		"wraps 2^32": func(t *testing.T, m *memFS, tr *Tree, rn *Node) {
			n := &Node{Header: Header{Magic: Magic, Max: 4}, Extents: []Extent{{Logical: 0xfffffffb, Len: 10, Start: 100}}}
			n.Encode(tr.Root)
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			m, tr, rn := setup()
			f(t, m, tr, rn)
			err := tr.Walk(func(Extent) error { return nil })
			if !errors.Is(err, fserr.ErrCorrupt) {
				t.Fatalf("walk: %v", err)
			}
			t.Log(err)
		})
	}
	// An extent may end exactly at MaxLogical.
	_, tr, _ := setup()
	n := &Node{Header: Header{Magic: Magic, Max: 4}, Extents: []Extent{{Logical: 0xfffffff5, Len: 10, Start: 100}}}
	n.Encode(tr.Root)
	if got, err := tr.Lookup(MaxLogical - 1); err != nil || got.Physical != 109 || got.Len != 1 {
		t.Errorf("last block: %+v %v", got, err)
	}
	if got, err := tr.Lookup(MaxLogical); err != nil || !got.Hole() || got.Len != 1 {
		t.Errorf("block 2^32-1: %+v %v", got, err)
	}
	// A missing block and a short block are read errors, not corruption.
	m, tr, rn := setup()
	delete(m.blocks, rn.Indexes[1].Child)
	if err := tr.Walk(func(Extent) error { return nil }); err == nil || errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("missing block: %v", err)
	}
	m, tr, rn = setup()
	m.blocks[rn.Indexes[1].Child] = make([]byte, 100)
	if err := tr.Walk(func(Extent) error { return nil }); err == nil {
		t.Error("short block accepted")
	}
	// Without Csum a bad tail passes, and fn's error stops the walk.
	m, tr, rn = setup()
	m.blocks[rn.Indexes[1].Child][1020] ^= 1
	tr.Csum = false
	stop := errors.New("stop")
	calls := 0
	if err := tr.Walk(func(Extent) error { calls++; return stop }); err != stop || calls != 1 {
		t.Errorf("stop: %v after %d", err, calls)
	}
	// Error locations are filled in.
	m, tr, rn = setup()
	m.blocks[rn.Indexes[1].Child][1020] ^= 1
	var ke *fserr.ChecksumError
	if err := tr.Walk(func(Extent) error { return nil }); !errors.As(err, &ke) || ke.Block != int64(rn.Indexes[1].Child) || ke.Ino != 12 {
		t.Errorf("checksum error location: %v", err)
	}
}

func FuzzDecodeNode(f *testing.F) {
	m := newMemFS(1024)
	root := m.build(f, sampleExtents(40), 3)
	f.Add(root)
	for _, b := range m.blocks {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := DecodeNode(b)
		if err != nil {
			return
		}
		_, _ = Checksum(b, 1)
		for _, e := range n.Extents {
			if e.Len == 0 {
				return // not encodable
			}
		}
		out := append([]byte(nil), b...)
		if err := n.Encode(out); err != nil {
			t.Fatalf("encode decoded node: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("round trip differs")
		}
	})
}

// FuzzWalk feeds arbitrary bytes as the root and as every block (shifted
// by the block number so blocks differ).
func FuzzWalk(f *testing.F) {
	m := newMemFS(1024)
	root := m.build(f, sampleExtents(40), 3)
	leaf := m.blocks[101]
	idx := m.blocks[m.next-1]
	f.Add(root, leaf, uint8(0), uint32(7))
	f.Add(root, idx, uint8(1), uint32(100))
	f.Add(idx[:RootSize], leaf, uint8(2), uint32(0))
	f.Fuzz(func(t *testing.T, root, blk []byte, flags uint8, lblk uint32) {
		bs := 1024
		read := func(p uint64) ([]byte, error) {
			if p%7 == 6 {
				return nil, errors.New("io")
			}
			b := make([]byte, bs)
			if len(blk) > 0 {
				s := int(p % uint64(len(blk)))
				if flags&4 != 0 {
					s = 0
				}
				for i := range b {
					b[i] = blk[(s+i)%len(blk)]
				}
			}
			return b, nil
		}
		tr := &Tree{Root: root, Read: read, BlockSize: bs, Csum: flags&1 != 0, Seed: 5, Ino: 3}
		if flags&2 != 0 {
			tr.BlocksCount = 1 << 20
		}
		count := 0
		tr.Walk(func(Extent) error {
			count++
			if count > 1<<20 {
				t.Fatal("too many extents")
			}
			return nil
		})
		tr.Lookup(lblk)
		tr.Blocks()
	})
}

// TestNodeArraysWholeLines: a decoded node's entry arrays fill whole
// cache lines (growLines), whatever the entry count.
func TestNodeArraysWholeLines(t *testing.T) {
	for _, depth := range []uint16{0, 1} {
		for entries := 1; entries <= 20; entries++ {
			n := &Node{Header: Header{Depth: depth, Max: 340}}
			for i := range entries {
				if depth == 0 {
					n.Extents = append(n.Extents, Extent{Logical: uint32(i * 10), Len: 1, Start: uint64(1000 + i)})
				} else {
					n.Indexes = append(n.Indexes, Index{Logical: uint32(i * 10), Child: uint64(1000 + i)})
				}
			}
			b := make([]byte, 4096)
			if err := n.Encode(b); err != nil {
				t.Fatal(err)
			}
			var m Node
			if err := decodeNodeInto(b, &m); err != nil {
				t.Fatal(err)
			}
			size := uintptr(cap(m.Extents)) * unsafe.Sizeof(Extent{})
			if depth > 0 {
				size = uintptr(cap(m.Indexes)) * unsafe.Sizeof(Index{})
			}
			if size%64 != 0 || size == 0 {
				t.Errorf("depth %d, %d entries: arrays of %d bytes", depth, entries, size)
			}
		}
	}
}
