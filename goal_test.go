//go:build linux

package ext4go_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestHoleWriteGoal: a write or fallocate into a hole between two extents
// is placed where its neighbours put it (the goal the lookup of the hole
// reports, extent.Mapping.Left/Right; kernel: ext4_ext_find_goal), so that
// filling the hole later makes one run. Without the neighbours the blocks
// land wherever the stream goal is.
//
// Without delayed allocation: this is the goal of the allocation at the
// write (writeChunk). With it, the hole's blocks are chosen at the Close,
// where the file's earlier appends, allocated exactly at their closes,
// left no room beside them (no preallocation window held it free), so the
// neighbours' goal is taken but not necessarily free.
func TestHoleWriteGoal(t *testing.T) {
	img, fsys := formatRW(t, 256<<20)
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true, NoDelalloc: true})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	bs := int64(fsys.Info().BlockSize)
	for _, c := range []struct {
		name string
		fill func(f *ext4go.File, off int64) error
	}{
		{"write", func(f *ext4go.File, off int64) error { _, err := f.WriteAt(buf, off); return err }},
		{"fallocate", func(f *ext4go.File, off int64) error { return f.Fallocate(ext4go.FallocKeepSize, off, 4096) }},
	} {
		// Other files first, so that the stream goal is elsewhere.
		for i := range 3 {
			if err := fsys.WriteFile(fmt.Sprintf("%s-other%d", c.name, i), buf, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		steps := []int64{0, 400 << 10, 200 << 10} // the last one fills a hole
		for _, off := range steps {
			f, err := fsys.OpenFile(c.name, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.fill(f, off); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil { // each step alone: no preallocation carries over
				t.Fatal(err)
			}
			if err := fsys.WriteFile(c.name+"-between", buf, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Remove(c.name + "-between"); err != nil {
				t.Fatal(err)
			}
		}
		f, err := fsys.Open(c.name)
		if err != nil {
			t.Fatal(err)
		}
		ex, err := f.(*ext4go.File).Extents()
		f.Close()
		if err != nil || len(ex) != 3 {
			t.Fatalf("%s: extents %+v, %v", c.name, ex, err)
		}
		left, mid, right := ex[0], ex[1], ex[2]
		fromLeft := left.Physical + (mid.Logical - left.Logical)
		fromRight := right.Physical - (right.Logical - mid.Logical)
		if mid.Physical != fromLeft && mid.Physical != fromRight {
			t.Errorf("%s: the hole's blocks at %d, not where a neighbour puts them (%d from the left, %d from the right); extents %+v (block size %d)",
				c.name, mid.Physical, fromLeft, fromRight, ex, bs)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
}
