package dir

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Check verifies a whole directory against the rules the kernel's lookups
// and e2fsck's pass 2 apply, reading every block once:
//   - every block exists (no holes), parses, and has a valid checksum;
//   - a linear directory starts with "." (the directory itself, when Ino is
//     set) and "..";
//   - every other used entry has a valid, unique name that is neither "."
//     nor "..";
//   - an htree has a valid root and nodes (limits, counts, sorted hashes,
//     checksums, all leaves at one depth), every block but the root is
//     referenced exactly once, leaf start hashes never go down in hash
//     order, and every name lies in the hash range the index gives its
//     leaf (LeafRange.Holds), so DxLookup finds it.
//
// The first rule broken is returned as an *fserr.CorruptError or
// *fserr.ChecksumError.
func (d *Dir) Check() error {
	if d.NBlocks == 0 {
		return d.checkErr(-1, "directory has no blocks")
	}
	var ranges map[uint32]LeafRange
	var index map[uint32]bool
	eff := 0
	if d.Indexed {
		r, leaves, nodes, err := d.dxWalk()
		if err != nil {
			var bad *errBadIndex
			if errors.As(err, &bad) {
				return bad.err
			}
			return err
		}
		if d.Ino != 0 && r.DotInode != d.Ino {
			return d.checkErr(0, `"." is inode %d, want %d`, r.DotInode, d.Ino)
		}
		if r.DotDotInode == 0 {
			return d.checkErr(0, `".." is unused`)
		}
		eff = EffectiveVersion(r.HashVersion, d.HashUnsigned)
		index = nodes
		ranges = make(map[uint32]LeafRange, len(leaves))
		for i, l := range leaves {
			if l.Block == 0 || l.Block >= d.NBlocks {
				return d.checkErr(int64(l.Block), "htree leaf %d is outside the directory's %d blocks", l.Block, d.NBlocks)
			}
			if i > 0 && l.Lo < leaves[i-1].Lo {
				return d.checkErr(int64(l.Block), "leaf start hash %#x below the previous leaf's %#x", l.Lo, leaves[i-1].Lo)
			}
			ranges[l.Block] = l
		}
		for n := range nodes {
			if n >= d.NBlocks {
				return d.checkErr(int64(n), "htree node %d is outside the directory's %d blocks", n, d.NBlocks)
			}
		}
		if int(d.NBlocks) != len(nodes)+len(leaves) {
			for lblk := uint32(1); lblk < d.NBlocks; lblk++ {
				if _, ok := ranges[lblk]; !ok && !nodes[lblk] {
					return d.checkErr(int64(lblk), "block not referenced by the htree")
				}
			}
		}
	}
	seen := map[string]bool{}
	for lblk := uint32(0); lblk < d.NBlocks; lblk++ {
		b, err := d.block(lblk, "directory block", true)
		if err != nil {
			return err
		}
		if index[lblk] {
			continue // verified by the walk
		}
		blk, err := d.parseLeafView(lblk, b)
		if err != nil {
			return err
		}
		slots := blk.Slots
		if lblk == 0 {
			if len(slots) < 2 || slots[0].Inode == 0 || string(slots[0].Name) != "." ||
				slots[1].Inode == 0 || string(slots[1].Name) != ".." {
				return d.checkErr(0, `block 0 does not start with "." and ".."`)
			}
			if d.Ino != 0 && slots[0].Inode != d.Ino {
				return d.checkErr(0, `"." is inode %d, want %d`, slots[0].Inode, d.Ino)
			}
			slots = slots[2:]
		}
		for _, s := range slots {
			if s.Inode == 0 {
				continue
			}
			if len(s.Name) == 0 || bytes.ContainsAny(s.Name, "/\x00") || isDots(s.Name) {
				return d.checkErr(int64(lblk), "entry at offset %d has a bad name %q", s.Off, s.Name)
			}
			if seen[string(s.Name)] {
				return d.checkErr(int64(lblk), "duplicate name %q", s.Name)
			}
			seen[string(s.Name)] = true
			if ranges != nil {
				h, _, err := hashName(s.Name, eff, d.HashSeed)
				if err != nil {
					return err
				}
				if l := ranges[lblk]; !l.Holds(h) {
					return d.checkErr(int64(lblk), "%q hashes to %#x, outside the leaf's range [%#x, %#x)", s.Name, h, l.Lo, l.Hi)
				}
			}
		}
	}
	return nil
}

func (d *Dir) checkErr(lblk int64, format string, args ...any) error {
	return &fserr.CorruptError{What: "directory", Block: lblk, Ino: d.Ino, Detail: fmt.Sprintf(format, args...)}
}
