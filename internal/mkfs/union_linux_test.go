package mkfs

import (
	"os"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// unionData returns the block-aligned byte ranges holding data in a or b.
func unionData(t *testing.T, a, b *os.File, size, bs int64) [][2]int64 {
	var rs [][2]int64
	for _, f := range []*os.File{a, b} {
		for off := int64(0); off < size; {
			d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
			if err != nil {
				break // ENXIO: no data after off
			}
			h, err := unix.Seek(int(f.Fd()), d, unix.SEEK_HOLE)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, [2]int64{d / bs * bs, (h + bs - 1) / bs * bs})
			off = h
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	var out [][2]int64
	for _, r := range rs {
		if k := len(out) - 1; k >= 0 && r[0] <= out[k][1] {
			out[k][1] = max(out[k][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}
