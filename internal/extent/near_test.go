package extent

import "testing"

// TestLookupNeighbours: the neighbours a lookup of a hole reports as known
// are those Editor.Neighbours finds, in trees of one to three levels, and
// most holes get them (an append's, always).
func TestLookupNeighbours(t *testing.T) {
	for _, nodeMax := range []int{0, 5, 6} {
		h := newHarness(t, 1024, nodeMax, true, uint64(nodeMax)+1)
		known, asked := 0, 0
		for i := range 300 {
			// Extents of 2 blocks with holes of 1 to 4 between them,
			// inserted out of order so that leaves split everywhere.
			l := uint32((i*7919)%300) * 6
			h.insert(Extent{Logical: l, Len: 2, Start: h.nextData})
			h.nextData += 2
		}
		h.check()
		for lblk := uint32(0); lblk < 300*6+10; lblk++ {
			m, err := h.ed.Lookup(lblk)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Hole() {
				continue
			}
			asked++
			if !m.NearKnown {
				continue
			}
			known++
			left, right, err := h.ed.Neighbours(lblk)
			if err != nil {
				t.Fatal(err)
			}
			if m.HasLeft != (left != nil) || m.HasLeft && m.Left != *left {
				t.Fatalf("nodeMax %d, block %d: lookup's left %v %+v, Neighbours' %+v", nodeMax, lblk, m.HasLeft, m.Left, left)
			}
			if m.HasRight != (right != nil) || m.HasRight && m.Right != *right {
				t.Fatalf("nodeMax %d, block %d: lookup's right %v %+v, Neighbours' %+v", nodeMax, lblk, m.HasRight, m.Right, right)
			}
		}
		t.Logf("nodeMax %d (depth %d): %d of %d holes with known neighbours", nodeMax, h.maxDepth, known, asked)
		if known < asked/2 {
			t.Errorf("nodeMax %d: only %d of %d holes with known neighbours", nodeMax, known, asked)
		}
		// Past the end (an append): always known.
		m, err := h.ed.Lookup(300*6 + 100)
		if err != nil || !m.Hole() || !m.NearKnown || !m.HasLeft || m.HasRight {
			t.Errorf("nodeMax %d: an append's lookup: %+v %v", nodeMax, m, err)
		}
	}
}
