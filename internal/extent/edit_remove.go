package extent

import (
	"fmt"
	"slices"
)

// splitAt makes lblk the first block of an extent when it falls inside
// one, without changing the mapping (kernel: ext4_split_extent_at).
func (ed *Editor) splitAt(lblk uint32) error {
	p, err := ed.find(lblk)
	if err != nil {
		return err
	}
	leaf := p.leaf()
	if leaf.pos < 0 {
		return nil
	}
	x := leaf.node.Extents[leaf.pos]
	if x.Logical == lblk || x.End() <= uint64(lblk) {
		return nil
	}
	pool, err := ed.reserve(p, len(p)-1)
	if err != nil {
		return err
	}
	head := lblk - x.Logical
	leaf.node.Extents[leaf.pos].Len = head
	tail := Extent{Logical: lblk, Len: x.Len - head, Start: x.Start + uint64(head), Unwritten: x.Unwritten}
	return ed.insertSplit(p, len(p)-1, leaf.pos+1, entry{ext: tail}, pool)
}

// Remove unmaps file blocks [from, to) (to = MaxLogical: everything from
// from on), trimming extents that cross the edges, and hands the unmapped
// physical blocks to FreeData after the tree no longer names them (one call
// per piece of an extent). Emptied nodes are freed and the tree shrinks back
// into the root when it fits (kernel: ext4_ext_remove_space,
// ext4_ext_rm_leaf). Only a range strictly inside one extent needs a new
// entry, so only then can Remove fail for want of a node, before any change.
func (ed *Editor) Remove(from, to uint32) error {
	if err := ed.setupErr(); err != nil {
		return err
	}
	defer ed.release()
	if from >= to {
		return nil
	}
	p, err := ed.find(from)
	if err != nil {
		return err
	}
	if l := p.leaf(); l.pos >= 0 {
		if x := l.node.Extents[l.pos]; x.Logical < from && uint64(to) < x.End() {
			// A hole punched inside one extent leaves a piece on either
			// side (kernel: ext4_force_split_extent_at).
			if err := ed.splitAt(to); err != nil {
				return err
			}
		}
	}
	type run struct {
		start uint64
		n     uint32
	}
	cur := from
	for {
		p, err := ed.find(cur)
		if err != nil {
			return err
		}
		leaf := p.leaf()
		// The extents kept go back into the leaf's own slice: each one
		// read yields at most one (a hole inside one extent was split
		// above), written at or before where it was read.
		kept := leaf.node.Extents[:0]
		var freedBuf [8]run
		freed := freedBuf[:0]
		for _, x := range leaf.node.Extents {
			a, b := max(uint64(x.Logical), uint64(cur)), min(x.End(), uint64(to))
			if a >= b {
				kept = append(kept, x)
				continue
			}
			freed = append(freed, run{x.Start + a - uint64(x.Logical), uint32(b - a)})
			switch {
			case a > uint64(x.Logical): // keep the head
				x.Len = uint32(a) - x.Logical
				kept = append(kept, x)
			case b < x.End(): // keep the tail
				x.Start += b - uint64(x.Logical)
				x.Len = uint32(x.End() - b)
				x.Logical = uint32(b)
				kept = append(kept, x)
			}
		}
		hi := leaf.hi
		if len(freed) > 0 {
			d := len(p) - 1
			if len(kept) == 0 && d > 0 {
				if err := ed.deleteAt(p, d-1, p[d-1].pos); err != nil {
					return err
				}
				if err := ed.Store.FreeNode(leaf.blk); err != nil {
					return err
				}
			} else {
				leaf.node.Extents = kept
				if err := ed.write(leaf); err != nil {
					return err
				}
				if len(kept) > 0 {
					if err := ed.fixKeys(p, d); err != nil {
						return err
					}
				}
			}
			for _, r := range freed {
				if err := ed.Store.FreeData(r.start, r.n); err != nil {
					return err
				}
			}
		}
		if hi >= uint64(to) {
			break
		}
		cur = uint32(hi)
	}
	return ed.shrink()
}

// Convert sets the written state of the mapped blocks in [from, from+n):
// unwritten to written after data was written into fallocated space, or
// written to unwritten (zero range). Holes in the range stay holes. An
// extent partly in the range splits into up to three; the converted part
// then merges with its neighbours in the leaf, and when it starts or ends
// the extent and continues a neighbour of the new state, the boundary
// between them just moves, with no new entry (kernel: ext4_split_extent,
// ext4_ext_convert_to_initialized, ext4_ext_try_to_merge).
func (ed *Editor) Convert(from, n uint32, toWritten bool) error {
	if err := ed.setupErr(); err != nil {
		return err
	}
	defer ed.release()
	to := uint64(from) + uint64(n)
	if to > MaxLogical {
		return fmt.Errorf("%w: range %d+%d ends past block %d", ErrInvalid, from, n, uint64(MaxLogical))
	}
	unw := !toWritten
	cur := uint64(from)
	for cur < to {
		p, err := ed.find(uint32(cur))
		if err != nil {
			return err
		}
		leaf := p.leaf()
		exts := leaf.node.Extents
		i := leaf.pos
		if i < 0 || exts[i].End() <= cur {
			i++
		}
		if i == len(exts) { // nothing more in this leaf
			cur = leaf.hi
			continue
		}
		x := exts[i]
		if uint64(x.Logical) >= to {
			break
		}
		a, b := max(uint64(x.Logical), cur), min(x.End(), to)
		cur = b
		if x.Unwritten == unw {
			continue
		}
		piece := Extent{Logical: uint32(a), Len: uint32(b - a), Start: x.Start + a - uint64(x.Logical), Unwritten: unw}
		switch {
		case a == uint64(x.Logical) && b < x.End() && i > 0 && canMerge(exts[i-1], piece):
			exts[i-1].Len += piece.Len
			exts[i] = Extent{Logical: uint32(b), Len: uint32(x.End() - b), Start: piece.Start + uint64(piece.Len), Unwritten: x.Unwritten}
			if err := ed.write(leaf); err != nil {
				return err
			}
			continue
		case a > uint64(x.Logical) && b == x.End() && i+1 < len(exts) && canMerge(piece, exts[i+1]):
			y := &exts[i+1]
			y.Logical, y.Start, y.Len = piece.Logical, piece.Start, y.Len+piece.Len
			exts[i].Len = uint32(a) - x.Logical
			if err := ed.write(leaf); err != nil {
				return err
			}
			continue
		}
		if b-a > uint64(maxLen(unw)) {
			// A whole initialized extent of InitMaxLen blocks is one
			// block too long to be unwritten: convert it in two steps.
			b = a + uint64(maxLen(unw))
			cur = b
		}
		// Where the leaf has room for the pieces, the change is made in
		// it at once; else the splits below may split the leaf itself.
		var pieces []Extent
		if a > uint64(x.Logical) {
			pieces = append(pieces, Extent{Logical: x.Logical, Len: uint32(a) - x.Logical, Start: x.Start, Unwritten: x.Unwritten})
		}
		j := i + len(pieces)
		pieces = append(pieces, Extent{Logical: uint32(a), Len: uint32(b - a), Start: x.Start + a - uint64(x.Logical), Unwritten: unw})
		if b < x.End() {
			pieces = append(pieces, Extent{Logical: uint32(b), Len: uint32(x.End() - b), Start: x.Start + b - uint64(x.Logical), Unwritten: x.Unwritten})
		}
		if nd := leaf.node; len(exts)-1+len(pieces) <= int(nd.Max) {
			nd.Extents = slices.Replace(nd.Extents, i, i+1, pieces...)
			nd.mergeAround(j)
			if err := ed.write(leaf); err != nil {
				return err
			}
			continue
		}
		if err := ed.splitAt(uint32(a)); err != nil {
			return err
		}
		if b < MaxLogical {
			if err := ed.splitAt(uint32(b)); err != nil {
				return err
			}
		}
		if p, err = ed.find(uint32(a)); err != nil {
			return err
		}
		leaf = p.leaf()
		nd := leaf.node
		j = leaf.pos
		nd.Extents[j].Unwritten = unw
		nd.mergeAround(j)
		if err := ed.write(leaf); err != nil {
			return err
		}
	}
	return ed.shrink()
}

// Neighbours returns the extent holding file block lblk or else the last
// one before it (left), and the first extent starting after lblk (right);
// nil where there is none. The writer takes allocation goals from them
// (kernel: ext4_ext_find_goal, ext4_ext_search_left/right). The extents
// are the Editor's: valid until its next call.
func (ed *Editor) Neighbours(lblk uint32) (left, right *Extent, err error) {
	if err := ed.setupErr(); err != nil {
		return nil, nil, err
	}
	defer ed.release()
	p, err := ed.find(lblk)
	if err != nil {
		return nil, nil, err
	}
	// Empty leaves exist only in trees from elsewhere; step over them.
	for q := p; q != nil && left == nil; {
		l := q.leaf()
		if l.pos >= 0 {
			ed.left = l.node.Extents[l.pos]
			left = &ed.left
		} else if q, err = ed.sideLeaf(q, false); err != nil {
			return nil, nil, err
		}
	}
	for q := p; q != nil && right == nil; {
		l := q.leaf()
		if l.pos+1 < len(l.node.Extents) {
			ed.right = l.node.Extents[l.pos+1]
			right = &ed.right
		} else if q, err = ed.sideLeaf(q, true); err != nil {
			return nil, nil, err
		}
	}
	return left, right, nil
}
