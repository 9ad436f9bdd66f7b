package extent

import (
	"testing"
)

// TestRootLeaf: a root that is the whole tree gives its extents, a deeper
// one says so, a corrupt one is an error, and none of it allocates.
func TestRootLeaf(t *testing.T) {
	h := newHarness(t, 1024, 0, false, 1)
	tree := func() *Tree {
		return &Tree{Root: h.root[:], BlockSize: 1024, FirstDataBlock: 1, BlocksCount: 1 << 40, Ino: 12}
	}
	var buf [4]Extent
	for i := range 12 {
		exts, leaf, err := tree().RootLeaf(&buf)
		if err != nil {
			t.Fatalf("after %d extents: %v", i, err)
		}
		hdr, err := DecodeHeader(h.root[:])
		if err != nil {
			t.Fatal(err)
		}
		if leaf != (hdr.Depth == 0) {
			t.Fatalf("after %d extents: leaf %v at depth %d", i, leaf, hdr.Depth)
		}
		if leaf {
			if len(exts) != i {
				t.Fatalf("after %d extents: RootLeaf gave %d", i, len(exts))
			}
			for j, e := range exts {
				if e.Logical != uint32(10*j) || e.Len != 2 || e.Start != uint64(5000+10*j) {
					t.Fatalf("extent %d: %+v", j, e)
				}
			}
		}
		h.insert(Extent{Logical: uint32(10 * i), Len: 2, Start: uint64(5000 + 10*i)})
	}
	if _, leaf, _ := tree().RootLeaf(&buf); leaf {
		t.Fatal("12 extents still in the root")
	}
	// Allocation-free, for a leaf root.
	var root [RootSize]byte
	leafRoot := &Node{Header: Header{Magic: Magic, Max: 4, Entries: 1}, Extents: []Extent{{Logical: 0, Len: 3, Start: 7000}}}
	if err := leafRoot.Encode(root[:]); err != nil {
		t.Fatal(err)
	}
	lt := &Tree{Root: root[:], BlockSize: 1024, FirstDataBlock: 1, BlocksCount: 1 << 40, Ino: 12}
	if n := testing.AllocsPerRun(100, func() {
		if exts, leaf, err := lt.RootLeaf(&buf); err != nil || !leaf || len(exts) != 1 {
			t.Fatalf("%v %v %v", exts, leaf, err)
		}
	}); n != 0 {
		t.Errorf("RootLeaf allocates %v objects", n)
	}
	// Corrupt: bad magic, and a block past the end of the filesystem.
	bad := root
	bad[0] ^= 0xff
	if _, _, err := (&Tree{Root: bad[:], BlockSize: 1024, FirstDataBlock: 1, BlocksCount: 1 << 40, Ino: 12}).RootLeaf(&buf); err == nil {
		t.Error("bad magic: no error")
	}
	if _, _, err := (&Tree{Root: root[:], BlockSize: 1024, FirstDataBlock: 1, BlocksCount: 7001, Ino: 12}).RootLeaf(&buf); err == nil {
		t.Error("extent past the end: no error")
	}
}
