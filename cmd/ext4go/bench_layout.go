package main

// What the workload benchmarks measure of a filesystem after their run:
// the free space (as e2freefrag reports it) and the layout of the files
// (extents per file, block groups holding their data).

import (
	"fmt"
	"slices"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/freefrag"
)

// freeSpace is a filesystem's geometry and its free space.
type freeSpace struct {
	BlockSize      uint32 `json:"block_size"`
	BlocksPerGroup uint32 `json:"blocks_per_group"`
	FirstDataBlock uint32 `json:"first_data_block"`
	Blocks         uint64 `json:"blocks"`
	FreeBlocks     uint64 `json:"free_blocks"`
	FreeExtents    uint64 `json:"free_extents"`
	// MeanFreeExtent is the mean free extent in bytes.
	MeanFreeExtent float64 `json:"mean_free_extent_bytes"`
	// Histogram has e2freefrag's buckets: free extents of 2^k to 2^(k+1)-1
	// blocks; buckets without extents are left out.
	Histogram []freeBucket `json:"histogram"`
}

// freeBucket is one bucket of the free extent histogram.
type freeBucket struct {
	MinBytes uint64 `json:"min_bytes"` // the extents here are at least this long, and shorter than twice it
	Extents  uint64 `json:"extents"`
	Blocks   uint64 `json:"blocks"`
}

// measureFreeSpace reads the free space of the ext4 filesystem on the
// image or device at path from its block bitmaps (FS.FreeExtents, counted
// as e2freefrag counts them). Nothing may change the filesystem meanwhile:
// it is closed, or frozen by the kernel.
func measureFreeSpace(path string) (*freeSpace, error) {
	fsys, err := ext4go.Open(path, nil)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	return freeSpaceOf(fsys, path)
}

// freeSpaceOf is measureFreeSpace of an open filesystem, named path in
// errors.
func freeSpaceOf(fsys *ext4go.FS, path string) (*freeSpace, error) {
	in := fsys.Info()
	counter, err := freefrag.NewCounter(freefrag.Geometry{BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), FreeBlocks: in.FreeBlocks}, 0)
	if err != nil {
		return nil, err
	}
	if err := fsys.FreeExtents(func(start, length uint64) error { counter.Add(start, length); return nil }); err != nil {
		return nil, fmt.Errorf("free extents of %s: %w", path, err)
	}
	r := counter.Report()
	fsp := &freeSpace{BlockSize: in.BlockSize, BlocksPerGroup: in.BlocksPerGroup, FirstDataBlock: in.FirstDataBlock,
		Blocks: in.BlocksCount, FreeBlocks: r.ExtentBlocks, FreeExtents: r.Extents}
	for _, b := range r.Histogram {
		if b.Extents > 0 {
			fsp.Histogram = append(fsp.Histogram, freeBucket{MinBytes: b.MinBytes(in.BlockSize), Extents: b.Extents, Blocks: b.Blocks})
		}
	}
	if fsp.FreeExtents > 0 {
		fsp.MeanFreeExtent = float64(fsp.FreeBlocks) * float64(fsp.BlockSize) / float64(fsp.FreeExtents)
	}
	return fsp, nil
}

// fileLayout is a file's physical layout: its extents with physically
// contiguous neighbours merged (an extent tree splits runs longer than an
// extent can hold, and FIEMAP reports written and unwritten parts apart,
// but neither is fragmentation).
type fileLayout []physExtent

func newFileLayout(es []physExtent) fileLayout {
	var out fileLayout
	for _, e := range es {
		if e.length == 0 {
			continue
		}
		if n := len(out); n > 0 {
			p := &out[n-1]
			if p.logical+p.length == e.logical && p.physical+p.length == e.physical {
				p.length += e.length
				continue
			}
		}
		out = append(out, e)
	}
	return out
}

// layoutStats summarises the layout of a set of files.
type layoutStats struct {
	// Files counts the files holding data; files without blocks are left
	// out of the means.
	Files         int     `json:"files"`
	MeanExtents   float64 `json:"extents_per_file_mean"`
	MaxExtents    int     `json:"extents_per_file_max"`
	NonContiguous float64 `json:"non_contiguous_pct"` // files of more than one extent, in percent
	GroupsTouched int     `json:"groups_touched"`     // distinct block groups holding data of the files
}

// summarizeLayout computes the layout statistics of the files against the
// filesystem's geometry.
func summarizeLayout(files []fileLayout, fsp *freeSpace) layoutStats {
	var s layoutStats
	groups := map[uint64]bool{}
	total := 0
	for _, f := range files {
		if len(f) == 0 {
			continue
		}
		s.Files++
		total += len(f)
		s.MaxExtents = max(s.MaxExtents, len(f))
		if len(f) > 1 {
			s.NonContiguous++
		}
		for _, e := range f {
			first := (e.physical - uint64(fsp.FirstDataBlock)) / uint64(fsp.BlocksPerGroup)
			last := (e.physical + e.length - 1 - uint64(fsp.FirstDataBlock)) / uint64(fsp.BlocksPerGroup)
			for g := first; g <= last; g++ {
				groups[g] = true
			}
		}
	}
	if s.Files > 0 {
		s.MeanExtents = float64(total) / float64(s.Files)
		s.NonContiguous = s.NonContiguous * 100 / float64(s.Files)
	}
	s.GroupsTouched = len(groups)
	return s
}

// measureTarget measures t after a workload: the layout of the named
// files, then (ending the workload) the free space.
func measureTarget(t benchTarget, names []string) (*freeSpace, layoutStats, error) {
	layouts, err := collectLayouts(t, names)
	if err != nil {
		return nil, layoutStats{}, err
	}
	fsp, err := t.finish()
	if err != nil {
		return nil, layoutStats{}, err
	}
	return fsp, summarizeLayout(layouts, fsp), nil
}

// benchData returns n bytes to write: not zeros, which nothing should
// treat specially.
func benchData(n int) []byte {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	return buf
}

// collectLayouts reads the layout of each named file of t.
func collectLayouts(t benchTarget, names []string) ([]fileLayout, error) {
	out := make([]fileLayout, 0, len(names))
	for _, n := range slices.Sorted(slices.Values(names)) {
		es, err := t.extents(n)
		if err != nil {
			return nil, fmt.Errorf("extents of %s: %w", n, err)
		}
		out = append(out, newFileLayout(es))
	}
	return out, nil
}

// formatBytes prints a byte count with a binary unit, as e2freefrag does.
func formatBytes(b float64) string {
	units := []string{"B", "K", "M", "G", "T"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if b == float64(int64(b)) {
		return fmt.Sprintf("%d%s", int64(b), units[i])
	}
	return fmt.Sprintf("%.1f%s", b, units[i])
}
