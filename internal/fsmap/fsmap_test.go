package fsmap_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fsmap"
	"github.com/ext4go/ext4go/internal/fsmap/fsmaptest"
)

// render writes m's picture and parses it back.
func render(t *testing.T, m *fsmap.Map, l fsmap.Labels) ([]byte, *fsmaptest.Picture) {
	t.Helper()
	var b bytes.Buffer
	if err := m.WriteSVG(&b, l); err != nil {
		t.Fatal(err)
	}
	p, err := fsmaptest.Parse(b.Bytes())
	if err != nil {
		t.Fatalf("the SVG does not parse: %v\n%.2000s", err, b.Bytes())
	}
	return b.Bytes(), p
}

// classAt returns the class the map layer draws over block b.
func classAt(t *testing.T, m *fsmap.Map, p *fsmaptest.Picture, layer string, b uint64) string {
	t.Helper()
	r, ok := m.Locate(b)
	if !ok {
		t.Fatalf("block %d not located", b)
	}
	return p.Top(layer, r.X+r.W/2, r.Y+r.H/2)
}

func TestGeometryErrors(t *testing.T) {
	for _, g := range []fsmap.Geometry{
		{BlockSize: 1000, BlocksCount: 100, BlocksPerGroup: 8},
		{BlockSize: 1024, BlocksCount: 100},
		{BlockSize: 4096, BlocksCount: 1, FirstDataBlock: 1, BlocksPerGroup: 8},
		{BlockSize: 4096, BlocksCount: 1 << 62, BlocksPerGroup: 8},
	} {
		_, err := fsmap.New(g)
		var ge *fsmap.GeometryError
		if !errors.As(err, &ge) {
			t.Errorf("New(%+v): %v, want a GeometryError", g, err)
		}
	}
}

// smallGeometry is 8 groups of 8192 1 KiB blocks, as mke2fs makes a
// 64 MiB filesystem with -b 1024.
var smallGeometry = fsmap.Geometry{BlockSize: 1024, BlocksCount: 65536, FirstDataBlock: 1, BlocksPerGroup: 8192}

// TestStripMap: a few groups are strips; metadata, used and free blocks
// and the highlight are drawn where they are.
func TestStripMap(t *testing.T) {
	m, err := fsmap.New(smallGeometry)
	if err != nil {
		t.Fatal(err)
	}
	m.AddMetadata(fsmap.KindSuper, 1, 2)
	m.AddMetadata(fsmap.KindReservedGDT, 3, 256)
	m.AddMetadata(fsmap.KindBitmap, 259, 2)
	m.AddMetadata(fsmap.KindInodeTable, 261, 256)
	m.AddMetadata(fsmap.KindJournal, 24577, 4096) // group 3's first half
	m.AddFree(10000, 10000)                       // groups 1 and 2
	m.AddFree(40000, 100)                         // group 4
	m.AddFree(65000, 1000)                        // the end, cut at 65536
	m.AddHighlight(50000, 64)
	m.AddHighlight(60000, 1)
	svg, p := render(t, m, fsmap.Labels{Image: "small.img", Highlight: "/d"})
	for b, want := range map[uint64]string{
		1: "sb", 2: "sb", 100: "rg", 259: "bm", 260: "bm", 300: "it", 516: "it",
		600: "u5", 9999 - 8: "u5", 10000 + 8: "u0", 15000: "u0", 19990: "u0", 20010: "u5",
		24577: "jn", 26000: "jn", 28670: "jn", 28690: "u5", 40050: "u0", 40200: "u5",
		64000: "u5", 65500: "u0",
	} {
		if got := classAt(t, m, p, "map", b); got != want {
			t.Errorf("block %d: class %q, want %q", b, got, want)
		}
	}
	// A bin of 8 blocks partly free is shaded by its used fraction.
	if got := classAt(t, m, p, "map", 40100); got == "u0" || got == "u5" || !strings.HasPrefix(got, "u") {
		t.Errorf("block 40100 (a bin partly free): %q", got)
	}
	for b, want := range map[uint64]string{50000: "hl", 50063: "hl", 60000: "hl", 50100: "", 100: ""} {
		if got := classAt(t, m, p, "highlight", b); got != want {
			t.Errorf("highlight at block %d: %q, want %q", b, got, want)
		}
	}
	st := m.Stats()
	if st.FreeExtents != 3 || st.FreeBlocks != 10000+100+536 || st.LargestFree != 10000 ||
		st.HighlightExtents != 2 || st.HighlightBlocks != 65 || st.HighlightGroups != 2 {
		t.Errorf("stats %+v", st)
	}
	text := strings.Join(p.Texts, "\n")
	for _, want := range []string{
		"small.img", "64 MiB, 1 KiB blocks, 8 groups of 8192 blocks (8 MiB)",
		"free: 10.4 MiB in 3 extents", "largest 9.8 MiB",
		"highlighted: /d: 2 extents, 65 blocks (65 KiB) in 2 groups",
		"group 7", "a pixel up to 8 blocks (8 KiB)", "inode tables", "journal",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture does not say %q:\n%s", want, text)
		}
	}
	// Group 1 holds the first part of the 10000-block extent.
	if !strings.Contains(text, "1 free extent, largest 6.2 MiB") {
		t.Errorf("group 1's figures are not there:\n%s", text)
	}
	if len(svg) > 40<<10 {
		t.Errorf("%d bytes for a small map", len(svg))
	}
	checkRender(t, svg, p, m, map[uint64]string{1: "sb", 300: "it", 15000: "u0", 600: "u5", 26000: "jn"}, true)
}

// checkRender renders the picture with rsvg-convert: the PNG has the
// SVG's size and the colour of the class wanted at each block.
func checkRender(t *testing.T, svg []byte, p *fsmaptest.Picture, m *fsmap.Map, want map[uint64]string, dimmed bool) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "map.svg")
	if err := os.WriteFile(f, svg, 0o644); err != nil {
		t.Fatal(err)
	}
	img := fsmaptest.Render(t, f)
	if b := img.Bounds(); b.Dx() != p.Width || b.Dy() != p.Height {
		t.Fatalf("PNG %v, SVG %dx%d", b, p.Width, p.Height)
	}
	for b, class := range want {
		r, _ := m.Locate(b)
		c, ok := p.Colours[class]
		if !ok {
			t.Fatalf("no colour for class %s", class)
		}
		if dimmed {
			c = fsmaptest.Dimmed(c)
		}
		if px := img.At(r.X+r.W/2, r.Y+r.H/2); !fsmaptest.Near(px, c, 3) {
			t.Errorf("block %d at %v: pixel %v, want %s %v", b, r, px, class, c)
		}
	}
}

// TestGridMap: more groups are cells, a group each up to MaxCells; the
// fill is the used fraction or the metadata filling half the cell, a
// band the metadata of less, a mark the mean free extent.
func TestGridMap(t *testing.T) {
	g := fsmap.Geometry{BlockSize: 1024, BlocksCount: 1 + 1000*8192, FirstDataBlock: 1, BlocksPerGroup: 8192}
	m, err := fsmap.New(g)
	if err != nil {
		t.Fatal(err)
	}
	first := func(group uint64) uint64 { return 1 + group*8192 }
	for gr := uint64(0); gr < 1000; gr++ {
		m.AddMetadata(fsmap.KindBitmap, first(gr), 2)
	}
	m.AddMetadata(fsmap.KindInodeTable, first(1)+2, 512) // 1/16: a band
	m.AddMetadata(fsmap.KindJournal, first(2), 8192)     // the whole group
	m.AddFree(first(3)+2, 8190)                          // all free but the bitmaps
	for i := uint64(0); i < 100; i++ {                   // group 4: 100 free pieces of 4 KiB
		m.AddFree(first(4)+100+i*10, 4)
	}
	m.AddFree(first(5)+100, 1024) // two 1 MiB pieces: mean below 4 MiB, half a group
	m.AddFree(first(5)+4096, 1024)
	m.AddFree(first(6)+2, 4000) // about half used
	svg, p := render(t, m, fsmap.Labels{Image: "grid.img"})
	center := func(gr uint64) uint64 { return first(gr) + 4096 }
	for gr, want := range map[uint64]string{0: "u5", 1: "u5", 2: "jn", 3: "u0", 4: "u4", 5: "u3", 6: "u3", 7: "u5"} {
		r, _ := m.Locate(center(gr))
		got := p.ClassesAt("map", r.X+r.W/2, r.Y+r.H-1) // below the band and the mark
		if len(got) == 0 || got[0] != want {
			t.Errorf("group %d: %v, want %s first", gr, got, want)
		}
	}
	for gr, want := range map[uint64]string{0: "", 1: "it", 3: ""} {
		r, _ := m.Locate(center(gr))
		if got := p.Top("map", r.X+r.W/2, r.Y); got != want && !(want == "" && strings.HasPrefix(got, "u")) {
			t.Errorf("group %d's band: %q, want %q", gr, got, want)
		}
	}
	for gr, want := range map[uint64]string{3: "", 4: "m3", 5: "m1", 6: "m1", 0: ""} {
		r, _ := m.Locate(center(gr))
		got := p.Top("map", r.X+r.W/2, r.Y+r.H/2)
		if strings.HasPrefix(got, "m") != (want != "") || (want != "" && got != want) {
			t.Errorf("group %d's mark: %q, want %q", gr, got, want)
		}
	}
	text := strings.Join(p.Texts, "\n")
	for _, want := range []string{"1000 groups", "a cell 1 group (8 MiB), 64 cells a row", "< 64 KiB", "< 1 MiB", "< 4 MiB", "960"} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture does not say %q:\n%s", want, text)
		}
	}
	if _, ok := p.Layers["highlight"]; ok || strings.Contains(text, "highlighted") {
		t.Error("a highlight drawn without one")
	}
	checkRender(t, svg, p, m, map[uint64]string{first(2) + 10: "jn", first(7) + 4000: "u5", first(3) + 4000: "u0"}, false)
}

// TestGroupsPerCell: past MaxCells groups, adjacent groups share a cell,
// and the picture stays small even when every cell differs from the
// next.
func TestGroupsPerCell(t *testing.T) {
	const groups = 30000
	g := fsmap.Geometry{BlockSize: 4096, BlocksCount: groups*32768 - 1000, BlocksPerGroup: 32768}
	m, err := fsmap.New(g)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for gr := uint64(0); gr < groups; gr++ {
		s := gr * 32768
		m.AddMetadata(fsmap.KindBitmap, s, 2)
		switch rng.IntN(4) {
		case 0:
			m.AddMetadata(fsmap.KindInodeTable, s+2, uint64(rng.IntN(32768)))
		case 1:
			for i := uint64(0); i < 40; i++ {
				m.AddFree(s+100+i*700, uint64(1+rng.IntN(600)))
			}
		case 2:
			m.AddFree(s+2, 32766)
		}
		if rng.IntN(3) == 0 {
			m.AddHighlight(s+50, 10)
		}
	}
	svg, p := render(t, m, fsmap.Labels{Image: "huge.img", Highlight: "/"})
	t.Logf("30000 groups, cells unlike their neighbours: %d bytes, %dx%d", len(svg), p.Width, p.Height)
	if len(svg) > 1<<20 {
		t.Errorf("%d bytes", len(svg))
	}
	if p.Width > 1200 || p.Height > 1200 {
		t.Errorf("%dx%d pixels", p.Width, p.Height)
	}
	text := strings.Join(p.Texts, "\n")
	if !strings.Contains(text, "a cell 8 groups (1 GiB)") {
		t.Errorf("cell size not stated:\n%s", text)
	}
	// The last cell: groups 29992..29999, the last one short.
	r, ok := m.Locate(g.BlocksCount - 1)
	if !ok || r.X != 16+64+(3750-1)%64*12 || r.Y != 108+(3750-1)/64*12 {
		t.Errorf("last block at %v", r)
	}
	if _, ok := m.Locate(g.BlocksCount); ok {
		t.Error("a block past the end located")
	}
	checkRender(t, svg, p, m, map[uint64]string{}, true)
}

// TestHostileInput: names that are not XML, ranges past the end or
// overflowing, kinds out of range: the picture is still XML.
func TestHostileInput(t *testing.T) {
	m, err := fsmap.New(smallGeometry)
	if err != nil {
		t.Fatal(err)
	}
	m.AddMetadata(fsmap.KindInodeTable, 1<<63, 1<<63+5)
	m.AddMetadata(fsmap.Kind(200), 5, 5)
	m.AddFree(0, ^uint64(0))
	m.AddFree(70000, 10)
	m.AddHighlight(65530, 1<<40)
	m.AddMetadata(fsmap.KindJournal, 10, 100) // free and metadata at once
	_, p := render(t, m, fsmap.Labels{Image: "a<b>&\"c\x01\xff\n" + strings.Repeat("x", 500), Highlight: "]]>\x00"})
	if st := m.Stats(); st.FreeBlocks != 65535 || st.FreeExtents != 1 || st.HighlightBlocks != 6 {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(strings.Join(p.Texts, ""), "a<b>&\"c\uFFFD\uFFFD") {
		t.Errorf("title %q", p.Texts[0])
	}
}

// TestPartition: every block is in the bin Locate draws it in, in
// order, for geometries whose groups do not divide into pixels.
func TestPartition(t *testing.T) {
	for _, g := range []fsmap.Geometry{
		{BlockSize: 1024, BlocksCount: 3*1000 + 1 - 7, FirstDataBlock: 1, BlocksPerGroup: 1000},
		{BlockSize: 1024, BlocksCount: 5 * 256, BlocksPerGroup: 256},
		{BlockSize: 4096, BlocksCount: 2*32768 + 5, BlocksPerGroup: 32768},
		{BlockSize: 1024, BlocksCount: 100*3000 + 17, BlocksPerGroup: 3000},
	} {
		m, err := fsmap.New(g)
		if err != nil {
			t.Fatal(err)
		}
		prev := fsmap.Rect{}
		for b := g.FirstDataBlock; b < g.BlocksCount; b++ {
			r, ok := m.Locate(b)
			if !ok {
				t.Fatalf("%+v: block %d not located", g, b)
			}
			// Within a row, bins go left to right.
			if r.Y == prev.Y && r.X < prev.X {
				t.Fatalf("%+v: block %d at %v, the block before at %v", g, b, r, prev)
			}
			prev = r
		}
		m.AddFree(g.FirstDataBlock, g.BlocksCount)
		_, p := render(t, m, fsmap.Labels{Image: "p"})
		for b := g.FirstDataBlock; b < g.BlocksCount; b += 97 {
			if c := classAt(t, m, p, "map", b); c != "u0" {
				t.Fatalf("%+v: block %d of an empty filesystem drawn %q", g, b, c)
			}
		}
	}
}

// TestWorstStripSize: 64 groups whose every pixel differs from the next,
// highlighted every other one, stay under 1.5 MB; the picture parses
// and the pixels are drawn as their blocks are.
func TestWorstStripSize(t *testing.T) {
	g := fsmap.Geometry{BlockSize: 4096, BlocksCount: 64 * 32768, BlocksPerGroup: 32768}
	m, err := fsmap.New(g)
	if err != nil {
		t.Fatal(err)
	}
	for b := uint64(0); b < g.BlocksCount; b += 64 { // a pixel is 32 blocks
		m.AddFree(b, 32)
		m.AddHighlight(b+32, 1)
	}
	svg, p := render(t, m, fsmap.Labels{Image: "worst.img", Highlight: "/"})
	t.Logf("64 groups, every pixel unlike the next: %d bytes", len(svg))
	if len(svg) > 1500<<10 {
		t.Errorf("%d bytes", len(svg))
	}
	for b := uint64(0); b < g.BlocksCount; b += 32 {
		if gr := b / 32768; gr != 0 && gr != 31 && gr != 63 {
			continue // every pixel of three groups is enough
		}
		want, hl := "u0", ""
		if b%64 != 0 {
			want, hl = "u5", "hl"
		}
		if got := classAt(t, m, p, "map", b); got != want {
			t.Fatalf("block %d: %q, want %q", b, got, want)
		}
		if got := classAt(t, m, p, "highlight", b); got != hl {
			t.Fatalf("block %d highlighted %q, want %q", b, got, hl)
		}
	}
}
