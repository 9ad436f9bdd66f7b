package mballoc

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/pad"

	"github.com/ext4go/ext4go/internal/fserr"
)

type testTx uint64

func (t testTx) ID() uint64 { return uint64(t) }

// kernelGeometry is the fake filesystem of the kernel's mballoc-test.c:
// 4 groups of 8192 blocks.
func kernelGeometry(bs uint32) Geometry {
	return Geometry{BlockSize: bs, BlocksPerGroup: 8192, BlocksCount: 4 * 8192}
}

func newBare(t testing.TB, gm Geometry, cfg Config) (*Allocator, *MemStore) {
	t.Helper()
	s, err := NewMemStore(gm, MemStoreOptions{Bare: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(gm, s, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, s
}

// TestNewBlocksSimple follows the kernel's test_new_blocks_simple: a block
// at the goal, then after the goal, then in the next group, then wrapping
// to the groups before the goal, then ENOSPC.
func TestNewBlocksSimple(t *testing.T) {
	for _, bs := range []uint32{1024, 4096} {
		gm := kernelGeometry(bs)
		s, _ := NewMemStore(gm, MemStoreOptions{Bare: true})
		const goalGroup = 1
		goal := uint64(goalGroup * 8192)
		alloc := func() (Extent, error) {
			a, err := New(gm, s, Config{})
			if err != nil {
				t.Fatal(err)
			}
			e, err := a.Allocate(nil, Request{Len: 1, Goal: goal, Flags: FlagTryGoal})
			if err == nil {
				if err := a.CheckConsistency(); err != nil {
					t.Fatalf("bs %d: %v", bs, err)
				}
			}
			return e, err
		}
		check := func(what string, want uint64) {
			t.Helper()
			e, err := alloc()
			if err != nil || e.Start != want || e.Len != 1 {
				t.Fatalf("bs %d, %s: got %+v, %v; want block %d", bs, what, e, err, want)
			}
		}
		check("goal", goal)
		check("after goal", goal+1)
		if err := s.MarkUsed(goal, 8192); err != nil {
			t.Fatal(err)
		}
		check("next group", 2*8192)
		if err := s.MarkUsed(2*8192, 2*8192); err != nil {
			t.Fatal(err)
		}
		check("wrap to group 0", 0)
		if err := s.MarkUsed(0, 8192); err != nil {
			t.Fatal(err)
		}
		_, err := alloc()
		if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("bs %d, full: got %v, want ENOSPC", bs, err)
		}
	}
}

// TestFreeBlocksExactBitmap follows test_free_blocks_simple: after freeing
// ranges, the bitmap is exactly what remains.
func TestFreeBlocksExactBitmap(t *testing.T) {
	for _, bs := range []uint32{1024, 4096} {
		a, s := newBare(t, kernelGeometry(bs), Config{})
		var exts []Extent
		for i := 0; i < 64; i++ {
			e, err := a.Allocate(nil, Request{Len: 100, Goal: uint64(i) * 500, Flags: FlagTryGoal})
			if err != nil {
				t.Fatal(err)
			}
			exts = append(exts, e)
		}
		model := map[uint64]bool{}
		for _, e := range exts {
			for b := e.Start; b < e.End(); b++ {
				if model[b] {
					t.Fatalf("block %d allocated twice", b)
				}
				model[b] = true
			}
		}
		for i, e := range exts {
			if i%3 == 0 {
				continue
			}
			// free a middle part
			fs, fn := e.Start+uint64(i%7), uint64(e.Len)-uint64(i%7)-uint64(i%5)
			if err := a.Free(nil, fs, fn, 0); err != nil {
				t.Fatal(err)
			}
			for b := fs; b < fs+fn; b++ {
				delete(model, b)
			}
		}
		for b := uint64(0); b < 4*8192; b++ {
			if s.IsUsed(b) != model[b] {
				t.Fatalf("bs %d: block %d used=%v, model %v", bs, b, s.IsUsed(b), model[b])
			}
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestGroupPadding(t *testing.T) {
	if sz := unsafe.Sizeof(group{}); sz%cacheLine != 0 {
		t.Fatalf("group is %d bytes, not a multiple of %d", sz, cacheLine)
	}
	if unsafe.Sizeof(paddedU32{}) != cacheLine || unsafe.Sizeof(paddedI64{}) != cacheLine {
		t.Fatal("padded counters are not one cache line")
	}
	// A file's preallocation state is written on every allocation of the
	// file: a size class of one line keeps two files' states apart.
	if pad.On == 1 && unsafe.Sizeof(inodeState{}) != cacheLine {
		t.Fatalf("inodeState is %d bytes, not one cache line", unsafe.Sizeof(inodeState{}))
	}
}

func TestErrors(t *testing.T) {
	a, _ := newBare(t, kernelGeometry(4096), Config{})
	e, err := a.Allocate(nil, Request{Len: 8})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Free(nil, e.Start, 8, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Free(nil, e.Start, 8, 0); err == nil {
		t.Fatal("double free succeeded")
	}
	if err := a.Free(nil, 4*8192-1, 2, 0); err == nil {
		t.Fatal("free past the end succeeded")
	}
	if _, err := a.Allocate(nil, Request{}); err == nil {
		t.Fatal("zero-length allocation succeeded")
	}
	if err := a.CheckConsistency(); err != nil {
		t.Fatal(err)
	}
	// System zone: the MemStore with metadata refuses frees of it.
	gm := GeometryFor(256<<20, 4096)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	a2, err := New(gm, s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a2.Free(nil, 0, 1, 0); err == nil {
		t.Fatal("freeing the superblock succeeded")
	}
}

// The flex group's free count takes its groups' changes in batches: it is
// never further from their sum than flexBatch per group, and catches up
// (allocations of many small pieces, then frees).
func TestFlexFreeBatched(t *testing.T) {
	gm := Geometry{BlockSize: 4096, BlocksPerGroup: 8192, BlocksCount: 8 * 8192, LogGroupsPerFlex: 2}
	a, _ := newBare(t, gm, Config{CPUs: 1})
	sum := func(f uint32) int64 {
		var s int64
		for gi := f * 4; gi < min(f*4+4, a.Groups()); gi++ {
			s += int64(a.GroupFreeClusters(gi))
		}
		return s
	}
	check := func(when string) {
		t.Helper()
		for f := uint32(0); f < 2; f++ {
			got, want := a.FlexFreeClusters(f), sum(f)
			if d := got - want; d > 4*flexBatch || d < -4*flexBatch {
				t.Fatalf("%s: flex group %d counts %d free, its groups %d", when, f, got, want)
			}
		}
		if err := a.CheckConsistency(); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
	}
	check("fresh")
	var got []Extent
	for i := 0; i < 3000; i++ {
		e, err := a.Allocate(nil, Request{Inode: uint32(i % 7), Len: 3, Goal: uint64(i*7) % gm.BlocksCount})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e)
		if i%500 == 0 {
			check(fmt.Sprintf("after %d allocations", i))
		}
	}
	check("allocated")
	for _, e := range got {
		if err := a.Free(nil, e.Start, uint64(e.Len), 0); err != nil {
			t.Fatal(err)
		}
	}
	check("freed")
}

// TestCheckInUse: CheckInUse refuses what Free would (blocks free in the
// bitmap, outside the filesystem, in the system zone) without changing
// anything, and accepts allocated blocks.
func TestCheckInUse(t *testing.T) {
	gm := GeometryFor(256<<20, 4096)
	s, _ := NewMemStore(gm, MemStoreOptions{})
	a, err := New(gm, s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ext, err := a.Allocate(nil, Request{Len: 8, Goal: 40000})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInUse(ext.Start, uint64(ext.Len)); err != nil {
		t.Errorf("allocated blocks: %v", err)
	}
	free := a.FreeClusters()
	for _, c := range []struct {
		what         string
		start, count uint64
	}{
		{"one past the allocation", ext.Start, uint64(ext.Len) + 1},
		{"free blocks", ext.Start + 1000, 4},
		{"the superblock", 0, 1},
		{"past the end", gm.BlocksCount - 1, 2},
	} {
		if err := a.CheckInUse(c.start, c.count); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v, want a corruption", c.what, err)
		}
	}
	if a.FreeClusters() != free {
		t.Error("CheckInUse changed the free count")
	}
	if err := a.Free(nil, ext.Start, uint64(ext.Len), 0); err != nil {
		t.Fatal(err)
	}
	if err := a.CheckInUse(ext.Start, 1); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("freed block: %v, want a corruption", err)
	}
}
