package dir

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/ext4go/ext4go/internal/fserr"
)

// canIndex reports whether block 0 has the layout make_indexed_dir
// relies on: "." of rec_len 12 holding the directory, then "..".
func canIndex(slots []Slot, ino uint32) bool {
	return len(slots) >= 2 &&
		slots[0].Off == 0 && slots[0].RecLen == minRecLen && string(slots[0].Name) == "." && slots[0].Inode != 0 &&
		(ino == 0 || slots[0].Inode == ino) &&
		slots[1].Off == minRecLen && string(slots[1].Name) == ".." && slots[1].Inode != 0
}

// hashedEntry is an entry with its htree hash.
type hashedEntry struct {
	Entry
	hash uint32
}

// splitByHash sorts es by hash and cuts it in two parts that both fit a
// leaf, as evenly by bytes as possible (kernel: do_split, which moves the
// upper half of a hash-sorted map). It returns the index entry hash of the
// upper part: its first hash, with the low bit set when the lower part ends
// with that same hash (the collision continues into the next leaf).
func splitByHash(es []hashedEntry, f *Format) (lo, hi []Entry, hash2 uint32, err error) {
	slices.SortStableFunc(es, func(a, b hashedEntry) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	usable := len(leafRegion(make([]byte, f.BlockSize), f))
	total := 0
	for _, x := range es {
		total += RecLen(len(x.Name))
	}
	best, bestDiff := -1, 0
	left := 0
	for k := 1; k < len(es); k++ {
		left += RecLen(len(es[k-1].Name))
		right := total - left
		if left > usable || right > usable {
			continue
		}
		diff := max(left-right, right-left)
		if best < 0 || diff < bestDiff {
			best, bestDiff = k, diff
		}
	}
	if best < 0 {
		return nil, nil, 0, ErrNoSpace
	}
	for i, x := range es {
		if i < best {
			lo = append(lo, x.Entry)
		} else {
			hi = append(hi, x.Entry)
		}
	}
	hash2 = es[best].hash
	if es[best-1].hash == hash2 {
		hash2 |= 1
	}
	return lo, hi, hash2, nil
}

// hashVersionOK reports whether v may be stored in a new dx root.
func hashVersionOK(v uint8) bool {
	return v == HashLegacy || v == HashHalfMD4 || v == HashTea
}

// splitBlocks hashes entries (with hash version eff), adds the hashed
// entries more, splits them in two by hash and encodes each half as a leaf
// block; hash2 is the first hash of the upper half (kernel: dx_make_map,
// dx_sort_map and do_split).
func (e *Editor) splitBlocks(entries []Entry, eff int, more ...hashedEntry) (lo, hi []byte, hash2 uint32, err error) {
	es := make([]hashedEntry, 0, len(entries)+len(more))
	for _, x := range entries {
		h, _, err := hashName(x.Name, eff, e.HashSeed)
		if err != nil {
			return nil, nil, 0, err
		}
		es = append(es, hashedEntry{x, h})
	}
	es = append(es, more...)
	loEs, hiEs, hash2, err := splitByHash(es, &e.Format)
	if err != nil {
		return nil, nil, 0, err
	}
	if lo, err = EncodeBlock(e.Format, loEs, e.CsumSeed); err != nil {
		return nil, nil, 0, err
	}
	if hi, err = EncodeBlock(e.Format, hiEs, e.CsumSeed); err != nil {
		return nil, nil, 0, err
	}
	return lo, hi, hash2, nil
}

// makeIndexed turns the full one-block directory whose block 0 holds slots
// into an htree holding ent too (kernel: make_indexed_dir + do_split): the
// entries after ".." and ent are split by hash into new blocks 1 and 2, and
// block 0 becomes the root pointing at them.
func (e *Editor) makeIndexed(slots []Slot, ent Entry) error {
	if !hashVersionOK(e.DefHashVersion) {
		return fmt.Errorf("dir: default hash version %d cannot start an htree", e.DefHashVersion)
	}
	eff := EffectiveVersion(e.DefHashVersion, e.HashUnsigned)
	b1, b2, hash2, err := e.splitBlocks(append(Used(slots[2:]), ent), eff)
	if err != nil {
		return err
	}
	empty, err := EncodeBlock(e.Format, nil, e.CsumSeed)
	if err != nil {
		return err
	}
	// Write block 1 as an empty leaf before asking for block 2, so that a
	// failing second AppendBlock leaves a valid linear directory.
	l1, err := e.appendBlock()
	if err != nil {
		return err
	}
	if err := e.Store.WriteBlock(l1, empty); err != nil {
		return err
	}
	l2, err := e.appendBlock()
	if err != nil {
		return err
	}
	root, err := EncodeDxRoot(e.Format, &DxRoot{
		DotInode:    slots[0].Inode,
		DotDotInode: slots[1].Inode,
		HashVersion: e.DefHashVersion,
		Entries:     []DxEntry{{Block: l1}, {Hash: hash2, Block: l2}},
	}, e.CsumSeed)
	if err != nil {
		return err
	}
	if err := e.Store.WriteBlock(l2, b2); err != nil {
		return err
	}
	if err := e.Store.WriteBlock(l1, b1); err != nil {
		return err
	}
	if err := e.Store.WriteBlock(0, root); err != nil {
		return err
	}
	e.Indexed = true
	return nil
}

// frameLimit is the dx limit of the index block of frame i (0: the root).
func (e *Editor) frameLimit(i int) int {
	if i == 0 {
		return DxRootLimit(e.Format)
	}
	return DxNodeLimit(e.Format)
}

// writeIndex stores new entries for the index block of fr: the root (whose
// other fields come from r) or an interior node.
func (e *Editor) writeIndex(r *DxRoot, fr frame, es []DxEntry) error {
	var b []byte
	var err error
	if fr.block == 0 {
		nr := *r
		nr.Entries = es
		b, err = EncodeDxRoot(e.Format, &nr, e.CsumSeed)
	} else {
		b, err = EncodeDxNode(e.Format, &DxNode{Entries: es}, e.CsumSeed)
	}
	if err != nil {
		return err
	}
	return e.Store.WriteBlock(fr.block, b)
}

// dxAdd is Add for an htree (kernel: ext4_dx_add_entry). Each pass probes
// the path anew; a pass that splits an index block or adds a level starts
// over, as the kernel does, so at most one index block changes shape per
// pass and the path is never stale.
func (e *Editor) dxAdd(ent Entry) error {
	d := e.Dir()
	if !e.NameChecked {
		if _, err := d.DxLookup(ent.Name); err == nil {
			return fmt.Errorf("dir: %q: %w", ent.Name, fs.ErrExist)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	// Each restart adds a level or splits one index block; the depth
	// bounds how many a single Add needs. The first pass goes on from
	// CheckAdd's root and path when there are some.
	_, sc, checkedFrames, checkedHash, checkedEff, checked := e.takeChecked(ent.Name)
	if sc == nil {
		sc, checked = getDxScratch(), false
	}
	defer putDxScratch(sc)
	for pass := 0; pass <= 2*dxMaxLevelsLarge; pass++ {
		d = e.Dir()
		r := &sc.root
		var frames []frame
		var eff int
		var h uint32
		if checked && pass == 0 {
			frames, h, eff = checkedFrames, checkedHash, checkedEff
		} else {
			if err := d.rootInto(r, sc.entries[:0]); err != nil {
				return err
			}
			eff = EffectiveVersion(r.HashVersion, e.HashUnsigned)
			var err error
			if h, _, err = hashName(ent.Name, eff, e.HashSeed); err != nil {
				return err
			}
			if frames, err = d.probeInto(r, h, sc.frames[:0], sc); err != nil {
				return err
			}
		}
		last := len(frames) - 1
		leaf := frames[last].entries[frames[last].at].Block
		if inserted, err := e.insertInPlace(leaf, ent); inserted || err != nil {
			return err
		}
		// No room: the leaf is split from a copy.
		b, err := d.block(leaf, "directory block", true)
		if err != nil {
			return err
		}
		if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
			return fserr.At(err, int64(leaf), e.Ino)
		}
		ok, err := Insert(b, e.Format, ent, e.CsumSeed)
		if err != nil {
			return fserr.At(err, int64(leaf), e.Ino)
		}
		if ok {
			return e.Store.WriteBlock(leaf, b)
		}
		if len(frames[last].entries) < e.frameLimit(last) {
			return e.splitLeaf(r, frames[last], leaf, b, hashedEntry{ent, h}, eff)
		}
		// The leaf's index block is full: split the highest full block
		// of the run of full ones ending at it, or add a level.
		i := last
		for i > 0 && len(frames[i-1].entries) >= e.frameLimit(i-1) {
			i--
		}
		if i == 0 {
			err = e.addLevel(r)
		} else {
			err = e.splitNode(r, frames[i-1], frames[i])
		}
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("dir: inode %d: htree insert did not settle", e.Ino)
}

// insertInPlace adds ent to leaf lblk in its buffer, when the store can
// change blocks in place (Modifier), and reports whether it did: a leaf
// without room is left as it was. Most inserts fit, and a copy of the
// leaf was a fifth of an insert's time.
func (e *Editor) insertInPlace(lblk uint32, ent Entry) (bool, error) {
	m, ok := e.Store.(Modifier)
	if !ok {
		return false, nil
	}
	if lblk >= e.NBlocks {
		return false, &fserr.CorruptError{What: "directory block", Block: int64(lblk), Ino: e.Ino,
			Detail: fmt.Sprintf("block %d is past the directory's %d blocks", lblk, e.NBlocks)}
	}
	inserted := false
	err := m.ModifyBlock(lblk, func(b []byte) error {
		if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
			return fserr.At(err, int64(lblk), e.Ino)
		}
		ok, err := Insert(b, e.Format, ent, e.CsumSeed)
		if err != nil {
			return fserr.At(err, int64(lblk), e.Ino)
		}
		inserted = ok
		return nil
	})
	return inserted, err
}

// splitLeaf splits the full leaf lblk (content b) in two by hash, with ent
// added to the part its hash falls in, and links the new upper leaf into
// parent after the old one (kernel: do_split + dx_insert_block).
func (e *Editor) splitLeaf(r *DxRoot, parent frame, lblk uint32, b []byte, ent hashedEntry, eff int) error {
	blk, err := ParseBlock(b, e.Format)
	if err != nil {
		return fserr.At(err, int64(lblk), e.Ino)
	}
	lb, hb, hash2, err := e.splitBlocks(blk.Entries(), eff, ent)
	if err != nil {
		return err
	}
	nb, err := e.appendBlock()
	if err != nil {
		return err
	}
	pes := slices.Insert(slices.Clone(parent.entries), parent.at+1, DxEntry{Hash: hash2, Block: nb})
	if err := e.Store.WriteBlock(nb, hb); err != nil {
		return err
	}
	if err := e.Store.WriteBlock(lblk, lb); err != nil {
		return err
	}
	return e.writeIndex(r, parent, pes)
}

// splitNode moves the upper half of the full index node child to a new
// node and links it into parent after child (kernel: ext4_dx_add_entry's
// "Split index" branch). The new node's first hash lives in parent.
func (e *Editor) splitNode(r *DxRoot, parent, child frame) error {
	es := child.entries
	n1 := len(es) / 2
	lo := slices.Clone(es[:n1])
	hi := slices.Clone(es[n1:])
	hash2 := hi[0].Hash
	hi[0].Hash = 0
	hb, err := EncodeDxNode(e.Format, &DxNode{Entries: hi}, e.CsumSeed)
	if err != nil {
		return err
	}
	lb, err := EncodeDxNode(e.Format, &DxNode{Entries: lo}, e.CsumSeed)
	if err != nil {
		return err
	}
	nb, err := e.appendBlock()
	if err != nil {
		return err
	}
	pes := slices.Insert(slices.Clone(parent.entries), parent.at+1, DxEntry{Hash: hash2, Block: nb})
	if err := e.Store.WriteBlock(nb, hb); err != nil {
		return err
	}
	if err := e.Store.WriteBlock(child.block, lb); err != nil {
		return err
	}
	return e.writeIndex(r, parent, pes)
}

// addLevel moves the full root's entries to a new index node that becomes
// the root's only child (kernel: ext4_dx_add_entry's add_level branch).
func (e *Editor) addLevel(r *DxRoot) error {
	if int(r.IndirectLevels)+1 >= MaxLevels(e.Format) {
		return fmt.Errorf("inode %d, %d levels: %w", e.Ino, r.IndirectLevels+1, ErrIndexFull)
	}
	es := slices.Clone(r.Entries)
	es[0].Hash = 0
	nodeb, err := EncodeDxNode(e.Format, &DxNode{Entries: es}, e.CsumSeed)
	if err != nil {
		return err
	}
	nb, err := e.appendBlock()
	if err != nil {
		return err
	}
	nr := *r
	nr.Entries = []DxEntry{{Block: nb}}
	nr.IndirectLevels++
	rootb, err := EncodeDxRoot(e.Format, &nr, e.CsumSeed)
	if err != nil {
		return err
	}
	if err := e.Store.WriteBlock(nb, nodeb); err != nil {
		return err
	}
	return e.Store.WriteBlock(0, rootb)
}
