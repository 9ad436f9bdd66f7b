package ext4go

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
)

// seekRunsReference is SEEK_DATA/SEEK_HOLE by a walk over every data
// range, as it was answered before the binary search.
func seekRunsReference(runs []run, bs, size, off int64, data bool) (int64, error) {
	var ranges [][2]int64
	for _, r := range runs {
		if r.unwritten {
			continue
		}
		start := int64(r.logical) * bs
		end := min(start+int64(r.length)*bs, size)
		if start >= end {
			continue
		}
		if k := len(ranges) - 1; k >= 0 && ranges[k][1] == start {
			ranges[k][1] = end
			continue
		}
		ranges = append(ranges, [2]int64{start, end})
	}
	for _, r := range ranges {
		if off >= r[1] {
			continue
		}
		if data {
			return max(off, r[0]), nil
		}
		if off < r[0] {
			return off, nil
		}
		off = r[1]
	}
	if data {
		return 0, syscall.ENXIO
	}
	return min(off, size), nil
}

func TestSeekRunsMatchesWalk(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const bs = 1024
	for iter := range 2000 {
		var runs []run
		lblk := uint64(rng.IntN(3))
		for range rng.IntN(12) {
			r := run{logical: lblk, physical: uint64(1000 + rng.IntN(1000)), length: uint64(1 + rng.IntN(4)), unwritten: rng.IntN(4) == 0}
			runs = append(runs, r)
			lblk += r.length + uint64(rng.IntN(3)) // 0: adjacent runs
		}
		size := int64(1 + rng.IntN(int(lblk+3)*bs))
		for off := int64(0); off < size; off += int64(1 + rng.IntN(bs/2)) {
			for _, data := range []bool{true, false} {
				got, gerr := seekRuns(runs, bs, size, off, data)
				want, werr := seekRunsReference(runs, bs, size, off, data)
				if got != want || !errors.Is(gerr, werr) && gerr != werr {
					t.Fatalf("iteration %d: runs %+v size %d: seek(%d, data %v) = %d, %v; want %d, %v", iter, runs, size, off, data, got, gerr, want, werr)
				}
			}
		}
	}
}
