package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/ext4go/ext4go/internal/freefrag"
)

func init() {
	register(&command{name: "freefrag", usage: "[-c CHUNK_KB] [--json] [--force] IMAGE", summary: "free-space fragmentation, like e2freefrag", run: runFreefrag})
}

// jsonOption is the --json option of freefrag and frag, also spelt -json
// (as the bench commands take it).
var jsonOption = optDef{long: "json", help: "print the numbers as one JSON object (also -json)"}

// singleDashJSON lets "-json" mean "--json" (before "--").
func singleDashJSON(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		if a == "--" {
			break
		}
		if a == "-json" {
			out[i] = "--json"
		}
	}
	return out
}

func runFreefrag(e *env, args []string) error {
	fsys, o, err := openRead(e, "freefrag", []optDef{
		{short: 'c', arg: "CHUNK_KB", help: "also count the wholly free chunks of CHUNK_KB KiB (a power of two, at least the block size)"},
		jsonOption,
	}, singleDashJSON(args), 1, 1)
	if err != nil {
		return err
	}
	defer fsys.Close()
	device := o.image
	var chunkBytes uint64
	if v, ok := o.str("c"); ok {
		// e2freefrag: strtoull(optarg, &end, 0), then a power of two.
		kb, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return usagef("bad chunk size '%s'", v)
		}
		if kb&(kb-1) != 0 || kb > math.MaxUint64/1024 {
			return usagef("chunk size must be a power of 2, not %s", v)
		}
		// As in e2freefrag, -c 0 is no chunk summary.
		chunkBytes = kb * 1024
		if kb != 0 && chunkBytes < uint64(fsys.BlockSize()) {
			return usagef("chunksize must be greater than or equal to filesystem blocksize (%d bytes)", fsys.BlockSize())
		}
	}
	in := fsys.Info()
	c, err := freefrag.NewCounter(freefrag.Geometry{
		BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), FreeBlocks: in.FreeBlocks,
	}, chunkBytes)
	if err != nil {
		return err
	}
	err = fsys.FreeExtents(func(start, length uint64) error {
		c.Add(start, length)
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: reading the block bitmaps: %w", device, err)
	}
	r := c.Report()
	if o.has("json") {
		return json.NewEncoder(e.stdout).Encode(freefragJSON(device, &r))
	}
	return r.WriteText(e.stdout, device)
}

// freefragJSON is the report for scripts: the numbers e2freefrag prints,
// sizes in bytes and blocks, percentages left out where e2freefrag's
// would be undefined (a zero free-block count).
func freefragJSON(device string, r *freefrag.Report) map[string]any {
	bs := r.BlockSize
	out := map[string]any{
		"device":        device,
		"block_size":    bs,
		"total_blocks":  r.BlocksCount,
		"free_blocks":   r.FreeBlocks,
		"free_percent":  jsonPercent(r.FreePercent()),
		"free_extents":  r.Extents,
		"extent_blocks": r.ExtentBlocks,
		"min_extent_kb": r.MinKB,
		"max_extent_kb": r.MaxKB,
		"avg_extent_kb": r.AvgKB,
	}
	if r.ChunkBytes != 0 {
		out["chunk"] = map[string]any{
			"bytes": r.ChunkBytes, "blocks": r.ChunkBlocks,
			"total": r.TotalChunks, "free": r.FreeChunks,
			"free_percent": jsonPercent(r.FreeChunksPercent()),
		}
	}
	hist := []map[string]any{}
	for _, b := range r.Histogram {
		if b.Extents == 0 {
			continue
		}
		h := map[string]any{
			"min_bytes": b.MinBytes(bs), "extents": b.Extents, "blocks": b.Blocks,
			"percent": jsonPercent(r.BucketPercent(b)),
		}
		if m := b.MaxBytes(bs); m != 0 {
			h["max_bytes"] = m // exclusive; absent for the last, unbounded bucket
		}
		hist = append(hist, h)
	}
	out["histogram"] = hist
	return out
}

// jsonPercent rounds a percentage to two decimals, or is nil (null) where
// it is not a number.
func jsonPercent(p float64) any {
	if math.IsInf(p, 0) || math.IsNaN(p) {
		return nil
	}
	return math.Round(p*100) / 100
}
