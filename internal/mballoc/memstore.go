package mballoc

import (
	"fmt"
	"sync"
)

// MemStore is an in-memory Store shaped like a freshly made ext4 (sparse
// superblock backups, descriptor and reserved descriptor blocks, bitmaps and
// inode tables packed per flex group as mke2fs lays them out), for tests
// and benchmarks. It checks every update: setting a bit that is set or
// clearing one that is clear, or a free count that disagrees with the
// bitmap, is an error, so a double allocation or double free cannot pass
// unnoticed.
type MemStore struct {
	geo    *geo
	groups []memGroup
	meta   [][2]uint64 // system zone: [start, end) block ranges, sorted
}

type memGroup struct {
	mu     sync.Mutex
	bitmap []byte
	free   uint32
	uninit bool
	lastTx uint64
}

// MemStoreOptions shape a MemStore.
type MemStoreOptions struct {
	// InodesPerGroup sizes the inode tables; 0 means one inode per 16 KiB,
	// like mke2fs's default inode_ratio.
	InodesPerGroup uint32
	// InodeSize in bytes; 0 means 256.
	InodeSize uint32
	// Bare leaves out all metadata: every cluster starts free, as in the
	// kernel's allocator unit tests.
	Bare bool
}

// GeometryFor returns the geometry mke2fs would pick for an ext4 of size
// bytes and the given block size (default options: 8*blocksize blocks per
// group, flex_bg of 16, one inode per 16 KiB).
func GeometryFor(size uint64, blockSize uint32) Geometry {
	g := Geometry{
		BlockSize:        blockSize,
		ClusterRatio:     1,
		BlocksPerGroup:   8 * blockSize,
		BlocksCount:      size / uint64(blockSize),
		LogGroupsPerFlex: 4,
	}
	if blockSize == 1024 {
		g.FirstDataBlock = 1
	}
	g.InodesPerGroup = inodesPerGroup(g, 0)
	return g
}

func inodesPerGroup(g Geometry, inodeSize uint32) uint32 {
	if inodeSize == 0 {
		inodeSize = 256
	}
	ipg := uint32(uint64(g.BlocksPerGroup) * uint64(g.BlockSize) / 16384)
	// Round up to fill whole inode table blocks, as mke2fs does.
	perBlock := g.BlockSize / inodeSize
	ipg = (ipg + perBlock - 1) / perBlock * perBlock
	return max(ipg, perBlock)
}

func hasSuperBackup(g uint32) bool {
	if g <= 1 {
		return true
	}
	for _, p := range []uint32{3, 5, 7} {
		n := p
		for n < g {
			n *= p
		}
		if n == g {
			return true
		}
	}
	return false
}

// NewMemStore builds a MemStore for gm.
func NewMemStore(gm Geometry, opts MemStoreOptions) (*MemStore, error) {
	g, err := newGeo(gm)
	if err != nil {
		return nil, err
	}
	ipg := opts.InodesPerGroup
	if ipg == 0 {
		ipg = gm.InodesPerGroup
	}
	if ipg == 0 {
		ipg = inodesPerGroup(gm, opts.InodeSize)
	}
	isz := opts.InodeSize
	if isz == 0 {
		isz = 256
	}
	s := &MemStore{geo: g, groups: make([]memGroup, g.groups)}
	for i := range s.groups {
		s.groups[i].bitmap = make([]byte, gm.BlockSize)
	}
	bs := uint64(gm.BlockSize)
	// Descriptor blocks (64-byte descriptors) and the reserve for growth to
	// 1024 times the size, capped as mke2fs caps it.
	descPerBlock := bs / 64
	gdt := (uint64(g.groups) + descPerBlock - 1) / descPerBlock
	maxBlocks := min(gm.BlocksCount*1024, 1<<32-1)
	rsvGroups := (maxBlocks - uint64(gm.FirstDataBlock) + uint64(gm.BlocksPerGroup) - 1) / uint64(gm.BlocksPerGroup)
	rsv := (rsvGroups+descPerBlock-1)/descPerBlock - gdt
	if rsvGroups/descPerBlock < gdt {
		rsv = 0
	}
	rsv = min(rsv, bs/4)
	itb := (uint64(ipg)*uint64(isz) + bs - 1) / bs
	add := func(start, n uint64) { s.meta = append(s.meta, [2]uint64{start, start + n}) }
	for gi := uint32(0); gi < g.groups && !opts.Bare; gi++ {
		first := g.blockOf(gi, 0)
		next := first
		if hasSuperBackup(gi) {
			n := 1 + gdt + rsv
			add(next, n)
			next += n
		}
		if gi%g.flexSize == 0 {
			members := uint64(min(g.flexSize, g.groups-gi))
			n := 2*members + members*itb
			add(next, n)
		}
	}
	for _, m := range s.meta {
		for b := m[0]; b < m[1] && b < gm.BlocksCount; {
			gi, off := g.locate(b)
			gstart := g.blockOf(gi, 0)
			n := min(m[1], gm.BlocksCount, gstart+uint64(gm.BlocksPerGroup)) - b
			lastC := uint32((b + n - 1 - gstart) >> g.clusterBits)
			bm := s.groups[gi].bitmap
			for k := off; k <= lastC && k < g.clustersIn(gi); k++ {
				bm[k/8] |= 1 << (k % 8)
			}
			b += n
		}
	}
	for gi := range s.groups {
		mg := &s.groups[gi]
		n := g.clustersIn(uint32(gi))
		for k := n; k < 8*gm.BlockSize; k++ { // padding past the group end
			mg.bitmap[k/8] |= 1 << (k % 8)
		}
		used := uint32(0)
		for k := uint32(0); k < n; k++ {
			if mg.bitmap[k/8]&(1<<(k%8)) != 0 {
				used++
			}
		}
		mg.free = n - used
		mg.uninit = gi > 0 && used == 0
	}
	return s, nil
}

// GroupFree implements Store.
func (s *MemStore) GroupFree(group uint32) (uint32, error) {
	if group >= uint32(len(s.groups)) {
		return 0, fmt.Errorf("memstore: no group %d", group)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.free, nil
}

// ReadBlockBitmap implements Store.
func (s *MemStore) ReadBlockBitmap(group uint32) ([]byte, error) {
	if group >= uint32(len(s.groups)) {
		return nil, fmt.Errorf("memstore: no group %d", group)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return append([]byte(nil), mg.bitmap...), nil
}

// UpdateBlockBitmap implements Store.
func (s *MemStore) UpdateBlockBitmap(tx Tx, group, start, count uint32, used bool, free uint32) error {
	if group >= uint32(len(s.groups)) || start+count > s.geo.clustersIn(group) || start+count < start {
		return fmt.Errorf("memstore: update of group %d clusters %d+%d out of range", group, start, count)
	}
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	for k := start; k < start+count; k++ {
		if (mg.bitmap[k/8]&(1<<(k%8)) != 0) == used {
			what := "allocated twice"
			if !used {
				what = "freed twice"
			}
			return fmt.Errorf("memstore: group %d cluster %d %s", group, k, what)
		}
	}
	for k := start; k < start+count; k++ {
		mg.bitmap[k/8] ^= 1 << (k % 8)
	}
	if used {
		mg.free -= count
	} else {
		mg.free += count
	}
	if mg.free != free {
		return fmt.Errorf("memstore: group %d free count %d given, bitmap says %d", group, free, mg.free)
	}
	mg.uninit = false
	if tx != nil {
		mg.lastTx = tx.ID()
	}
	return nil
}

// InSystemZone implements SystemZone.
func (s *MemStore) InSystemZone(block, count uint64) bool {
	end := block + count
	for _, m := range s.meta {
		if block < m[1] && m[0] < end {
			return true
		}
	}
	return false
}

// MarkUsed sets clusters in the bitmaps and descriptor counts directly, to
// shape a filesystem before an Allocator is made on it.
func (s *MemStore) MarkUsed(block, count uint64) error {
	for count > 0 {
		if block < uint64(s.geo.FirstDataBlock) || block >= s.geo.BlocksCount {
			return fmt.Errorf("memstore: block %d out of range", block)
		}
		gi, off := s.geo.locate(block)
		n := min(uint64(s.geo.clustersIn(gi)-off), (count+uint64(s.geo.ClusterRatio)-1)>>s.geo.clusterBits)
		mg := &s.groups[gi]
		mg.mu.Lock()
		for k := off; k < off+uint32(n); k++ {
			if mg.bitmap[k/8]&(1<<(k%8)) == 0 {
				mg.bitmap[k/8] |= 1 << (k % 8)
				mg.free--
			}
		}
		mg.uninit = false
		mg.mu.Unlock()
		adv := n << s.geo.clusterBits
		block += adv
		count -= min(count, adv)
	}
	return nil
}

// Bitmap returns a copy of group's bitmap.
func (s *MemStore) Bitmap(group uint32) []byte {
	b, _ := s.ReadBlockBitmap(group)
	return b
}

// IsUsed reports whether the cluster holding block is set in the bitmap.
func (s *MemStore) IsUsed(block uint64) bool {
	gi, off := s.geo.locate(block)
	mg := &s.groups[gi]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.bitmap[off/8]&(1<<(off%8)) != 0
}

// FreeClusters returns the sum of the descriptors' free counts.
func (s *MemStore) FreeClusters() uint64 {
	var n uint64
	for gi := range s.groups {
		f, _ := s.GroupFree(uint32(gi))
		n += uint64(f)
	}
	return n
}

// Uninit reports whether group is still BLOCK_UNINIT.
func (s *MemStore) Uninit(group uint32) bool {
	mg := &s.groups[group]
	mg.mu.Lock()
	defer mg.mu.Unlock()
	return mg.uninit
}

// Geometry returns the store's geometry.
func (s *MemStore) Geometry() Geometry { return s.geo.Geometry }
