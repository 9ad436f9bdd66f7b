package fsmap

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// The picture's layout, in pixels (SVG user units).
const (
	margin   = 16
	labelW   = 64 // row labels left of the map
	mapTop   = 108
	stripRow = 16 // a group's strip
	stripGap = 4
	figuresW = 280 // a strip's figures right of it
	cellPx   = 12
	bandPx   = 3 // a cell's metadata band
	legendH  = 20
	charPx   = 6.6 // a character of the 11-12px text, for widths
	maxLabel = 120 // characters of a name shown
)

// usedColours are the fills by used fraction: free, up to a quarter,
// half, three quarters, not full, full.
var usedColours = [6]string{"#ebebe3", "#c6dbef", "#9ecae1", "#6baed6", "#3182bd", "#08519c"}

const highlightColour = "#e7298a"

// fragThresholds are the mean free extent sizes (bytes) below which a
// cell gets a mark of level 3, 2, 1: the smaller its free extents, the
// bigger the mark.
var fragThresholds = [3]uint64{64 << 10, 1 << 20, 16 << 20}

// markPx is the side of the mark of each level.
var markPx = [4]int{0, 2, 4, 6}

// Rect is a rectangle of the picture.
type Rect struct{ X, Y, W, H int }

// Labels are the words the picture shows besides its figures.
type Labels struct {
	Image string // the image's name, the title
	// Highlight names what AddHighlight marked (a path); when it is set
	// or something was highlighted, the rest of the picture is dimmed.
	Highlight string
}

// Locate returns the rectangle drawing block b: its pixel column of its
// group's strip, or its cell. ok is false for blocks outside the groups.
func (m *Map) Locate(b uint64) (r Rect, ok bool) {
	if b < m.geo.FirstDataBlock || b >= m.geo.BlocksCount {
		return Rect{}, false
	}
	return m.binRect(m.bins.index(b)), true
}

func (m *Map) binRect(i int) Rect {
	if m.strip {
		g, j := i/int(m.stripBins), i%int(m.stripBins)
		return Rect{margin + labelW + j, mapTop + g*(stripRow+stripGap), 1, stripRow}
	}
	return Rect{margin + labelW + i%gridCols*cellPx, mapTop + i/gridCols*cellPx, cellPx, cellPx}
}

// mapSize returns the map's width (from its left edge) and height.
func (m *Map) mapSize() (w, h int) {
	if m.strip {
		return int(m.stripBins) + 8 + figuresW, int(m.groups)*(stripRow+stripGap) + 14
	}
	cols := min(m.bins.n, gridCols)
	return cols * cellPx, (m.bins.n + gridCols - 1) / gridCols * cellPx
}

// usedClass returns the class of the used fraction of a bin's blocks
// that are not fixed metadata: the metadata has its own colours, and
// counting it would shade every cell holding some (with flex_bg, every
// flex group's first) as if files were there.
func usedClass(blocks, free uint64) string {
	free = min(free, blocks)
	switch {
	case free == blocks:
		return "u0"
	case free == 0:
		return "u5"
	}
	used := blocks - free
	return fmt.Sprintf("u%d", (used*4+blocks-1)/blocks)
}

// fragLevel returns the mark level of a bin from its mean free extent
// part. The thresholds are capped at half a group: a free extent cannot
// be longer than the gap between two groups' metadata, so a group with
// one free extent is not marked for being small.
func (m *Map) fragLevel(t *tally) int {
	if t.free == 0 || t.freePieces == 0 {
		return 0
	}
	mean := t.free * uint64(m.geo.BlockSize) / t.freePieces
	for i, lim := range m.fragLimits() {
		if mean < lim {
			return 3 - i
		}
	}
	return 0
}

func (m *Map) fragLimits() [3]uint64 {
	half := uint64(m.geo.BlocksPerGroup) * uint64(m.geo.BlockSize) / 2
	var out [3]uint64
	for i, t := range fragThresholds {
		out[i] = min(t, half)
	}
	return out
}

// layer gathers rectangles into one path per class, in the order the
// classes first come.
type layer struct {
	order []string
	paths map[string]*classPath
}

// classPath is the path data of one class and the corner its last
// rectangle started at: after a closed rectangle the next one is moved
// to relative to it, which keeps the numbers short.
type classPath struct {
	d    bytes.Buffer
	x, y int
}

func (l *layer) rect(class string, r Rect) {
	if l.paths == nil {
		l.paths = map[string]*classPath{}
	}
	p := l.paths[class]
	if p == nil {
		p = &classPath{}
		l.paths[class] = p
		l.order = append(l.order, class)
		fmt.Fprintf(&p.d, "M%d %d", r.X, r.Y)
	} else {
		fmt.Fprintf(&p.d, "m%d %d", r.X-p.x, r.Y-p.y)
	}
	fmt.Fprintf(&p.d, "h%dv%dh-%dz", r.W, r.H, r.W)
	p.x, p.y = r.X, r.Y
}

func (l *layer) write(w io.Writer) {
	for _, c := range l.order {
		fmt.Fprintf(w, "<path class=\"%s\" d=\"%s\"/>\n", c, l.paths[c].d.Bytes())
	}
}

// runs calls emit for each run of equal non-empty classes among
// class(0..n-1).
func runs(n int, class func(j int) string, emit func(c string, j0, j1 int)) {
	cur, j0 := "", 0
	for j := 0; j <= n; j++ {
		c := ""
		if j < n {
			c = class(j)
		}
		if j < n && c == cur {
			continue
		}
		if cur != "" {
			emit(cur, j0, j)
		}
		cur, j0 = c, j
	}
}

// layers returns the picture's map drawn: the base (fills, bands,
// marks) and the highlight.
func (m *Map) layers() (base, bands, marks, highlight layer) {
	rowLen := gridCols
	if m.strip {
		rowLen = int(m.stripBins)
	}
	for row := 0; row*rowLen < m.bins.n; row++ {
		first := row * rowLen
		n := min(rowLen, m.bins.n-first)
		span := func(j0, j1 int) Rect { // the row's bins j0..j1-1
			r := m.binRect(first + j0)
			r.W *= j1 - j0
			return r
		}
		fill := func(j int) string {
			i := first + j
			t, blocks := &m.tallies[i], m.bins.blocks(i)
			if blocks == 0 {
				return ""
			}
			// In a strip any metadata shows, the rarest kind in the
			// pixel first, so a single superblock or bitmap block is
			// seen; in a cell it must be half of it.
			meta := t.metaBlocks()
			if meta > 0 && m.strip {
				return kindInfo[t.rarestKind()].class
			}
			if meta > 0 && meta*2 >= blocks {
				return kindInfo[t.mainKind()].class
			}
			return usedClass(blocks-min(meta, blocks), t.free)
		}
		runs(n, fill, func(c string, j0, j1 int) { base.rect(c, span(j0, j1)) })
		runs(n, func(j int) string {
			if m.tallies[first+j].highlight > 0 {
				return "hl"
			}
			return ""
		}, func(c string, j0, j1 int) { highlight.rect(c, span(j0, j1)) })
		if m.strip {
			continue
		}
		runs(n, func(j int) string {
			i := first + j
			t, blocks := &m.tallies[i], m.bins.blocks(i)
			if meta := t.metaBlocks(); meta*32 >= blocks && meta*2 < blocks && meta > 0 {
				return kindInfo[t.mainKind()].class
			}
			return ""
		}, func(c string, j0, j1 int) {
			r := span(j0, j1)
			r.H = bandPx
			bands.rect(c, r)
		})
		for j := 0; j < n; j++ {
			if lv := m.fragLevel(&m.tallies[first+j]); lv > 0 {
				r, s := m.binRect(first+j), markPx[lv]
				marks.rect(fmt.Sprintf("m%d", lv), Rect{r.X + (cellPx-s)/2, r.Y + (cellPx-s)/2, s, s})
			}
		}
	}
	return
}

// WriteSVG writes the picture.
func (m *Map) WriteSVG(w io.Writer, l Labels) error {
	bw := bufio.NewWriter(w)
	m.writeSVG(bw, l)
	return bw.Flush()
}

func (m *Map) writeSVG(w *bufio.Writer, l Labels) {
	st := m.Stats()
	highlighted := l.Highlight != "" || st.HighlightExtents > 0
	bs := uint64(m.geo.BlockSize)

	header := []string{}
	used := m.geo.BlocksCount - min(st.FreeBlocks, m.geo.BlocksCount)
	header = append(header, fmt.Sprintf("%s, %s blocks, %d group%s of %d blocks (%s); %.1f%% used",
		blocksSize(m.geo.BlocksCount, bs), size(bs), m.groups, plural(m.groups), m.geo.BlocksPerGroup,
		blocksSize(uint64(m.geo.BlocksPerGroup), bs), 100*float64(used)/float64(m.geo.BlocksCount)))
	if st.FreeExtents == 0 {
		header = append(header, "no free blocks")
	} else {
		header = append(header, fmt.Sprintf("free: %s in %d extent%s, mean %s, largest %s",
			blocksSize(st.FreeBlocks, bs), st.FreeExtents, plural(st.FreeExtents),
			blocksSize(st.FreeBlocks/st.FreeExtents, bs), blocksSize(st.LargestFree, bs)))
	}
	if m.strip {
		per := (uint64(m.geo.BlocksPerGroup) + m.stripBins - 1) / m.stripBins
		header = append(header, fmt.Sprintf("a row a group, a pixel up to %d block%s (%s); metadata shown where it is, a pixel at least",
			per, plural(per), blocksSize(per, bs)))
	} else {
		header = append(header, fmt.Sprintf("a cell %d group%s (%s), %d cells a row; the first group of a row on its left",
			m.groupsPerCell, plural(m.groupsPerCell), blocksSize(m.groupsPerCell*uint64(m.geo.BlocksPerGroup), bs), gridCols))
	}
	if highlighted {
		header = append(header, fmt.Sprintf("highlighted: %s: %d extent%s, %d block%s (%s) in %d group%s; the rest dimmed",
			clip(l.Highlight), st.HighlightExtents, plural(st.HighlightExtents), st.HighlightBlocks, plural(st.HighlightBlocks),
			blocksSize(st.HighlightBlocks, bs), st.HighlightGroups, plural(st.HighlightGroups)))
	}

	legend := m.legend(highlighted, l.Highlight)
	mapW, mapH := m.mapSize()
	width := margin + labelW + mapW + margin
	for _, row := range legend {
		width = max(width, margin+row.width()+margin)
	}
	for _, h := range header {
		width = max(width, margin+textWidth(h)+margin)
	}
	legendTop := mapTop + mapH + 20
	height := legendTop + len(legend)*legendH + margin

	fmt.Fprintf(w, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	fmt.Fprintf(w, "<title>ext4go map: %s</title>\n", escape(clip(l.Image)))
	w.WriteString("<style>text{font:12px sans-serif;fill:#222}.t{font-size:16px;font-weight:bold}.s{font-size:10px}.e{text-anchor:end}.c{text-anchor:middle}")
	for i, c := range usedColours {
		fmt.Fprintf(w, ".u%d{fill:%s}", i, c)
	}
	for _, k := range kindInfo {
		fmt.Fprintf(w, ".%s{fill:%s}", k.class, k.colour)
	}
	fmt.Fprintf(w, ".m1,.m2,.m3{fill:#111}.hl{fill:%s}.dim{opacity:.35}.o{fill:none;stroke:#888}.g{fill:url(#grid)}</style>\n", highlightColour)
	fmt.Fprintf(w, "<defs><pattern id=\"grid\" width=\"%d\" height=\"%d\" patternUnits=\"userSpaceOnUse\" x=\"%d\" y=\"%d\">"+
		"<path d=\"M%d.5 0V%dM0 %d.5H%d\" fill=\"none\" stroke=\"#fff\"/></pattern></defs>\n",
		cellPx, cellPx, margin+labelW, mapTop, cellPx-1, cellPx, cellPx-1, cellPx)
	fmt.Fprintf(w, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", width, height)
	fmt.Fprintf(w, "<text x=\"%d\" y=\"26\" class=\"t\">%s</text>\n", margin, escape(clip(l.Image)))
	for i, h := range header {
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\">%s</text>\n", margin, 46+16*i, escape(h))
	}

	base, bands, marks, hl := m.layers()
	if highlighted {
		w.WriteString("<g id=\"map\" class=\"dim\">\n")
	} else {
		w.WriteString("<g id=\"map\">\n")
	}
	base.write(w)
	bands.write(w)
	marks.write(w)
	w.WriteString("</g>\n")
	if highlighted {
		w.WriteString("<g id=\"highlight\">\n")
		hl.write(w)
		w.WriteString("</g>\n")
	}
	if !m.strip {
		// The grid's lines over the cells: the full rows, then the
		// last row's cells.
		full := m.bins.n / gridCols
		x := margin + labelW
		if full > 0 {
			fmt.Fprintf(w, "<rect class=\"g\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", x, mapTop, gridCols*cellPx, full*cellPx)
		}
		if rest := m.bins.n % gridCols; rest > 0 {
			fmt.Fprintf(w, "<rect class=\"g\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>\n", x, mapTop+full*cellPx, rest*cellPx, cellPx)
		}
	}
	if m.strip {
		// A frame around each strip, so free blocks at its ends show
		// where the group ends.
		w.WriteString("<path class=\"o\" d=\"")
		for g := 0; g < int(m.groups); g++ {
			r := m.binRect(g * int(m.stripBins))
			end := m.bins.index(m.bins.start(g*int(m.stripBins)) + m.rows.blocks(g) - 1)
			wd := end - g*int(m.stripBins) + 1
			fmt.Fprintf(w, "M%d.5 %d.5h%dv%dh-%dz", r.X-1, r.Y-1, wd+1, r.H+1, wd+1)
		}
		w.WriteString("\"/>\n")
	}
	m.writeLabels(w)
	for i, row := range legend {
		row.write(w, margin, legendTop+i*legendH)
	}
	w.WriteString("</svg>\n")
}

// writeLabels writes the rows' labels: the group numbers, and in strip
// mode each group's figures and the offsets under the strips.
func (m *Map) writeLabels(w *bufio.Writer) {
	x := margin + labelW - 6
	bs := uint64(m.geo.BlockSize)
	if !m.strip {
		rows := (m.bins.n + gridCols - 1) / gridCols
		every := 1
		if rows > 16 {
			every = 4 // room for the text
		}
		for r := 0; r < rows; r += every {
			fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" class=\"s e\">%d</text>\n", x, mapTop+r*cellPx+cellPx-2, uint64(r*gridCols)*m.groupsPerCell)
		}
		return
	}
	stripX := margin + labelW
	for g := 0; g < int(m.groups); g++ {
		y := mapTop + g*(stripRow+stripGap) + stripRow - 4
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" class=\"s e\">group %d</text>\n", x, y, g)
		t, blocks := &m.rowTally[g], m.rows.blocks(g)
		s := fmt.Sprintf("%.0f%% used", 100*float64(blocks-min(t.free, blocks))/float64(max(blocks, 1)))
		if t.freePieces > 0 {
			s += fmt.Sprintf("; %d free extent%s, largest %s", t.freePieces, plural(t.freePieces), blocksSize(t.largestFree, bs))
		}
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" class=\"s\">%s</text>\n", stripX+int(m.stripBins)+8, y, s)
	}
	y := mapTop + int(m.groups)*(stripRow+stripGap) + 6
	for q := 0; q <= 4; q++ {
		off := uint64(m.geo.BlocksPerGroup) * uint64(q) / 4
		anchor := "c"
		switch q {
		case 0:
			anchor = ""
		case 4:
			anchor = "e"
		}
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\" class=\"s %s\">%s</text>\n", stripX+int(m.stripBins)*q/4, y, anchor, blocksSize(off, bs))
	}
}

// legendItem is a swatch (a class, or a mark level) and its words.
type legendItem struct {
	class string
	mark  int // side of a mark instead of a full swatch, 0 for none
	band  bool
	text  string
}

type legendRow struct {
	title  string
	titleW int // room for the titles of all rows
	items  []legendItem
}

const (
	swatchPx = 12
)

func (r legendRow) width() int {
	w := r.titleW
	for _, it := range r.items {
		w += swatchPx + 4 + textWidth(it.text) + 14
	}
	return w
}

func (r legendRow) write(w *bufio.Writer, x, y int) {
	fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\">%s</text>\n", x, y+swatchPx-1, escape(r.title))
	x += r.titleW
	for _, it := range r.items {
		switch {
		case it.mark > 0:
			fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"u0\"/>", x, y, swatchPx, swatchPx)
			o := (swatchPx - it.mark) / 2
			fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"%s\"/>", x+o, y+o, it.mark, it.mark, it.class)
		case it.band:
			fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"u1\"/>", x, y, swatchPx, swatchPx)
			fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"%s\"/>", x, y, swatchPx, bandPx, it.class)
		default:
			fmt.Fprintf(w, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" class=\"%s\"/>", x, y, swatchPx, swatchPx, it.class)
		}
		fmt.Fprintf(w, "<text x=\"%d\" y=\"%d\">%s</text>\n", x+swatchPx+4, y+swatchPx-1, escape(it.text))
		x += swatchPx + 4 + textWidth(it.text) + 14
	}
}

func (m *Map) legend(highlighted bool, label string) []legendRow {
	rows := []legendRow{{title: "used (not metadata)", items: []legendItem{
		{class: "u0", text: "free"}, {class: "u1", text: "≤ 25% used"}, {class: "u2", text: "≤ 50%"},
		{class: "u3", text: "≤ 75%"}, {class: "u4", text: "< 100%"}, {class: "u5", text: "all used"},
	}}}
	meta := legendRow{title: "metadata"}
	for _, k := range kindInfo {
		meta.items = append(meta.items, legendItem{class: k.class, text: k.name})
	}
	if !m.strip {
		meta.title = "metadata ≥ ½ cell"
		meta.items = append(meta.items, legendItem{class: kindInfo[KindInodeTable].class, band: true, text: "band: ≥ 1/32 of the cell"})
	}
	rows = append(rows, meta)
	if !m.strip {
		frag := legendRow{title: "mean free extent"}
		lim := m.fragLimits()
		for i := range lim {
			if i > 0 && lim[i] == lim[i-1] {
				break
			}
			frag.items = append(frag.items, legendItem{class: fmt.Sprintf("m%d", 3-i), mark: markPx[3-i], text: "< " + size(lim[i])})
		}
		rows = append(rows, frag)
	}
	if highlighted {
		rows = append(rows, legendRow{title: "highlight", items: []legendItem{{class: "hl", text: "blocks of " + clip(label)}}})
	}
	titleW := 0
	for _, r := range rows {
		titleW = max(titleW, textWidth(r.title)+12)
	}
	for i := range rows {
		rows[i].titleW = titleW
	}
	return rows
}

func textWidth(s string) int { return int(math.Ceil(float64(utf8.RuneCountInString(s)) * charPx)) }

// clip shortens a name to maxLabel characters.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxLabel {
		return s
	}
	r := []rune(s)
	return string(r[:maxLabel-1]) + "…"
}

// escape makes s XML character data; characters XML cannot hold (invalid
// UTF-8, control characters) become U+FFFD.
func escape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

func plural(n uint64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// size formats a byte count in binary units: "8 MiB", "7.9 MiB".
func size(b uint64) string { return sizeOf(float64(b)) }

// blocksSize formats the size of n blocks of bs bytes.
func blocksSize(n, bs uint64) string { return sizeOf(float64(n) * float64(bs)) }

func sizeOf(f float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"}
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 || f >= 100 || f == math.Trunc(f) {
		return fmt.Sprintf("%.0f %s", f, units[i])
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
