package blockmap

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
)

// memStore is an in-memory Store: a disk of blocks with an allocation
// bitmap, counting what is allocated.
type memStore struct {
	t      *testing.T
	bs     int
	blocks map[uint64][]byte
	used   map[uint64]bool
	next   uint64
	nodes  map[uint64]bool // allocated indirect blocks
	failAt int             // AllocNode fails on this call (1-based), 0: never
	calls  int
}

func newMemStore(t *testing.T, bs int) *memStore {
	return &memStore{t: t, bs: bs, blocks: map[uint64][]byte{}, used: map[uint64]bool{}, next: 100000, nodes: map[uint64]bool{}}
}

func (s *memStore) ReadNode(p uint64) ([]byte, error) {
	if !s.nodes[p] {
		s.t.Fatalf("ReadNode(%d): not an indirect block", p)
	}
	return append([]byte(nil), s.blocks[p]...), nil
}

func (s *memStore) WriteNode(p uint64, b []byte) error {
	if !s.nodes[p] {
		s.t.Fatalf("WriteNode(%d): not an indirect block", p)
	}
	s.blocks[p] = append([]byte(nil), b...)
	return nil
}

func (s *memStore) AllocNode(goal uint64) (uint64, error) {
	s.calls++
	if s.calls == s.failAt {
		return 0, errors.New("no space")
	}
	p := s.next
	s.next++
	s.nodes[p] = true
	s.blocks[p] = make([]byte, s.bs)
	return p, nil
}

func (s *memStore) FreeNode(p uint64) error {
	if !s.nodes[p] {
		s.t.Fatalf("FreeNode(%d): not allocated", p)
	}
	delete(s.nodes, p)
	delete(s.blocks, p)
	return nil
}

func (s *memStore) FreeData(p uint64, n uint32) error {
	for i := uint64(0); i < uint64(n); i++ {
		if !s.used[p+i] {
			s.t.Fatalf("FreeData: block %d not in use", p+i)
		}
		delete(s.used, p+i)
	}
	return nil
}

// reachable returns the indirect blocks the map names.
func reachable(t *testing.T, e *Editor) map[uint64]bool {
	got, err := e.Map().IndirectBlocks()
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]bool{}
	for _, b := range got {
		out[b] = true
	}
	return out
}

// TestEditorRandom: random inserts and removes against a plain map of file
// block -> physical block; every lookup agrees, every data block freed is
// one that was mapped, and exactly the reachable indirect blocks stay
// allocated.
func TestEditorRandom(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		rnd := rand.New(rand.NewPCG(uint64(bs), 7))
		s := newMemStore(t, bs)
		var root [RootSize]byte
		e := &Editor{Root: &root, Store: s, BlockSize: bs, Ino: 12}
		model := map[uint32]uint64{}
		ppb := uint32(bs / 4)
		// Interesting file blocks: the edges of each region.
		edges := []uint32{0, 11, 12, 12 + ppb - 1, 12 + ppb, 12 + ppb + ppb*ppb - 1, 12 + ppb + ppb*ppb}
		nextPhys := uint64(1000)
		for op := 0; op < 3000; op++ {
			l := edges[rnd.IntN(len(edges))] + uint32(rnd.IntN(40))
			if rnd.IntN(3) > 0 {
				n := uint32(1 + rnd.IntN(30))
				free := true
				for i := uint32(0); i < n; i++ {
					if _, ok := model[l+i]; ok {
						free = false
					}
				}
				err := e.Insert(l, nextPhys, n)
				if !free {
					if !errors.Is(err, ErrMapped) {
						t.Fatalf("insert over mapped blocks: %v", err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				for i := uint32(0); i < n; i++ {
					model[l+i] = nextPhys + uint64(i)
					s.used[nextPhys+uint64(i)] = true
				}
				nextPhys += uint64(n) + uint64(rnd.IntN(3))
			} else {
				to := l + uint32(rnd.IntN(2000))
				if rnd.IntN(10) == 0 {
					to = 1<<32 - 1
				}
				if err := e.Remove(l, to); err != nil {
					t.Fatal(err)
				}
				for k := range model {
					if k >= l && (k < to || to == 1<<32-1) {
						delete(model, k)
					}
				}
			}
			if op%50 == 0 {
				checkAgainst(t, e, s, model, edges)
			}
		}
		if err := e.Remove(0, 1<<32-1); err != nil {
			t.Fatal(err)
		}
		if len(s.nodes) != 0 || len(s.used) != 0 || root != [RootSize]byte{} {
			t.Fatalf("bs %d: after removing all: %d indirect and %d data blocks left", bs, len(s.nodes), len(s.used))
		}
	}
}

func checkAgainst(t *testing.T, e *Editor, s *memStore, model map[uint32]uint64, edges []uint32) {
	t.Helper()
	for _, base := range edges {
		for l := base; l < base+80; l++ {
			mp, err := e.Lookup(l)
			if err != nil {
				t.Fatal(err)
			}
			if want := model[l]; mp.Physical != want {
				t.Fatalf("block %d maps to %d, want %d", l, mp.Physical, want)
			}
		}
	}
	r := reachable(t, e)
	if len(r) != len(s.nodes) {
		t.Fatalf("%d indirect blocks allocated, %d reachable", len(s.nodes), len(r))
	}
}

// TestEditorInsertFailure: an allocation failure in the middle of an insert
// leaves the map as it was and frees what it allocated.
func TestEditorInsertFailure(t *testing.T) {
	s := newMemStore(t, 1024)
	var root [RootSize]byte
	e := &Editor{Root: &root, Store: s, BlockSize: 1024}
	if err := e.Insert(0, 500, 5); err != nil {
		t.Fatal(err)
	}
	before := root
	s.failAt = s.calls + 2 // the double indirect tree needs two new blocks
	if err := e.Insert(12+256-2, 600, 4); err == nil {
		t.Fatal("insert did not fail")
	}
	if root != before || len(s.nodes) != 0 {
		t.Fatalf("failed insert changed the map (%d indirect blocks left)", len(s.nodes))
	}
}

func TestArrayEndAndNewNodes(t *testing.T) {
	s := newMemStore(t, 1024)
	var root [RootSize]byte
	e := &Editor{Root: &root, Store: s, BlockSize: 1024}
	for _, c := range []struct {
		lblk uint32
		end  uint64
		new  int
	}{{0, 12, 0}, {11, 12, 0}, {12, 268, 1}, {267, 268, 1}, {268, 524, 2}, {12 + 256 + 256*256, 12 + 256 + 256*256 + 256, 3}} {
		if got := e.ArrayEnd(c.lblk); got != c.end {
			t.Errorf("ArrayEnd(%d) = %d, want %d", c.lblk, got, c.end)
		}
		if got, err := e.NewNodes(c.lblk); err != nil || got != c.new {
			t.Errorf("NewNodes(%d) = %d, %v; want %d", c.lblk, got, err, c.new)
		}
	}
	if err := e.Insert(268, 5000, 1); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.NewNodes(269); got != 0 {
		t.Errorf("NewNodes(269) after mapping 268 = %d, want 0", got)
	}
	if got, _ := e.NewNodes(12 + 256 + 256); got != 1 {
		t.Errorf("NewNodes in the next leaf under the same double indirect block = %d, want 1", got)
	}
}

// fuzzStore serves every block from fuzz input and accepts every change.
type fuzzStore struct {
	data []byte
	bs   int
	next uint64
}

func (s *fuzzStore) ReadNode(p uint64) ([]byte, error) {
	b := make([]byte, s.bs)
	if len(s.data) > 0 {
		for i := range b {
			b[i] = s.data[(int(p)*7+i)%len(s.data)]
		}
	}
	return b, nil
}
func (s *fuzzStore) WriteNode(uint64, []byte) error   { return nil }
func (s *fuzzStore) AllocNode(uint64) (uint64, error) { s.next++; return 1000 + s.next, nil }
func (s *fuzzStore) FreeNode(uint64) error            { return nil }
func (s *fuzzStore) FreeData(uint64, uint32) error    { return nil }

// FuzzEditor: inserts and removes on a map read from arbitrary bytes end
// without panics, with the map's pointers checked against the filesystem.
func FuzzEditor(f *testing.F) {
	f.Add(make([]byte, RootSize+16), uint32(0), uint32(5))
	f.Add(bytes.Repeat([]byte{1, 2, 0, 0}, 40), uint32(12), uint32(300))
	f.Fuzz(func(t *testing.T, data []byte, from, n uint32) {
		var root [RootSize]byte
		copy(root[:], data)
		rest := data[min(len(data), RootSize):]
		e := &Editor{Root: &root, Store: &fuzzStore{data: rest, bs: 1024}, BlockSize: 1024, BlocksCount: 1 << 20}
		e.Insert(from%100000, 5000, n%600)
		e.NewNodes(from)
		e.Remove(from%70000, from%70000+n)
		e.Remove(0, 1<<32-1)
	})
}
