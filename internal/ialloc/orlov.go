package ialloc

// FindGroup chooses the group to look for a free inode in first (kernel:
// find_group_orlov for directories, find_group_other for the rest). It
// returns ErrNoSpace if no group has a free inode.
func (a *Allocator) FindGroup(parent *Dir, dir bool, name []byte) (uint32, error) {
	var g int64
	if dir {
		g = a.findOrlov(parent, name, true)
	} else {
		g = a.findOther(parent)
	}
	if g < 0 {
		return 0, ErrNoSpace
	}
	return uint32(g), nil
}

type orlovStats struct {
	freeInodes, usedDirs uint32
	freeClusters         int64
}

// stats returns the counts of flex group f, or of group f without flex_bg
// (kernel: get_orlov_stats).
func (a *Allocator) stats(f uint32) orlovStats {
	if a.flexSize > 1 {
		return orlovStats{
			freeInodes:   uint32(max(a.flexInodes[f].v.Load(), 0)),
			usedDirs:     uint32(max(a.flexDirs[f].v.Load(), 0)),
			freeClusters: a.blocks.FlexFreeClusters(f),
		}
	}
	g := &a.groups[f]
	return orlovStats{g.freeInodes.Load(), g.usedDirs.Load(), int64(a.blocks.GroupFreeClusters(f))}
}

// findOrlov is Orlov's allocator (kernel: find_group_orlov). With flex_bg it
// works on flex groups and returns the first group of the chosen one that
// has a free inode. topdirRules applies the top-level spreading when the
// parent is the root or a TopDir; find_group_other calls it without.
func (a *Allocator) findOrlov(parent *Dir, name []byte, topdirRules bool) int64 {
	realGroups := a.geo.Groups
	ngroups := realGroups
	parentGroup := parent.Group
	log := a.geo.LogGroupsPerFlex
	fs := a.flexSize
	if fs > 1 {
		ngroups = (realGroups + fs - 1) >> log
		parentGroup >>= log
	}
	freei := uint64(max(a.freeInodes.Load(), 0))
	avefreei := freei / uint64(ngroups)
	avefreec := max(a.blocks.FreeClusters(), 0) / int64(ngroups)
	ndirs := uint64(max(a.dirs.Load(), 0))
	ipg := uint64(a.geo.InodesPerGroup)

	found := func(grp uint32) int64 {
		if fs == 1 {
			return int64(grp)
		}
		// Pack inodes at the start of the flex group's inode tables; data
		// will start in its second group.
		first := grp * fs
		for i := uint32(0); i < fs && first+i < realGroups; i++ {
			if a.groups[first+i].freeInodes.Load() > 0 {
				return int64(first + i)
			}
		}
		return -1
	}

	if topdirRules && (parent.Root || parent.TopDir) {
		// Spread top-level directories: among the groups with at least
		// average free inodes and blocks, the one with the fewest
		// directories, starting from a hash of the name.
		var start uint32
		if name != nil {
			start = a.opts.NameHash(name) % ngroups
		} else {
			start = a.opts.Rand(ngroups)
		}
		best, bestDirs := int64(-1), uint32(ipg)
		for i := uint32(0); i < ngroups; i++ {
			g := (start + i) % ngroups
			st := a.stats(g)
			if st.freeInodes == 0 || st.usedDirs >= bestDirs ||
				uint64(st.freeInodes) < avefreei || st.freeClusters < avefreec {
				continue
			}
			best, bestDirs = int64(g), st.usedDirs
		}
		if best >= 0 {
			if r := found(uint32(best)); r >= 0 {
				return r
			}
		}
		return a.orlovFallback(parent, freei)
	}

	// Other directories: near the parent, unless its group has too many
	// directories or too few free inodes or blocks.
	maxDirs := ndirs/uint64(ngroups) + ipg*uint64(fs)/16
	minInodes := int64(avefreei) - int64(ipg*uint64(fs)/4)
	minInodes = max(minInodes, 1)
	minClusters := max(avefreec-int64(a.geo.ClustersPerGroup)*int64(fs)/4, 0)
	if la := parent.lastAlloc.Load(); la >= 0 {
		parentGroup = uint32(la)
		if fs > 1 {
			parentGroup >>= log
		}
	}
	for i := uint32(0); i < ngroups; i++ {
		g := (parentGroup + i) % ngroups
		st := a.stats(g)
		if uint64(st.usedDirs) >= maxDirs || int64(st.freeInodes) < minInodes || st.freeClusters < minClusters {
			continue
		}
		if r := found(g); r >= 0 {
			return r
		}
		break
	}
	return a.orlovFallback(parent, freei)
}

// orlovFallback looks, from the parent's group, for a group with at least
// average free inodes, then for any with a free inode.
func (a *Allocator) orlovFallback(parent *Dir, freei uint64) int64 {
	ng := a.geo.Groups
	avefreei := freei / uint64(ng)
	for {
		for i := uint32(0); i < ng; i++ {
			g := (parent.Group + i) % ng
			if f := a.groups[g].freeInodes.Load(); f > 0 && uint64(f) >= avefreei {
				return int64(g)
			}
		}
		if avefreei == 0 {
			return -1
		}
		// The free-inode counter is approximate: on small filesystems the
		// test above may fail everywhere.
		avefreei = 0
	}
}

// findOther places a non-directory inode (kernel: find_group_other).
func (a *Allocator) findOther(parent *Dir) int64 {
	ng := a.geo.Groups
	fs := a.flexSize
	pg := parent.Group % ng
	if fs > 1 {
		// The parent's flex group, then the flex group the parent last
		// allocated from, then Orlov without the top-level rules.
		try := func(g uint32) int64 {
			g &^= fs - 1
			for i := g; i < g+fs && i < ng; i++ {
				if a.groups[i].freeInodes.Load() > 0 {
					return int64(i)
				}
			}
			return -1
		}
		if r := try(pg); r >= 0 {
			return r
		}
		if la := parent.lastAlloc.Load(); la >= 0 {
			if r := try(uint32(la) % ng); r >= 0 {
				return r
			}
		}
		return a.findOrlov(parent, nil, false)
	}
	ok := func(g uint32) bool {
		return a.groups[g].freeInodes.Load() > 0 && a.blocks.GroupFreeClusters(g) > 0
	}
	if ok(pg) {
		return int64(pg)
	}
	// Files of one directory land together; directories sharing a group
	// land apart: start from a hash of the parent's inode number, then
	// probe quadratically.
	g := (pg + parent.Ino%ng) % ng
	for i := uint32(1); i < ng; i <<= 1 {
		g = (g + i) % ng
		if ok(g) {
			return int64(g)
		}
	}
	// Any free inode, even in a group without free blocks.
	g = pg
	for i := uint32(0); i < ng; i++ {
		if g++; g >= ng {
			g = 0
		}
		if a.groups[g].freeInodes.Load() > 0 {
			return int64(g)
		}
	}
	return -1
}
