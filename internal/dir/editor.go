package dir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"syscall"

	"github.com/ext4go/ext4go/internal/fserr"
)

// ErrIndexFull is returned by Editor.Add when an htree has as many levels as
// the filesystem allows and every index block on the new name's path is
// full (kernel: "Directory index full", ENOSPC). It matches syscall.ENOSPC.
var ErrIndexFull = fmt.Errorf("dir: directory index full: %w", syscall.ENOSPC)

// Editor changes one directory through a Store, keeping it a valid linear
// directory or htree: the directory write path of the kernel's namei.c
// (ext4_add_entry, make_indexed_dir, ext4_dx_add_entry, do_split,
// ext4_delete_entry). Like the kernel it never shrinks a directory, merges
// leaves or removes index entries: removals leave empty leaves in place.
//
// NBlocks and Indexed describe the directory and are kept up to date by the
// operations: after Add the caller persists i_size (through the Store's
// AppendBlock) and, when Indexed turned true, the inode flag EXT4_INDEX_FL.
// An Editor is not safe for concurrent use; the caller holds the directory's
// lock for the length of each operation.
type Editor struct {
	Format
	Store    Store
	NBlocks  uint32 // i_size / block size
	Indexed  bool   // inode flag EXT4_INDEX_FL: block 0 is an htree root
	CsumSeed uint32 // the directory inode's checksum seed (with Format.Csum)
	Ino      uint32 // the directory's inode number ("." must hold it)

	// DirIndex is the compat feature dir_index: when a one-block linear
	// directory is full, Add turns it into an htree instead of appending a
	// block (kernel: make_indexed_dir).
	DirIndex bool
	// DefHashVersion is s_def_hash_version, the hash a new htree root gets
	// (HashLegacy, HashHalfMD4 or HashTea).
	DefHashVersion uint8
	// NameChecked says the caller has just looked the name up and not
	// found it, with the directory locked: Add then skips its own htree
	// lookup (an insert still refuses a name in the leaf it writes).
	NameChecked bool

	// checked is what CheckAdd found for name, for the Add of that name
	// to go on from instead of reading it all again.
	checked struct {
		name []byte
		fit  int64 // linear: the first block with room, -1 if none
		// htree: the root, the path to the leaf and the name's hash.
		sc     *dxScratch
		frames []frame
		hash   uint32
		eff    int
	}
}

// Dir returns a read-only view of the directory that reads through the
// Store, for lookups and iteration.
func (e *Editor) Dir() *Dir {
	d := &Dir{Format: e.Format, Read: e.Store.ReadBlock, NBlocks: e.NBlocks, Indexed: e.Indexed, CsumSeed: e.CsumSeed, Ino: e.Ino}
	if v, ok := e.Store.(Viewer); ok {
		d.View = v.ViewBlock
	}
	return d
}

func isDots(name []byte) bool {
	return string(name) == "." || string(name) == ".."
}

// checkNewName rejects names no dirent may hold: empty, too long, or with
// a slash or NUL (e2fsck: PR_2_BAD_NAME).
func checkNewName(name []byte) error {
	if len(name) == 0 || len(name) > MaxNameLen || bytes.ContainsAny(name, "/\x00") {
		return fmt.Errorf("dir: invalid name %q: %w", name, fs.ErrInvalid)
	}
	return nil
}

func (e *Editor) corrupt(lblk int64, format string, args ...any) error {
	return &fserr.CorruptError{What: "directory", Block: lblk, Ino: e.Ino, Detail: fmt.Sprintf(format, args...)}
}

// Add inserts ent. It returns an error matching fs.ErrExist if the name is
// already there (".." and "." always are), fs.ErrInvalid for a bad name or
// inode 0, and ErrIndexFull when an htree can grow no further.
//
// A linear directory gets the entry in the first block with room (kernel:
// ext4_add_entry). If none has room, a one-block directory on a dir_index
// filesystem becomes an htree: block 0 turns into the root and its entries,
// with the new one, are split by hash into two new leaves (make_indexed_dir);
// otherwise a block is appended. In an htree the entry goes to the leaf its
// hash selects; a full leaf is split in two by hash, a full index block is
// split, and a full root moves its entries to a new index block one level
// down (ext4_dx_add_entry).
func (e *Editor) Add(ent Entry) error {
	if err := checkNewName(ent.Name); err != nil {
		return err
	}
	if isDots(ent.Name) {
		return fmt.Errorf("dir: %q: %w", ent.Name, fs.ErrExist)
	}
	if ent.Inode == 0 {
		return fmt.Errorf("dir: %q: inode 0: %w", ent.Name, fs.ErrInvalid)
	}
	if !e.FileType {
		ent.FileType = 0
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	if e.Indexed {
		return e.dxAdd(ent)
	}
	return e.linearAdd(ent)
}

// slotRoom is the bytes a new dirent could take from slot s (the test of
// ext4_find_dest_de): all of an
// unused slot, the slack past its entry of a used one.
func slotRoom(s Slot) int {
	if s.Inode == 0 {
		return s.RecLen
	}
	return s.RecLen - slotNeed(s)
}

// CheckAdd makes the reads and checks an Add of name would make before
// its first change, and changes nothing: the caller can then refuse, with
// nothing allocated, a name the directory cannot take (a corrupt block or
// index on the way). It finds no room and allocates nothing: an Add that
// passes may still fail for want of space. The directory must not change
// between CheckAdd and Add (the caller holds its lock).
func (e *Editor) CheckAdd(name []byte) error {
	if err := checkNewName(name); err != nil {
		return err
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	e.dropChecked()
	if !e.Indexed {
		fit, err := e.linearScan(Entry{Name: name})
		if err == nil {
			e.checked.name, e.checked.fit = name, fit
		}
		return err
	}
	d := e.Dir()
	sc := getDxScratch()
	r := &sc.root
	err := d.rootInto(r, sc.entries[:0])
	var eff int
	var h uint32
	var frames []frame
	if err == nil {
		eff = EffectiveVersion(r.HashVersion, e.HashUnsigned)
		h, _, err = hashName(name, eff, e.HashSeed)
	}
	if err == nil {
		frames, err = d.probeInto(r, h, sc.frames[:0], sc)
	}
	if err == nil {
		last := len(frames) - 1
		leaf := frames[last].entries[frames[last].at].Block
		err = d.viewBlock(leaf, "directory block", true, func(b []byte) error {
			if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
				return fserr.At(err, int64(leaf), e.Ino)
			}
			region, err := checkedLeafRegion(b, &e.Format)
			if err == nil {
				err = scanRegion(region, &e.Format, func(Slot) bool { return true })
			}
			return fserr.At(err, int64(leaf), e.Ino)
		})
	}
	if err != nil {
		putDxScratch(sc)
		return err
	}
	c := &e.checked
	c.name, c.sc, c.frames, c.hash, c.eff = name, sc, frames, h, eff
	return nil
}

// takeChecked returns what CheckAdd found if it was for name (it holds
// for the one Add that follows), and forgets it.
func (e *Editor) takeChecked(name []byte) (fit int64, sc *dxScratch, frames []frame, hash uint32, eff int, ok bool) {
	c := &e.checked
	if c.name != nil && bytes.Equal(c.name, name) {
		fit, sc, frames, hash, eff, ok = c.fit, c.sc, c.frames, c.hash, c.eff, true
		c.sc = nil // the caller's now
	}
	e.dropChecked()
	return
}

// dropChecked forgets what CheckAdd found.
func (e *Editor) dropChecked() {
	c := &e.checked
	if c.sc != nil {
		putDxScratch(c.sc)
	}
	*c = struct {
		name   []byte
		fit    int64
		sc     *dxScratch
		frames []frame
		hash   uint32
		eff    int
	}{}
}

func (e *Editor) linearAdd(ent Entry) error {
	fit, _, _, _, _, ok := e.takeChecked(ent.Name)
	if !ok {
		var err error
		if fit, err = e.linearScan(ent); err != nil {
			return err
		}
	}
	if fit >= 0 {
		return e.insertInto(uint32(fit), ent)
	}
	if e.NBlocks == 1 && e.DirIndex {
		// Block 0 is full: its entries (names copied out) seed the index.
		blk, err := e.Dir().leaf(0, false)
		if err != nil {
			return err
		}
		var slots0 []Slot
		if blk != nil {
			slots0 = slices.Clone(blk.Slots)
		}
		for i := range slots0 {
			slots0[i].Name = bytes.Clone(slots0[i].Name)
		}
		if canIndex(slots0, e.Ino) {
			return e.makeIndexed(slots0, ent)
		}
	}
	return e.appendLeaf(ent)
}

// linearScan checks every block of a linear directory as linearAdd reads
// it, and returns the first block with room for ent (-1: none) or an
// error matching fs.ErrExist if the name is there.
func (e *Editor) linearScan(ent Entry) (int64, error) {
	d := e.Dir()
	need := RecLen(len(ent.Name))
	fit := int64(-1)
	for lblk := uint32(0); lblk < e.NBlocks; lblk++ {
		// Looked at in place (a view): only the block written gets copied.
		err := d.viewBlock(lblk, "directory block", false, func(b []byte) error {
			if b == nil {
				return nil // a hole: e2fsck's to fill, not ours
			}
			if err := VerifyLeafChecksum(b, d.Format, d.CsumSeed); err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			region, err := checkedLeafRegion(b, &d.Format)
			if err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			dup := false
			err = scanRegion(region, &d.Format, func(s Slot) bool {
				if s.Inode != 0 && bytes.Equal(s.Name, ent.Name) {
					dup = true
					return false
				}
				if fit < 0 && slotRoom(s) >= need {
					fit = int64(lblk)
				}
				return true
			})
			if err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			if dup {
				return fmt.Errorf("dir: %q: %w", ent.Name, fs.ErrExist)
			}
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	return fit, nil
}

// insertInto adds ent to leaf lblk, which is known to have room.
func (e *Editor) insertInto(lblk uint32, ent Entry) error {
	if m, ok := e.Store.(Modifier); ok {
		if lblk >= e.NBlocks {
			return &fserr.CorruptError{What: "directory block", Block: int64(lblk), Ino: e.Ino,
				Detail: fmt.Sprintf("block %d is past the directory's %d blocks", lblk, e.NBlocks)}
		}
		inserted := false
		err := m.ModifyBlock(lblk, func(b []byte) error {
			ok, err := Insert(b, e.Format, ent, e.CsumSeed)
			if err != nil {
				return fserr.At(err, int64(lblk), e.Ino)
			}
			inserted = ok
			return nil
		})
		if err != nil {
			return err
		}
		if !inserted {
			return fmt.Errorf("dir: block %d of inode %d has no room after all", lblk, e.Ino)
		}
		return nil
	}
	b, err := e.Dir().block(lblk, "directory block", true)
	if err != nil {
		return err
	}
	ok, err := Insert(b, e.Format, ent, e.CsumSeed)
	if err != nil {
		return fserr.At(err, int64(lblk), e.Ino)
	}
	if !ok {
		return fmt.Errorf("dir: block %d of inode %d has no room after all", lblk, e.Ino)
	}
	return e.Store.WriteBlock(lblk, b)
}

// appendBlock grows the directory by one block.
func (e *Editor) appendBlock() (uint32, error) {
	lblk, err := e.Store.AppendBlock()
	if err != nil {
		return 0, err
	}
	if lblk != e.NBlocks {
		return 0, fmt.Errorf("dir: store appended block %d to inode %d, want %d", lblk, e.Ino, e.NBlocks)
	}
	e.NBlocks++
	return lblk, nil
}

// appendLeaf appends a block holding ent alone.
func (e *Editor) appendLeaf(ent Entry) error {
	b, err := EncodeBlock(e.Format, []Entry{ent}, e.CsumSeed)
	if err != nil {
		return err
	}
	lblk, err := e.appendBlock()
	if err != nil {
		return err
	}
	return e.Store.WriteBlock(lblk, b)
}

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

// find locates a used entry other than "." and "..", and returns its leaf
// block's content, verified.
func (e *Editor) find(name []byte) (Result, []byte, error) {
	if isDots(name) {
		return Result{}, nil, fmt.Errorf("dir: %q: %w", name, fs.ErrInvalid)
	}
	d := e.Dir()
	res, err := d.Lookup(name)
	if err != nil {
		return Result{}, nil, err
	}
	b, err := d.block(res.Block, "directory block", true)
	if err != nil {
		return Result{}, nil, err
	}
	if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
		return Result{}, nil, fserr.At(err, int64(res.Block), e.Ino)
	}
	return res, b, nil
}

// Remove deletes the entry called name and returns it (kernel:
// ext4_delete_entry): its space joins the previous dirent of its block, or
// the dirent is marked unused if it is the block's first. Blocks and index
// entries stay. A missing name gives an error matching fs.ErrNotExist; "."
// and ".." give fs.ErrInvalid.
func (e *Editor) Remove(name []byte) (Entry, error) {
	res, b, err := e.find(name)
	if err != nil {
		return Entry{}, err
	}
	old, ok, err := Delete(b, e.Format, name, e.CsumSeed)
	if err != nil {
		return Entry{}, fserr.At(err, int64(res.Block), e.Ino)
	}
	if !ok {
		return Entry{}, fmt.Errorf("dir: %q vanished from block %d of inode %d", name, res.Block, e.Ino)
	}
	return old, e.Store.WriteBlock(res.Block, b)
}

// Replace points the existing entry called name at inode ino of file type
// ft (a rename over an existing name) and returns the entry as it was.
func (e *Editor) Replace(name []byte, ino uint32, ft uint8) (Entry, error) {
	if ino == 0 {
		return Entry{}, fmt.Errorf("dir: %q: inode 0: %w", name, fs.ErrInvalid)
	}
	res, b, err := e.find(name)
	if err != nil {
		return Entry{}, err
	}
	off := res.Offset
	if off+direntHeader+len(name) > len(b) || !bytes.Equal(b[off+direntHeader:off+direntHeader+len(name)], name) {
		return Entry{}, fmt.Errorf("dir: %q moved in block %d of inode %d", name, res.Block, e.Ino)
	}
	binary.LittleEndian.PutUint32(b[off:], ino)
	if e.FileType {
		b[off+7] = ft
	}
	if e.Csum {
		SetLeafChecksum(b, e.Format, e.CsumSeed)
	}
	return res.Entry, e.Store.WriteBlock(res.Block, b)
}

// SetDotDot makes ".." point at parent (a directory moved to another
// parent): the second dirent of block 0, or the ".." of the htree root.
func (e *Editor) SetDotDot(parent uint32) error {
	if parent == 0 {
		return fmt.Errorf("dir: parent inode 0: %w", fs.ErrInvalid)
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	d := e.Dir()
	b, err := d.block(0, "directory block", true)
	if err != nil {
		return err
	}
	if e.Indexed {
		if _, err := d.root(); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b[minRecLen:], parent)
		if e.Csum {
			if err := SetDxChecksum(b, e.Format, e.CsumSeed); err != nil {
				return err
			}
		}
		return e.Store.WriteBlock(0, b)
	}
	blk, err := d.parseLeafView(0, b)
	if err != nil {
		return err
	}
	if len(blk.Slots) < 2 || string(blk.Slots[1].Name) != ".." || string(blk.Slots[0].Name) != "." {
		return e.corrupt(0, `block 0 does not start with "." and ".."`)
	}
	binary.LittleEndian.PutUint32(b[blk.Slots[1].Off:], parent)
	if e.Csum {
		SetLeafChecksum(b, e.Format, e.CsumSeed)
	}
	return e.Store.WriteBlock(0, b)
}

// IsEmpty reports whether the directory holds nothing but "." and ".."
// (kernel: empty_dir, for rmdir).
func (e *Editor) IsEmpty() (bool, error) {
	empty := true
	err := e.Dir().Iterate(func(_ uint32, _ int, x Entry) error {
		if isDots(x.Name) {
			return nil
		}
		empty = false
		return fs.SkipAll
	})
	return empty && err == nil, err
}

// NewDirBlock returns block 0 of a new directory self in parent: "." and
// ".." (file type directory when f.FileType), ".." reaching to the end or,
// with f.Csum, to the checksum tail (kernel: ext4_init_dot_dotdot).
func NewDirBlock(f Format, self, parent, seed uint32) ([]byte, error) {
	return EncodeBlock(f, []Entry{
		{Inode: self, Name: []byte("."), FileType: FTDir},
		{Inode: parent, Name: []byte(".."), FileType: FTDir},
	}, seed)
}
