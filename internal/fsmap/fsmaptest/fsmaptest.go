// Package fsmaptest reads back the pictures fsmap writes, for tests: it
// parses the SVG as XML, finds which classes the map draws at a point,
// and renders the picture with rsvg-convert to check real pixels.
package fsmaptest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// Picture is a parsed map.
type Picture struct {
	Width, Height int
	// Colours are the fills of the classes, from the style sheet.
	Colours map[string]color.RGBA
	// Layers are the map's rectangles by group ("map", "highlight"), in
	// drawing order.
	Layers map[string][]Shape
	Texts  []string
	// byRow indexes each layer's shapes by the pixel rows they cover.
	byRow map[string]map[int][]int
}

// Shape is one rectangle of a class.
type Shape struct {
	Class      string
	X, Y, W, H int
}

var (
	// fsmap's rectangles: the first moved to absolutely, the others
	// relative to the corner of the one before.
	rectPath = regexp.MustCompile(`^([Mm])(-?\d+) (-?\d+)h(\d+)v(\d+)h-(\d+)z`)
	styleRe  = regexp.MustCompile(`\.([a-z0-9]+)\{fill:#([0-9a-f]{6})\}`)
)

// Parse reads an SVG fsmap wrote. It fails on anything not XML and on
// paths that are not fsmap's rectangles.
func Parse(svg []byte) (*Picture, error) {
	p := &Picture{Colours: map[string]color.RGBA{}, Layers: map[string][]Shape{}}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var group []string // ids of the open <g> elements
	inText := false
	for {
		tok, err := d.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range t.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch t.Name.Local {
			case "svg":
				p.Width, _ = strconv.Atoi(attr("width"))
				p.Height, _ = strconv.Atoi(attr("height"))
			case "g":
				group = append(group, attr("id"))
			case "text":
				inText = true
			case "path":
				if len(group) == 0 || group[len(group)-1] == "" {
					continue
				}
				id, class, dd := group[len(group)-1], attr("class"), attr("d")
				x, y := 0, 0
				for first := true; len(dd) > 0; first = false {
					m := rectPath.FindStringSubmatch(dd)
					if m == nil || (m[1] == "M") != first {
						return nil, fmt.Errorf("path of class %s: not rectangles at %.40q", class, dd)
					}
					n := make([]int, 5)
					for i := range n {
						n[i], _ = strconv.Atoi(m[i+2])
					}
					if n[2] != n[4] {
						return nil, fmt.Errorf("path of class %s: %q is no rectangle", class, m[0])
					}
					x, y = x+n[0], y+n[1] // the first from 0, 0
					p.Layers[id] = append(p.Layers[id], Shape{class, x, y, n[2], n[3]})
					dd = dd[len(m[0]):]
				}
			}
		case xml.EndElement:
			switch t.Name.Local {
			case "g":
				group = group[:len(group)-1]
			case "text":
				inText = false
			}
		case xml.CharData:
			if inText {
				p.Texts = append(p.Texts, string(t))
			}
			for _, m := range styleRe.FindAllStringSubmatch(string(t), -1) {
				v, _ := strconv.ParseUint(m[2], 16, 32)
				p.Colours[m[1]] = color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 0xff}
			}
		}
	}
	if p.Width <= 0 || p.Height <= 0 {
		return nil, fmt.Errorf("no width and height")
	}
	return p, nil
}

// ClassesAt returns the classes the layer draws over the pixel at (x, y),
// the topmost last.
func (p *Picture) ClassesAt(layer string, x, y int) []string {
	if p.byRow == nil {
		p.byRow = map[string]map[int][]int{}
	}
	rows := p.byRow[layer]
	if rows == nil {
		rows = map[int][]int{}
		for i, s := range p.Layers[layer] {
			for r := s.Y; r < s.Y+s.H; r++ {
				rows[r] = append(rows[r], i)
			}
		}
		p.byRow[layer] = rows
	}
	var out []string
	for _, i := range rows[y] {
		if s := p.Layers[layer][i]; x >= s.X && x < s.X+s.W {
			out = append(out, s.Class)
		}
	}
	return out
}

// Top returns the topmost class the layer draws at (x, y), or "".
func (p *Picture) Top(layer string, x, y int) string {
	c := p.ClassesAt(layer, x, y)
	if len(c) == 0 {
		return ""
	}
	return c[len(c)-1]
}

// Render turns the SVG file into a PNG with rsvg-convert and decodes it;
// the test is skipped, saying why, when rsvg-convert is not installed.
func Render(t testing.TB, svgFile string) image.Image {
	t.Helper()
	tool, err := exec.LookPath("rsvg-convert")
	if err != nil {
		t.Skipf("rsvg-convert (Debian: librsvg2-bin) not installed, the picture is not rendered: %v", err)
	}
	out := filepath.Join(t.TempDir(), filepath.Base(svgFile)+".png")
	if b, err := exec.Command(tool, svgFile, "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("rsvg-convert %s: %v\n%s", svgFile, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	return img
}

// Dimmed is colour c seen through the map's dimming (opacity .35 over
// white).
func Dimmed(c color.RGBA) color.RGBA {
	mix := func(v uint8) uint8 { return uint8((float64(v)*0.35 + 255*0.65) + 0.5) }
	return color.RGBA{mix(c.R), mix(c.G), mix(c.B), 0xff}
}

// Near reports whether the pixel's colour is c, give or take tolerance in
// each channel.
func Near(px color.Color, c color.RGBA, tolerance int) bool {
	r, g, b, _ := px.RGBA()
	d := func(a uint32, b uint8) bool {
		v := int(a>>8) - int(b)
		return v <= tolerance && v >= -tolerance
	}
	return d(r, c.R) && d(g, c.G) && d(b, c.B)
}
