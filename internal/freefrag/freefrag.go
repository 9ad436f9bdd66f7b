// Package freefrag summarises a filesystem's free space the way
// e2freefrag (e2fsprogs misc/e2freefrag.c) does: the free extents by size
// in a power-of-two histogram, their smallest, largest and mean size, and
// optionally how many aligned chunks of a chosen size are wholly free. It
// does no I/O: the caller feeds it the maximal free extents in block
// order (ext4go's FS.FreeExtents) and prints or encodes the Report.
//
// The numbers are e2freefrag's, to the unit and the rounding: sizes in
// KiB are truncated, the mean is the integer mean in blocks times the
// block size, and the percentages of free blocks divide by the
// superblock's free block count, not by what the bitmaps hold.
package freefrag

import (
	"fmt"
	"io"
	"math"
	"math/bits"
)

// Buckets is the number of histogram buckets (e2freefrag: MAX_HIST).
// Bucket i holds extents of [2^(i-1), 2^i) blocks; the last one every
// larger extent too.
const Buckets = 32

// DefaultChunkBytes is e2freefrag's chunk size when none is asked for
// (DEFAULT_CHUNKSIZE, 1 MiB); without -c it counts chunks but does not
// print them.
const DefaultChunkBytes = 1 << 20

// Geometry is what the summary needs of the filesystem.
type Geometry struct {
	BlockSize      uint32 // bytes, a power of two >= 1024
	BlocksCount    uint64 // s_blocks_count
	FirstDataBlock uint64 // s_first_data_block: chunk 0 is scanned from here
	// FreeBlocks is the superblock's free block count, which the
	// percentages divide by (e2freefrag: ext2fs_free_blocks_count).
	FreeBlocks uint64
}

// Bucket is one histogram bucket.
type Bucket struct {
	Index   int
	Extents uint64 // free extents of this size class
	Blocks  uint64 // blocks in them
}

// MinBytes returns the smallest extent size in bytes the bucket holds.
func (b Bucket) MinBytes(blockSize uint32) uint64 {
	if b.Index == 0 {
		return 0
	}
	return uint64(blockSize) << (b.Index - 1)
}

// MaxBytes returns the size in bytes the bucket's extents are smaller
// than, or 0 for the last bucket, which has no bound.
func (b Bucket) MaxBytes(blockSize uint32) uint64 {
	if b.Index == Buckets-1 {
		return 0
	}
	return uint64(blockSize) << b.Index
}

// Report is the summary of the free extents added to a Counter.
type Report struct {
	Geometry
	// ChunkBytes is the chunk size asked for, 0 when none was (the chunk
	// fields then hold e2freefrag's unprinted default count).
	ChunkBytes  uint64
	ChunkBlocks uint64 // blocks per chunk
	TotalChunks uint64 // e2freefrag's count: (blocks + chunk) / chunk
	FreeChunks  uint64 // chunks whose every block is free
	// Extents is the number of free extents and ExtentBlocks the blocks
	// in them (what the bitmaps say is free).
	Extents, ExtentBlocks uint64
	// MinKB, MaxKB and AvgKB are the extent sizes e2freefrag prints:
	// KiB, the mean taken in whole blocks first; all 0 without extents.
	MinKB, MaxKB, AvgKB uint64
	// Histogram has all Buckets buckets, empty ones included.
	Histogram [Buckets]Bucket
}

// Counter accumulates free extents.
type Counter struct {
	geo         Geometry
	chunkBytes  uint64
	chunkBlocks uint64
	r           Report
	minBlocks   uint64
	sumBlocks   uint64
}

// NewCounter returns a Counter for a filesystem of geometry g. chunkBytes
// is the chunk size for the chunk summary (e2freefrag -c, in bytes): 0
// for none, else a power of two no smaller than the block size.
func NewCounter(g Geometry, chunkBytes uint64) (*Counter, error) {
	bs := uint64(g.BlockSize)
	if bs < 1024 || bs&(bs-1) != 0 {
		return nil, fmt.Errorf("freefrag: block size %d is not a power of two of at least 1024", bs)
	}
	size := chunkBytes
	if size == 0 {
		size = DefaultChunkBytes
	}
	switch {
	case size&(size-1) != 0:
		return nil, fmt.Errorf("freefrag: chunk size %d is not a power of two", size)
	case size < bs:
		// e2freefrag refuses this only for an explicit -c; its default
		// is never smaller than a block (64 KiB at most).
		return nil, fmt.Errorf("freefrag: chunk size %d is smaller than the block size %d", size, bs)
	}
	c := &Counter{geo: g, chunkBytes: chunkBytes, chunkBlocks: size / bs, minBlocks: math.MaxUint64}
	c.r.Geometry = g
	for i := range c.r.Histogram {
		c.r.Histogram[i].Index = i
	}
	return c, nil
}

// bucketOf returns the histogram bucket of an extent of n > 0 blocks
// (e2freefrag: ul_log2(n) + 1, capped).
func bucketOf(n uint64) int {
	return min(bits.Len64(n), Buckets-1)
}

// Add counts the free extent [start, start+length). Extents must come in
// block order, maximal (not touching one another) and inside the
// filesystem; an empty one is ignored.
func (c *Counter) Add(start, length uint64) {
	if length == 0 {
		return
	}
	r := &c.r
	b := &r.Histogram[bucketOf(length)]
	b.Extents++
	b.Blocks += length
	r.Extents++
	r.ExtentBlocks += length
	c.sumBlocks += length
	c.minBlocks = min(c.minBlocks, length)
	r.MaxKB = max(r.MaxKB, length) // in blocks until Report
	// The chunks wholly inside the extent. e2freefrag scans chunk 0 from
	// the first data block, so with 1 KiB blocks it is never wholly free;
	// an extent never starts before that block, so the count below
	// leaves it out as well.
	first := (start + c.chunkBlocks - 1) / c.chunkBlocks
	end := (start + length) / c.chunkBlocks
	if end > first {
		r.FreeChunks += end - first
	}
}

// Report returns the summary of the extents added so far.
func (c *Counter) Report() Report {
	r := c.r
	r.ChunkBytes = c.chunkBytes
	r.ChunkBlocks = c.chunkBlocks
	r.TotalChunks = (c.geo.BlocksCount + c.chunkBlocks) / c.chunkBlocks
	if r.Extents > 0 {
		// e2freefrag: scale = blocksize >> 10, applied after the
		// integer mean.
		scale := uint64(c.geo.BlockSize >> 10)
		r.MinKB = c.minBlocks * scale
		r.MaxKB = r.MaxKB * scale
		r.AvgKB = c.sumBlocks / r.Extents * scale
	} else {
		r.MinKB, r.MaxKB, r.AvgKB = 0, 0, 0
	}
	return r
}

// Percent returns part*100/whole as e2freefrag computes it in double
// precision: +Inf (or NaN for 0/0) when whole is 0.
func Percent(part, whole uint64) float64 {
	return float64(part) * 100 / float64(whole)
}

// FreePercent is the share of the filesystem's blocks the superblock
// counts free.
func (r *Report) FreePercent() float64 { return Percent(r.FreeBlocks, r.BlocksCount) }

// FreeChunksPercent is the share of chunks wholly free.
func (r *Report) FreeChunksPercent() float64 { return Percent(r.FreeChunks, r.TotalChunks) }

// BucketPercent is the share of the superblock's free blocks in b.
func (r *Report) BucketPercent(b Bucket) float64 { return Percent(b.Blocks, r.FreeBlocks) }

// WriteText writes the report in e2freefrag's format, device being the
// name its "Device:" line shows.
func (r *Report) WriteText(w io.Writer, device string) error {
	p := &printer{w: w}
	p.f("Device: %s\n", device)
	p.f("Blocksize: %d bytes\n", r.BlockSize)
	p.f("Total blocks: %d\nFree blocks: %d (%s%%)\n", r.BlocksCount, r.FreeBlocks, cFloat(r.FreePercent(), 1))
	if r.ChunkBytes != 0 {
		p.f("\nChunksize: %d bytes (%d blocks)\n", r.ChunkBytes, r.ChunkBlocks)
		p.f("Total chunks: %d\nFree chunks: %d (%s%%)\n", r.TotalChunks, r.FreeChunks, cFloat(r.FreeChunksPercent(), 1))
	}
	p.f("\nMin. free extent: %d KB \nMax. free extent: %d KB\nAvg. free extent: %d KB\n", r.MinKB, r.MaxKB, r.AvgKB)
	p.f("Num. free extent: %d\n", r.Extents)
	p.f("\nHISTOGRAM OF FREE EXTENT SIZES:\n")
	p.f("%s :  %12s  %12s  %7s\n", "Extent Size Range", "Free extents", "Free Blocks", "Percent")
	for _, l := range bucketLabels(r.BlockSize) {
		b := r.Histogram[l.index]
		if b.Extents == 0 {
			continue
		}
		p.f("%5d%c...%7s  :  %12d  %12d  %6s%%\n", l.start, l.unit, l.end, b.Extents, b.Blocks, cFloat(r.BucketPercent(b), 2))
	}
	return p.err
}

// label is how e2freefrag names a bucket's size range: "start" and "end"
// in the same unit, the end followed by '-' (or "max " for the last).
type label struct {
	index int
	start uint64
	unit  byte
	end   string
}

// bucketLabels computes every bucket's label the way e2freefrag's
// dump_chunk_info loop does: the end of bucket i is 2^(i+log2(block
// size)) bytes in the current unit, the start the previous end, and the
// unit moves up (K, M, G, ...) once a start reaches 1024.
func bucketLabels(blockSize uint32) []label {
	const units = "KMGTPEZY"
	blockBits := bits.Len32(blockSize) - 1
	shift := 10
	unit := 0
	var start uint64
	out := make([]label, 0, Buckets)
	for i := 0; i < Buckets; i++ {
		end := uint64(1) << (i + blockBits - shift)
		l := label{index: i, start: start, unit: units[unit], end: fmt.Sprintf("%5d%c-", end, units[unit])}
		if i == Buckets-1 {
			l.end = "max "
		}
		out = append(out, l)
		start = end
		if start == 1024 {
			start = 1
			shift += 10
			unit++
		}
	}
	return out
}

// cFloat formats x with prec decimals as C's printf "%.*f" does, whose
// infinities and NaN are "inf" and "nan" (Go writes "+Inf" and "NaN").
func cFloat(x float64, prec int) string {
	switch {
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	case math.IsNaN(x):
		return "-nan" // glibc: 0.0/0.0 has its sign bit set
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// printer writes formatted text, keeping the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, a ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, a...)
	}
}
