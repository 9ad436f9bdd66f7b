package blockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// memFS is an in-memory block device that builds block maps.
type memFS struct {
	bs     int
	blocks map[uint64][]byte
	next   uint32
	reads  int
}

func newMemFS(bs int) *memFS { return &memFS{bs: bs, blocks: map[uint64][]byte{}, next: 1000} }

func (m *memFS) read(p uint64) ([]byte, error) {
	m.reads++
	b, ok := m.blocks[p]
	if !ok {
		return nil, fmt.Errorf("no block %d", p)
	}
	return b, nil
}

func (m *memFS) alloc() uint32 {
	p := m.next
	m.next++
	m.blocks[uint64(p)] = make([]byte, m.bs)
	return p
}

// build makes an i_block mapping each file block in data to its physical
// block, allocating indirect blocks (from 1000 up) as needed.
func (m *memFS) build(t testing.TB, data map[uint32]uint32) []byte {
	root := make([]byte, RootSize)
	mp := &Map{Root: root, BlockSize: m.bs}
	keys := make([]uint32, 0, len(data))
	for l := range data {
		keys = append(keys, l)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	for _, l := range keys {
		path, _, err := mp.path(l)
		if err != nil {
			t.Fatal(err)
		}
		arr := root
		for j, off := range path {
			slot := arr[4*off:]
			if j == len(path)-1 {
				binary.LittleEndian.PutUint32(slot, data[l])
				break
			}
			p := binary.LittleEndian.Uint32(slot)
			if p == 0 {
				p = m.alloc()
				binary.LittleEndian.PutUint32(slot, p)
			}
			arr = m.blocks[uint64(p)]
		}
	}
	return root
}

func (m *memFS) mapOf(root []byte) *Map {
	return &Map{Root: root, Read: m.read, BlockSize: m.bs, FirstDataBlock: 0, BlocksCount: 1 << 31, Ino: 11}
}

// sample maps runs of blocks in every region of a 1 KiB-block map.
func sample(bs int) map[uint32]uint32 {
	p := uint32(bs / 4)
	d := map[uint32]uint32{}
	put := func(l uint32, n int, phys uint32) {
		for i := range uint32(n) {
			d[l+i] = phys + i
		}
	}
	put(0, 3, 50000)
	put(5, 10, 50010) // crosses into the single indirect range
	put(12+p-2, 5, 60000)
	put(12+p+p*3+7, 1, 70000)
	dind := 12 + p + p*p
	put(dind-1, 3, 80000) // end of double, start of triple
	put(dind+p*p+p+1, 2, 90000)
	return d
}

func TestPath(t *testing.T) {
	m := &Map{BlockSize: 1024}
	for _, c := range []struct {
		l    uint32
		path []int
		rel  uint64
	}{
		{0, []int{0}, 0},
		{11, []int{11}, 11},
		{12, []int{12, 0}, 0},
		{267, []int{12, 255}, 255},
		{268, []int{13, 0, 0}, 0},
		{268 + 256*256 - 1, []int{13, 255, 255}, 65535},
		{268 + 65536, []int{14, 0, 0, 0}, 0},
		{268 + 65536 + 256*256*256 - 1, []int{14, 255, 255, 255}, 1<<24 - 1},
	} {
		p, rel, err := m.path(c.l)
		if err != nil || !reflect.DeepEqual(p, c.path) || rel != c.rel {
			t.Errorf("path(%d) = %v %d %v, want %v %d", c.l, p, rel, err, c.path, c.rel)
		}
	}
	if _, _, err := m.path(uint32(MaxBlocks(1024))); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("past the map: %v", err)
	}
	m.BlockSize = 4096
	if _, _, err := m.path(12 + 1024 + 1<<20 + 1<<30); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("bs 4096: past the map: %v", err)
	}
	m.BlockSize = 65536
	if _, _, err := m.path(1<<32 - 1); err != nil {
		t.Errorf("bs 65536: last block: %v", err)
	}
	if MaxBlocks(1024) != 12+256+65536+16777216 || MaxBlocks(4096) != 12+1024+1<<20+1<<30 || MaxBlocks(65536) != 1<<32 {
		t.Error("MaxBlocks")
	}
	m.BlockSize = 1000
	if _, _, err := m.path(0); err == nil {
		t.Error("bad block size accepted")
	}
}

func TestLookupWalk(t *testing.T) {
	for _, bs := range []int{1024, 2048, 4096, 65536} {
		m := newMemFS(bs)
		data := sample(bs)
		mp := m.mapOf(m.build(t, data))
		// Lookup of every mapped block and its neighbours.
		for l := range data {
			for _, x := range []uint32{l - 1, l, l + 1} {
				checkLookup(t, mp, data, x)
			}
		}
		checkLookup(t, mp, data, 1<<31)
		// Walk yields the same blocks, in order, runs merged.
		var got []Run
		if err := mp.Walk(func(r Run) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		seen := map[uint32]uint32{}
		var ind []uint64
		last := int64(-1)
		for i, r := range got {
			if r.Level > 0 {
				ind = append(ind, r.Physical)
				continue
			}
			if int64(r.Logical) <= last {
				t.Fatalf("bs %d: run %d out of order", bs, i)
			}
			for k := range r.Len {
				seen[r.Logical+k] = uint32(r.Physical) + k
			}
			last = int64(r.Logical + r.Len - 1)
			if i > 0 && got[i-1].Level == 0 && uint64(got[i-1].Logical+got[i-1].Len) == uint64(r.Logical) &&
				got[i-1].Physical+uint64(got[i-1].Len) == r.Physical {
				t.Errorf("bs %d: runs %d and %d not merged", bs, i-1, i)
			}
		}
		if !reflect.DeepEqual(seen, data) {
			t.Errorf("bs %d: walk maps %d blocks, want %d", bs, len(seen), len(data))
		}
		ib, err := mp.IndirectBlocks()
		if err != nil || !reflect.DeepEqual(ib, ind) || len(ib) != len(m.blocks) {
			t.Errorf("bs %d: indirect blocks %v (%d allocated), %v", bs, ib, len(m.blocks), err)
		}
	}
}

// checkLookup compares Lookup with the map it was built from.
func checkLookup(t *testing.T, mp *Map, data map[uint32]uint32, l uint32) {
	t.Helper()
	got, err := mp.Lookup(l)
	if errors.Is(err, ErrOutOfRange) {
		if uint64(l) < MaxBlocks(mp.BlockSize) {
			t.Errorf("Lookup(%d): out of range", l)
		}
		return
	}
	if err != nil {
		t.Fatalf("Lookup(%d): %v", l, err)
	}
	if got.Logical != l || got.Physical != uint64(data[l]) || got.Len < 1 || got.Hole() != (data[l] == 0) {
		t.Fatalf("Lookup(%d) = %+v, want physical %d", l, got, data[l])
	}
	// Every block of the reported run agrees.
	for i := range min(got.Len, 5000) {
		want := uint32(0)
		if !got.Hole() {
			want = uint32(got.Physical + i)
		}
		if data[l+uint32(i)] != want {
			t.Fatalf("Lookup(%d) = %+v, but block %d maps to %d", l, got, l+uint32(i), data[l+uint32(i)])
		}
	}
}

func TestLookupReads(t *testing.T) {
	m := newMemFS(1024)
	data := sample(1024)
	mp := m.mapOf(m.build(t, data))
	for _, c := range []struct {
		l     uint32
		reads int
	}{{0, 0}, {12, 1}, {268 + 256*3 + 7, 2}, {268 + 65536 + 65536 + 256 + 1, 3}} {
		m.reads = 0
		if _, err := mp.Lookup(c.l); err != nil || m.reads != c.reads {
			t.Errorf("Lookup(%d): %d reads, %v", c.l, m.reads, err)
		}
	}
	// A hole under a missing indirect block is reported whole.
	got, err := mp.Lookup(268 + 65536*2)
	if err != nil || !got.Hole() || got.Len < 256 {
		t.Errorf("hole in triple range: %+v %v", got, err)
	}
	empty := newMemFS(1024).mapOf(make([]byte, RootSize))
	got, err = empty.Lookup(0)
	if err != nil || got.Len != NDirect {
		t.Errorf("empty map: %+v %v", got, err)
	}
	got, err = empty.Lookup(20)
	if err != nil || got.Len != 256-8 {
		t.Errorf("empty map, single indirect: %+v %v", got, err)
	}
}

func TestCorruption(t *testing.T) {
	setup := func() (*memFS, *Map) {
		m := newMemFS(1024)
		return m, m.mapOf(m.build(t, sample(1024)))
	}
	walk := func(mp *Map) error { return mp.Walk(func(Run) error { return nil }) }
	le := binary.LittleEndian
	for name, f := range map[string]func(m *memFS, mp *Map){
		"root pointer past end": func(m *memFS, mp *Map) { le.PutUint32(mp.Root[4:], 1<<31) },
		"root pointer at first data block": func(m *memFS, mp *Map) {
			mp.FirstDataBlock = 1
			le.PutUint32(mp.Root[4:], 1)
		},
		"indirect pointer past end": func(m *memFS, mp *Map) {
			le.PutUint32(m.blocks[uint64(le.Uint32(mp.Root[4*IndSlot:]))][100:], 1<<31+5)
		},
		"shared indirect block": func(m *memFS, mp *Map) {
			d := m.blocks[uint64(le.Uint32(mp.Root[4*DindSlot:]))]
			le.PutUint32(d[8:], le.Uint32(d[12:]))
		},
		"indirect block is itself": func(m *memFS, mp *Map) {
			p := le.Uint32(mp.Root[4*DindSlot:])
			le.PutUint32(m.blocks[uint64(p)][0:], p)
		},
	} {
		m, mp := setup()
		f(m, mp)
		if err := walk(mp); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: walk: %v", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// Lookup checks i_block and each indirect block it reads.
	m, mp := setup()
	le.PutUint32(m.blocks[uint64(le.Uint32(mp.Root[4*IndSlot:]))][1020:], 1<<31)
	var ce *fserr.CorruptError
	if _, err := mp.Lookup(12); !errors.As(err, &ce) || ce.Block != int64(le.Uint32(mp.Root[4*IndSlot:])) || ce.Ino != 11 {
		t.Errorf("lookup through a bad indirect block: %v", err)
	}
	if _, err := mp.Lookup(3); err != nil {
		t.Errorf("direct lookup: %v", err)
	}
	// Read errors and short blocks are errors, not corruption.
	m, mp = setup()
	delete(m.blocks, uint64(le.Uint32(mp.Root[4*TindSlot:])))
	if err := walk(mp); err == nil || errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("missing block: %v", err)
	}
	m, mp = setup()
	m.blocks[uint64(le.Uint32(mp.Root[4*TindSlot:]))] = make([]byte, 10)
	if err := walk(mp); err == nil {
		t.Error("short block accepted")
	}
	_, mp = setup()
	mp.Root = mp.Root[:40]
	if err := walk(mp); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("short i_block: %v", err)
	}
	_, mp = setup()
	mp.Read = nil
	if _, err := mp.Lookup(20); err == nil {
		t.Error("nil reader")
	}
	// fn's error stops the walk.
	_, mp = setup()
	stop := errors.New("stop")
	n := 0
	if err := mp.Walk(func(Run) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("stop: %v after %d", err, n)
	}
	// A pointer mapping past 2^32 (possible with 8 KiB blocks and up).
	m = newMemFS(8192)
	root := make([]byte, RootSize)
	t1, t2, t3 := m.alloc(), m.alloc(), m.alloc()
	le.PutUint32(root[4*TindSlot:], t1)
	le.PutUint32(m.blocks[uint64(t1)][4*2047:], t2)
	le.PutUint32(m.blocks[uint64(t2)][0:], t3)
	le.PutUint32(m.blocks[uint64(t3)][0:], 5000)
	mp = m.mapOf(root)
	if err := walk(mp); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("past 2^32: %v", err)
	}
}

func FuzzWalk(f *testing.F) {
	m := newMemFS(1024)
	root := m.build(f, sample(1024))
	for _, p := range []uint64{1000, 1001, 1003} {
		f.Add(root, m.blocks[p], uint8(0), uint32(300))
	}
	f.Add(make([]byte, RootSize), []byte{1, 0, 0, 0}, uint8(3), uint32(0))
	f.Fuzz(func(t *testing.T, root, blk []byte, flags uint8, lblk uint32) {
		bs := 1024 << (flags & 3)
		read := func(p uint64) ([]byte, error) {
			if p%11 == 10 {
				return nil, errors.New("io")
			}
			b := make([]byte, bs)
			if len(blk) > 0 {
				s := int(p % uint64(len(blk)))
				for i := range b {
					b[i] = blk[(s+i)%len(blk)]
				}
			}
			return b, nil
		}
		mp := &Map{Root: root, Read: read, BlockSize: bs, FirstDataBlock: 1}
		if flags&4 != 0 {
			mp.BlocksCount = 1 << 16
		}
		count := 0
		mp.Walk(func(r Run) error {
			count++
			if count > 1<<22 {
				t.Fatal("walk does not end")
			}
			return nil
		})
		got, err := mp.Lookup(lblk)
		if err == nil && got.Len == 0 {
			t.Fatal("empty mapping")
		}
		mp.IndirectBlocks()
	})
}

func TestRandomMaps(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 20 {
		m := newMemFS(1024)
		data := map[uint32]uint32{}
		for range 300 {
			l := r.Uint32N(uint32(MaxBlocks(1024)))
			if r.IntN(3) == 0 {
				l = r.Uint32N(400)
			}
			data[l] = 100000 + r.Uint32N(1000000)
		}
		mp := m.mapOf(m.build(t, data))
		for l := range data {
			checkLookup(t, mp, data, l)
			checkLookup(t, mp, data, l+1)
		}
		got := map[uint32]uint32{}
		mp.Walk(func(r Run) error {
			for k := range r.Len {
				if r.Level == 0 {
					got[r.Logical+k] = uint32(r.Physical) + k
				}
			}
			return nil
		})
		if !reflect.DeepEqual(got, data) {
			t.Fatal("walk differs from the map")
		}
	}
}
