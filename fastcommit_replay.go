package ext4go

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/super"
)

// Fast-commit replay (kernel: fs/ext4/fast_commit.c, ext4_fc_replay).
//
// A fast commit logs operations, not blocks: inodes (their raw bytes
// but i_block), ranges mapped and unmapped, directory entries added and
// removed. Bitmaps and group counts are not logged; the replay rebuilds
// them for the inodes it touched. After the full transactions are
// replayed (jbd2.Recover), the records are applied in log order, as the
// kernel applies them:
//
//   - INODE: the inode's bytes before i_block and from i_generation on are
//     the logged ones; i_block stays (its extent tree is changed by the
//     range records), or becomes an empty tree if it holds none; the
//     inode is marked in use. The blocks it mapped before are released.
//   - ADD_RANGE: the range is mapped to the logged blocks; a different
//     mapping there is replaced (its blocks released), a different
//     written state converted.
//   - DEL_RANGE: the range is unmapped, its blocks released.
//   - CREAT_DENTRY: the inode is marked in use, a directory gets its "."
//     and ".." block, and the entry is added (one link).
//   - ADD_ENTRY, DEL_ENTRY: an entry is added or removed and the link
//     count follows; a missing inode or directory skips the record, an
//     entry already there (or already gone) is not an error.
//
// At the end every block the touched inodes map, tree blocks included, is
// marked used, every released block none of them maps any more is marked
// free, and i_blocks is counted anew (kernel:
// ext4_fc_set_bitmaps_and_counters, ext4_ext_replay_set_iblocks). An
// inode an entry removal left without links is freed, as the orphan
// cleanup after the kernel's replay would free it.
//
// The replay runs through a writable FS opened without journal over a
// copy-on-write view of the device with the full replay in it (cowDev),
// so that it uses the same extent, directory and allocator code as every
// change, and its result is a set of blocks: kept in memory by a
// read-only open, written home with the full replay by a writable one
// (replayHome), before the journal is reset. A crash while they are
// written leaves the journal to be replayed again, to the same result.
// Tree and directory blocks the replay allocates avoid the blocks the
// fast commits map (kernel: ext4_fc_replay_check_excluded), and the
// blocks it releases are freed only at the end, so no block it must keep
// is handed out before.

// fcReplay is the state of one fast-commit replay (kernel:
// ext4_fc_replay_state).
type fcReplay struct {
	f        *FS
	regions  [][2]uint64 // [start, end) the ADD_RANGE records map
	modified []uint32    // inodes touched, in order (kernel: fc_modified_inodes)
	seen     map[uint32]bool
	released [][2]uint64     // blocks unmapped by the replay: freed at the end unless mapped again
	unlinked map[uint32]bool // inodes a DEL_ENTRY took a link from
}

// replayFastCommits applies the fast commits of rec over the device d
// with rec's blocks replayed, and returns every block the fast commits
// change (the full replay's blocks they leave alone are not included).
// The superblock among them keeps needs_recovery: replayHome clears it
// last.
func (f *FS) replayFastCommits(d dev.Device, rec *jbd2.Recovery) (map[uint64][]byte, error) {
	sb := f.sb
	if sb.ClusterRatio() > 1 {
		return nil, &UnsupportedError{Feature: "fast-commit replay on bigalloc"}
	}
	cow := &cowDev{Device: d, base: rec.Blocks, blocks: map[uint64][]byte{}, bs: f.blockSize}
	// The view opens like an unjournalled filesystem: needs_recovery
	// cleared for it, set again below with the state it had (the view's
	// Close marks it clean).
	var state uint16
	var roCompat uint32
	if err := cow.patchSuper(func(s *super.Superblock) {
		state, roCompat = s.State, s.FeatureROCompat
		s.FeatureIncompat &^= super.IncompatRecover
	}); err != nil {
		return nil, err
	}
	o := Options{Writable: true, NoJournal: true, AllowUnclean: true, AllowInUse: true,
		IgnoreJournal: true, IgnoreChecksums: f.opts.IgnoreChecksums, replaying: true}
	w, err := newFS(cow, &o, false)
	if err != nil {
		return nil, fmt.Errorf("opening the replayed filesystem: %w", err)
	}
	// Opened without its journal, the view must still keep off it: its
	// open tolerates a journal it cannot map, the replay does not.
	if err := w.protectJournal(); err != nil {
		w.tm.Abort(err)
		w.Close()
		return nil, fmt.Errorf("the journal of the replayed filesystem: %w", err)
	}
	if err := w.applyFastCommits(rec.FastCommits); err != nil {
		w.tm.Abort(err)
		w.Close()
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("after the fast-commit replay: %w", err)
	}
	if err := cow.patchSuper(func(s *super.Superblock) {
		s.FeatureIncompat |= super.IncompatRecover
		s.State = state
		s.FeatureROCompat |= roCompat & super.ROCompatOrphanPresent
	}); err != nil {
		return nil, err
	}
	return cow.blocks, nil
}

// applyFastCommits runs the replay on f, a writable FS opened for it.
func (f *FS) applyFastCommits(fc *jbd2.FastCommits) error {
	r := &fcReplay{f: f, seen: map[uint32]bool{}, unlinked: map[uint32]bool{}}
	for i, tg := range fc.Tags {
		if tg.Tag != jbd2.FCTagAddRange {
			continue
		}
		x, err := jbd2.DecodeFCRange(tg.Value)
		if err != nil {
			return r.corrupt(i, tg, err.Error())
		}
		r.regions = append(r.regions, [2]uint64{x.Start, x.Start + uint64(x.Len)})
	}
	r.regions = mergeRanges(r.regions)
	f.w.exclude = r.excluded
	defer func() { f.w.exclude = nil }()
	for i, tg := range fc.Tags {
		if err := r.apply(tg); err != nil {
			var ce *CorruptError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("fast-commit record %d (%s): %w", i, jbd2.FCTagName(tg.Tag), err)
		}
	}
	return r.finish()
}

func (r *fcReplay) corrupt(i int, tg jbd2.FCTag, detail string) error {
	return &CorruptError{What: "journal", Block: -1, Ino: r.f.sb.JournalInum,
		Detail: fmt.Sprintf("fast-commit record %d (%s): %s", i, jbd2.FCTagName(tg.Tag), detail)}
}

// excluded reports whether [start, start+n) meets a range the fast
// commits map, and if so where the first such range ends.
func (r *fcReplay) excluded(start, n uint64) (uint64, bool) {
	end := start + n
	i := sort.Search(len(r.regions), func(i int) bool { return r.regions[i][1] > start })
	if i < len(r.regions) && r.regions[i][0] < end {
		return r.regions[i][1], true
	}
	return 0, false
}

func (r *fcReplay) record(ino uint32) {
	if !r.seen[ino] {
		r.seen[ino] = true
		r.modified = append(r.modified, ino)
	}
}

func (r *fcReplay) release(start, n uint64) {
	if n > 0 {
		r.released = append(r.released, [2]uint64{start, start + n})
	}
}

// inode returns inode ino if it is one the kernel's iget would give: it
// reads, and has links.
func (r *fcReplay) inode(ino uint32) (*node, bool) {
	if ino < r.f.sb.FirstInode() && ino != rootIno {
		return nil, false // kernel: __ext4_iget refuses reserved inodes
	}
	n, err := r.f.inode(ino)
	if err != nil || n.in().LinksCount == 0 {
		return nil, false
	}
	return n, true
}

// blocksOf lists every block an extent-mapped inode maps, its tree
// blocks included.
func (r *fcReplay) blocksOf(n *node, in *inode.Inode) ([][2]uint64, error) {
	if !in.HasFlag(inode.FlagExtents) || in.HasFlag(inode.FlagInlineData) {
		return nil, nil
	}
	var rs [][2]uint64
	err := r.f.extentTree(n, in).WalkNodes(func(ni extent.NodeInfo) error {
		if ni.Block != 0 {
			rs = append(rs, [2]uint64{ni.Block, ni.Block + 1})
		}
		if ni.Node.Leaf() {
			for _, x := range ni.Node.Extents {
				rs = append(rs, [2]uint64{x.Start, x.Start + uint64(x.Len)})
			}
		}
		return nil
	})
	return rs, err
}

func (r *fcReplay) apply(tg jbd2.FCTag) error {
	switch tg.Tag {
	case jbd2.FCTagInode:
		x, err := jbd2.DecodeFCInode(tg.Value)
		if err != nil {
			return err
		}
		return r.replayInode(x)
	case jbd2.FCTagAddRange:
		x, err := jbd2.DecodeFCRange(tg.Value)
		if err != nil {
			return err
		}
		return r.addRange(x)
	case jbd2.FCTagDelRange:
		x, err := jbd2.DecodeFCDelRange(tg.Value)
		if err != nil {
			return err
		}
		return r.delRange(x)
	case jbd2.FCTagCreat, jbd2.FCTagLink, jbd2.FCTagUnlink:
		x, err := jbd2.DecodeFCDentry(tg.Tag, tg.Value)
		if err != nil {
			return err
		}
		switch tg.Tag {
		case jbd2.FCTagCreat:
			return r.create(x)
		case jbd2.FCTagLink:
			return r.link(x)
		}
		return r.unlink(x)
	}
	return nil
}

// replayInode applies an INODE record (kernel: ext4_fc_replay_inode).
func (r *fcReplay) replayInode(x jbd2.FCInode) (err error) {
	f := r.f
	blk, off, err := f.inodeLocation(x.Ino)
	if err != nil || (x.Ino < f.sb.FirstInode() && x.Ino != rootIno) {
		return nil // no such inode, or a reserved one: skipped
	}
	if old, ok := r.inode(x.Ino); ok {
		rs, err := r.blocksOf(old, old.in())
		if err != nil {
			return err
		}
		r.released = append(r.released, rs...)
	}
	r.record(x.Ino)
	raw := make([]byte, f.inodeSize)
	if err := f.tm.View(blk, func(b []byte) error { copy(raw, b[off:]); return nil }); err != nil {
		return err
	}
	const iBlock, iBlockEnd = 40, 100 // i_block, i_generation
	n := min(len(x.Raw), f.inodeSize)
	copy(raw[:iBlock], x.Raw[:iBlock])
	if n > iBlockEnd {
		copy(raw[iBlockEnd:n], x.Raw[iBlockEnd:n])
	}
	if f.inodeSize > inode.GoodOldSize && n <= inode.GoodOldSize+2 {
		// The record ends before i_extra_isize: there is none.
		binary.LittleEndian.PutUint16(raw[inode.GoodOldSize:], 0)
	}
	flags := binary.LittleEndian.Uint32(raw[0x20:])
	switch {
	case flags&inode.FlagInlineData != 0:
		copy(raw[iBlock:iBlockEnd], x.Raw[iBlock:iBlockEnd])
	case flags&inode.FlagExtents != 0:
		if _, err := extent.DecodeHeader(raw[iBlock:iBlockEnd]); err != nil {
			clear(raw[iBlock:iBlockEnd])
			if err := extent.NewRoot().Encode(raw[iBlock:iBlockEnd]); err != nil {
				return err
			}
		}
	}
	in, err := inode.Decode(raw, f.inodeSize)
	if err != nil {
		return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: fmt.Sprintf("fast-commit INODE record: %v", err)}
	}
	in.Raw = raw
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	if x.Ino >= f.sb.FirstInode() {
		if _, err := f.w.ialloc.MarkUsed(h, x.Ino, in.IsDir()); err != nil {
			return err
		}
	}
	if old, err := f.inode(x.Ino); err == nil {
		f.cache.forget(old)
	}
	nn := newNode(x.Ino, nil)
	if err := f.setInode(h, nn, in); err != nil {
		return err
	}
	f.cache.put(nn)
	return nil
}

// rangeEditor returns the extent editor of n for the replay, or nil for
// an inode without an extent tree (which fast commits do not map).
func (r *fcReplay) rangeEditor(h handle, n *node, in *inode.Inode) *extent.Editor {
	if in.IsDir() {
		return nil
	}
	if !in.HasFlag(inode.FlagExtents) || in.HasFlag(inode.FlagInlineData) {
		return nil
	}
	s := &extStore{f: r.f, h: h, ino: n.ino, replay: r}
	return r.f.editor(n, in, s).(extentMap).Editor
}

// editRange runs fn on the extent tree of inode ino for a range record
// (tag names it in errors), in a handle, under the inode's lock, and
// writes the inode back: the shared part of ADD_RANGE and DEL_RANGE. A
// missing inode, or one without an extent tree, skips the record; a
// directory's range is corrupt (the kernel logs none: directory blocks
// are rebuilt from the entry records).
func (r *fcReplay) editRange(tag string, ino uint32, fn func(ed *extent.Editor) error) (err error) {
	f := r.f
	n, ok := r.inode(ino)
	if !ok {
		return nil
	}
	if n.isDir() {
		return &CorruptError{What: "journal", Block: -1, Ino: ino, Detail: "fast-commit " + tag + " of a directory"}
	}
	r.record(ino)
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	n.mu.Lock()
	defer n.mu.Unlock()
	in := editInode(n)
	ed := r.rangeEditor(h, n, in)
	if ed == nil {
		return nil
	}
	if err := fn(ed); err != nil {
		return err
	}
	return f.setInode(h, n, in)
}

// addRange applies an ADD_RANGE record (kernel: ext4_fc_replay_add_range).
func (r *fcReplay) addRange(x jbd2.FCRange) error {
	if uint64(x.Logical)+uint64(x.Len) > extent.MaxLogical {
		return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: fmt.Sprintf("fast-commit ADD_RANGE %d+%d past the last file block", x.Logical, x.Len)}
	}
	return r.editRange("ADD_RANGE", x.Ino, func(ed *extent.Editor) error {
		cur, end := x.Logical, x.Logical+x.Len
		for cur < end {
			m, err := ed.Tree().Lookup(cur)
			if err != nil {
				return err
			}
			l := uint32(min(uint64(end-cur), m.Len))
			want := extent.Extent{Logical: cur, Len: l, Start: x.Start + uint64(cur-x.Logical), Unwritten: x.Unwritten}
			switch {
			case m.Hole():
				err = ed.Insert(want)
			case m.Physical != want.Start:
				// Mapped elsewhere before: the new blocks replace the old.
				if err = ed.Remove(cur, cur+l); err == nil {
					err = ed.Insert(want)
				}
			case m.Unwritten != x.Unwritten:
				err = ed.Convert(cur, l, !x.Unwritten)
			}
			if err != nil {
				return err
			}
			cur += l
		}
		return nil
	})
}

// delRange applies a DEL_RANGE record (kernel: ext4_fc_replay_del_range).
func (r *fcReplay) delRange(x jbd2.FCDelRange) error {
	if x.Len == 0 || uint64(x.Logical) >= extent.MaxLogical {
		return nil
	}
	return r.editRange("DEL_RANGE", x.Ino, func(ed *extent.Editor) error {
		end := uint32(min(uint64(x.Logical)+uint64(x.Len), extent.MaxLogical))
		return ed.Remove(x.Logical, end)
	})
}

// finish frees the inodes left without links, then rebuilds the bitmaps
// of the touched inodes and their i_blocks (kernel:
// ext4_fc_set_bitmaps_and_counters).
func (r *fcReplay) finish() (err error) {
	f := r.f
	// The tree blocks the replay freed wait for a commit.
	if err := f.tm.Commit(); err != nil {
		return err
	}
	if err := r.freeDead(); err != nil {
		return err
	}
	if err := f.tm.Commit(); err != nil {
		return err
	}
	var final [][2]uint64
	type count struct {
		n      *node
		blocks uint64
	}
	var counts []count
	for _, ino := range r.modified {
		n, ok := r.inode(ino)
		if !ok {
			continue
		}
		in := n.in()
		rs, err := r.blocksOf(n, in)
		if err != nil {
			return err
		}
		final = append(final, rs...)
		if in.HasFlag(inode.FlagExtents) && !in.HasFlag(inode.FlagInlineData) {
			var b uint64
			for _, x := range rs {
				b += x[1] - x[0]
			}
			if in.FileACL != 0 {
				b++
			}
			counts = append(counts, count{n, b})
		}
	}
	final = mergeRanges(final)
	if err := r.checkRanges(final); err != nil {
		return err
	}
	free := subtractRanges(subtractRanges(mergeRanges(r.released), final), f.zoneRanges())
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	for _, x := range final {
		if err := f.w.balloc.MarkRange(h, x[0], x[1]-x[0], true); err != nil {
			return err
		}
	}
	for _, x := range free {
		if x[0] < uint64(f.sb.FirstDataBlock) || x[1] > f.sb.BlocksCount() {
			continue
		}
		if err := f.w.balloc.MarkRange(h, x[0], x[1]-x[0], false); err != nil {
			return err
		}
	}
	for _, c := range counts {
		c.n.mu.Lock()
		in := editInode(c.n)
		err := in.SetSectors(c.blocks*uint64(f.blockSize/512), uint32(f.blockSize), f.hugeFile)
		if err == nil {
			err = f.setInode(h, c.n, in)
		}
		c.n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return err
}

// checkRanges refuses blocks outside the filesystem or in its fixed
// metadata (the journal included).
func (r *fcReplay) checkRanges(rs [][2]uint64) error {
	f := r.f
	for _, x := range rs {
		if x[0] < uint64(f.sb.FirstDataBlock) || x[1] > f.sb.BlocksCount() || x[1] <= x[0] {
			return &CorruptError{What: "journal", Block: int64(x[0]), Detail: "the fast commits map blocks outside the filesystem"}
		}
		if f.zone.Load().Overlaps(x[0], x[1]-x[0]) {
			return &CorruptError{What: "journal", Block: int64(x[0]), Detail: "the fast commits map blocks of the filesystem's metadata"}
		}
	}
	return nil
}

// freeDead frees the inodes an entry removal left without links, as the
// orphan cleanup after the kernel's replay frees them: their blocks
// (marked used first: the fast commits may have mapped them without the
// bitmap knowing), xattrs, and the inode.
func (r *fcReplay) freeDead() (err error) {
	f := r.f
	var dead []*node
	for ino := range r.unlinked {
		n, err := f.inode(ino)
		if err == nil && n.in().LinksCount == 0 && !n.freed.Load() {
			dead = append(dead, n)
		}
	}
	if len(dead) == 0 {
		return nil
	}
	slices.SortFunc(dead, func(a, b *node) int { return int(a.ino) - int(b.ino) })
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	for _, n := range dead {
		n.mu.Lock()
		err := func() error {
			rs, err := r.blocksOf(n, n.in())
			if err != nil {
				return err
			}
			rs = mergeRanges(rs)
			if err := r.checkRanges(rs); err != nil {
				return err
			}
			for _, x := range rs {
				if err := f.w.balloc.MarkRange(h, x[0], x[1]-x[0], true); err != nil {
					return err
				}
			}
			return f.freeInodeIn(h, n)
		}()
		n.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// subtractRanges returns the parts of a (sorted, merged) outside b
// (sorted, merged).
func subtractRanges(a, b [][2]uint64) [][2]uint64 {
	var out [][2]uint64
	j := 0
	for _, x := range a {
		s := x[0]
		for j < len(b) && b[j][1] <= s {
			j++
		}
		for k := j; k < len(b) && b[k][0] < x[1]; k++ {
			if b[k][0] > s {
				out = append(out, [2]uint64{s, b[k][0]})
			}
			s = max(s, b[k][1])
		}
		if s < x[1] {
			out = append(out, [2]uint64{s, x[1]})
		}
	}
	return out
}
