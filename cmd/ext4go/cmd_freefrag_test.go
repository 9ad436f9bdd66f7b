package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/freefrag"
	"github.com/ext4go/ext4go/internal/testutil"
)

// runTool runs an e2fsprogs tool and returns its standard output and
// exit status (stderr is appended to the output when it fails).
func runTool(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	testutil.RequireTools(t, name)
	cmd := exec.Command(name, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return out.String() + errb.String(), ee.ExitCode()
		}
		t.Fatalf("%s: %v", name, err)
	}
	return out.String(), 0
}

// chunkArgs are the -c variants every comparison runs.
var chunkArgs = [][]string{nil, {"-c", "64"}, {"-c", "4096"}, {"-c", "0"}}

// e2freefragBigalloc is the report e2freefrag prints for a bigalloc
// image: its scan tests the bitmap at block >> cluster_bits, which the
// bitmap code shifts by cluster_bits again, so block b counts as free when
// the cluster of block b >> cluster_bits is. ext4go reports the real free
// clusters; this reproduces e2freefrag's view from them to check that the
// difference is that and nothing else.
func e2freefragBigalloc(t *testing.T, img string, chunkBytes uint64) string {
	t.Helper()
	fsys, err := ext4go.Open(img, &ext4go.Options{IgnoreChecksums: true, IgnoreJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	in := fsys.Info()
	bits := 0
	for r := in.ClusterSize / in.BlockSize; r > 1; r >>= 1 {
		bits++
	}
	c, err := freefrag.NewCounter(freefrag.Geometry{BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), FreeBlocks: in.FreeBlocks}, chunkBytes)
	if err != nil {
		t.Fatal(err)
	}
	err = fsys.FreeExtents(func(start, length uint64) error {
		s, e := start<<bits, min((start+length)<<bits, in.BlocksCount)
		if s < e {
			c.Add(s, e-s)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r := c.Report()
	r.WriteText(&b, img)
	return b.String()
}

// compareFreefrag runs ext4go freefrag (with extra options) and
// e2freefrag on img with every chunk variant: both must succeed with the
// same report, or both fail. It reports whether they succeeded.
func compareFreefrag(t *testing.T, img string, bigalloc bool, extra ...string) bool {
	t.Helper()
	ok := true
	for _, c := range chunkArgs {
		want, wantCode := runTool(t, "e2freefrag", append(c, img)...)
		code, got, errs := cli("", append(append(append([]string{"freefrag"}, extra...), c...), img)...)
		if code > 1 {
			t.Fatalf("ext4go freefrag %v %s: exit %d: %s", c, img, code, errs)
		}
		if (code == 0) != (wantCode == 0) {
			t.Errorf("freefrag %v %s: ext4go exit %d (%s), e2freefrag exit %d (%s)", c, img, code, strings.TrimSpace(errs), wantCode, strings.TrimSpace(want))
			return false
		}
		if code != 0 {
			ok = false
			continue
		}
		if bigalloc {
			var chunk uint64
			if c != nil {
				fmt.Sscan(c[1], &chunk)
				chunk *= 1024
			}
			if emu := e2freefragBigalloc(t, img, chunk); emu != want {
				t.Errorf("freefrag %v %s: e2freefrag's bigalloc scan is not what we take it for:\n%s\nwant\n%s", c, img, emu, want)
			}
			want = freefragTruth(t, img, chunk)
		}
		if got != want {
			t.Errorf("freefrag %v %s:\n%s\ne2freefrag:\n%s", c, img, got, want)
		}
	}
	return ok
}

// freefragTruth is the report of the free clusters as they are (what
// ext4go prints on bigalloc).
func freefragTruth(t *testing.T, img string, chunkBytes uint64) string {
	fsys, err := ext4go.Open(img, &ext4go.Options{IgnoreChecksums: true, IgnoreJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	in := fsys.Info()
	c, _ := freefrag.NewCounter(freefrag.Geometry{BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), FreeBlocks: in.FreeBlocks}, chunkBytes)
	var sum uint64
	fsys.FreeExtents(func(s, l uint64) error { c.Add(s, l); sum += l; return nil })
	if sum != in.FreeBlocks {
		t.Errorf("%s: free extents hold %d blocks, the superblock counts %d", img, sum, in.FreeBlocks)
	}
	var b strings.Builder
	r := c.Report()
	r.WriteText(&b, img)
	return b.String()
}

var (
	fsckFragFiles = regexp.MustCompile(`(\d+) non-contiguous files? \((\d+\.\d)%\)`)
	fsckFragDirs  = regexp.MustCompile(`(\d+) non-contiguous director(?:y|ies) \((\d+\.\d)%\)`)
)

// compareFragSummary checks frag's counts of non-contiguous files and
// directories (and their percentages) against e2fsck -fnv's.
func compareFragSummary(t *testing.T, img string, extra ...string) {
	t.Helper()
	fsck, _ := runTool(t, "e2fsck", "-fnv", img)
	out := mustCLI(t, append(append([]string{"frag"}, extra...), img)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sum := lines[len(lines)-1]
	t.Logf("%s: %s", filepath.Base(img), sum)
	for _, re := range []*regexp.Regexp{fsckFragFiles, fsckFragDirs} {
		w, g := re.FindStringSubmatch(fsck), re.FindStringSubmatch(sum)
		if w == nil || g == nil || w[1] != g[1] || w[2] != g[2] {
			t.Errorf("%s: frag summary %q, e2fsck -fnv %q", img, sum, w)
		}
	}
}

// geometries are the mke2fs layouts the comparisons run on.
var geometries = []struct {
	name string
	size int64
	args []string
}{
	{"1k", 64 << 20, []string{"-t", "ext4", "-b", "1024"}},
	{"1k-noflex", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-O", "^flex_bg"}},
	{"4k", 300 << 20, []string{"-t", "ext4", "-b", "4096"}},
	{"4k-noflex", 300 << 20, []string{"-t", "ext4", "-b", "4096", "-O", "^flex_bg"}},
	{"4k-64bit-metabg", 300 << 20, []string{"-t", "ext4", "-O", "64bit,meta_bg,^resize_inode"}},
	{"2k-gdtcsum", 100 << 20, []string{"-t", "ext4", "-b", "2048", "-O", "^metadata_csum,uninit_bg"}},
	{"1k-ext2", 32 << 20, []string{"-t", "ext2", "-b", "1024"}},
	{"ext3", 64 << 20, []string{"-t", "ext3"}},
	{"bigalloc", 300 << 20, []string{"-t", "ext4", "-O", "bigalloc", "-C", "16384"}},
}

func TestFreefragMatchesE2freefrag(t *testing.T) {
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			testutil.Mke2fs(t, img, g.size, g.args...)
			compareFreefrag(t, img, g.name == "bigalloc")
			compareFragSummary(t, img)
			if g.name == "4k" {
				failCLI(t, []string{"chunksize must be greater"}, "freefrag", "-c", "0x2", img)
			}
			testutil.RequireFsckClean(t, img)
		})
	}
}

// TestFreefragAgedImage ages images through the library (files of random
// sizes written in interleaved pieces, some deleted) and compares the
// free-space report with e2freefrag's and the frag summary with e2fsck's.
func TestFreefragAgedImage(t *testing.T) {
	aged := append(geometries[:4:4], geometries[6], geometries[7]) // ext4 layouts, and ext2/ext3's indirect block maps
	for _, g := range aged {
		t.Run(g.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			testutil.Mke2fs(t, img, g.size, g.args...)
			ageImage(t, img, int64(len(g.name)))
			testutil.RequireFsckClean(t, img)
			compareFreefrag(t, img, false)
			compareFragSummary(t, img)
			// A subtree: the percentages divide by what was seen.
			out := mustCLI(t, "frag", img, "/d1")
			if !strings.Contains(out, "non-contiguous files") {
				t.Errorf("frag /d1: %s", out)
			}
		})
	}
}

// ageImage fills img with files written a piece at a time, several at
// once (so their blocks interleave), and deletes some of them.
func ageImage(t *testing.T, img string, seed int64) {
	t.Helper()
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 12))
	bs := fsys.BlockSize()
	var names []string
	for round := 0; round < 6; round++ {
		dir := fmt.Sprintf("d%d", round%3)
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var files []*ext4go.File
		for i := 0; i < 8; i++ {
			name := path.Join(dir, fmt.Sprintf("f%d-%d", round, i))
			f, err := fsys.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			names = append(names, name)
		}
		for piece := 0; piece < 12; piece++ {
			for _, f := range files {
				n := bs * (1 + rng.IntN(24))
				if rng.IntN(5) == 0 {
					n += rng.IntN(bs) // a partial last block
				}
				if _, err := f.Write(make([]byte, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, f := range files {
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// Delete about a third of everything so far.
		for i := 0; i < len(names); i++ {
			if rng.IntN(3) == 0 {
				if err := fsys.Remove(names[i]); err != nil {
					t.Fatal(err)
				}
				names = append(names[:i], names[i+1:]...)
				i--
			}
		}
	}
	// Files written whole, mostly contiguous: with block maps their
	// indirect blocks sit between data blocks, which e2fsck visits in
	// that order.
	for i := 0; i < 6; i++ {
		if err := fsys.WriteFile(fmt.Sprintf("whole%d", i), make([]byte, bs*(13+i*97)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
}

// freefragExceptions are the clean shared images ext4go refuses, with
// why. e2freefrag refuses the first two as well.
var freefragExceptions = map[string]string{
	"f_first_meta_bg_too_big": "superblock: s_first_meta_bg past the descriptor blocks (e2freefrag: superblock corrupt)",
	"f_zero_inode_size":       "superblock: inode size 0 (e2freefrag: superblock corrupt)",
	"f_ea_inode_dir_ref":      "frag: a directory entry names an EA inode; ext4go refuses the walk",
	"f_extent_too_deep":       "frag: an extent tree deeper than 5 levels; ext4go refuses it",
}

// TestFreefragSharedImages compares freefrag with e2freefrag, and frag's
// summary with e2fsck's, on every clean e2fsprogs image; the others (all
// of them without -short) must give a report or an error, no panic.
// ext4go is run with --force --ignore-journal for the comparison because
// e2freefrag neither checks descriptor checksums nor replays journals.
func TestFreefragSharedImages(t *testing.T) {
	for _, im := range testutil.SharedImages(t) {
		if im.FsckExit != 0 && testing.Short() {
			continue
		}
		t.Run(im.Name, func(t *testing.T) {
			img := im.Decompress(t)
			for _, opts := range [][]string{nil, {"--force", "--ignore-journal"}} {
				for _, cmd := range []string{"freefrag", "frag"} {
					if code, _, errs := cli("", append(append([]string{cmd}, opts...), img)...); code > 1 || (code == 1 && errs == "") {
						t.Errorf("%s %v: exit %d: %q", cmd, opts, code, errs)
					}
				}
			}
			if im.FsckExit != 0 {
				return
			}
			ok := compareFreefrag(t, img, im.HasFeature("bigalloc"), "--force", "--ignore-journal")
			if why, known := freefragExceptions[im.Name]; known {
				t.Logf("known: %s", why)
				return
			}
			if !ok {
				t.Fatal("both refused the image")
			}
			compareFragSummary(t, img, "--force", "--ignore-journal")
		})
	}
}

func TestFreefragJSON(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	testutil.Mke2fs(t, img, 64<<20, "-t", "ext4", "-b", "1024")
	ageImage(t, img, 3)
	testutil.RequireFsckClean(t, img)
	var r struct {
		BlockSize   uint32   `json:"block_size"`
		TotalBlocks uint64   `json:"total_blocks"`
		FreeBlocks  uint64   `json:"free_blocks"`
		FreeExtents uint64   `json:"free_extents"`
		ExtentBlks  uint64   `json:"extent_blocks"`
		MaxKB       uint64   `json:"max_extent_kb"`
		FreePercent *float64 `json:"free_percent"`
		Chunk       struct {
			Bytes, Blocks, Total, Free uint64
		} `json:"chunk"`
		Histogram []struct {
			MinBytes uint64 `json:"min_bytes"`
			MaxBytes uint64 `json:"max_bytes"`
			Extents  uint64 `json:"extents"`
			Blocks   uint64 `json:"blocks"`
		} `json:"histogram"`
	}
	out := mustCLI(t, "freefrag", "-json", "-c", "256", img)
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	text, _ := runTool(t, "e2freefrag", "-c", "256", img)
	for _, want := range []string{
		fmt.Sprintf("Total blocks: %d\n", r.TotalBlocks),
		fmt.Sprintf("Free blocks: %d (%.1f%%)\n", r.FreeBlocks, *r.FreePercent),
		fmt.Sprintf("Num. free extent: %d\n", r.FreeExtents),
		fmt.Sprintf("Max. free extent: %d KB\n", r.MaxKB),
		fmt.Sprintf("Chunksize: %d bytes (%d blocks)\nTotal chunks: %d\nFree chunks: %d ", r.Chunk.Bytes, r.Chunk.Blocks, r.Chunk.Total, r.Chunk.Free),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("e2freefrag lacks %q (from the JSON):\n%s", want, text)
		}
	}
	var blocks, extents uint64
	for _, h := range r.Histogram {
		blocks += h.Blocks
		extents += h.Extents
		if h.MaxBytes != 0 && h.MaxBytes != 2*h.MinBytes {
			t.Errorf("bucket %+v", h)
		}
	}
	if blocks != r.ExtentBlks || extents != r.FreeExtents || r.ExtentBlks != r.FreeBlocks {
		t.Errorf("histogram %d blocks in %d extents; report %d in %d, superblock %d free", blocks, extents, r.ExtentBlks, r.FreeExtents, r.FreeBlocks)
	}

	var fr struct {
		Files []struct {
			Path    string `json:"path"`
			Extents int    `json:"extents"`
		} `json:"files"`
		Summary map[string]any `json:"summary"`
	}
	out = mustCLI(t, "frag", "--json", img)
	if err := json.Unmarshal([]byte(out), &fr); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(fr.Files) < 10 || fr.Summary["files"].(float64) < 5 {
		t.Fatalf("frag --json: %s", out)
	}
	fsck, _ := runTool(t, "e2fsck", "-fnv", img)
	if w := fsckFragFiles.FindStringSubmatch(fsck); w == nil || w[2] != fmt.Sprint(fr.Summary["non_contiguous_files_percent"]) && w[2] != fmt.Sprintf("%.1f", fr.Summary["non_contiguous_files_percent"]) {
		t.Errorf("frag --json %v, e2fsck %q", fr.Summary, w)
	}
	failCLI(t, []string{"power of 2"}, "freefrag", "-c", "3", img)
	failCLI(t, []string{"bad chunk size"}, "freefrag", "-c", "x", img)
}

// TestFreefragBadBitmap: a block bitmap whose checksum is wrong is refused
// with the group named (e2freefrag refuses it too); --force reads it.
func TestFreefragBadBitmap(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	testutil.Mke2fs(t, img, 64<<20, "-t", "ext4", "-b", "1024", "-O", "^flex_bg")
	fsys := openRO(t, img)
	groups, err := fsys.BlockGroups()
	if err != nil {
		t.Fatal(err)
	}
	// The last group not BLOCK_UNINIT: its bitmap is on disk.
	var bitmap uint64
	g := 0
	for i, bg := range groups {
		if i > 0 && bg.Flags&ext4go.GroupBlockUninit == 0 {
			g = i
		}
	}
	for _, r := range groups[g].Metadata {
		if r.Kind == ext4go.KindBlockBitmap && r.Owner == uint32(g) {
			bitmap = r.Start
		}
	}
	if g == 0 || bitmap == 0 {
		t.Fatalf("no initialised group with its bitmap in it: %+v", groups)
	}
	fsys.Close()
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	old := make([]byte, 1)
	f.ReadAt(old, int64(bitmap)*1024+700)
	f.WriteAt([]byte{old[0] ^ 0x10}, int64(bitmap)*1024+700)
	failCLI(t, []string{fmt.Sprintf("block bitmap of group %d", g), "checksum"}, "freefrag", img)
	if _, code := runTool(t, "e2freefrag", img); code == 0 {
		t.Error("e2freefrag read the bad bitmap")
	}
	mustCLI(t, "freefrag", "--force", img)
	f.WriteAt(old, int64(bitmap)*1024+700)
	f.Close()
	testutil.RequireFsckClean(t, img)
}
