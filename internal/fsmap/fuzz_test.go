package fsmap_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/ext4go/ext4go/internal/fsmap"
	"github.com/ext4go/ext4go/internal/fsmap/fsmaptest"
)

// FuzzMap: any geometry New takes and any ranges added give a picture
// that parses, of bounded size, without a panic.
func FuzzMap(f *testing.F) {
	f.Add(uint8(0), uint64(65536), uint32(8192), []byte("\x00\x01\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00\x00\x00\x00\x01"), "img")
	f.Add(uint8(2), uint64(1<<30), uint32(32768), []byte{}, "<x>")
	f.Add(uint8(0), uint64(100*256+3), uint32(256), bytes.Repeat([]byte{7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7}, 40), "\xff")
	f.Fuzz(func(t *testing.T, bsShift uint8, blocks uint64, bpg uint32, ops []byte, name string) {
		g := fsmap.Geometry{BlockSize: 1024 << (bsShift % 8), BlocksCount: blocks, BlocksPerGroup: bpg}
		if g.BlockSize == 1024 {
			g.FirstDataBlock = 1
		}
		if g.Groups() > 1<<20 {
			return // New takes it, but a bit set of its groups is big for a fuzzer
		}
		m, err := fsmap.New(g)
		if err != nil {
			return
		}
		// Each op: a kind byte, then start and length.
		for len(ops) >= 17 {
			k, start, length := ops[0], binary.LittleEndian.Uint64(ops[1:]), binary.LittleEndian.Uint64(ops[9:])
			ops = ops[17:]
			// Lengths bounded so a run's spread stays quick.
			length %= 1 << 24
			switch {
			case k < 8:
				m.AddMetadata(fsmap.Kind(k), start%(blocks+10), length)
			case k < 16:
				m.AddFree(start%(blocks+10), length)
			default:
				m.AddHighlight(start%(blocks+10), length)
			}
		}
		var b bytes.Buffer
		if err := m.WriteSVG(&b, fsmap.Labels{Image: name, Highlight: name}); err != nil {
			t.Fatal(err)
		}
		if _, err := fsmaptest.Parse(b.Bytes()); err != nil {
			t.Fatalf("%v\n%.1000s", err, b.Bytes())
		}
		if b.Len() > 2<<20 {
			t.Fatalf("%d bytes", b.Len())
		}
	})
}
