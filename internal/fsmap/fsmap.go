// Package fsmap draws a filesystem's block usage as an SVG picture: every
// block group, its fixed metadata by kind, used and free blocks, and how
// fragmented the free space is, optionally with some blocks (one file's
// or one directory tree's) highlighted over the dimmed rest. It does no
// I/O on images: the caller gives the geometry, adds block ranges
// (metadata, free extents, highlighted extents) and writes the picture.
//
// A filesystem of up to StripGroups groups is drawn a group a row, each
// row a strip of its blocks, so the layout inside the groups shows. A
// larger one is a grid of cells, a group a cell, or several adjacent
// groups a cell once there are more than MaxCells groups, so the
// picture's size is bounded whatever the filesystem's: equal neighbouring
// cells are one rectangle, every rectangle of a class is in one path, and
// the colours are CSS classes.
package fsmap

import (
	"fmt"
	"math"
	"math/bits"
)

// Kind is what a range of fixed metadata holds, as drawn.
type Kind uint8

const (
	// KindSuper is a superblock copy or a copy of the group descriptors.
	KindSuper Kind = iota
	// KindReservedGDT is blocks reserved for growing the descriptors.
	KindReservedGDT
	// KindBitmap is block and inode bitmaps.
	KindBitmap
	KindInodeTable
	KindJournal
	numKinds
)

// kindInfo is each kind's CSS class, legend name and colour.
var kindInfo = [numKinds]struct{ class, name, colour string }{
	KindSuper:       {"sb", "superblock, descriptors", "#d62728"},
	KindReservedGDT: {"rg", "reserved GDT", "#f7a0a0"},
	KindBitmap:      {"bm", "bitmaps", "#ff7f0e"},
	KindInodeTable:  {"it", "inode tables", "#2ca02c"},
	KindJournal:     {"jn", "journal", "#9467bd"},
}

const (
	// StripGroups is the most groups drawn as strips of blocks.
	StripGroups = 64
	// MaxCells is the most cells of the grid drawn for more groups.
	MaxCells = 4096
	// maxStripBins is the most columns (pixels) a group's strip has.
	maxStripBins = 1024
	gridCols     = 64 // cells a row
)

// Geometry is what the layout needs of the filesystem.
type Geometry struct {
	BlockSize      uint32 // bytes
	BlocksCount    uint64
	FirstDataBlock uint64 // block 1 on a 1 KiB-block filesystem, else 0
	BlocksPerGroup uint32
}

// GeometryError is a Geometry New cannot draw.
type GeometryError struct {
	Detail string
}

func (e *GeometryError) Error() string { return "fsmap: " + e.Detail }

// Groups returns the number of block groups.
func (g Geometry) Groups() uint64 {
	if g.BlocksPerGroup == 0 || g.FirstDataBlock >= g.BlocksCount {
		return 0
	}
	return (g.BlocksCount - g.FirstDataBlock + uint64(g.BlocksPerGroup) - 1) / uint64(g.BlocksPerGroup)
}

func (g Geometry) check() error {
	bs := g.BlockSize
	switch {
	case bs < 1024 || bs > 1<<16 || bs&(bs-1) != 0:
		return &GeometryError{fmt.Sprintf("block size %d is not a power of two from 1024 to 65536", bs)}
	case g.BlocksPerGroup == 0:
		return &GeometryError{"no blocks per group"}
	case g.FirstDataBlock >= g.BlocksCount:
		return &GeometryError{fmt.Sprintf("first data block %d not below the block count %d", g.FirstDataBlock, g.BlocksCount)}
	case g.Groups() > math.MaxUint32:
		return &GeometryError{fmt.Sprintf("%d groups", g.Groups())}
	}
	return nil
}

// partition cuts the blocks from the first data block to the end into
// consecutive bins: perGroup bins a group, or one bin for groupsPer
// groups. Bin j of a group's perGroup covers the offsets off with
// off*perGroup/bpg == j, so every bin has a block when perGroup <= bpg.
type partition struct {
	first, end uint64 // the blocks partitioned: [first, end)
	bpg        uint64
	perGroup   uint64
	groupsPer  uint64
	n          int // bins
}

func newPartition(g Geometry, perGroup, groupsPer uint64) partition {
	cells := (g.Groups() + groupsPer - 1) / groupsPer
	return partition{first: g.FirstDataBlock, end: g.BlocksCount, bpg: uint64(g.BlocksPerGroup),
		perGroup: perGroup, groupsPer: groupsPer, n: int(cells * perGroup)}
}

// index returns the bin of block b (first <= b < end).
func (p partition) index(b uint64) int {
	rel := b - p.first
	g, off := rel/p.bpg, rel%p.bpg
	return int((g/p.groupsPer)*p.perGroup + off*p.perGroup/p.bpg)
}

// start returns the first block of bin i, or end past the last block.
func (p partition) start(i int) uint64 {
	cell, j := uint64(i)/p.perGroup, uint64(i)%p.perGroup
	groups := cell * p.groupsPer
	if groups >= (p.end-p.first+p.bpg-1)/p.bpg {
		return p.end
	}
	return min(p.first+groups*p.bpg+(j*p.bpg+p.perGroup-1)/p.perGroup, p.end)
}

// blocks returns the number of blocks in bin i.
func (p partition) blocks(i int) uint64 { return p.start(i+1) - p.start(i) }

// spread calls fn for each bin the blocks [s, e) meet, with how many of
// them are in it; blocks outside the partition are left out.
func (p partition) spread(s, e uint64, fn func(bin int, n uint64)) {
	s, e = max(s, p.first), min(e, p.end)
	if s >= e {
		return
	}
	for i := p.index(s); s < e; i++ {
		next := min(p.start(i+1), e)
		fn(i, next-s)
		s = next
	}
}

// tally is what a bin holds.
type tally struct {
	free uint64
	meta [numKinds]uint64
	// highlighted blocks
	highlight uint64
	// freePieces counts the free extents meeting the bin; largestFree is
	// the largest part of one in it.
	freePieces, largestFree uint64
}

func (t *tally) metaBlocks() uint64 {
	var n uint64
	for _, b := range t.meta {
		n += b
	}
	return n
}

// mainKind returns the kind with the most blocks in the bin.
func (t *tally) mainKind() Kind {
	best := Kind(0)
	for k := range numKinds {
		if t.meta[k] > t.meta[best] {
			best = k
		}
	}
	return best
}

// stripPriority orders the kinds for a pixel of a strip holding several:
// the ones of a block or two before the large ones.
var stripPriority = [numKinds]Kind{KindSuper, KindBitmap, KindReservedGDT, KindInodeTable, KindJournal}

// rarestKind returns the first kind in stripPriority the bin holds.
func (t *tally) rarestKind() Kind {
	for _, k := range stripPriority {
		if t.meta[k] > 0 {
			return k
		}
	}
	return 0
}

func (t *tally) addFree(n uint64) {
	t.free += n
	t.freePieces++
	t.largestFree = max(t.largestFree, n)
}

// Map collects a filesystem's block usage for one picture.
type Map struct {
	geo    Geometry
	groups uint64
	strip  bool
	// bins are the picture's units: in strip mode a group's strip has
	// stripBins of them, a pixel each; else a bin is a cell of
	// groupsPerCell groups.
	bins          partition
	stripBins     uint64
	groupsPerCell uint64
	tallies       []tally
	// rows are the groups' own tallies in strip mode (their free-extent
	// counts are per group, not per pixel), else nil.
	rows      partition
	rowTally  []tally
	groupPart partition // a bin a group: which groups a highlight meets

	freeBlocks, freeExtents, largestFree uint64
	metaBlocks                           [numKinds]uint64
	highlightBlocks, highlightExtents    uint64
	highlightGroups                      []uint64 // bit set of the groups highlighted
}

// New returns an empty Map of a filesystem of geometry g.
func New(g Geometry) (*Map, error) {
	if err := g.check(); err != nil {
		return nil, err
	}
	m := &Map{geo: g, groups: g.Groups()}
	m.groupPart = newPartition(g, 1, 1)
	if m.groups <= StripGroups {
		m.strip = true
		m.stripBins = min(uint64(g.BlocksPerGroup), maxStripBins)
		m.groupsPerCell = 1
		m.bins = newPartition(g, m.stripBins, 1)
		m.rows = m.groupPart
		m.rowTally = make([]tally, m.rows.n)
	} else {
		m.groupsPerCell = (m.groups + MaxCells - 1) / MaxCells
		m.bins = newPartition(g, 1, m.groupsPerCell)
	}
	m.tallies = make([]tally, m.bins.n)
	return m, nil
}

// end returns start+length, saturated.
func end(start, length uint64) uint64 {
	if length > math.MaxUint64-start {
		return math.MaxUint64
	}
	return start + length
}

// clipped returns how many of the blocks [s, e) are in the filesystem.
func (m *Map) clipped(s, e uint64) uint64 {
	s, e = max(s, m.geo.FirstDataBlock), min(e, m.geo.BlocksCount)
	if s >= e {
		return 0
	}
	return e - s
}

// AddMetadata records length blocks of fixed metadata of kind k from
// block start. Ranges outside the filesystem are cut off.
func (m *Map) AddMetadata(k Kind, start, length uint64) {
	if k >= numKinds {
		return
	}
	e := end(start, length)
	m.metaBlocks[k] += m.clipped(start, e)
	m.bins.spread(start, e, func(i int, n uint64) { m.tallies[i].meta[k] += n })
}

// AddFree records one maximal free extent (as the block bitmaps have it:
// adjacent calls are counted as separate extents).
func (m *Map) AddFree(start, length uint64) {
	e := end(start, length)
	n := m.clipped(start, e)
	if n == 0 {
		return
	}
	m.freeBlocks += n
	m.freeExtents++
	m.largestFree = max(m.largestFree, n)
	m.bins.spread(start, e, func(i int, n uint64) { m.tallies[i].addFree(n) })
	if m.strip {
		m.rows.spread(start, e, func(i int, n uint64) { m.rowTally[i].addFree(n) })
	}
}

// AddHighlight records one extent of what is highlighted.
func (m *Map) AddHighlight(start, length uint64) {
	e := end(start, length)
	m.highlightExtents++
	m.highlightBlocks += m.clipped(start, e)
	m.bins.spread(start, e, func(i int, n uint64) { m.tallies[i].highlight += n })
	if m.highlightGroups == nil {
		// A bit a group, made on the first highlight: a filesystem
		// holds far more than that per group in its descriptors.
		m.highlightGroups = make([]uint64, (m.groups+63)/64)
	}
	m.groupPart.spread(start, e, func(g int, _ uint64) { m.highlightGroups[g/64] |= 1 << (g % 64) })
}

// Stats are the figures the picture states.
type Stats struct {
	Groups                               uint64
	FreeBlocks, FreeExtents, LargestFree uint64 // blocks, extents, blocks
	MetadataBlocks                       [numKinds]uint64
	// HighlightExtents counts the AddHighlight calls, HighlightBlocks the
	// blocks they cover in the filesystem, HighlightGroups the groups
	// those lie in.
	HighlightExtents, HighlightBlocks, HighlightGroups uint64
}

// Stats returns the figures of what was added so far.
func (m *Map) Stats() Stats {
	s := Stats{Groups: m.groups, FreeBlocks: m.freeBlocks, FreeExtents: m.freeExtents, LargestFree: m.largestFree,
		MetadataBlocks: m.metaBlocks, HighlightExtents: m.highlightExtents, HighlightBlocks: m.highlightBlocks}
	for _, w := range m.highlightGroups {
		s.HighlightGroups += uint64(bits.OnesCount64(w))
	}
	return s
}
