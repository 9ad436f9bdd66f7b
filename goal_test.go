//go:build linux

package ext4go_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
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

// TestFlexGroupInodeGoal: the first block of a directory or of a slow
// symbolic link goes to the first group of its inode's flex group, a
// regular file's to the second (kernel: ext4_inode_to_goal_block), so that
// a flex group's directory blocks gather in one group instead of one more
// group a directory inode lands in. An untar of /usr/local/go at 1 KiB
// blocks put directory blocks in 5 groups of a flex group where the
// kernel puts them in 1.
func TestFlexGroupInodeGoal(t *testing.T) {
	image := t.TempDir() + "/img"
	if err := mkfs.Format(image, mkfs.Options{Size: 512 << 20, BlockSize: 1024}); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	info := fsys.Info()
	if info.FlexBGSize < 4 {
		t.Fatalf("flex groups of %d", info.FlexBGSize)
	}
	groupOf := func(blk uint64) uint32 {
		return uint32((blk - uint64(info.FirstDataBlock)) / uint64(info.BlocksPerGroup))
	}
	long := strings.Repeat("x", 200)
	checked := map[string]int{}
	for i := range 24 {
		top := fmt.Sprintf("d%02d", i)
		for _, dir := range []string{top, top + "/sub1", top + "/sub2"} {
			if err := fsys.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			// Enough entries for a directory block of its own (no
			// inline data at 1 KiB blocks with these names).
			for j := range 3 {
				if err := fsys.WriteFile(fmt.Sprintf("%s/file-with-a-long-name-%d", dir, j), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := fsys.Symlink(long, dir+"/link"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := range 24 {
		top := fmt.Sprintf("d%02d", i)
		for _, dir := range []string{top, top + "/sub1", top + "/sub2"} {
			for _, name := range []string{dir, dir + "/link"} {
				fi, err := fsys.Lstat(name)
				if err != nil {
					t.Fatal(err)
				}
				ino := fi.Sys().(*ext4go.Stat).Ino
				exts, err := fsys.Extents(name)
				if err != nil || len(exts) == 0 {
					t.Fatalf("%s: extents %v, %v", name, exts, err)
				}
				inoGroup := (ino - 1) / info.InodesPerGroup
				want := inoGroup &^ (info.FlexBGSize - 1)
				if got := groupOf(exts[0].Physical); got != want {
					t.Errorf("%s (inode %d, group %d): first block %d in group %d, want %d (its flex group's first)",
						name, ino, inoGroup, exts[0].Physical, got, want)
				}
				checked[fmt.Sprint(inoGroup)]++
			}
		}
	}
	if len(checked) < 2 {
		t.Errorf("directories' inodes all in one group (%v): nothing shown", checked)
	}
	t.Logf("inode groups checked: %v", checked)
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out := testutil.E2fsckFN(t, image); code != 0 {
		t.Fatalf("e2fsck -fn: exit %d\n%s", code, out)
	}
}
