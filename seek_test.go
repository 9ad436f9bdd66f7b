//go:build linux

package ext4go_test

import (
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go"
)

// TestFindDataPerCallCost walks a file of many extents (every other block
// written, some blocks preallocated and unwritten) with FindData and
// Seek: the answers are DataRanges', and once the file's block runs are
// read a call allocates nothing, so it neither rebuilds the runs nor
// lists the file's data ranges (the walk was quadratic in the extents).
func TestFindDataPerCallCost(t *testing.T) {
	const bs = 4096
	const extents = 3000
	image, fsys := daImage(t, 64<<20, bs, ext4go.Options{CommitInterval: -1})
	f, err := fsys.Create("sparse")
	if err != nil {
		t.Fatal(err)
	}
	blk := daData(1, bs)
	for i := range extents {
		if _, err := f.WriteAt(blk, int64(2*i)*bs); err != nil {
			t.Fatal(err)
		}
	}
	// Unwritten blocks count as holes.
	if err := f.Fallocate(0, int64(2*extents+5)*bs, 3*bs); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(blk, int64(2*extents+10)*bs); err != nil {
		t.Fatal(err)
	}
	// Delayed blocks are data before they are mapped.
	d, err := f.FindData(int64(2*extents+9)*bs, 3)
	if err != nil || d != int64(2*extents+10)*bs {
		t.Fatalf("SEEK_DATA over a delayed block: %d, %v", d, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	ranges, err := f.DataRanges()
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != extents+1 {
		t.Fatalf("%d data ranges, want %d", len(ranges), extents+1)
	}
	var got []ext4go.Range
	for off := int64(0); ; {
		d, err := f.FindData(off, 3)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h, err := f.FindData(d, 4)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ext4go.Range{Off: d, Len: h - d})
		off = h
	}
	if len(got) != len(ranges) {
		t.Fatalf("walk found %d ranges, want %d", len(got), len(ranges))
	}
	for i := range got {
		if got[i] != ranges[i] {
			t.Fatalf("range %d: walk %+v, DataRanges %+v", i, got[i], ranges[i])
		}
	}
	// Seek answers the same and moves the offset; FindData does not.
	if off, err := f.Seek(3*bs, 4); err != nil || off != 3*bs {
		t.Fatalf("SEEK_HOLE at a hole: %d, %v", off, err)
	}
	if _, err := f.FindData(bs, 3); err != nil {
		t.Fatal(err)
	}
	if off, _ := f.Seek(0, io.SeekCurrent); off != 3*bs {
		t.Fatalf("FindData moved the offset to %d", off)
	}
	mid := int64(extents) * bs
	if a := testing.AllocsPerRun(200, func() {
		if _, err := f.FindData(mid+1, 3); err != nil {
			t.Fatal(err)
		}
		if _, err := f.FindData(mid, 4); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("FindData allocates %v times a call pair: it rebuilds or lists the mapping", a)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, fsys, image)
}
