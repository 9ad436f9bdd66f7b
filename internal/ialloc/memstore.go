package ialloc

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// MemStore is an in-memory Store for tests and benchmarks. It checks every
// update: allocating a used inode or freeing a free one, or counts that
// disagree with the bitmap, is an error.
type MemStore struct {
	geo    Geometry
	groups []memGroup
}

type memGroup struct {
	mu     sync.Mutex
	bitmap []byte
	free   uint32
	dirs   uint32
}

// NewMemStore returns a store with every inode free but the reserved ones
// (1 .. FirstIno-1) of group 0.
func NewMemStore(geo Geometry) *MemStore {
	if geo.FirstIno == 0 {
		geo.FirstIno = 11
	}
	s := &MemStore{geo: geo, groups: make([]memGroup, geo.Groups)}
	for gi := range s.groups {
		mg := &s.groups[gi]
		mg.bitmap = make([]byte, (geo.InodesPerGroup+7)/8)
		mg.free = geo.InodesPerGroup
		if gi == 0 {
			for i := uint32(0); i < geo.FirstIno-1 && i < geo.InodesPerGroup; i++ {
				mg.bitmap[i/8] |= 1 << (i % 8)
				mg.free--
			}
		}
	}
	return s
}

// GroupCounts implements Store.
func (s *MemStore) GroupCounts(group uint32) (uint32, uint32, error) {
	if group >= uint32(len(s.groups)) {
		return 0, 0, fmt.Errorf("memstore: no group %d", group)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.free, mg.dirs, nil
}

// ReadInodeBitmap implements Store.
func (s *MemStore) ReadInodeBitmap(group uint32) ([]byte, error) {
	if group >= uint32(len(s.groups)) {
		return nil, fmt.Errorf("memstore: no group %d", group)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return append([]byte(nil), mg.bitmap...), nil
}

// UpdateInodeBitmap implements Store.
func (s *MemStore) UpdateInodeBitmap(tx Tx, group, index uint32, used, dir bool, free, dirs uint32) error {
	if group >= uint32(len(s.groups)) || index >= s.geo.InodesPerGroup {
		return fmt.Errorf("memstore: inode %d of group %d out of range", index, group)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	if (mg.bitmap[index/8]&(1<<(index%8)) != 0) == used {
		return fmt.Errorf("memstore: group %d inode index %d already in that state", group, index)
	}
	mg.bitmap[index/8] ^= 1 << (index % 8)
	if used {
		mg.free--
		if dir {
			mg.dirs++
		}
	} else {
		mg.free++
		if dir {
			mg.dirs--
		}
	}
	if mg.free != free || mg.dirs != dirs {
		return fmt.Errorf("memstore: group %d counts %d/%d given, bitmap says %d/%d", group, free, dirs, mg.free, mg.dirs)
	}
	return nil
}

// FixedBlocks is a BlockCounts with settable per-group free clusters, for
// tests.
type FixedBlocks struct {
	geo  Geometry
	free []atomic.Int64
}

// NewFixedBlocks returns block counts with every group holding free clusters.
func NewFixedBlocks(geo Geometry, free uint32) *FixedBlocks {
	b := &FixedBlocks{geo: geo, free: make([]atomic.Int64, geo.Groups)}
	for i := range b.free {
		b.free[i].Store(int64(free))
	}
	return b
}

// Set sets group's free clusters.
func (b *FixedBlocks) Set(group uint32, free uint32) { b.free[group].Store(int64(free)) }

// GroupFreeClusters implements BlockCounts.
func (b *FixedBlocks) GroupFreeClusters(group uint32) uint32 { return uint32(b.free[group].Load()) }

// FlexFreeClusters implements BlockCounts.
func (b *FixedBlocks) FlexFreeClusters(flex uint32) int64 {
	fs := uint32(1) << b.geo.LogGroupsPerFlex
	var n int64
	for g := flex * fs; g < (flex+1)*fs && g < b.geo.Groups; g++ {
		n += b.free[g].Load()
	}
	return n
}

// FreeClusters implements BlockCounts.
func (b *FixedBlocks) FreeClusters() int64 {
	var n int64
	for i := range b.free {
		n += b.free[i].Load()
	}
	return n
}
