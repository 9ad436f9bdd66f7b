package ext4go

import (
	"fmt"
	"slices"

	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/syszone"
)

// The system zone (internal/syszone) is built at every open, read-only
// too, as the kernel builds it at mount (ext4_setup_system_zone): the
// fixed metadata of every group, then the journal's blocks as the journal
// inode's own. It is the one place consulted by everything that follows a
// block number found in an inode: the extent trees and block maps (their
// data blocks and their index and indirect blocks, through the Zone of
// extent.Tree, extent.Editor, blockmap.Map and blockmap.Editor, which
// covers file data, directory blocks and symlink targets read or
// written), xattr blocks (checkXattrBlock), the data writes
// (writeData), and the allocator (mballoc.SystemZone), which neither hands
// out nor frees a block of it.

// buildSystemZone lists the fixed metadata of every group: superblock
// and descriptor copies, reserved GDT blocks (the resize inode's own when
// the filesystem has one: they are what it maps), bitmaps and inode
// tables. Two of them sharing a block is corruption (a bitmap in another
// group's inode table, two groups with one bitmap), returned as the error
// with the zone all the same: the kernel refuses to mount such a
// filesystem (add_system_zone: "Unexpected overlap of system zones"),
// ext4go only to change it, since its allocators would write the one
// structure over the other.
func (f *FS) buildSystemZone() (*syszone.Zone, error) {
	sb := f.sb
	type part struct {
		r        syszone.Range
		reserved bool
		what     string
		group    int
	}
	var parts []part
	add := func(start, n uint64, reserved bool, what string, g int) {
		if n > 0 {
			parts = append(parts, part{syszone.Range{Start: start, End: start + n}, reserved, what, g})
		}
	}
	itb := uint64(sb.InodeTableBlocks())
	for g := range f.groups {
		o := sb.GroupOverhead(uint32(g))
		if o.HasSuper {
			add(o.SuperBlock, 1, false, "superblock copy", g)
		}
		if o.GDTBlocks > 0 {
			add(o.GDT, uint64(o.GDTBlocks), false, "group descriptors", g)
			add(o.GDT+uint64(o.GDTBlocks), uint64(o.ReservedGDT), true, "reserved GDT blocks", g)
		}
		gd := f.groups[g]
		add(gd.BlockBitmap, 1, false, "block bitmap", g)
		add(gd.InodeBitmap, 1, false, "inode bitmap", g)
		add(gd.InodeTable, itb, false, "inode table", g)
	}
	byStart := slices.Clone(parts)
	slices.SortStableFunc(byStart, func(a, b part) int {
		switch {
		case a.r.Start < b.r.Start:
			return -1
		case a.r.Start > b.r.Start:
			return 1
		}
		return 0
	})
	var overlap error
	var reach part // of those seen, the one reaching furthest
	for i, cur := range byStart {
		if i > 0 && cur.r.Start < reach.r.End {
			overlap = &CorruptError{What: fmt.Sprintf("group descriptor %d", cur.group), Block: int64(cur.r.Start),
				Detail: fmt.Sprintf("the %s of group %d (blocks %d+%d) overlaps the %s of group %d (blocks %d+%d)",
					cur.what, cur.group, cur.r.Start, cur.r.End-cur.r.Start, reach.what, reach.group, reach.r.Start, reach.r.End-reach.r.Start)}
			break
		}
		if i == 0 || cur.r.End > reach.r.End {
			reach = cur
		}
	}
	var fixed, reserved []syszone.Range
	for _, p := range parts {
		if p.reserved {
			reserved = append(reserved, p.r)
		} else {
			fixed = append(fixed, p.r)
		}
	}
	if !sb.HasCompat(super.CompatResizeInode) {
		return syszone.New(append(fixed, reserved...)), overlap
	}
	return syszone.New(fixed).WithOwner(super.ResizeIno, reserved), overlap
}

// protectJournal adds the internal journal's blocks to the system zone as
// the journal inode's own (kernel: ext4_protect_reserved_inode); a journal
// that overlaps the fixed metadata is refused as corrupt. A filesystem
// without an internal journal keeps its zone. Called again (a replay's
// view), it finds the journal's blocks its own already.
func (f *FS) protectJournal() error {
	sb := f.sb
	if !sb.HasCompat(super.CompatHasJournal) || sb.JournalInum == 0 || sb.HasIncompat(super.IncompatJournalDev) {
		return nil
	}
	n, err := f.readInode(sb.JournalInum)
	if err != nil {
		return fmt.Errorf("journal inode: %w", err)
	}
	runs, err := f.buildMapping(n, n.in())
	if err != nil {
		return fmt.Errorf("journal inode %d: %w", sb.JournalInum, err)
	}
	z := f.zone.Load()
	rs := make([]syszone.Range, 0, len(runs))
	for _, r := range runs {
		if !z.Permits(sb.JournalInum, r.physical, r.length) {
			return &CorruptError{What: "journal inode", Block: int64(r.physical), Ino: sb.JournalInum,
				Detail: fmt.Sprintf("journal blocks %d+%d overlap the filesystem's fixed metadata", r.physical, r.length)}
		}
		rs = append(rs, syszone.Range{Start: r.physical, End: r.physical + r.length})
	}
	f.zone.Store(z.WithOwner(sb.JournalInum, rs))
	return nil
}

// zoneRanges returns the whole system zone as [start, end) pairs.
func (f *FS) zoneRanges() [][2]uint64 {
	rs := f.zone.Load().Ranges()
	out := make([][2]uint64, len(rs))
	for i, r := range rs {
		out[i] = [2]uint64{r.Start, r.End}
	}
	return out
}

func mergeRanges(rs [][2]uint64) [][2]uint64 {
	slices.SortFunc(rs, func(a, b [2]uint64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	var out [][2]uint64
	for _, r := range rs {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// checkInodeBlocks refuses the count blocks from start as blocks inode ino
// names outside its block mapping (its xattr block): outside the
// filesystem, or in the system zone but for ranges ino owns (kernel:
// ext4_inode_block_valid).
func (f *FS) checkInodeBlocks(ino uint32, start, count uint64, what string) error {
	end := start + count
	if start <= uint64(f.sb.FirstDataBlock) || end < start || end > f.sb.BlocksCount() {
		return &CorruptError{What: what, Block: int64(start), Ino: ino,
			Detail: fmt.Sprintf("blocks %d+%d outside the filesystem (%d blocks)", start, count, f.sb.BlocksCount())}
	}
	if !f.zone.Load().Permits(ino, start, count) {
		return &CorruptError{What: what, Block: int64(start), Ino: ino,
			Detail: fmt.Sprintf("blocks %d+%d hold the filesystem's fixed metadata", start, count)}
	}
	return nil
}

// checkXattrBlock refuses blk as inode ino's xattr block where the kernel
// refuses the inode (ext4_iget: "bad extended attribute block").
func (f *FS) checkXattrBlock(ino uint32, blk uint64) error {
	return f.checkInodeBlocks(ino, blk, 1, "xattr block")
}

// readXattrBlock reads inode ino's xattr block blk, refused as
// checkXattrBlock says.
func (f *FS) readXattrBlock(ino uint32, blk uint64) ([]byte, error) {
	if err := f.checkXattrBlock(ino, blk); err != nil {
		return nil, err
	}
	return f.readBlock(blk, "xattr block")
}

// checkDataWrite refuses a write of file data to the n bytes at device
// offset off that would land in the system zone: the mappings were
// checked when read and the allocator keeps off the zone, so this is the
// last guard, whatever path the block number came by.
func (f *FS) checkDataWrite(off, n int64) error {
	if n <= 0 || off < 0 {
		return nil
	}
	first := uint64(off / f.blockSize)
	count := uint64((off+n-1)/f.blockSize) - first + 1
	if f.zone.Load().Overlaps(first, count) {
		return &CorruptError{What: "file data", Block: int64(first),
			Detail: fmt.Sprintf("a write to blocks %d+%d would land in the filesystem's fixed metadata", first, count)}
	}
	return nil
}

// InSystemZone implements mballoc.SystemZone.
func (s blockStore) InSystemZone(block, count uint64) bool {
	return s.f.zone.Load().Overlaps(block, count)
}
