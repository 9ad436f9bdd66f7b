package main

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/fsmap"
	"github.com/ext4go/ext4go/internal/fsmap/fsmaptest"
	"github.com/ext4go/ext4go/internal/testutil"
)

// The map's classes by what a block holds, as the picture names them.
const (
	truthUsed = -2 // data or anything else allocated
	truthFree = -1
)

var kindClass = map[int]string{
	int(fsmap.KindSuper): "sb", int(fsmap.KindReservedGDT): "rg", int(fsmap.KindBitmap): "bm",
	int(fsmap.KindInodeTable): "it", int(fsmap.KindJournal): "jn",
}

// stripOrder is the kind a strip's pixel shows when it holds several.
var stripOrder = []int{int(fsmap.KindSuper), int(fsmap.KindBitmap), int(fsmap.KindReservedGDT), int(fsmap.KindInodeTable), int(fsmap.KindJournal)}

// blockRange is blocks [start, end) holding one thing.
type blockRange struct {
	start, end uint64
	what       int // truthFree or a fsmap.Kind
}

// e2fsprogsTruth is what e2fsprogs says of an image's blocks: dumpe2fs's
// metadata and free blocks per group, debugfs's journal extents.
type e2fsprogsTruth struct {
	ranges  []blockRange
	groups  []blockRange // each group's blocks
	cluster uint64       // blocks a cluster
}

var (
	dumpGroup  = regexp.MustCompile(`^Group (\d+): \(Blocks (\d+)-(\d+)\)`)
	dumpSuper  = regexp.MustCompile(`superblock at (\d+)`)
	dumpDesc   = regexp.MustCompile(`Group descriptors? at (\d+)(?:-(\d+))?`) // one with meta_bg
	dumpRGDT   = regexp.MustCompile(`Reserved GDT blocks at (\d+)-(\d+)`)
	dumpBitmap = regexp.MustCompile(`(?:Block|Inode) bitmap at (\d+)`)
	dumpITable = regexp.MustCompile(`Inode table at (\d+)-(\d+)`)
	// debugfs stat's extents and block maps: "(0-9):100-109", "(ETB0):99",
	// "(IND):120".
	statExtent = regexp.MustCompile(`\((ETB\d+|IND|DIND|TIND|\d+(?:-\d+)?)\):(\d+)(?:-(\d+))?`)
)

func atou(s string) uint64 {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return v
}

func readTruth(t *testing.T, img string) *e2fsprogsTruth {
	t.Helper()
	tr := &e2fsprogsTruth{}
	dump := testutil.Dumpe2fs(t, img)
	// With bigalloc dumpe2fs names a free range by the first blocks of
	// its first and last clusters.
	cluster := uint64(1)
	if m := regexp.MustCompile(`(?m)^Cluster size: +(\d+)`).FindStringSubmatch(dump); m != nil {
		bs := regexp.MustCompile(`(?m)^Block size: +(\d+)`).FindStringSubmatch(dump)
		cluster = atou(m[1]) / atou(bs[1])
	}
	tr.cluster = cluster
	add := func(what int, a, b string) { // b inclusive, "" for one block
		s := atou(a)
		e := s + 1
		if b != "" {
			e = atou(b) + 1
		}
		if what == truthFree {
			e = (e + cluster - 1) / cluster * cluster
		}
		tr.ranges = append(tr.ranges, blockRange{s, e, what})
	}
	inFree := false
	for _, line := range strings.Split(dump, "\n") {
		if m := dumpGroup.FindStringSubmatch(line); m != nil {
			inFree = false
			tr.groups = append(tr.groups, blockRange{atou(m[2]), atou(m[3]) + 1, 0})
			continue
		}
		for _, m := range dumpSuper.FindAllStringSubmatch(line, -1) {
			add(int(fsmap.KindSuper), m[1], "")
		}
		for _, m := range dumpDesc.FindAllStringSubmatch(line, -1) {
			add(int(fsmap.KindSuper), m[1], m[2])
		}
		for _, m := range dumpRGDT.FindAllStringSubmatch(line, -1) {
			add(int(fsmap.KindReservedGDT), m[1], m[2])
		}
		for _, m := range dumpBitmap.FindAllStringSubmatch(line, -1) {
			add(int(fsmap.KindBitmap), m[1], "")
		}
		for _, m := range dumpITable.FindAllStringSubmatch(line, -1) {
			add(int(fsmap.KindInodeTable), m[1], m[2])
		}
		// Long lists of free blocks go on over indented lines until
		// the free inodes.
		l := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(l, "Free blocks:"); ok && len(tr.groups) > 0 { // not the superblock's count
			inFree, l = true, rest
		} else if strings.HasPrefix(l, "Free inodes:") {
			inFree = false
		}
		if inFree {
			for _, r := range strings.Split(l, ",") {
				if r = strings.TrimSpace(r); r != "" {
					a, b, _ := strings.Cut(r, "-")
					add(truthFree, a, b)
				}
			}
		}
	}
	for _, x := range statExtents(t, img, "<8>", true) {
		tr.ranges = append(tr.ranges, blockRange{x.start, x.end, int(fsmap.KindJournal)})
	}
	return tr
}

// statExtents returns the blocks debugfs's stat lists for a file, with
// or without the extent tree's own blocks.
func statExtents(t *testing.T, img, file string, treeBlocks bool) []blockRange {
	t.Helper()
	out := testutil.Debugfs(t, img, "stat "+file)
	_, ext, ok := strings.Cut(out, "EXTENTS:\n")
	if !ok {
		if _, ext, ok = strings.Cut(out, "BLOCKS:\n"); !ok {
			return nil
		}
	}
	var rs []blockRange
	for _, m := range statExtent.FindAllStringSubmatch(ext, -1) {
		if m[1][0] < '0' || m[1][0] > '9' && !treeBlocks {
			continue
		}
		s, e := atou(m[2]), atou(m[2])+1
		if m[3] != "" {
			e = atou(m[3]) + 1
		}
		rs = append(rs, blockRange{s, e, 0})
	}
	return rs
}

// binTruth is what e2fsprogs says a rectangle of the map holds.
type binTruth struct {
	blocks, free, highlight uint64
	meta                    map[int]uint64
	freePieces              uint64
}

func (b *binTruth) metaBlocks() uint64 {
	var n uint64
	for _, v := range b.meta {
		n += v
	}
	return n
}

// usedClassOf is the fill for a used fraction, the legend's rule.
func usedClassOf(blocks, free uint64) string {
	free = min(free, blocks)
	switch {
	case free == blocks:
		return "u0"
	case free == 0:
		return "u5"
	}
	return fmt.Sprintf("u%d", ((blocks-free)*4+blocks-1)/blocks)
}

// wantClass is the fill the legend promises for a rectangle.
func (b *binTruth) wantClass(strip bool) string {
	meta := b.metaBlocks()
	if strip && meta > 0 {
		for _, k := range stripOrder {
			if b.meta[k] > 0 {
				return kindClass[k]
			}
		}
	}
	if !strip && meta > 0 && meta*2 >= b.blocks {
		return kindClass[b.mainKind()]
	}
	return usedClassOf(b.blocks-min(meta, b.blocks), b.free)
}

// mainKind is the kind of most blocks, the first in Kind order of
// equals.
func (b *binTruth) mainKind() int {
	best := 0
	for k := range int(fsmap.KindJournal) + 1 {
		if b.meta[k] > b.meta[best] {
			best = k
		}
	}
	return best
}

// wantBand is the class of a cell's top band: metadata of at least a
// 32nd of it, less than half.
func (b *binTruth) wantBand() string {
	if meta := b.metaBlocks(); meta > 0 && meta*32 >= b.blocks && meta*2 < b.blocks {
		return kindClass[b.mainKind()]
	}
	return ""
}

// wantMark is the class of a cell's mark: its free blocks' mean extent
// (the part of each free extent in it) below 64 KiB, 1 MiB, 16 MiB,
// each limit at most half a group.
func (b *binTruth) wantMark(blockSize, blocksPerGroup uint64) string {
	if b.free == 0 {
		return ""
	}
	mean := b.free * blockSize / b.freePieces
	for i, lim := range []uint64{64 << 10, 1 << 20, 16 << 20} {
		if mean < min(lim, blocksPerGroup*blockSize/2) {
			return fmt.Sprintf("m%d", 3-i)
		}
	}
	return ""
}

// expectedBins spreads e2fsprogs's view of the image, and the
// highlighted ranges, over the map's rectangles (as Locate places each
// group's blocks). Where a rectangle holds whole groups (cells), it is
// reckoned a group at a time.
func expectedBins(t *testing.T, m *fsmap.Map, tr *e2fsprogsTruth, highlight []blockRange, strip bool) map[fsmap.Rect]*binTruth {
	t.Helper()
	bins := map[fsmap.Rect]*binTruth{}
	at := func(b uint64) *binTruth {
		r, ok := m.Locate(b)
		if !ok {
			t.Fatalf("block %d not on the map", b)
		}
		bt := bins[r]
		if bt == nil {
			bt = &binTruth{meta: map[int]uint64{}}
			bins[r] = bt
		}
		return bt
	}
	// spread calls fn with each part of [s, e) in one rectangle: a block
	// at a time in strips, a group at a time in cells.
	spread := func(s, e uint64, fn func(bt *binTruth, n uint64)) {
		for s < e {
			next := s + 1
			if !strip {
				g, _ := slices.BinarySearchFunc(tr.groups, s, func(g blockRange, b uint64) int { return cmp.Compare(g.end-1, b) })
				next = min(e, tr.groups[g].end)
			}
			fn(at(s), next-s)
			s = next
		}
	}
	for _, g := range tr.groups {
		spread(g.start, g.end, func(bt *binTruth, n uint64) { bt.blocks += n })
	}
	// Free extents as the bitmaps have them: runs merged across groups.
	var free []blockRange
	for _, r := range tr.ranges {
		switch {
		case r.what != truthFree:
			spread(r.start, r.end, func(bt *binTruth, n uint64) { bt.meta[r.what] += n })
		case len(free) > 0 && free[len(free)-1].end == r.start:
			free[len(free)-1].end = r.end
		default:
			free = append(free, r)
		}
	}
	for _, r := range free {
		var last *binTruth // an extent counts once in a rectangle of many groups
		spread(r.start, r.end, func(bt *binTruth, n uint64) {
			bt.free += n
			if bt != last {
				bt.freePieces++
			}
			last = bt
		})
	}
	for _, r := range highlight {
		spread(r.start, r.end, func(bt *binTruth, n uint64) { bt.highlight += n })
	}
	return bins
}

// checkMap runs ext4go map on img (with PATH when highlight is not nil)
// and compares every rectangle of the picture, and of its rendering,
// with what e2fsprogs says. It returns the SVG's size.
func checkMap(t *testing.T, img, path string, highlight []blockRange) int {
	t.Helper()
	out := filepath.Join(t.TempDir(), "map.svg")
	args := []string{"map", img, "-o", out}
	if path != "" {
		args = append(args, path)
	}
	mustCLI(t, args...)
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fsmaptest.Parse(svg)
	if err != nil {
		t.Fatalf("the SVG does not parse: %v", err)
	}
	fsys := openRO(t, img)
	in := fsys.Info()
	m, err := fsmap.New(fsmap.Geometry{BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), BlocksPerGroup: in.BlocksPerGroup})
	if err != nil {
		t.Fatal(err)
	}
	strip := in.Groups <= fsmap.StripGroups
	tr := readTruth(t, img)
	if len(tr.groups) != int(in.Groups) {
		t.Fatalf("dumpe2fs lists %d groups, ext4go %d", len(tr.groups), in.Groups)
	}
	bins := expectedBins(t, m, tr, highlight, strip)
	// The rendering, sampled inside each rectangle clear of bands, marks
	// and grid lines.
	png := fsmaptest.Render(t, out)
	if b := png.Bounds(); b.Dx() != p.Width || b.Dy() != p.Height {
		t.Fatalf("PNG %v, SVG %dx%d", b, p.Width, p.Height)
	}
	dimmed := path != ""
	bad := 0
	for r, bt := range bins {
		x, y := r.X+r.W/2, r.Y+r.H/2
		if !strip {
			x, y = r.X+1, r.Y+r.H-3
		}
		classes := p.ClassesAt("map", x, y)
		want := bt.wantClass(strip)
		if len(classes) == 0 || classes[0] != want {
			t.Errorf("rectangle %v: %+v drawn %v, want %s", r, *bt, classes, want)
			bad++
		}
		gotHL := p.Top("highlight", x, y) == "hl"
		if gotHL != (bt.highlight > 0) {
			t.Errorf("rectangle %v: %d blocks highlighted, drawn highlighted: %v", r, bt.highlight, gotHL)
			bad++
		}
		if !strip {
			// The band along the top, the mark in the middle.
			top := p.Top("map", r.X+1, r.Y+1)
			if band := bt.wantBand(); top != band && !(band == "" && top == want) {
				t.Errorf("rectangle %v: %+v has the band %q, want %q", r, *bt, top, band)
				bad++
			}
			mid := p.Top("map", r.X+r.W/2, r.Y+r.H/2)
			if mark := bt.wantMark(uint64(in.BlockSize), uint64(in.BlocksPerGroup)); mid != mark && !(mark == "" && mid == want) {
				t.Errorf("rectangle %v: %+v has the mark %q, want %q", r, *bt, mid, mark)
				bad++
			}
		}
		c := p.Colours[want]
		switch {
		case gotHL:
			c = p.Colours["hl"]
		case dimmed:
			c = fsmaptest.Dimmed(c)
		}
		if px := png.At(x, y); !fsmaptest.Near(px, c, 3) {
			t.Errorf("rectangle %v (%s): rendered %v, want %v", r, want, px, c)
			bad++
		}
		if bad > 20 {
			t.Fatal("too many differences")
		}
	}
	t.Logf("%s: %d rectangles as e2fsprogs says, rendered too", filepath.Base(img), len(bins))
	// The figures: free extents as e2freefrag counts them (not with
	// bigalloc, where its scan is off: see e2freefragBigalloc).
	text := strings.Join(p.Texts, "\n")
	if tr.cluster == 1 {
		ff, _ := runTool(t, "e2freefrag", img)
		if m := regexp.MustCompile(`Num\. free extent: (\d+)`).FindStringSubmatch(ff); m == nil || !strings.Contains(text, " in "+m[1]+" extent") {
			t.Errorf("the picture's free extents are not e2freefrag's %v:\n%s", m, text)
		}
	}
	for _, want := range []string{img, fmt.Sprintf("%d group", in.Groups)} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture does not say %q:\n%s", want, text)
		}
	}
	if path != "" {
		var blocks uint64
		for _, r := range highlight {
			blocks += r.end - r.start
		}
		if want := fmt.Sprintf("highlighted: %s: ", path); !strings.Contains(text, want) || !strings.Contains(text, fmt.Sprintf(" %d blocks", blocks)) {
			t.Errorf("the picture does not say %q and %d blocks:\n%s", want, blocks, text)
		}
	}
	return len(svg)
}

// TestMapSmall: 8 groups, aged by the library, then files written at
// places e2fsprogs tells: every pixel of every strip shows what dumpe2fs
// says of its blocks, also rendered, and PATH highlights exactly the
// pixels of the tree's blocks.
func TestMapSmall(t *testing.T) {
	img := filepath.Join(t.TempDir(), "small.img")
	testutil.Mke2fs(t, img, 64<<20, "-t", "ext4", "-b", "1024")
	ageImage(t, img, 7)
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll("hl/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, size := range map[string]int{"hl/a": 300 << 10, "hl/sub/b": 2 << 20, "other": 1 << 20} {
		if err := fsys.WriteFile(name, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Link("hl/a", "hl/a2"); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
	size := checkMap(t, img, "", nil)
	t.Logf("8 groups: %d bytes", size)
	if size > 100<<10 {
		t.Errorf("%d bytes for 8 groups", size)
	}
	var hl []blockRange
	for _, f := range []string{"/hl", "/hl/a", "/hl/sub", "/hl/sub/b"} {
		hl = append(hl, statExtents(t, img, f, false)...)
	}
	checkMap(t, img, "/hl", hl)
	checkMap(t, img, "/hl/sub/b", statExtents(t, img, "/hl/sub/b", false))
}

// TestMapLarge: 1,000 groups (a group a cell) aged, and 30,720 (8 groups
// a cell): every cell shows what dumpe2fs says, the SVG stays small.
func TestMapLarge(t *testing.T) {
	for _, c := range []struct {
		name   string
		size   int64
		args   []string
		age    bool
		maxLen int
	}{
		{"1000", 1000 * 8 << 20, []string{"-t", "ext4", "-b", "1024", "-N", "64000", "-E", "lazy_itable_init=1"}, true, 300 << 10},
		{"30720", 30720 * 8 << 20, []string{"-t", "ext4", "-b", "1024", "-N", "61440", "-E", "lazy_itable_init=1"}, false, 2 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "large.img")
			testutil.Mke2fs(t, img, c.size, c.args...)
			if c.age {
				ageImage(t, img, 11)
			}
			scatterFiles(t, img, 200, 12)
			size := checkMap(t, img, "", nil)
			t.Logf("%s groups: %d bytes", c.name, size)
			if c.age {
				checkMap(t, img, "/s5/f0", statExtents(t, img, "/s5/f0", false))
			}
			if size > c.maxLen {
				t.Errorf("%d bytes, want at most %d", size, c.maxLen)
			}
		})
	}
}

// scatterFiles writes files of random sizes into dirs top-level
// directories, which the Orlov allocator spreads over the groups, and
// deletes every third file, so many cells differ.
func scatterFiles(t *testing.T, img string, dirs int, seed uint64) {
	t.Helper()
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	for d := range dirs {
		dir := fmt.Sprintf("s%d", d)
		if err := fsys.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range 6 {
			name := fmt.Sprintf("%s/f%d", dir, f)
			if err := fsys.WriteFile(name, make([]byte, rng.IntN(192<<10)), 0o644); err != nil {
				t.Fatal(err)
			}
			if f%3 == 1 {
				if err := fsys.Remove(name); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMapSharedImages: every shared image, clean or corrupt, gives a
// picture that parses or a message; never a panic.
func TestMapSharedImages(t *testing.T) {
	for _, im := range testutil.SharedImages(t) {
		if im.FsckExit != 0 && testing.Short() {
			continue
		}
		t.Run(im.Name, func(t *testing.T) {
			img := im.Decompress(t)
			out := filepath.Join(t.TempDir(), "map.svg")
			for _, opts := range [][]string{nil, {"--force", "--ignore-journal"}, {"--force", "--ignore-journal", "/"}} {
				os.Remove(out)
				code, _, errs := cli("", append(append([]string{"map", "-o", out}, opts...), img)...)
				if code > 1 || (code == 1 && errs == "") {
					t.Fatalf("map %v: exit %d: %q", opts, code, errs)
				}
				if code == 1 {
					if _, err := os.Stat(out); err == nil {
						t.Errorf("map %v failed (%s) but wrote %s", opts, strings.TrimSpace(errs), out)
					}
					continue
				}
				svg, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fsmaptest.Parse(svg); err != nil {
					t.Errorf("map %v: %v", opts, err)
				}
			}
		})
	}
}

// TestMapUsage: the operands and -o are checked; PNG is pointed to
// rsvg-convert; a missing PATH is named.
func TestMapUsage(t *testing.T) {
	img := filepath.Join(t.TempDir(), "fs.img")
	testutil.Mke2fs(t, img, 16<<20, "-t", "ext4")
	failCLI(t, []string{"missing -o FILE.svg", "usage: ext4go map"}, "map", img)
	failCLI(t, []string{"not PNG", "rsvg-convert x.svg -o x.png"}, "map", "-o", "x.png", img)
	failCLI(t, []string{"missing operand"}, "map", "-o", "x.svg")
	failCLI(t, []string{"extra operand 'c'"}, "map", "-o", "x.svg", img, "/", "c")
	failCLI(t, []string{"/nope: file does not exist"}, "map", "-o", filepath.Join(t.TempDir(), "x.svg"), img, "/nope")
	failCLI(t, []string{"no such file"}, "map", "-o", "x.svg", filepath.Join(t.TempDir(), "none.img"))
	failCLI(t, []string{"is the image itself"}, "map", "-o", img, img)
	failCLI(t, []string{"is a directory"}, "map", "-o", t.TempDir(), img)
	if fi, err := os.Stat("/dev/loop0"); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		failCLI(t, []string{"is a block device"}, "map", "-o", "/dev/loop0", img)
	}
	out := mustCLI(t, "map", "-o", "-", img, "/lost+found")
	if _, err := fsmaptest.Parse([]byte(out)); err != nil || !strings.Contains(out, "highlighted: /lost+found: ") {
		t.Errorf("map -o -: %v\n%.500s", err, out)
	}
}

// TestMapGeometries: the layouts of mke2fs's options, each pixel as
// dumpe2fs says.
func TestMapGeometries(t *testing.T) {
	for _, g := range geometries {
		t.Run(g.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			testutil.Mke2fs(t, img, g.size, g.args...)
			if g.name != "bigalloc" { // ext4go does not write it
				ageImage(t, img, 5)
			}
			checkMap(t, img, "", nil)
		})
	}
}
