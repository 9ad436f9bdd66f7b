// Package syszone is a filesystem's system zone: the block ranges that hold
// its fixed metadata (superblocks and their backups, group descriptors,
// reserved descriptor blocks, bitmaps, inode tables) and the journal
// (kernel: fs/ext4/block_validity.c). No inode may map such a block as
// data, as a node of its extent tree or block map, or as its xattr block,
// except the inode that owns a range: the journal inode reads and writes
// its own blocks, and the resize inode maps the reserved descriptor
// blocks (kernel: ext4_inode_block_valid's entry->ino check). The
// allocator never hands out nor frees any of it.
//
// A Zone is immutable once made; lookups cost O(log n) in the number of
// ranges, which flex_bg packing keeps small.
package syszone

import (
	"slices"
	"sort"
)

// Range is the blocks [Start, End).
type Range struct {
	Start, End uint64
}

// Zone is a system zone. The nil *Zone is empty: it permits everything.
type Zone struct {
	fixed []Range // owned by no inode; sorted, merged
	owned []owner // few: the journal, the resize inode
	all   []Range // union of fixed and owned, sorted, merged
}

// owner is the ranges one inode maps as its own.
type owner struct {
	ino    uint32
	ranges []Range // sorted, merged
}

// New makes the zone of the fixed ranges, which may be unsorted and
// overlap; empty ranges are dropped.
func New(fixed []Range) *Zone {
	z := &Zone{fixed: merge(fixed)}
	z.all = z.fixed
	return z
}

// WithOwner returns z with ranges added as inode ino's own: Permits lets
// ino, and only ino, map them. Ranges ino already owned in z are kept.
// It does not check that the ranges are free of z's: the caller asks
// Overlaps first (a journal that overlaps the fixed metadata is corrupt,
// kernel: ext4_protect_reserved_inode).
func (z *Zone) WithOwner(ino uint32, ranges []Range) *Zone {
	out := &Zone{}
	if z != nil {
		out.fixed = z.fixed
		out.owned = slices.Clone(z.owned)
	}
	i := slices.IndexFunc(out.owned, func(o owner) bool { return o.ino == ino })
	if i < 0 {
		out.owned = append(out.owned, owner{ino: ino})
		i = len(out.owned) - 1
	}
	out.owned[i].ranges = merge(append(slices.Clone(out.owned[i].ranges), ranges...))
	all := slices.Clone(out.fixed)
	for _, o := range out.owned {
		all = append(all, o.ranges...)
	}
	out.all = merge(all)
	return out
}

// merge sorts rs by start and joins ranges that overlap or touch.
func merge(rs []Range) []Range {
	rs = slices.DeleteFunc(slices.Clone(rs), func(r Range) bool { return r.End <= r.Start })
	slices.SortFunc(rs, func(a, b Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.Start <= out[n-1].End {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// meets reports whether [start, end) shares a block with a range of rs
// (sorted, disjoint).
func meets(rs []Range, start, end uint64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].End > start })
	return i < len(rs) && rs[i].Start < end
}

// Overlaps reports whether any of the count blocks from start lies in the
// zone, whoever owns it: what the allocator must neither hand out nor free.
// A range that wraps around the block numbers overlaps.
func (z *Zone) Overlaps(start, count uint64) bool {
	if z == nil || count == 0 {
		return false
	}
	end := start + count
	if end < start {
		return true
	}
	return meets(z.all, start, end)
}

// Permits reports whether inode ino may map the count blocks from start:
// none of them lies in the zone but in ranges ino owns (kernel:
// ext4_inode_block_valid, the system zone part; the filesystem's bounds
// are the caller's to check). A range that wraps around is refused.
func (z *Zone) Permits(ino uint32, start, count uint64) bool {
	if z == nil || count == 0 {
		return true
	}
	end := start + count
	if end < start {
		return false
	}
	if !meets(z.all, start, end) {
		return true // the common case: one search
	}
	if meets(z.fixed, start, end) {
		return false
	}
	for _, o := range z.owned {
		if o.ino != ino && meets(o.ranges, start, end) {
			return false
		}
	}
	return true
}

// Ranges returns the whole zone, sorted and merged; the caller must not
// change it.
func (z *Zone) Ranges() []Range {
	if z == nil {
		return nil
	}
	return z.all
}

// Owned returns the ranges inode ino owns, sorted and merged; the caller
// must not change them.
func (z *Zone) Owned(ino uint32) []Range {
	if z == nil {
		return nil
	}
	for _, o := range z.owned {
		if o.ino == ino {
			return o.ranges
		}
	}
	return nil
}
