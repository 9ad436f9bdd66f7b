package blockmap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/ext4go/ext4go/internal/syszone"
)

// Store is what an Editor changes blocks through: the same contract as the
// extent editor's (internal/extent.Store), so one implementation serves
// both.
type Store interface {
	// ReadNode returns the current content of indirect block pblk; the
	// Editor may change it in place and passes every buffer it changed to
	// WriteNode before it returns.
	ReadNode(pblk uint64) ([]byte, error)
	// WriteNode stores the new content of indirect block pblk.
	WriteNode(pblk uint64, b []byte) error
	// AllocNode allocates a block for a new indirect block near goal.
	AllocNode(goal uint64) (uint64, error)
	// FreeNode releases an indirect block the map no longer uses.
	FreeNode(pblk uint64) error
	// FreeData releases n data blocks from pblk that Remove unmapped.
	FreeData(pblk uint64, n uint32) error
}

// ErrMapped is returned by Insert for a range with a mapped block.
var ErrMapped = errors.New("blockmap: block already mapped")

// Editor changes the block map in Root (an inode's i_block), allocating
// and freeing indirect blocks through Store (kernel: fs/ext4/indirect.c,
// ext4_ind_map_blocks with EXT4_GET_BLOCKS_CREATE, ext4_ind_truncate,
// ext4_free_branches). It keeps no state between calls; the caller locks
// the inode.
type Editor struct {
	Root      *[RootSize]byte
	Store     Store
	BlockSize int

	FirstDataBlock, BlocksCount uint64
	Zone                        *syszone.Zone // as in Map
	Ino                         uint32
}

// Map returns a reader of the current map.
func (e *Editor) Map() *Map {
	return &Map{Root: e.Root[:], Read: BlockReader(e.Store.ReadNode), BlockSize: e.BlockSize,
		FirstDataBlock: e.FirstDataBlock, BlocksCount: e.BlocksCount, Zone: e.Zone, Ino: e.Ino}
}

// Lookup maps file block lblk.
func (e *Editor) Lookup(lblk uint32) (Mapping, error) { return e.Map().Lookup(lblk) }

// edit is one Insert's or Remove's view of the indirect blocks it reads
// and changes, written back together at the end.
type edit struct {
	e       *Editor
	blocks  map[uint64][]byte
	dirty   map[uint64]bool
	created []uint64 // indirect blocks allocated by this edit
}

func (e *Editor) begin() *edit {
	return &edit{e: e, blocks: map[uint64][]byte{}, dirty: map[uint64]bool{}}
}

// node returns indirect block p's content, reading it once per edit.
func (ed *edit) node(p uint64) ([]byte, error) {
	if b, ok := ed.blocks[p]; ok {
		return b, nil
	}
	if p <= ed.e.FirstDataBlock || ed.e.BlocksCount != 0 && p >= ed.e.BlocksCount {
		return nil, ed.e.Map().corrupt(-1, "pointer names block %d outside the filesystem", p)
	}
	if !ed.e.Zone.Permits(ed.e.Ino, p, 1) {
		return nil, ed.e.Map().corrupt(-1, "pointer names indirect block %d, which holds the filesystem's fixed metadata", p)
	}
	b, err := ed.e.Store.ReadNode(p)
	if err != nil {
		return nil, err
	}
	if len(b) < ed.e.BlockSize {
		return nil, fmt.Errorf("block map of inode %d: block %d: read %d bytes, want %d", ed.e.Ino, p, len(b), ed.e.BlockSize)
	}
	b = b[:ed.e.BlockSize]
	ed.blocks[p] = b
	return b, nil
}

// flush writes the changed indirect blocks, in block order.
func (ed *edit) flush() error {
	var nrs []uint64
	for p := range ed.dirty {
		nrs = append(nrs, p)
	}
	slices.Sort(nrs)
	for _, p := range nrs {
		if err := ed.e.Store.WriteNode(p, ed.blocks[p]); err != nil {
			return err
		}
	}
	return nil
}

// Insert maps file blocks [lblk, lblk+n) to physical blocks [pblk,
// pblk+n), which must all be holes, allocating the indirect blocks on the
// way (near the data they map, as ext4_alloc_branch places them). On
// failure the map is unchanged and the indirect blocks allocated are freed.
func (e *Editor) Insert(lblk uint32, pblk uint64, n uint32) error {
	if n == 0 {
		return nil
	}
	if pblk == 0 || pblk+uint64(n) > 1<<32 {
		return fmt.Errorf("block map of inode %d: blocks %d+%d cannot be named by 32-bit pointers", e.Ino, pblk, n)
	}
	if !e.Zone.Permits(e.Ino, pblk, uint64(n)) {
		return fmt.Errorf("block map of inode %d: blocks %d+%d hold the filesystem's fixed metadata", e.Ino, pblk, n)
	}
	if uint64(lblk)+uint64(n) > MaxBlocks(e.BlockSize) {
		return ErrOutOfRange
	}
	saved := *e.Root
	ed := e.begin()
	err := ed.insert(lblk, pblk, n)
	if err == nil {
		err = ed.flush()
	}
	if err != nil {
		*e.Root = saved
		for _, p := range ed.created {
			e.Store.FreeNode(p)
		}
	}
	return err
}

func (ed *edit) insert(lblk uint32, pblk uint64, n uint32) error {
	m := ed.e.Map()
	root := ed.e.Root[:]
	for i := uint32(0); i < n; i++ {
		path, _, err := m.path(lblk + i)
		if err != nil {
			return err
		}
		data := pblk + uint64(i)
		// arr is the pointer array being walked: i_block, then indirect
		// blocks; slot is the byte offset of the pointer in it.
		arr, arrBlk := root, uint64(0)
		for j, off := range path {
			slot := 4 * off
			ptr := uint64(binary.LittleEndian.Uint32(arr[slot:]))
			last := j == len(path)-1
			if last {
				if ptr != 0 {
					return ErrMapped
				}
				binary.LittleEndian.PutUint32(arr[slot:], uint32(data))
				if arrBlk != 0 {
					ed.dirty[arrBlk] = true
				}
				break
			}
			if ptr == 0 {
				nb, err := ed.e.Store.AllocNode(data)
				if err != nil {
					return err
				}
				if nb == 0 || nb >= 1<<32 {
					ed.e.Store.FreeNode(nb)
					return fmt.Errorf("block map of inode %d: indirect block %d cannot be named by a 32-bit pointer", ed.e.Ino, nb)
				}
				ed.created = append(ed.created, nb)
				ed.blocks[nb] = make([]byte, ed.e.BlockSize)
				ed.dirty[nb] = true
				binary.LittleEndian.PutUint32(arr[slot:], uint32(nb))
				if arrBlk != 0 {
					ed.dirty[arrBlk] = true
				}
				ptr = nb
			}
			if arr, err = ed.node(ptr); err != nil {
				return err
			}
			arrBlk = ptr
		}
	}
	return nil
}

// Remove unmaps file blocks [from, to) (to = 1<<32-1 or more: everything
// from from on), frees the data blocks they named, and frees indirect
// blocks left without pointers (kernel: ext4_ind_truncate and
// ext4_ind_remove_space). Blocks are freed after the map no longer names
// them.
func (e *Editor) Remove(from, to uint32) error {
	m := e.Map()
	pb, err := m.ptrsBits()
	if err != nil {
		return err
	}
	hi := min(uint64(to), MaxBlocks(e.BlockSize))
	if to == 1<<32-1 {
		hi = MaxBlocks(e.BlockSize)
	}
	if uint64(from) >= hi {
		return nil
	}
	saved := *e.Root
	r := &remover{edit: e.begin(), pb: pb, lo: uint64(from), hi: hi}
	err = r.drop(e.Root[:])
	if err == nil {
		err = r.flush()
	}
	if err != nil {
		*e.Root = saved
		return err
	}
	if err := r.flush(); err != nil {
		return err
	}
	return r.release()
}

// drop unmaps the range from i_block: the direct pointers, then the
// single, double and triple indirect trees.
func (r *remover) drop(root []byte) error {
	for i := 0; i < NDirect; i++ {
		if err := r.dropData(root, 0, i, uint64(i)); err != nil {
			return err
		}
	}
	base := uint64(NDirect)
	for level, slot := 1, IndSlot; slot <= TindSlot; level, slot = level+1, slot+1 {
		if err := r.dropTree(root, 0, slot, level, base); err != nil {
			return err
		}
		base += uint64(1) << (r.pb * uint(level))
	}
	return nil
}

type remover struct {
	*edit
	pb        uint
	lo, hi    uint64   // file blocks to unmap
	data      []uint64 // data blocks unmapped, in file order
	freeNodes []uint64
}

// dropData clears data pointer i of arr (block arrBlk, 0 for i_block),
// which maps file block l, when l is in range.
func (r *remover) dropData(arr []byte, arrBlk uint64, i int, l uint64) error {
	if l < r.lo || l >= r.hi {
		return nil
	}
	ptr := binary.LittleEndian.Uint32(arr[4*i:])
	if ptr == 0 {
		return nil
	}
	if uint64(ptr) <= r.e.FirstDataBlock || r.e.BlocksCount != 0 && uint64(ptr) >= r.e.BlocksCount {
		return r.e.Map().corrupt(int64(arrBlk), "pointer %d names block %d outside the filesystem", i, ptr)
	}
	if !r.e.Zone.Permits(r.e.Ino, uint64(ptr), 1) {
		return r.e.Map().corrupt(int64(arrBlk), "pointer %d maps file block %d to block %d, which holds the filesystem's fixed metadata", i, l, ptr)
	}
	r.data = append(r.data, uint64(ptr))
	binary.LittleEndian.PutUint32(arr[4*i:], 0)
	if arrBlk != 0 {
		r.dirty[arrBlk] = true
	}
	return nil
}

// dropTree unmaps the range under pointer i of arr (in block arrBlk, 0 for
// i_block): an indirect block of the given level (1: single) whose first
// file block is base. An indirect block left empty is freed and its
// pointer cleared.
func (r *remover) dropTree(arr []byte, arrBlk uint64, i, level int, base uint64) error {
	span := uint64(1) << (r.pb * uint(level))
	if base+span <= r.lo || base >= r.hi {
		return nil
	}
	ptr := uint64(binary.LittleEndian.Uint32(arr[4*i:]))
	if ptr == 0 {
		return nil
	}
	b, err := r.node(ptr)
	if err != nil {
		return err
	}
	child := span >> r.pb
	for k := 0; k < len(b)/4; k++ {
		cb := base + uint64(k)*child
		var err error
		if level == 1 {
			err = r.dropData(b, ptr, k, cb)
		} else {
			err = r.dropTree(b, ptr, k, level-1, cb)
		}
		if err != nil {
			return err
		}
	}
	for k := 0; k < len(b); k += 4 {
		if binary.LittleEndian.Uint32(b[k:]) != 0 {
			return nil
		}
	}
	// Empty: free it instead of writing it.
	delete(r.dirty, ptr)
	r.freeNodes = append(r.freeNodes, ptr)
	binary.LittleEndian.PutUint32(arr[4*i:], 0)
	if arrBlk != 0 {
		r.dirty[arrBlk] = true
	}
	return nil
}

// release frees the unmapped data blocks (joined into runs) and the
// emptied indirect blocks.
func (r *remover) release() error {
	for i := 0; i < len(r.data); {
		j := i + 1
		for j < len(r.data) && r.data[j] == r.data[j-1]+1 && j-i < 1<<15 {
			j++
		}
		if err := r.e.Store.FreeData(r.data[i], uint32(j-i)); err != nil {
			return err
		}
		i = j
	}
	for _, p := range r.freeNodes {
		if err := r.e.Store.FreeNode(p); err != nil {
			return err
		}
	}
	return nil
}

// Neighbour returns the physical block mapping file block lblk-1, or 0: the
// goal for allocating lblk (kernel: ext4_find_near, simplified).
func (e *Editor) Neighbour(lblk uint32) uint64 {
	if lblk == 0 {
		return 0
	}
	mp, err := e.Lookup(lblk - 1)
	if err != nil || mp.Hole() {
		return 0
	}
	return mp.Physical
}

// ArrayEnd returns the file block after the last one whose pointer is in
// the same pointer array as lblk's (i_block's direct words, or one
// indirect block). A run of blocks up to it needs new indirect blocks, if
// any, only at its start, which lets the writer place them just before
// the data (as ext4_alloc_branch does).
func (e *Editor) ArrayEnd(lblk uint32) uint64 {
	ppb := uint64(e.BlockSize / 4)
	l := uint64(lblk)
	if l < NDirect {
		return NDirect
	}
	// Past the direct blocks, every pointer array maps an aligned run of
	// ppb blocks counted from NDirect.
	return NDirect + ((l-NDirect)/ppb+1)*ppb
}

// NewNodes returns how many indirect blocks Insert would allocate to map
// lblk: the missing ones on its path.
func (e *Editor) NewNodes(lblk uint32) (int, error) {
	m := e.Map()
	path, _, err := m.path(lblk)
	if err != nil {
		return 0, err
	}
	ed := e.begin()
	arr := e.Root[:]
	for j, off := range path[:len(path)-1] {
		ptr := uint64(binary.LittleEndian.Uint32(arr[4*off:]))
		if ptr == 0 {
			return len(path) - 1 - j, nil
		}
		if arr, err = ed.node(ptr); err != nil {
			return 0, err
		}
	}
	return 0, nil
}
