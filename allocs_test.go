package ext4go_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// Allocation budgets of the hot operations (a hot path should not
// allocate), in heap objects per call on a fresh journalled 4 KiB-block
// image. A change that allocates more fails here and must say why by
// raising the figure. fallocate2's step allocates nothing: its transaction
// handle is the node's own (FS.beginHot) and its inode copy reuses the
// inode the step before replaced (node.publish). Before that work a 4 KiB
// write allocated 34.
var allocBudgets = map[string]float64{
	"fallocate2 step":  0, // 1 before inode copies were recycled, 2 before the handle was the node's own
	"truncate to 0":    0, // a 64 KiB fallocate and the truncate; 3 before the truncate stopped marking the inode it replaces (n.in, which keeps it from reuse) and kept the file's allocator state (DiscardInodePreallocOpen), 13 before prepareFree read a root-only tree's extents from i_block instead of building the node's block map (which also marked the inode, keeping it and the next from reuse), 14 before the truncate used the node's handle, 16 before the removal's store was pooled and prepareFree stopped copying blocks, 17 before fallocate used the node's handle
	"overwrite 4k":     0, // 2 before its time update used the node's handle and the overwrite gave back its unused inode copy, 3 before recycled inode copies
	"stat":             2,
	"punch+refill 4k":  0, // 6 before punch used the node's handle, the hot inode copy and a pooled store, the removal kept its extents in the leaf's slice and the allocator's free stopped cloning the group's preallocations
	"zero range 4k":    0,
	"append 4k":        0,  // a write at the end of an open file: blocks from its preallocation, the size in the same handle
	"write, deep tree": 0,  // into a hole of a file with a leaf block (its nodes come from a pool); 5 before the tree's child visit was bound once per Editor and scratch buffers went back to their pool in recycled boxes, 6 before its time update used the node's handle, 8 before recycled inode copies
	"create+remove":    76, // 78 before the truncate-path and tree-visit changes above, 81 before prepareFree read a root-only tree from i_block, 82 before prepareFree stopped copying the inode table block, 83 before a new regular file skipped the second write of its inode, 85 before new inodes were allocated with their bytes (one object, encoded in place), 82 before directory inserts changed their block in place (the viewer closures), 89 before pooled directory extent stores
}

func TestHotPathAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts: not in -short")
	}
	if testutil.RaceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	img := filepath.Join(t.TempDir(), "img")
	if err := mkfs.Format(img, mkfs.Options{Size: 256 << 20}); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := fsys.Close(); err != nil {
			t.Error(err)
		}
		testutil.RequireFsckClean(t, img)
	}()
	f, err := fsys.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// fallocate2's loop: 8 KiB at the end until 1 MiB, then truncate.
	const step, limit = 8 << 10, 1 << 20
	var off int64
	fallocStep := func() {
		if off >= limit {
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			off = 0
		}
		if err := f.Fallocate(0, off, step); err != nil {
			t.Fatal(err)
		}
		off += step
	}
	for range 300 {
		fallocStep()
	}
	measure := func(name string, fn func()) {
		t.Helper()
		got := testing.AllocsPerRun(100, fn)
		want := allocBudgets[name]
		t.Logf("%-16s %5.1f allocs/op (budget %v)", name, got, want)
		if got > want {
			t.Errorf("%s: %.1f allocations per call, budget %v", name, got, want)
		}
	}
	// The loop as fallocate2 runs it: one truncate in 128 steps falls in
	// the window, which AllocsPerRun's whole-number average rounds away;
	// "truncate to 0" counts it alone.
	measure("fallocate2 step", fallocStep)
	measure("truncate to 0", func() {
		if err := f.Fallocate(0, 0, 64<<10); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
	})
	buf := make([]byte, 4096)
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	var pos int64
	measure("overwrite 4k", func() {
		if _, err := f.WriteAt(buf, pos); err != nil {
			t.Fatal(err)
		}
		pos = (pos + 4096) % (1 << 20)
	})
	// A file of many extents (every other block), so that its tree has a
	// leaf block below the root: each write into one of its holes reads
	// and changes that leaf.
	g, err := fsys.Create("deep")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for blk := int64(0); blk < 400; blk += 2 {
		if _, err := g.WriteAt(buf, blk*4096); err != nil {
			t.Fatal(err)
		}
	}
	if ex, err := g.Extents(); err != nil || len(ex) < 100 {
		t.Fatalf("deep file: %d extents, %v", len(ex), err)
	}
	hole := int64(1)
	measure("write, deep tree", func() {
		if _, err := g.WriteAt(buf, hole*4096); err != nil {
			t.Fatal(err)
		}
		hole += 2
	})
	app, err := fsys.Create("append")
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	for range 64 {
		if _, err := app.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	measure("append 4k", func() {
		if _, err := app.Write(buf); err != nil {
			t.Fatal(err)
		}
	})
	var ppos int64
	measure("punch+refill 4k", func() {
		if err := app.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, ppos, 4096); err != nil {
			t.Fatal(err)
		}
		if _, err := app.WriteAt(buf, ppos); err != nil {
			t.Fatal(err)
		}
		ppos = (ppos + 8192) % (64 << 12)
	})
	var zpos int64
	measure("zero range 4k", func() {
		if err := app.Fallocate(ext4go.FallocZeroRange|ext4go.FallocKeepSize, zpos+4096, 4096); err != nil {
			t.Fatal(err)
		}
		zpos = (zpos + 8192) % (64 << 12)
	})
	measure("stat", func() {
		if _, err := f.Stat(); err != nil {
			t.Fatal(err)
		}
	})
	i := 0
	measure("create+remove", func() {
		name := fmt.Sprintf("c%d", i%8)
		i++
		g, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	})
}
