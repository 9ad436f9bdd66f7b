package mballoc

import (
	"fmt"
	"math/bits"
)

// Geometry is what the allocator needs to know about the filesystem's
// layout. It is plain data; the filesystem fills it from the superblock.
type Geometry struct {
	BlockSize        uint32 // bytes per block: a power of two in [1024, 65536]
	ClusterRatio     uint32 // blocks per cluster (bigalloc), a power of two; 0 or 1 without bigalloc
	BlocksPerGroup   uint32 // blocks in a full group: a multiple of ClusterRatio, at most 8*BlockSize clusters
	BlocksCount      uint64 // blocks in the filesystem
	FirstDataBlock   uint32 // first block of group 0: 1 for 1 KiB blocks without bigalloc, else 0
	LogGroupsPerFlex uint8  // log2 of the groups in a flex group; 0 without flex_bg
	InodesPerGroup   uint32 // only used to derive a goal from an inode number; 0 if unknown
}

// geo is Geometry with the derived values the allocator uses all the time.
type geo struct {
	Geometry
	blkBits       uint   // log2(BlockSize)
	clusterBits   uint   // log2(ClusterRatio)
	groups        uint32 // number of groups
	cpg           uint32 // clusters per (full) group
	lastClusters  uint32 // clusters in the last group
	maxOrder      int    // largest buddy order: blkBits+1 (kernel: MB_NUM_ORDERS-1)
	bitmapBits    uint32 // bits the buddy's order-0 bitmap holds: 8*BlockSize
	flexSize      uint32 // groups per flex group (1 without flex_bg)
	clustersTotal uint64
}

// numOrders is the number of buddy orders, 0..maxOrder (kernel: MB_NUM_ORDERS).
func (g *geo) numOrders() int { return g.maxOrder + 1 }

func newGeo(gm Geometry) (*geo, error) {
	bad := func(f string, a ...any) error { return fmt.Errorf("mballoc: bad geometry: "+f, a...) }
	if gm.ClusterRatio == 0 {
		gm.ClusterRatio = 1
	}
	if gm.BlockSize < 1024 || gm.BlockSize > 65536 || gm.BlockSize&(gm.BlockSize-1) != 0 {
		return nil, bad("block size %d", gm.BlockSize)
	}
	if gm.ClusterRatio&(gm.ClusterRatio-1) != 0 || gm.ClusterRatio > 1<<16 {
		return nil, bad("cluster ratio %d", gm.ClusterRatio)
	}
	if gm.BlocksPerGroup == 0 || gm.BlocksPerGroup%gm.ClusterRatio != 0 {
		return nil, bad("blocks per group %d with cluster ratio %d", gm.BlocksPerGroup, gm.ClusterRatio)
	}
	g := &geo{Geometry: gm}
	g.blkBits = uint(bits.TrailingZeros32(gm.BlockSize))
	g.clusterBits = uint(bits.TrailingZeros32(gm.ClusterRatio))
	g.cpg = gm.BlocksPerGroup >> g.clusterBits
	g.bitmapBits = 8 * gm.BlockSize
	if g.cpg > g.bitmapBits {
		return nil, bad("%d clusters per group do not fit a %d-byte bitmap", g.cpg, gm.BlockSize)
	}
	if g.cpg < 8 {
		return nil, bad("%d clusters per group", g.cpg)
	}
	if gm.BlocksCount <= uint64(gm.FirstDataBlock) {
		return nil, bad("blocks count %d, first data block %d", gm.BlocksCount, gm.FirstDataBlock)
	}
	data := gm.BlocksCount - uint64(gm.FirstDataBlock)
	ng := (data + uint64(gm.BlocksPerGroup) - 1) / uint64(gm.BlocksPerGroup)
	if ng > 1<<32-1 {
		return nil, bad("%d groups", ng)
	}
	g.groups = uint32(ng)
	last := data - uint64(g.groups-1)*uint64(gm.BlocksPerGroup)
	g.lastClusters = uint32(last >> g.clusterBits)
	if g.lastClusters == 0 {
		return nil, bad("last group holds no whole cluster")
	}
	g.clustersTotal = uint64(g.groups-1)*uint64(g.cpg) + uint64(g.lastClusters)
	g.maxOrder = int(g.blkBits) + 1
	if gm.LogGroupsPerFlex > 31 {
		return nil, bad("log groups per flex %d", gm.LogGroupsPerFlex)
	}
	g.flexSize = 1 << gm.LogGroupsPerFlex
	return g, nil
}

// clustersIn returns the clusters of group gi.
func (g *geo) clustersIn(gi uint32) uint32 {
	if gi == g.groups-1 {
		return g.lastClusters
	}
	return g.cpg
}

// locate maps a block to its group and the cluster offset in it.
// The block must be in [FirstDataBlock, BlocksCount).
func (g *geo) locate(block uint64) (uint32, uint32) {
	rel := block - uint64(g.FirstDataBlock)
	return uint32(rel / uint64(g.BlocksPerGroup)), uint32(rel%uint64(g.BlocksPerGroup)) >> g.clusterBits
}

// blockOf maps a group and cluster offset to the cluster's first block.
func (g *geo) blockOf(gi, off uint32) uint64 {
	return uint64(g.FirstDataBlock) + uint64(gi)*uint64(g.BlocksPerGroup) + uint64(off)<<g.clusterBits
}

// flexOf returns the flex group of group gi.
func (g *geo) flexOf(gi uint32) uint32 { return gi >> g.LogGroupsPerFlex }

// flexCount returns the number of flex groups.
func (g *geo) flexCount() uint32 { return (g.groups + g.flexSize - 1) >> g.LogGroupsPerFlex }

// Groups returns the number of block groups of a geometry, or 0 if it is invalid.
func (gm Geometry) Groups() uint32 {
	g, err := newGeo(gm)
	if err != nil {
		return 0
	}
	return g.groups
}
