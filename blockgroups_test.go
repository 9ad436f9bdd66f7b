//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// dumpGroup is what dumpe2fs prints of one group.
type dumpGroup struct {
	first, last uint64
	meta        map[string]ext4go.BlockRange // by "kind/owner"
	freeCount   uint64                       // "N free blocks" (clusters with bigalloc)
	free        [][2]uint64                  // "Free blocks: a-b, c" as [start, end]
}

var (
	dumpGroupRe = regexp.MustCompile(`^Group (\d+): \(Blocks (\d+)-(\d+)\)`)
	dumpAtRe    = regexp.MustCompile(`(Primary superblock|Backup superblock|Group descriptors?|Reserved GDT blocks|Block bitmap|Inode bitmap|Inode table) at (\d+)(?:-(\d+))?`)
	dumpFreeRe  = regexp.MustCompile(`^  (\d+) free (?:blocks|clusters),`)
)

// parseDumpe2fs reads dumpe2fs's group listing.
func parseDumpe2fs(t *testing.T, out string) []dumpGroup {
	kinds := map[string]ext4go.BlockKind{
		"Primary superblock": ext4go.KindSuperblock, "Backup superblock": ext4go.KindSuperblock,
		"Group descriptors": ext4go.KindGroupDescriptors, "Group descriptor": ext4go.KindGroupDescriptors, "Reserved GDT blocks": ext4go.KindReservedGDT,
		"Block bitmap": ext4go.KindBlockBitmap, "Inode bitmap": ext4go.KindInodeBitmap, "Inode table": ext4go.KindInodeTable,
	}
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("dumpe2fs: %q: %v", s, err)
		}
		return n
	}
	var groups []dumpGroup
	for _, line := range strings.Split(out, "\n") {
		if m := dumpGroupRe.FindStringSubmatch(line); m != nil {
			groups = append(groups, dumpGroup{first: num(m[2]), last: num(m[3]), meta: map[string]ext4go.BlockRange{}})
			continue
		}
		if len(groups) == 0 {
			continue
		}
		g := &groups[len(groups)-1]
		owner := uint32(len(groups) - 1)
		for _, m := range dumpAtRe.FindAllStringSubmatch(line, -1) {
			start := num(m[2])
			end := start
			if m[3] != "" {
				end = num(m[3])
			}
			r := ext4go.BlockRange{Start: start, Length: end - start + 1, Kind: kinds[m[1]], Owner: owner}
			g.meta[fmt.Sprintf("%v/%d", r.Kind, owner)] = r
		}
		if m := dumpFreeRe.FindStringSubmatch(line); m != nil {
			g.freeCount = num(m[1])
		}
		if rest, ok := strings.CutPrefix(line, "  Free blocks: "); ok && rest != "" {
			for _, part := range strings.Split(rest, ", ") {
				a, b, found := strings.Cut(part, "-")
				r := [2]uint64{num(a), num(a)}
				if found {
					r[1] = num(b)
				}
				g.free = append(g.free, r)
			}
		}
	}
	return groups
}

// TestBlockGroupsMatchDumpe2fs compares BlockGroups and FreeExtents with
// dumpe2fs's group listing (which reads the bitmaps as e2freefrag does)
// on mke2fs layouts and on an image aged through the library.
func TestBlockGroupsMatchDumpe2fs(t *testing.T) {
	for _, c := range []struct {
		name string
		size int64
		args []string
		age  bool
	}{
		{"1k-noflex", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-O", "^flex_bg"}, true},
		{"4k-flex", 300 << 20, []string{"-t", "ext4"}, true},
		{"4k-metabg", 300 << 20, []string{"-t", "ext4", "-O", "meta_bg,^resize_inode"}, false},
		{"2k-uninit", 100 << 20, []string{"-t", "ext4", "-b", "2048", "-O", "^metadata_csum,uninit_bg"}, false},
		{"ext2", 32 << 20, []string{"-t", "ext2", "-b", "1024"}, false},
		{"bigalloc", 300 << 20, []string{"-t", "ext4", "-O", "bigalloc", "-C", "16384"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			testutil.Mke2fs(t, img, c.size, c.args...)
			if c.age {
				ageThroughLibrary(t, img)
			}
			testutil.RequireFsckClean(t, img)
			want := parseDumpe2fs(t, testutil.Dumpe2fs(t, img))
			fsys, err := ext4go.Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			checkGroupsAgainst(t, fsys, want, c.name == "bigalloc")
		})
	}
}

func checkGroupsAgainst(t *testing.T, fsys *ext4go.FS, want []dumpGroup, bigalloc bool) {
	t.Helper()
	in := fsys.Info()
	groups, err := fsys.BlockGroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(want) {
		t.Fatalf("%d groups, dumpe2fs %d", len(groups), len(want))
	}
	// Metadata: the parts of a range split over groups joined again.
	got := map[string]ext4go.BlockRange{}
	var journal uint64
	for _, g := range groups {
		for i, r := range g.Metadata {
			if r.Start < g.FirstBlock || r.Start+r.Length > g.FirstBlock+uint64(g.Blocks) {
				t.Errorf("group %d holds %+v outside it", g.Index, r)
			}
			if i > 0 && g.Metadata[i-1].Start+g.Metadata[i-1].Length > r.Start {
				t.Errorf("group %d: %+v overlaps %+v", g.Index, g.Metadata[i-1], r)
			}
			if r.Kind == ext4go.KindJournal {
				journal += r.Length
				continue
			}
			k := fmt.Sprintf("%v/%d", r.Kind, r.Owner)
			if p, ok := got[k]; ok && p.Start+p.Length == r.Start {
				p.Length += r.Length
				got[k] = p
			} else {
				got[k] = r
			}
		}
	}
	all := map[string]ext4go.BlockRange{}
	for _, w := range want {
		for k, r := range w.meta {
			all[k] = r
		}
	}
	for k, w := range all {
		if got[k] != w {
			t.Errorf("%s: %+v, dumpe2fs %+v", k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := all[k]; !ok {
			t.Errorf("%s: %+v not in dumpe2fs", k, g)
		}
	}
	if j, err := fsys.Journal(); err == nil && j != nil && journal < uint64(j.Blocks) {
		t.Errorf("journal ranges hold %d blocks, the journal has %d", journal, j.Blocks)
	}
	// Free space: FreeExtents split at group boundaries is dumpe2fs's
	// "Free blocks:" list (with bigalloc dumpe2fs ends a range at the
	// first block of its last cluster, so only the counts are compared).
	perGroup := make([][][2]uint64, len(groups))
	var total uint64
	err = fsys.FreeExtents(func(start, length uint64) error {
		total += length
		for length > 0 {
			g := (start - uint64(in.FirstDataBlock)) / uint64(in.BlocksPerGroup)
			end := min(start+length, groups[g].FirstBlock+uint64(groups[g].Blocks))
			perGroup[g] = append(perGroup[g], [2]uint64{start, end - 1})
			length -= end - start
			start = end
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != in.FreeBlocks {
		t.Errorf("free extents hold %d blocks, the superblock counts %d", total, in.FreeBlocks)
	}
	ratio := uint64(in.ClusterSize / in.BlockSize)
	for i, g := range groups {
		var n uint64
		for _, r := range perGroup[i] {
			n += r[1] - r[0] + 1
		}
		if uint64(g.FreeBlocks) != n || g.FreeBlocks != g.DescFreeBlocks {
			t.Errorf("group %d: %d free, %d in its extents, descriptor %d", i, g.FreeBlocks, n, g.DescFreeBlocks)
		}
		if bigalloc {
			if w := want[i].freeCount * ratio; w < n || w-n >= ratio {
				t.Errorf("group %d: %d free blocks, dumpe2fs %d clusters", i, n, want[i].freeCount)
			}
			continue
		}
		if !slices.Equal(perGroup[i], want[i].free) {
			t.Errorf("group %d free %v, dumpe2fs %v", i, perGroup[i], want[i].free)
		}
	}
}

// ageThroughLibrary writes and deletes files of many sizes.
func ageThroughLibrary(t *testing.T, img string) {
	t.Helper()
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		name := fmt.Sprintf("f%02d", i)
		if err := fsys.WriteFile(name, bytes.Repeat([]byte{byte(i)}, (i*7919)%300000+1), 0o644); err != nil {
			t.Fatal(err)
		}
		if i%3 == 1 {
			if err := fsys.Remove(fmt.Sprintf("f%02d", i-1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestFreeExtentsWhileWriting reads the free extents and groups of a
// writable filesystem while files are written and removed (run it with
// -race): every reading is well formed, and once the writers stop and the
// changes are committed it is what the image holds after Close.
func TestFreeExtentsWhileWriting(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	testutil.Mke2fs(t, img, 64<<20, "-t", "ext4", "-b", "1024")
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	in := fsys.Info()
	check := func(what string) ([][2]uint64, error) {
		var out [][2]uint64
		err := fsys.FreeExtents(func(s, l uint64) error {
			if l == 0 || s < uint64(in.FirstDataBlock) || s+l > in.BlocksCount {
				return fmt.Errorf("%s: extent %d+%d out of bounds", what, s, l)
			}
			if n := len(out); n > 0 && out[n-1][0]+out[n-1][1] >= s {
				return fmt.Errorf("%s: extent %d+%d not after %v", what, s, l, out[n-1])
			}
			out = append(out, [2]uint64{s, l})
			return nil
		})
		return out, err
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				if err := fsys.WriteFile(name, make([]byte, 1024*(1+(i*37+w)%200)), 0o644); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					if err := fsys.Remove(fmt.Sprintf("w%d-%d", w, i-1)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for !stop.Load() {
			if _, err := check("during writes"); err != nil {
				errs <- err
				return
			}
			if _, err := fsys.BlockGroups(); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	live, err := check("after Sync")
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, e := range live {
		sum += e[1]
	}
	if u := fsys.Usage(); u.FreeBlocks != sum {
		t.Errorf("free extents hold %d blocks, Usage says %d free", sum, u.FreeBlocks)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
	ro, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var after [][2]uint64
	ro.FreeExtents(func(s, l uint64) error { after = append(after, [2]uint64{s, l}); return nil })
	if !slices.Equal(after, live) {
		t.Errorf("after Close %d extents, before %d:\n%v\n%v", len(after), len(live), after, live)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ro.FreeExtents(func(s, l uint64) error { return nil }); !errors.Is(err, os.ErrClosed) {
		t.Errorf("FreeExtents after Close: %v", err)
	}
}

// FuzzFreeExtents mutates small real images (see FuzzOpenWalk) and reads
// their free space: whatever the bitmaps and descriptors hold, the result
// is well-formed extents or a typed error, never a panic.
func FuzzFreeExtents(f *testing.F) {
	bases := seedFuzzBases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		img := mutatedImage(bases, data)
		if img == nil {
			return
		}
		for _, opts := range []*ext4go.Options{nil, {IgnoreChecksums: true, IgnoreJournal: true}} {
			fsys, err := ext4go.NewFS(bytes.NewReader(img), int64(len(img)), opts)
			if err != nil {
				continue
			}
			in := fsys.Info()
			var last, total uint64
			err = fsys.FreeExtents(func(s, l uint64) error {
				if l == 0 || s < last || s+l > in.BlocksCount || s < uint64(in.FirstDataBlock) {
					t.Fatalf("extent %d+%d after %d (blocks %d)", s, l, last, in.BlocksCount)
				}
				last = s + l + 1
				total += l
				return nil
			})
			if err != nil && !typedErr(err) {
				t.Errorf("FreeExtents: untyped error %T: %v", err, err)
			}
			groups, gerr := fsys.BlockGroups()
			if gerr == nil && err == nil {
				var n uint64
				for _, g := range groups {
					n += uint64(g.FreeBlocks)
				}
				if n != total {
					t.Errorf("groups count %d free blocks, extents %d", n, total)
				}
			}
			fsys.Close()
		}
	})
}
