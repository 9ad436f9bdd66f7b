package ext4go

import (
	"fmt"
	"slices"
	"sort"
)

// systemZone is the sorted, merged list of block ranges holding fixed
// metadata: superblock and descriptor copies, reserved GDT blocks,
// bitmaps, inode tables, and the journal (kernel: the block_validity
// system zone, ext4_setup_system_zone). The allocator never hands these
// out nor takes them back (mballoc.SystemZone): on a corrupt image whose
// bitmaps mark them free, a change fails as corruption instead of writing
// file data over the journal or an inode table. Immutable once built.
type systemZone struct {
	ranges [][2]uint64 // [start, end), sorted, not overlapping
}

// buildSystemZone lists the fixed metadata of every group.
func (f *FS) buildSystemZone() *systemZone {
	sb := f.sb
	var rs [][2]uint64
	add := func(start, n uint64) {
		if n > 0 {
			rs = append(rs, [2]uint64{start, start + n})
		}
	}
	itb := uint64(sb.InodeTableBlocks())
	for g := range f.groups {
		o := sb.GroupOverhead(uint32(g))
		if o.HasSuper {
			add(o.SuperBlock, 1)
		}
		if o.GDTBlocks > 0 {
			add(o.GDT, uint64(o.GDTBlocks)+uint64(o.ReservedGDT))
		}
		gd := f.groups[g]
		add(gd.BlockBitmap, 1)
		add(gd.InodeBitmap, 1)
		add(gd.InodeTable, itb)
	}
	return &systemZone{ranges: mergeRanges(rs)}
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

// overlaps reports whether [block, block+count) meets the zone.
func (z *systemZone) overlaps(block, count uint64) bool {
	end := block + count
	i := sort.Search(len(z.ranges), func(i int) bool { return z.ranges[i][1] > block })
	return i < len(z.ranges) && z.ranges[i][0] < end
}

// withJournal checks the journal's blocks against the fixed metadata
// (the kernel refuses a journal inode that overlaps it:
// ext4_protect_reserved_inode) and adds them to the zone.
func (z *systemZone) withJournal(runs []run, ino uint32) (*systemZone, error) {
	rs := slices.Clone(z.ranges)
	for _, r := range runs {
		if z.overlaps(r.physical, r.length) {
			return nil, &CorruptError{What: "journal inode", Block: int64(r.physical), Ino: ino,
				Detail: fmt.Sprintf("journal blocks %d+%d overlap the filesystem's fixed metadata", r.physical, r.length)}
		}
		rs = append(rs, [2]uint64{r.physical, r.physical + r.length})
	}
	return &systemZone{ranges: mergeRanges(rs)}, nil
}

// InSystemZone implements mballoc.SystemZone.
func (s blockStore) InSystemZone(block, count uint64) bool {
	z := s.f.zone.Load()
	return z != nil && z.overlaps(block, count)
}
