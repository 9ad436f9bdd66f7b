// Package blockmap reads and changes the legacy ext2/ext3 block map: the
// i_block array of an inode without EXT4_EXTENTS_FL, whose words 0..11 are
// direct block pointers, word 12 points to an indirect block (a block full
// of pointers), word 13 to a double indirect block and word 14 to a triple
// indirect block. A zero pointer is a hole, and so is everything under it.
//
// Map follows the kernel's rules (fs/ext4/indirect.c): ext4_block_to_path
// for the layout, and __ext4_check_blockref, which requires every non-zero
// pointer in i_block and in each indirect block read to name a block inside
// the filesystem. Any input ends in bounded work: a lookup reads at most
// three blocks, and Walk refuses an indirect block that appears twice.
//
// Map keeps no state between calls, so there are no locks; it may be used
// from several goroutines if its BlockReader may. Editor (edit.go) maps and
// unmaps blocks through a Store, allocating and freeing indirect blocks; it
// is not safe for concurrent use (the caller holds the inode's lock).
package blockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/syszone"
)

// Layout of i_block (kernel: EXT4_NDIR_BLOCKS, EXT4_IND_BLOCK, ...).
const (
	NDirect   = 12 // direct pointers
	IndSlot   = 12 // i_block word of the single indirect block
	DindSlot  = 13 // ... of the double indirect block
	TindSlot  = 14 // ... of the triple indirect block
	NSlots    = 15
	RootSize  = NSlots * 4 // bytes of i_block
	maxBlocks = 1 << 32    // file block numbers are 32-bit
)

// ErrOutOfRange is returned by Lookup for a file block the map cannot
// address (past the triple indirect range; only with 1 KiB blocks).
var ErrOutOfRange = errors.New("file block beyond the block map's reach")

// BlockReader returns the contents of one filesystem block (at least
// BlockSize bytes). The slice is only read and not kept.
type BlockReader func(pblk uint64) ([]byte, error)

// Map is the block map of one inode, read on demand through Read.
type Map struct {
	Root      []byte      // the inode's i_block (60 bytes)
	Read      BlockReader // reads indirect blocks
	BlockSize int         // 1024..65536

	// Pointers must name blocks after FirstDataBlock and, when BlocksCount
	// is not 0, before BlocksCount (kernel: ext4_inode_block_valid without
	// the system zone check).
	FirstDataBlock uint64
	BlocksCount    uint64
	// Zone, if set, is the filesystem's system zone: no pointer may name
	// a block of it but one the inode Ino owns (kernel: the system zone
	// check of ext4_inode_block_valid).
	Zone *syszone.Zone

	Ino uint32 // inode number, for error reports
}

// Mapping is where a file block lives, as Lookup reports it.
type Mapping struct {
	Logical uint32 // the block asked for
	// Len counts blocks from Logical on that are mapped to consecutive
	// physical blocks, or are all holes. It is at least 1 and looks no
	// further than the pointer array holding Logical's pointer, so the run
	// may continue past it.
	Len      uint64
	Physical uint64 // 0 in a hole
}

// Hole reports whether Logical is not mapped.
func (m Mapping) Hole() bool { return m.Physical == 0 }

// Run is an item met by Walk.
type Run struct {
	// Level is 0 for a run of data blocks and 1, 2 or 3 for a single,
	// double or triple indirect block.
	Level int
	// Logical is the first file block of the data run, or for an indirect
	// block the first file block it can map.
	Logical  uint32
	Physical uint64
	Len      uint32 // blocks; 1 for an indirect block
}

// ptrsBits returns log2 of the pointers per block.
func (m *Map) ptrsBits() (uint, error) {
	bs := m.BlockSize
	if bs < 1024 || bs > 65536 || bs&(bs-1) != 0 {
		return 0, fmt.Errorf("block map of inode %d: bad block size %d", m.Ino, bs)
	}
	return uint(bits.Len(uint(bs/4)) - 1), nil
}

// MaxBlocks returns how many file blocks a block map with blockSize blocks
// can address, capped at 2^32.
func MaxBlocks(blockSize int) uint64 {
	p := uint64(blockSize / 4)
	return min(NDirect+p+p*p+p*p*p, maxBlocks)
}

func (m *Map) corrupt(blk int64, format string, a ...any) error {
	what := "indirect block"
	if blk < 0 {
		what = "block map"
	}
	return &fserr.CorruptError{What: what, Block: blk, Ino: m.Ino, Detail: fmt.Sprintf(format, a...)}
}

// checkPtrs requires every non-zero pointer to lie inside the filesystem
// and outside the system zone (kernel: __ext4_check_blockref). firstBlock
// returns the first file block pointer i maps, for the report.
func (m *Map) checkPtrs(p []uint32, blk int64, firstBlock func(i int) uint64) error {
	for i, x := range p {
		if x == 0 {
			continue
		}
		if uint64(x) <= m.FirstDataBlock || m.BlocksCount != 0 && uint64(x) >= m.BlocksCount {
			return m.corrupt(blk, "pointer %d names block %d outside the filesystem", i, x)
		}
		if !m.Zone.Permits(m.Ino, uint64(x), 1) {
			return m.corrupt(blk, "pointer %d (file blocks from %d) names block %d, which holds the filesystem's fixed metadata",
				i, firstBlock(i), x)
		}
	}
	return nil
}

// root returns the checked i_block words.
func (m *Map) root() ([]uint32, error) {
	if len(m.Root) < RootSize {
		return nil, m.corrupt(-1, "i_block is %d bytes, want %d", len(m.Root), RootSize)
	}
	pb, err := m.ptrsBits()
	if err != nil {
		return nil, err
	}
	w := words(m.Root[:RootSize])
	return w, m.checkPtrs(w, -1, func(i int) uint64 { return slotFirstBlock(i, pb) })
}

// slotFirstBlock returns the first file block i_block word i maps, with
// 1<<pb pointers per block.
func slotFirstBlock(i int, pb uint) uint64 {
	p := uint64(1) << pb
	switch i {
	case IndSlot:
		return NDirect
	case DindSlot:
		return NDirect + p
	case TindSlot:
		return NDirect + p + p*p
	}
	return uint64(i)
}

func words(b []byte) []uint32 {
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// indirect reads and checks the indirect block p, whose pointers each map
// span file blocks from base on.
func (m *Map) indirect(p uint32, base, span uint64) ([]uint32, error) {
	if m.Read == nil {
		return nil, fmt.Errorf("block map of inode %d: no block reader", m.Ino)
	}
	b, err := m.Read(uint64(p))
	if err != nil {
		return nil, fmt.Errorf("block map of inode %d: reading block %d: %w", m.Ino, p, err)
	}
	if len(b) < m.BlockSize {
		return nil, fmt.Errorf("block map of inode %d: block %d: read %d bytes, want %d", m.Ino, p, len(b), m.BlockSize)
	}
	w := words(b[:m.BlockSize])
	return w, m.checkPtrs(w, int64(p), func(i int) uint64 { return base + uint64(i)*span })
}

// path returns the offsets leading to file block lblk: the i_block word,
// then one offset per indirect level (kernel: ext4_block_to_path); and
// lblk's position within its region (direct, single, double or triple).
func (m *Map) path(lblk uint32) ([]int, uint64, error) {
	pb, err := m.ptrsBits()
	if err != nil {
		return nil, 0, err
	}
	l, p := uint64(lblk), uint64(1)<<pb
	mask := p - 1
	if l < NDirect {
		return []int{int(l)}, l, nil
	}
	if l -= NDirect; l < p {
		return []int{IndSlot, int(l)}, l, nil
	}
	if l -= p; l < p*p {
		return []int{DindSlot, int(l >> pb), int(l & mask)}, l, nil
	}
	if l -= p * p; l>>(2*pb) < p {
		return []int{TindSlot, int(l >> (2 * pb)), int(l >> pb & mask), int(l & mask)}, l, nil
	}
	return nil, 0, ErrOutOfRange
}

// Lookup maps file block lblk, reading at most three indirect blocks.
func (m *Map) Lookup(lblk uint32) (Mapping, error) {
	path, rel, err := m.path(lblk)
	if err != nil {
		return Mapping{}, err
	}
	pb, _ := m.ptrsBits()
	arr, err := m.root()
	if err != nil {
		return Mapping{}, err
	}
	end := NDirect // direct pointers: the run may go on up to word 11
	if len(path) > 1 {
		end = path[0] + 1 // an indirect slot: look no further than it
	}
	var arrBase uint64 // first file block of the indirect block arr (below the root)
	for j, off := range path {
		levelsBelow := uint(len(path) - 1 - j)
		span := uint64(1) << (pb * levelsBelow) // file blocks under one pointer here
		ptrBase := arrBase + uint64(off)*span   // first file block under arr[off]
		if j == 0 {
			ptrBase = slotFirstBlock(off, pb)
		}
		ptr := arr[off]
		if ptr == 0 {
			// A hole: the rest of this pointer's span and any zero pointers after it.
			n := span - rel&(span-1)
			for i := off + 1; i < end && arr[i] == 0; i++ {
				n += span
			}
			return Mapping{Logical: lblk, Len: min(n, maxBlocks-uint64(lblk))}, nil
		}
		if levelsBelow == 0 {
			n := uint64(1)
			for i := off + 1; i < end && arr[i] == ptr+uint32(i-off); i++ {
				n++
			}
			return Mapping{Logical: lblk, Len: min(n, maxBlocks-uint64(lblk)), Physical: uint64(ptr)}, nil
		}
		if arr, err = m.indirect(ptr, ptrBase, span>>pb); err != nil {
			return Mapping{}, err
		}
		arrBase = ptrBase
		end = len(arr)
	}
	panic("unreachable")
}

// Walk calls fn for every indirect block and every run of data blocks, in
// file block order, each indirect block before the blocks it maps (the
// order debugfs's stat prints them in). Data runs join blocks that are
// consecutive both in the file and on disk, and are split by indirect
// blocks. An error from fn stops the walk and is returned.
func (m *Map) Walk(fn func(Run) error) error {
	pb, err := m.ptrsBits()
	if err != nil {
		return err
	}
	root, err := m.root()
	if err != nil {
		return err
	}
	w := walker{m: m, fn: fn, pb: pb, seen: map[uint32]bool{}}
	for i := range NDirect {
		if err := w.data(uint64(i), root[i]); err != nil {
			return err
		}
	}
	p := uint64(1) << pb
	base := uint64(NDirect)
	for level := 1; level <= 3; level++ {
		if err := w.indirect(root[NDirect+level-1], level, base); err != nil {
			return err
		}
		base += p << (pb * uint(level-1))
	}
	return w.flush()
}

type walker struct {
	m       *Map
	fn      func(Run) error
	pb      uint
	seen    map[uint32]bool
	pending Run // data run not yet reported; Len 0 if none
}

func (w *walker) flush() error {
	if w.pending.Len == 0 {
		return nil
	}
	r := w.pending
	w.pending = Run{}
	return w.fn(r)
}

// data adds file block l mapped to ptr (0: a hole) to the pending run.
func (w *walker) data(l uint64, ptr uint32) error {
	if ptr == 0 {
		return nil
	}
	if l >= maxBlocks {
		return w.m.corrupt(-1, "pointer maps file block %d, past 2^32", l)
	}
	p := &w.pending
	if p.Len != 0 && uint64(p.Logical)+uint64(p.Len) == l && p.Physical+uint64(p.Len) == uint64(ptr) {
		p.Len++
		return nil
	}
	if err := w.flush(); err != nil {
		return err
	}
	w.pending = Run{Logical: uint32(l), Physical: uint64(ptr), Len: 1}
	return nil
}

// indirect walks the indirect block ptr of the given level, whose first
// mapped file block is base.
func (w *walker) indirect(ptr uint32, level int, base uint64) error {
	if ptr == 0 {
		return nil
	}
	if base >= maxBlocks {
		return w.m.corrupt(-1, "level %d indirect block %d maps file blocks past 2^32", level, ptr)
	}
	if w.seen[ptr] {
		return w.m.corrupt(int64(ptr), "indirect block appears twice in the map")
	}
	w.seen[ptr] = true
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.fn(Run{Level: level, Logical: uint32(base), Physical: uint64(ptr), Len: 1}); err != nil {
		return err
	}
	span := uint64(1) << (w.pb * uint(level-1))
	arr, err := w.m.indirect(ptr, base, span)
	if err != nil {
		return err
	}
	for i, p := range arr {
		l := base + uint64(i)*span
		if level == 1 {
			err = w.data(l, p)
		} else {
			err = w.indirect(p, level-1, l)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// IndirectBlocks returns the indirect blocks of the map in Walk order:
// what the map itself occupies besides the data.
func (m *Map) IndirectBlocks() ([]uint64, error) {
	var out []uint64
	err := m.Walk(func(r Run) error {
		if r.Level > 0 {
			out = append(out, r.Physical)
		}
		return nil
	})
	return out, err
}
