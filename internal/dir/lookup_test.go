package dir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// synthTree is an htree built in memory: block 0 the root, then interior
// nodes, then leaves.
type synthTree struct {
	f      Format
	blocks [][]byte
	names  [][]byte
	levels int
}

func (s *synthTree) dir() *Dir {
	return &Dir{
		Format:   s.f,
		NBlocks:  uint32(len(s.blocks)),
		Indexed:  true,
		CsumSeed: 0x5eed,
		Ino:      12,
		Read: func(lblk uint32) ([]byte, error) {
			if int(lblk) >= len(s.blocks) {
				return nil, fmt.Errorf("read past end: %d", lblk)
			}
			return s.blocks[lblk], nil
		},
	}
}

// buildSynth lays names out as an htree with perLeaf names per leaf and
// fanout entries per index block, so deep trees need few names. Leaves that
// start in the middle of a run of equal hashes get the collision bit, as the
// kernel's do_split sets it.
func buildSynth(t testing.TB, f Format, version uint8, names [][]byte, perLeaf, fanout int) *synthTree {
	t.Helper()
	type hn struct {
		h    uint32
		name []byte
	}
	eff := EffectiveVersion(version, f.HashUnsigned)
	var hs []hn
	for _, n := range names {
		h, _ := MustHash(n, eff, f.HashSeed)
		hs = append(hs, hn{h, n})
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].h < hs[j].h })

	// Leaves and the entries pointing at them (blocks numbered later).
	var leaves [][]Entry
	var level []DxEntry
	for i := 0; i < len(hs); i += perLeaf {
		chunk := hs[i:min(i+perLeaf, len(hs))]
		var es []Entry
		for _, x := range chunk {
			es = append(es, Entry{Inode: uint32(100 + len(leaves)), Name: x.name, FileType: FTRegFile})
		}
		h := chunk[0].h
		if i > 0 && hs[i-1].h == h {
			h |= 1
		}
		if i == 0 {
			h = 0
		}
		level = append(level, DxEntry{Hash: h, Block: uint32(len(leaves))})
		leaves = append(leaves, es)
	}
	// Build index levels bottom-up until one block's worth remains.
	var nodeLevels [][]DxNode
	for len(level) > fanout {
		var nodes []DxNode
		var up []DxEntry
		for i := 0; i < len(level); i += fanout {
			chunk := slices.Clone(level[i:min(i+fanout, len(level))])
			up = append(up, DxEntry{Hash: chunk[0].Hash, Block: uint32(len(nodes))})
			chunk[0].Hash = 0
			nodes = append(nodes, DxNode{Entries: chunk})
		}
		nodeLevels = append(nodeLevels, nodes)
		level = up
	}
	levels := len(nodeLevels)
	// Number blocks: root, nodes top level first, then leaves.
	next := uint32(1)
	base := make([]uint32, levels) // first block of each node level (index into nodeLevels)
	for l := levels - 1; l >= 0; l-- {
		base[l] = next
		next += uint32(len(nodeLevels[l]))
	}
	leafBase := next
	st := &synthTree{f: f, names: names, levels: levels + 1}
	st.blocks = make([][]byte, int(leafBase)+len(leaves))
	fix := func(es []DxEntry, l int) []DxEntry {
		out := slices.Clone(es)
		for i := range out {
			if l < 0 {
				out[i].Block += leafBase
			} else {
				out[i].Block += base[l]
			}
		}
		return out
	}
	var err error
	root := &DxRoot{DotInode: 12, DotDotInode: 2, HashVersion: version, IndirectLevels: uint8(levels)}
	if levels > 0 {
		root.Entries = fix(level, levels-1)
	} else {
		root.Entries = fix(level, -1)
	}
	root.Entries[0].Hash = 0
	if st.blocks[0], err = EncodeDxRoot(f, root, 0x5eed); err != nil {
		t.Fatal(err)
	}
	for l, nodes := range nodeLevels {
		for i, n := range nodes {
			n.Entries = fix(n.Entries, l-1)
			if st.blocks[base[l]+uint32(i)], err = EncodeDxNode(f, &n, 0x5eed); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, es := range leaves {
		if st.blocks[leafBase+uint32(i)], err = EncodeBlock(f, es, 0x5eed); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// collidingNames finds two distinct names with the same legacy hash.
func collidingNames(t testing.TB, seed [4]uint32) ([]byte, []byte) {
	seen := map[uint32][]byte{}
	for i := range 2000000 {
		n := []byte(fmt.Sprintf("c%d", i))
		h, _ := MustHash(n, HashLegacy, seed)
		if o, ok := seen[h]; ok {
			return o, n
		}
		seen[h] = n
	}
	t.Skip("no legacy hash collision found")
	return nil, nil
}

func TestSynthLookup(t *testing.T) {
	var names [][]byte
	for i := range 600 {
		names = append(names, []byte(fmt.Sprintf("name-%d-%s", i, bytes.Repeat([]byte{0xc3, 0xa9}, i%5))))
	}
	tests := []struct {
		name    string
		f       Format
		version uint8
		perLeaf int
		fanout  int
		levels  int
	}{
		{"1level", Format{BlockSize: 1024, FileType: true, Csum: true}, HashHalfMD4, 20, 100, 1},
		{"2levels", Format{BlockSize: 1024, FileType: true}, HashTea, 4, 20, 2},
		{"3levels-largedir", Format{BlockSize: 1024, FileType: true, Csum: true, LargeDir: true, HashUnsigned: true}, HashHalfMD4, 3, 6, 3},
		{"legacy-dups", Format{BlockSize: 1024, FileType: true, Csum: true}, HashLegacy, 1, 50, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := slices.Clone(names)
			if tt.version == HashLegacy {
				a, b := collidingNames(t, tt.f.HashSeed)
				// Several copies around a collision, one name per leaf,
				// so the second lives in the continuation leaf.
				ns = append(ns, a, b)
			}
			st := buildSynth(t, tt.f, tt.version, ns, tt.perLeaf, tt.fanout)
			if st.levels != tt.levels {
				t.Fatalf("built %d levels, want %d", st.levels, tt.levels)
			}
			d := st.dir()
			vd := viewed(d)
			for _, n := range ns {
				r, err := d.DxLookup(n)
				if err != nil || !bytes.Equal(r.Name, n) {
					t.Fatalf("DxLookup(%q) = %+v, %v", n, r, err)
				}
				if r2, err := d.Lookup(n); err != nil || r2.Block != r.Block || r2.Offset != r.Offset {
					t.Fatalf("Lookup(%q) = %+v, %v", n, r2, err)
				}
				if r3, err := vd.Lookup(n); err != nil || !bytes.Equal(r3.Name, n) || r3.Block != r.Block || r3.Offset != r.Offset {
					t.Fatalf("Lookup(%q) through View = %+v, %v", n, r3, err)
				}
				if r4, err := vd.LinearLookup(n); err != nil || !bytes.Equal(r4.Name, n) || r4.Block != r.Block || r4.Offset != r.Offset {
					t.Fatalf("LinearLookup(%q) through View = %+v, %v", n, r4, err)
				}
			}
			for _, n := range [][]byte{[]byte("absent"), []byte("name-1-x")} {
				if _, err := d.Lookup(n); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("Lookup(%q): %v", n, err)
				}
			}
			if r, err := d.Lookup([]byte("..")); err != nil || r.Inode != 2 {
				t.Errorf(`Lookup(".."): %+v %v`, r, err)
			}
			// Every name sits in a leaf whose range holds its hash.
			root, leaves, err := d.DxLeaves()
			if err != nil {
				t.Fatal(err)
			}
			eff := EffectiveVersion(root.HashVersion, tt.f.HashUnsigned)
			count := 0
			for _, l := range leaves {
				blk, err := ParseBlock(st.blocks[l.Block], tt.f)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range blk.Entries() {
					h, _ := MustHash(e.Name, eff, tt.f.HashSeed)
					if !l.Holds(h) {
						t.Errorf("%q hash %#x outside leaf %+v", e.Name, h, l)
					}
					count++
				}
			}
			if count != len(ns) {
				t.Errorf("leaves hold %d names, want %d", count, len(ns))
			}
			var it []string
			if err := d.Iterate(func(_ uint32, _ int, e Entry) error {
				it = append(it, string(e.Name))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(it) != len(ns)+2 || it[0] != "." || it[1] != ".." {
				t.Errorf("Iterate gave %d names starting %q", len(it), it[:min(2, len(it))])
			}
		})
	}
}

func TestSynthCorrupt(t *testing.T) {
	var names [][]byte
	for i := range 200 {
		names = append(names, []byte(fmt.Sprintf("f%d", i)))
	}
	f := Format{BlockSize: 1024, FileType: true}
	fresh := func() *synthTree { return buildSynth(t, f, HashHalfMD4, names, 4, 10) }

	// A node pointing back at the root: a cycle.
	st := fresh()
	root, _ := ParseDxRoot(st.blocks[0], f)
	node, _ := ParseDxNode(st.blocks[root.Entries[0].Block], f)
	node.Entries[0].Block = 0
	st.blocks[root.Entries[0].Block], _ = EncodeDxNode(f, node, 0)
	d := st.dir()
	cycles := 0
	for _, n := range names {
		if _, err := d.DxLookup(n); errors.Is(err, fserr.ErrCorrupt) {
			cycles++
		}
	}
	if cycles == 0 {
		t.Error("no lookup saw the cycle")
	}
	if _, _, err := d.DxLeaves(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("cycle leaves: %v", err)
	}

	// A bad root limit: Lookup falls back to a linear search.
	st = fresh()
	st.blocks[0][32]++
	d = st.dir()
	if _, err := d.DxLookup(names[5]); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("bad limit: %v", err)
	}
	if r, err := d.Lookup(names[5]); err != nil || !bytes.Equal(r.Name, names[5]) {
		t.Errorf("fallback lookup: %+v %v", r, err)
	}

	// A block number past the end.
	st = fresh()
	root, _ = ParseDxRoot(st.blocks[0], f)
	root.Entries[1].Block = 5000
	st.blocks[0], _ = EncodeDxRoot(f, root, 0)
	d = st.dir()
	if _, _, err := d.DxLeaves(); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("block past end: %v", err)
	}

	// Checksum failures are reported, not fallen back from.
	fc := f
	fc.Csum = true
	st = buildSynth(t, fc, HashHalfMD4, names, 4, 10)
	st.blocks[len(st.blocks)-1][30] ^= 0xff
	d = st.dir()
	var bad int
	for _, n := range names {
		if _, err := d.Lookup(n); errors.Is(err, fserr.ErrChecksum) {
			bad++
		}
	}
	if bad == 0 {
		t.Error("no lookup saw the leaf checksum error")
	}
}

// viewed returns d reading leaves through View: each block is lent as a
// copy that is scribbled over once the viewer returns, so anything that
// kept it shows.
func viewed(d *Dir) *Dir {
	v := *d
	v.View = func(lblk uint32, fn func(b []byte) error) error {
		b, err := d.Read(lblk)
		if err != nil || b == nil {
			if err == nil {
				err = fn(nil)
			}
			return err
		}
		lent := slices.Clone(b)
		err = fn(lent)
		for i := range lent {
			lent[i] = 0xa5
		}
		return err
	}
	return &v
}

// dirFromBlocks makes a Dir over fuzz-provided blocks.
func dirFromBlocks(f Format, blocks [][]byte) *Dir {
	return &Dir{
		Format:  f,
		NBlocks: uint32(len(blocks)),
		Indexed: true,
		Read: func(lblk uint32) ([]byte, error) {
			if int(lblk) >= len(blocks) {
				return nil, errors.New("past end")
			}
			if blocks[lblk] == nil {
				return nil, nil
			}
			return blocks[lblk], nil
		},
	}
}

func FuzzLookup(fz *testing.F) {
	// Small trees keep inputs short: minimizing long ones stalls fuzzing
	// (or pass -fuzzminimizetime).
	var names [][]byte
	for i := range 24 {
		names = append(names, []byte(fmt.Sprintf("fz%d", i)))
	}
	for _, csum := range []bool{false, true} {
		f := Format{BlockSize: 1024, FileType: true, Csum: csum, LargeDir: true}
		st := buildSynth(fz, f, HashTea, names, 4, 3)
		fz.Add(csum, bytes.Join(st.blocks, nil))
	}
	for _, img := range realDirSeeds(fz) {
		fz.Add(img.csum, img.data)
	}
	fz.Fuzz(func(t *testing.T, csum bool, data []byte) {
		f := Format{BlockSize: 1024, FileType: true, Csum: csum, LargeDir: true}
		var blocks [][]byte
		for len(data) >= 1024 && len(blocks) < 16 {
			blocks = append(blocks, data[:1024])
			data = data[1024:]
		}
		if len(blocks) == 0 {
			return
		}
		d := dirFromBlocks(f, blocks)
		vd := viewed(d)
		for _, n := range [][]byte{[]byte("fz1"), []byte("fz42"), []byte("."), []byte("x")} {
			r, err := d.Lookup(n)
			vr, verr := vd.Lookup(n)
			if fmt.Sprint(err) != fmt.Sprint(verr) || !bytes.Equal(r.Name, vr.Name) || r.Inode != vr.Inode || r.Block != vr.Block || r.Offset != vr.Offset {
				t.Fatalf("Lookup(%q) = %+v, %v; through View %+v, %v", n, r, err, vr, verr)
			}
		}
		d.DxLeaves()
		d.Iterate(func(uint32, int, Entry) error { return nil })
	})
}

func FuzzParseBlock(fz *testing.F) {
	f := Format{BlockSize: 1024, FileType: true}
	b, _ := EncodeBlock(f, []Entry{{Inode: 2, Name: []byte(".")}, {Inode: 2, Name: []byte("..")}, {Inode: 11, Name: []byte("lost+found")}}, 0)
	fz.Add(false, b)
	for _, img := range realDirSeeds(fz) {
		for i := 0; i+1024 <= len(img.data); i += 1024 {
			fz.Add(img.csum, img.data[i:i+1024])
		}
	}
	fz.Fuzz(func(t *testing.T, csum bool, b []byte) {
		b = to1K(b)
		f := Format{BlockSize: len(b), FileType: true, Csum: csum, InodesCount: 1000}
		blk, err := ParseBlock(b, f)
		if err != nil {
			return
		}
		// Whatever parses must tile the block and survive an edit.
		end := 0
		for _, s := range blk.Slots {
			if s.Off != end {
				t.Fatalf("slot at %d, want %d", s.Off, end)
			}
			end += s.RecLen
		}
		c := slices.Clone(b)
		if ok, err := Insert(c, f, Entry{Inode: 7, Name: []byte("new-entry")}, 1); err == nil && ok {
			if _, err := ParseBlock(c, f); err != nil {
				t.Fatalf("insert broke the block: %v", err)
			}
		}
		for _, e := range blk.Entries() {
			c := slices.Clone(b)
			if _, ok, err := Delete(c, f, e.Name, 1); err != nil || !ok {
				t.Fatalf("delete %q: %v %v", e.Name, ok, err)
			}
			if _, err := ParseBlock(c, f); err != nil {
				t.Fatalf("delete broke the block: %v", err)
			}
		}
		ParseInline(append(make([]byte, 0, 60), b[:min(60, len(b))]...), b, f)
	})
}

func FuzzDxRoot(fz *testing.F) {
	for _, f := range []Format{{BlockSize: 1024, FileType: true}, {BlockSize: 1024, FileType: true, Csum: true}} {
		b, _ := EncodeDxRoot(f, &DxRoot{DotInode: 2, DotDotInode: 2, HashVersion: 1, Entries: []DxEntry{{0, 1}, {0x1234, 2}}}, 0)
		fz.Add(f.Csum, b)
	}
	for _, img := range realDirSeeds(fz) {
		fz.Add(img.csum, img.data[:1024])
	}
	fz.Fuzz(func(t *testing.T, csum bool, b []byte) {
		b = to1K(b)
		f := Format{BlockSize: len(b), FileType: true, Csum: csum, LargeDir: true}
		r, err := ParseDxRoot(b, f)
		DxChecksum(b, f, 0)
		VerifyDxChecksum(b, f, 0)
		if err != nil {
			return
		}
		out, err := EncodeDxRoot(f, r, 0)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		r2, err := ParseDxRoot(out, f)
		if err != nil || !slices.Equal(r.Entries, r2.Entries) || r.HashVersion != r2.HashVersion {
			t.Fatalf("round trip: %+v %+v %v", r, r2, err)
		}
	})
}

func FuzzDxNode(fz *testing.F) {
	for _, f := range []Format{{BlockSize: 1024}, {BlockSize: 1024, Csum: true}} {
		b, _ := EncodeDxNode(f, &DxNode{Entries: []DxEntry{{0, 1}, {0x1234, 2}, {0x1235, 3}}}, 0)
		fz.Add(f.Csum, b)
	}
	for _, img := range realDirSeeds(fz) {
		for i := 0; i+1024 <= len(img.data); i += 1024 {
			if IsDxNode(img.data[i:i+1024], Format{BlockSize: 1024}) {
				fz.Add(img.csum, img.data[i:i+1024])
			}
		}
	}
	fz.Fuzz(func(t *testing.T, csum bool, b []byte) {
		b = to1K(b)
		f := Format{BlockSize: len(b), Csum: csum}
		n, err := ParseDxNode(b, f)
		SetDxChecksum(slices.Clone(b), f, 1)
		if err != nil {
			return
		}
		out, err := EncodeDxNode(f, n, 0)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if n2, err := ParseDxNode(out, f); err != nil || !slices.Equal(n.Entries, n2.Entries) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// to1K pads or cuts fuzz input to one 1 KiB block.
func to1K(b []byte) []byte {
	out := make([]byte, 1024)
	copy(out, b)
	return out
}
