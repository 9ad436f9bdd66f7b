package freefrag

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// scanReport is e2freefrag's scan_block_bitmap and dump_chunk_info
// transcribed block by block over used (one bool per block, true when in
// use): the reference Counter must agree with.
func scanReport(g Geometry, chunkBytes uint64, used []bool) Report {
	size := chunkBytes
	if size == 0 {
		size = DefaultChunkBytes
	}
	bic := size / uint64(g.BlockSize)
	r := Report{Geometry: g, ChunkBytes: chunkBytes, ChunkBlocks: bic}
	for i := range r.Histogram {
		r.Histogram[i].Index = i
	}
	minB, maxB, sum := ^uint64(0), uint64(0), uint64(0)
	update := func(n uint64) {
		b := &r.Histogram[bucketOf(n)]
		b.Extents++
		b.Blocks += n
		minB, maxB = min(minB, n), max(maxB, n)
		sum += n
		r.Extents++
		r.ExtentBlocks += n
	}
	chunks := (g.BlocksCount + bic) / bic
	var last, chunkStart uint64
	for c := uint64(0); c < chunks; c++ {
		numBlks := bic
		if chunkStart+bic > g.BlocksCount {
			numBlks = g.BlocksCount - chunkStart
		}
		var free uint64
		for blk := uint64(0); blk < numBlks; blk, chunkStart = blk+1, chunkStart+1 {
			if c == 0 && blk == 0 {
				blk = g.FirstDataBlock
				chunkStart = blk
				if blk >= numBlks {
					break
				}
			}
			if !used[chunkStart] {
				last++
				free++
			} else if last != 0 {
				update(last)
				last = 0
			}
		}
		if free == bic {
			r.FreeChunks++
		}
	}
	if last != 0 {
		update(last)
	}
	r.TotalChunks = chunks
	if r.Extents > 0 {
		scale := uint64(g.BlockSize >> 10)
		r.MinKB, r.MaxKB, r.AvgKB = minB*scale, maxB*scale, sum/r.Extents*scale
	}
	return r
}

// counterReport feeds the maximal free runs of used to a Counter.
func counterReport(t testing.TB, g Geometry, chunkBytes uint64, used []bool) Report {
	c, err := NewCounter(g, chunkBytes)
	if err != nil {
		t.Fatal(err)
	}
	for b := g.FirstDataBlock; b < g.BlocksCount; {
		if used[b] {
			b++
			continue
		}
		s := b
		for b < g.BlocksCount && !used[b] {
			b++
		}
		c.Add(s, b-s)
	}
	return c.Report()
}

// geometryFrom derives a small filesystem and its bitmap from fuzz bytes.
func geometryFrom(data []byte) (Geometry, uint64, []bool) {
	var seed [32]byte
	copy(seed[:], data)
	rng := rand.New(rand.NewChaCha8(seed))
	bs := uint32(1024) << rng.IntN(4)
	g := Geometry{BlockSize: bs, BlocksCount: 1 + rng.Uint64N(20000)}
	if bs == 1024 && rng.IntN(2) == 0 {
		g.FirstDataBlock = 1
	}
	if g.FirstDataBlock >= g.BlocksCount {
		g.BlocksCount = g.FirstDataBlock + 1
	}
	var chunk uint64
	if rng.IntN(3) > 0 {
		chunk = uint64(bs) << rng.IntN(10)
	}
	used := make([]bool, g.BlocksCount)
	density := rng.Float64()
	runLen := 1 + rng.IntN(300)
	for b := uint64(0); b < g.BlocksCount; {
		n := uint64(1 + rng.IntN(runLen))
		u := rng.Float64() < density
		for i := uint64(0); i < n && b < g.BlocksCount; i, b = i+1, b+1 {
			used[b] = u
		}
	}
	for b := uint64(0); b < g.FirstDataBlock; b++ {
		used[b] = true
	}
	var free uint64
	for _, u := range used {
		if !u {
			free++
		}
	}
	g.FreeBlocks = free
	return g, chunk, used
}

func TestCounterMatchesE2freefragScan(t *testing.T) {
	for i := 0; i < 300; i++ {
		g, chunk, used := geometryFrom([]byte{byte(i), byte(i >> 8), 7})
		want := scanReport(g, chunk, used)
		got := counterReport(t, g, chunk, used)
		if got != want {
			t.Fatalf("case %d %+v chunk %d:\ngot  %+v\nwant %+v", i, g, chunk, got, want)
		}
	}
}

// FuzzCounter checks the Counter against the block-by-block transcription
// of e2freefrag on any geometry and bitmap the input describes, and that
// printing never fails.
func FuzzCounter(f *testing.F) {
	for _, s := range []string{"", "a", "bigalloc", "\x00\x01\x02", strings.Repeat("z", 40)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, chunk, used := geometryFrom(data)
		want := scanReport(g, chunk, used)
		got := counterReport(t, g, chunk, used)
		if got != want {
			t.Fatalf("%+v chunk %d:\ngot  %+v\nwant %+v", g, chunk, got, want)
		}
		var buf bytes.Buffer
		if err := got.WriteText(&buf, "x"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBucketLabels(t *testing.T) {
	// What e2freefrag prints for 4 KiB and 1 KiB blocks.
	for _, c := range []struct {
		bs    uint32
		index int
		want  string
	}{
		{4096, 1, "    4K...    8K-"},
		{4096, 8, "  512K... 1024K-"},
		{4096, 9, "    1M...    2M-"},
		{4096, 14, "   32M...   64M-"},
		{4096, 31, "    4T...   max "},
		{1024, 1, "    1K...    2K-"},
		{1024, 11, "    1M...    2M-"},
		{65536, 1, "   64K...  128K-"},
	} {
		l := bucketLabels(c.bs)[c.index]
		got := fmt.Sprintf("%5d%c...%7s", l.start, l.unit, l.end)
		if got != c.want {
			t.Errorf("block size %d bucket %d: %q, want %q", c.bs, c.index, got, c.want)
		}
	}
}

func TestWriteTextEdgeCases(t *testing.T) {
	// No free space at all, and a superblock count of 0 with free blocks
	// in the bitmap (e2freefrag divides by it and prints inf).
	c, err := NewCounter(Geometry{BlockSize: 4096, BlocksCount: 100}, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Add(10, 5)
	var buf bytes.Buffer
	r := c.Report()
	r.WriteText(&buf, "img")
	if !strings.Contains(buf.String(), "   inf%") || !strings.Contains(buf.String(), "Free blocks: 0 (0.0%)") {
		t.Fatalf("%s", buf.String())
	}
	c, _ = NewCounter(Geometry{BlockSize: 1024, BlocksCount: 100, FirstDataBlock: 1}, 4096)
	buf.Reset()
	r = c.Report()
	r.WriteText(&buf, "img")
	for _, want := range []string{"Min. free extent: 0 KB \n", "Num. free extent: 0\n", "Chunksize: 4096 bytes (4 blocks)\nTotal chunks: 26\nFree chunks: 0 (0.0%)\n"} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("lacks %q:\n%s", want, buf.String())
		}
	}
	for _, bad := range []uint64{3000, 512} {
		if _, err := NewCounter(Geometry{BlockSize: 1024, BlocksCount: 10}, bad); err == nil {
			t.Errorf("chunk size %d accepted", bad)
		}
	}
}
