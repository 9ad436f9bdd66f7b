package ialloc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/mballoc"
)

type tx uint64

func (t tx) ID() uint64 { return uint64(t) }

func newTest(t testing.TB, geo Geometry) (*Allocator, *MemStore, *FixedBlocks) {
	t.Helper()
	s := NewMemStore(geo)
	b := NewFixedBlocks(geo, geo.ClustersPerGroup/2)
	a, err := New(geo, s, b, Options{Rand: func(n uint32) uint32 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	return a, s, b
}

var flexGeo = Geometry{Groups: 64, InodesPerGroup: 256, ClustersPerGroup: 32768, LogGroupsPerFlex: 4}

func groupOf(geo Geometry, ino uint32) uint32 { return (ino - 1) / geo.InodesPerGroup }

func TestTopLevelDirsSpread(t *testing.T) {
	a, _, _ := newTest(t, flexGeo)
	root := NewDir(2, 0, true, false)
	flexes := map[uint32]bool{}
	for i := 0; i < 3; i++ {
		ino, err := a.Allocate(tx(1), root, true, []byte(fmt.Sprintf("dir%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		g := groupOf(flexGeo, ino)
		if g%16 != 0 {
			t.Errorf("top-level dir in group %d, not the first group of a flex group", g)
		}
		flexes[g/16] = true
	}
	// Flex group 0 holds the reserved inodes, so it has fewer free inodes
	// than average and is passed over; the other three get one each.
	if len(flexes) != 3 || flexes[0] {
		t.Fatalf("3 top-level dirs in flex groups %v, want 1, 2 and 3 (fewest directories first)", flexes)
	}
	if a.Dirs() != 3 {
		t.Fatalf("dirs counter %d", a.Dirs())
	}
}

func TestSubdirsAndFilesNearParent(t *testing.T) {
	a, _, _ := newTest(t, flexGeo)
	parent := NewDir(5000, 19, false, false) // in flex group 1
	for i := 0; i < 20; i++ {
		ino, err := a.Allocate(tx(1), parent, i%2 == 0, []byte("x"))
		if err != nil {
			t.Fatal(err)
		}
		if g := groupOf(flexGeo, ino); g/16 != 1 {
			t.Fatalf("inode %d of a child of a group-19 directory in group %d", ino, g)
		}
	}
	// Files: the parent's flex group first; when it is full, the group last
	// allocated from.
	full := Geometry{Groups: 8, InodesPerGroup: 16, ClustersPerGroup: 1024, LogGroupsPerFlex: 1}
	a2, _, _ := newTest(t, full)
	p := NewDir(20, 1, false, false)
	var got []uint32
	for i := 0; i < 40; i++ {
		ino, err := a2.Allocate(tx(1), p, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, groupOf(full, ino))
	}
	for i := 0; i < 22; i++ { // group 0 has 10 reserved inodes: 6 + 16 in flex 0
		if got[i] > 1 {
			t.Fatalf("file %d in group %d before the parent's flex group was full: %v", i, got[i], got)
		}
	}
	if got[22] <= 1 {
		t.Fatalf("file 22 in group %d, flex group 0 should be full: %v", got[22], got)
	}
	if p.LastAllocGroup() < 2 {
		t.Fatalf("last alloc group %d", p.LastAllocGroup())
	}
}

func TestNoFlexFindOther(t *testing.T) {
	geo := Geometry{Groups: 16, InodesPerGroup: 64, ClustersPerGroup: 1024}
	a, _, blocks := newTest(t, geo)
	p := NewDir(100, 3, false, false)
	ino, err := a.Allocate(tx(1), p, false, nil)
	if err != nil || groupOf(geo, ino) != 3 {
		t.Fatalf("file of a group-3 directory: inode %d (group %d), %v", ino, groupOf(geo, ino), err)
	}
	blocks.Set(3, 0) // no free blocks: the quadratic hash moves on
	ino, err = a.Allocate(tx(1), p, false, nil)
	if err != nil || groupOf(geo, ino) == 3 {
		t.Fatalf("parent group without blocks still chosen: %d %v", ino, err)
	}
}

func TestENOSPCAndFree(t *testing.T) {
	geo := Geometry{Groups: 2, InodesPerGroup: 16, ClustersPerGroup: 1024, LogGroupsPerFlex: 1}
	a, _, _ := newTest(t, geo)
	root := NewDir(2, 0, true, false)
	seen := map[uint32]bool{}
	for i := 0; i < 32-10; i++ {
		ino, err := a.Allocate(tx(1), root, i%3 == 0, nil)
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		if seen[ino] || ino < 11 {
			t.Fatalf("inode %d handed out twice or reserved", ino)
		}
		seen[ino] = true
	}
	_, err := a.Allocate(tx(1), root, false, nil)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("full: %v", err)
	}
	if err := a.Free(tx(2), 20, false); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(tx(2), 20, false); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("double free: %v", err)
	}
	if err := a.Free(tx(2), 3, false); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("freeing a reserved inode: %v", err)
	}
	ino, err := a.Allocate(tx(3), root, false, nil)
	if err != nil || ino != 20 {
		t.Fatalf("after free: %d %v", ino, err)
	}
}

func TestCorruptBitmap(t *testing.T) {
	geo := Geometry{Groups: 1, InodesPerGroup: 16, ClustersPerGroup: 1024}
	s := NewMemStore(geo)
	s.groups[0].bitmap[1] = 0xff // 8 more in use than the count says
	a, err := New(geo, s, NewFixedBlocks(geo, 100), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(nil, NewDir(2, 0, true, false), false, nil); !errors.Is(err, fserr.ErrCorrupt) {
		t.Fatalf("got %v, want corruption", err)
	}
}

// TestConcurrentInodes allocates and frees from many goroutines (run under
// -race) and checks no inode is handed out twice and the counts add up.
func TestConcurrentInodes(t *testing.T) {
	geo := Geometry{Groups: 32, InodesPerGroup: 128, ClustersPerGroup: 8192, LogGroupsPerFlex: 2}
	a, s, _ := newTest(t, geo)
	var mu sync.Mutex
	owner := map[uint32]int{}
	var wg sync.WaitGroup
	for w := 1; w <= 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			dir := NewDir(uint32(100*w), uint32(w%32), w == 1, false)
			var mine []uint32
			for i := 0; i < 400; i++ {
				if len(mine) > 0 && r.IntN(3) == 0 {
					k := r.IntN(len(mine))
					ino := mine[k]
					mine = append(mine[:k], mine[k+1:]...)
					mu.Lock()
					delete(owner, ino)
					mu.Unlock()
					if err := a.Free(nil, ino, false); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				ino, err := a.Allocate(nil, dir, false, nil)
				if errors.Is(err, ErrNoSpace) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if o, dup := owner[ino]; dup {
					t.Errorf("inode %d given to %d and %d", ino, o, w)
				}
				owner[ino] = w
				mu.Unlock()
				mine = append(mine, ino)
			}
		}(w)
	}
	wg.Wait()
	var free int64
	for g := uint32(0); g < geo.Groups; g++ {
		f, _, _ := s.GroupCounts(g)
		free += int64(f)
	}
	if free != a.FreeInodes() || int64(len(owner)) != int64(geo.Groups*geo.InodesPerGroup)-10-free {
		t.Fatalf("free %d (store %d), owned %d", a.FreeInodes(), free, len(owner))
	}
}

// mballoc's Allocator provides the block counts.
var _ BlockCounts = (*mballoc.Allocator)(nil)

type fuzzStore struct {
	bm         []byte
	free, dirs uint32
}

func (f *fuzzStore) GroupCounts(uint32) (uint32, uint32, error) { return f.free, f.dirs, nil }
func (f *fuzzStore) ReadInodeBitmap(uint32) ([]byte, error)     { return f.bm, nil }
func (f *fuzzStore) UpdateInodeBitmap(Tx, uint32, uint32, bool, bool, uint32, uint32) error {
	return nil
}

// FuzzInodeBitmap feeds arbitrary bitmaps and counts: no panic, corruption
// reported, never a used or reserved inode handed out.
func FuzzInodeBitmap(f *testing.F) {
	f.Add([]byte{0xff, 0x03}, uint32(6), uint32(0))
	f.Add([]byte{}, uint32(64), uint32(1))
	f.Fuzz(func(t *testing.T, bm []byte, free, dirs uint32) {
		geo := Geometry{Groups: 1, InodesPerGroup: 64, ClustersPerGroup: 1024}
		a, err := New(geo, &fuzzStore{bm, free, dirs}, NewFixedBlocks(geo, 10), Options{})
		if err != nil {
			if !errors.Is(err, fserr.ErrCorrupt) {
				t.Fatal(err)
			}
			return
		}
		ino, err := a.Allocate(nil, NewDir(2, 0, true, false), true, []byte("d"))
		if err != nil {
			if !errors.Is(err, fserr.ErrCorrupt) && !errors.Is(err, ErrNoSpace) {
				t.Fatal(err)
			}
			return
		}
		i := ino - 1
		if ino < 11 || (int(i/8) < len(bm) && bm[i/8]&(1<<(i%8)) != 0) {
			t.Fatalf("inode %d handed out", ino)
		}
	})
}
