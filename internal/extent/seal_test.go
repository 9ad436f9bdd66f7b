package extent

import (
	"errors"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// sealFS serves memFS's blocks through Tree.Sealed, with seals it keeps
// per block and seed as a buffer cache would.
type sealFS struct {
	*memFS
	seals     map[uint64]uint32
	verifies  int
	lieSealed bool // claim every block sealed
}

func (s *sealFS) view(blk uint64, seed uint32, fn func([]byte, bool) (bool, error)) error {
	b, err := s.read(blk)
	if err != nil {
		return err
	}
	sealSeed, ok := s.seals[blk]
	sealed := s.lieSealed || (ok && sealSeed == seed)
	if !sealed {
		s.verifies++
	}
	good, err := fn(b, sealed)
	if good && !sealed {
		s.seals[blk] = seed
	}
	return err
}

// A sealed view verifies each block once per seed, goes on reporting a bad
// tail as the plain view does, and keeps the structural errors' precedence
// over the checksum's.
func TestSealedView(t *testing.T) {
	m := newMemFS(1024)
	exts := sampleExtents(40)
	root := m.build(t, exts, 3)
	s := &sealFS{memFS: m, seals: map[uint64]uint32{}}
	tr := m.tree(root)
	tr.Read, tr.Sealed = nil, s.view
	for range 3 {
		got, err := tr.Extents()
		if err != nil || len(got) != len(exts) {
			t.Fatalf("walk: %d extents, %v", len(got), err)
		}
	}
	if s.verifies != len(m.blocks) {
		t.Fatalf("%d verifications over three walks of %d blocks, want one each", s.verifies, len(m.blocks))
	}
	// Another inode's seed (a block cross-linked into it) is verified
	// afresh, and fails.
	other := m.tree(root)
	other.Read, other.Sealed, other.Seed = nil, s.view, m.seed+1
	if _, err := other.Extents(); !isChecksumErr(err) {
		t.Fatalf("walk under another seed: %v, want a checksum error", err)
	}

	// A corrupt tail, unsealed, is reported.
	var leaf uint64
	for blk := range m.blocks {
		if n, err := DecodeNode(m.blocks[blk]); err == nil && n.Depth == 0 {
			leaf = blk
			break
		}
	}
	m.blocks[leaf][m.bs-1] ^= 0xff
	delete(s.seals, leaf)
	if _, err := tr.Extents(); !isChecksumErr(err) {
		t.Fatalf("corrupt tail: %v, want a checksum error", err)
	}
	// A structural error is still reported as such when the tail is bad
	// too (the entry count over the maximum).
	hdr2, hdr3 := m.blocks[leaf][2], m.blocks[leaf][3]
	m.blocks[leaf][2] = 0xff
	m.blocks[leaf][3] = 0xff
	_, err := tr.Extents()
	if err == nil || isChecksumErr(err) {
		t.Fatalf("corrupt header and tail: %v, want the header's error", err)
	}
	// A block the cache says is sealed is not verified again: the bad
	// tail goes unread (which is why only verified or self-written
	// content may be sealed).
	m.blocks[leaf][2], m.blocks[leaf][3] = hdr2, hdr3
	s.lieSealed = true
	if _, err := tr.Extents(); err != nil {
		t.Fatalf("sealed walk over a bad tail: %v", err)
	}
}

func isChecksumErr(err error) bool { return errors.Is(err, fserr.ErrChecksum) }
