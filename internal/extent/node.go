// Package extent decodes, encodes, checks and walks ext4 extent trees: the
// on-disk structures ext4_extent_header, ext4_extent, ext4_extent_idx and
// ext4_extent_tail (kernel fs/ext4/ext4_extents.h).
//
// An inode with EXT4_EXTENTS_FL holds the root node of its tree in i_block
// (60 bytes: a header and up to 4 entries). A node of depth 0 is a leaf
// whose entries are extents (a run of file blocks mapped to a run of
// physical blocks); a node of depth d > 0 holds index entries, each naming
// the block of a child node of depth d-1 and the first file block it
// covers. Every node but the root fills one filesystem block and ends with a
// crc32c tail (with metadata_csum).
//
// Node is the pure codec. Tree reads a whole tree through a BlockReader and
// applies the kernel's checks (ext4_ext_check, ext4_valid_extent_entries)
// plus ordering between siblings, so that a corrupt tree gives a
// *fserr.CorruptError or *fserr.ChecksumError and never a panic, a loop or
// unbounded work.
//
// Editor is the write side: it inserts, removes and converts ranges through
// a Store (the filesystem's transaction), merging neighbours, splitting
// full nodes, growing and shrinking the tree as the kernel's extents.c
// does. Every tree it leaves passes Tree's checks: sorted, non-overlapping
// entries, index keys equal to their child's first block, no empty block
// node, eh_max 4 in the root and (blocksize-12)/12 in new blocks, checksum
// tails with metadata_csum.
//
// Nothing here keeps state between calls, so there are no locks; a Tree
// may be used from several goroutines if its BlockReader may, an Editor by
// one goroutine at a time (the caller's inode lock).
package extent

import (
	"encoding/binary"
	"unsafe"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Format constants.
const (
	Magic      = 0xF30A // EXT4_EXT_MAGIC
	HeaderSize = 12     // sizeof(struct ext4_extent_header)
	EntrySize  = 12     // sizeof(struct ext4_extent) == sizeof(struct ext4_extent_idx)
	TailSize   = 4      // sizeof(struct ext4_extent_tail)
	RootSize   = 60     // the root node lives in the inode's i_block
	MaxDepth   = 5      // EXT4_MAX_EXTENT_DEPTH

	// InitMaxLen is the longest initialized extent (EXT_INIT_MAX_LEN). An
	// ee_len above it marks an unwritten extent of ee_len-InitMaxLen blocks,
	// so unwritten extents are at most UnwrittenMaxLen long.
	InitMaxLen      = 1 << 15
	UnwrittenMaxLen = InitMaxLen - 1

	// MaxLogical bounds file block numbers: an extent must end at or before
	// it (the kernel rejects extents whose ee_block+len wraps 32 bits).
	MaxLogical = 1<<32 - 1
)

// MaxEntries returns how many entries fit in a node of size bytes: 4 for the
// root (kernel: ext4_ext_space_root), (blocksize-12)/12 for a block
// (ext4_ext_space_block); for a block the tail still fits after them.
func MaxEntries(size int) int {
	if size < HeaderSize {
		return 0
	}
	return (size - HeaderSize) / EntrySize
}

// Header is struct ext4_extent_header.
type Header struct {
	Magic      uint16 // Magic
	Entries    uint16 // valid entries
	Max        uint16 // capacity in entries
	Depth      uint16 // 0 for a leaf
	Generation uint32 // eh_generation (unused by Linux; kept for round trips)
}

// Extent is a leaf entry, struct ext4_extent.
type Extent struct {
	Logical   uint32 // first file block
	Len       uint32 // blocks: 1..InitMaxLen, or 1..UnwrittenMaxLen if Unwritten
	Start     uint64 // first physical block (48 bits)
	Unwritten bool   // allocated but reads as zeros (fallocate)
}

// End returns the file block just past the extent.
func (e Extent) End() uint64 { return uint64(e.Logical) + uint64(e.Len) }

// Index is an index entry, struct ext4_extent_idx.
type Index struct {
	Logical uint32 // first file block the child covers
	Child   uint64 // physical block of the child node (48 bits)
	Unused  uint16 // ei_unused, kept for round trips
}

// Node is one node of an extent tree. Exactly one of Extents (Depth 0) and
// Indexes (Depth > 0) is used; Header.Entries is derived from it by Encode.
type Node struct {
	Header
	Extents []Extent
	Indexes []Index
}

// NewRoot returns an empty leaf root as the kernel creates it for a new
// file (ext4_ext_tree_init): depth 0, room for 4 extents.
func NewRoot() *Node {
	return &Node{Header: Header{Magic: Magic, Max: uint16(MaxEntries(RootSize))}}
}

// DecodeHeader decodes the header at the start of b and checks its magic.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, fserr.Corrupt("extent header", "%d bytes, need %d", len(b), HeaderSize)
	}
	le := binary.LittleEndian
	h := Header{
		Magic:      le.Uint16(b[0:]),
		Entries:    le.Uint16(b[2:]),
		Max:        le.Uint16(b[4:]),
		Depth:      le.Uint16(b[6:]),
		Generation: le.Uint32(b[8:]),
	}
	if h.Magic != Magic {
		return h, fserr.Corrupt("extent header", "bad magic %#04x", h.Magic)
	}
	return h, nil
}

func (h Header) put(b []byte) {
	le := binary.LittleEndian
	le.PutUint16(b[0:], h.Magic)
	le.PutUint16(b[2:], h.Entries)
	le.PutUint16(b[4:], h.Max)
	le.PutUint16(b[6:], h.Depth)
	le.PutUint32(b[8:], h.Generation)
}

// DecodeNode decodes a node from b, which is the 60-byte i_block for the
// root or a whole block otherwise. It checks only what decoding needs: the
// magic, Entries <= Max, and that Max entries fit in b. Tree applies the
// rules that need context (depth, ordering, bounds, checksum).
func DecodeNode(b []byte) (*Node, error) {
	n := &Node{}
	if err := decodeNodeInto(b, n); err != nil {
		return nil, err
	}
	return n, nil
}

// growLines is slices.Grow, with one entry to spare for an insert, to a
// number of entries that fills whole cache lines: a pooled node's arrays
// are written by every edit, and one of a size between lines shared a
// line with another goroutine's. On 64-bit platforms either kind is 24
// bytes and that is a multiple of 8 entries; on 32-bit ones, where a
// uint64 is aligned to 4 bytes, an Extent is 20 bytes and takes 16.
func growLines[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	var zero T
	step := cacheLine / gcd(int(unsafe.Sizeof(zero)), cacheLine) // entries per whole number of lines
	want := len(s) + n + 1
	return append(make([]T, 0, (want+step-1)/step*step), s...)
}

// cacheLine is the cache line size growLines fills.
const cacheLine = 64

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// decodeNodeInto is DecodeNode into n, reusing the capacity of its entry
// slices: the hot paths decode the root into storage they own instead of
// allocating a node per call. On error n is left partly filled.
func decodeNodeInto(b []byte, n *Node) error {
	var err error
	n.Header, n.Extents, n.Indexes, err = decodeNodeIn(b, n.Extents[:0], n.Indexes[:0])
	return err
}

// decodeNodeIn decodes a node appending its entries to exts or idxs and
// returns them: results rather than stores through a pointer, so that
// storage on the caller's stack stays there.
func decodeNodeIn(b []byte, exts []Extent, idxs []Index) (Header, []Extent, []Index, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return h, exts, idxs, err
	}
	if int(h.Max) > MaxEntries(len(b)) {
		return h, exts, idxs, fserr.Corrupt("extent header", "eh_max %d does not fit in %d bytes", h.Max, len(b))
	}
	if h.Entries > h.Max {
		return h, exts, idxs, fserr.Corrupt("extent header", "eh_entries %d > eh_max %d", h.Entries, h.Max)
	}
	switch {
	case h.Entries == 0:
	case h.Depth == 0:
		exts = growLines(exts, int(h.Entries))
	default:
		idxs = growLines(idxs, int(h.Entries))
	}
	le := binary.LittleEndian
	for i := range int(h.Entries) {
		e := b[HeaderSize+i*EntrySize:]
		if h.Depth == 0 {
			x := Extent{
				Logical: le.Uint32(e[0:]),
				Len:     uint32(le.Uint16(e[4:])),
				Start:   uint64(le.Uint16(e[6:]))<<32 | uint64(le.Uint32(e[8:])),
			}
			if x.Len > InitMaxLen { // kernel: ext4_ext_is_unwritten
				x.Len -= InitMaxLen
				x.Unwritten = true
			}
			exts = append(exts, x)
		} else {
			idxs = append(idxs, Index{
				Logical: le.Uint32(e[0:]),
				Child:   uint64(le.Uint16(e[8:]))<<32 | uint64(le.Uint32(e[4:])),
				Unused:  le.Uint16(e[10:]),
			})
		}
	}
	return h, exts, idxs, nil
}

// Leaf reports whether the node holds extents.
func (n *Node) Leaf() bool { return n.Depth == 0 }

// Len returns the number of entries in use.
func (n *Node) Len() int {
	if n.Leaf() {
		return len(n.Extents)
	}
	return len(n.Indexes)
}

// Encode writes the header (with Entries set from the entry slice) and the
// entries into b. Bytes after the last entry are left as they are: callers
// zero a new block first. It does not write the checksum tail; use
// SetChecksum for a block node.
func (n *Node) Encode(b []byte) error {
	count := n.Len()
	if n.Leaf() && len(n.Indexes) != 0 || !n.Leaf() && len(n.Extents) != 0 {
		return fserr.Corrupt("extent node", "depth %d node with entries of the other kind", n.Depth)
	}
	if count > int(n.Max) {
		return fserr.Corrupt("extent node", "%d entries, eh_max %d", count, n.Max)
	}
	if int(n.Max) > MaxEntries(len(b)) {
		return fserr.Corrupt("extent node", "eh_max %d does not fit in %d bytes", n.Max, len(b))
	}
	h := n.Header
	h.Magic = Magic
	h.Entries = uint16(count)
	h.put(b)
	le := binary.LittleEndian
	for i, x := range n.Extents {
		if err := putExtent(b[HeaderSize+i*EntrySize:], x); err != nil {
			return err
		}
	}
	for i, x := range n.Indexes {
		if x.Child >= 1<<48 {
			return fserr.Corrupt("extent index", "child block %d beyond 48 bits", x.Child)
		}
		e := b[HeaderSize+i*EntrySize:]
		le.PutUint32(e[0:], x.Logical)
		le.PutUint32(e[4:], uint32(x.Child))
		le.PutUint16(e[8:], uint16(x.Child>>32))
		le.PutUint16(e[10:], x.Unused)
	}
	return nil
}

// putExtent encodes x as the leaf entry at the start of e.
func putExtent(e []byte, x Extent) error {
	raw := x.Len
	switch {
	case x.Len == 0 || x.Len > InitMaxLen || x.Unwritten && x.Len > UnwrittenMaxLen:
		return fserr.Corrupt("extent", "bad length %d (unwritten %v)", x.Len, x.Unwritten)
	case x.Start >= 1<<48:
		return fserr.Corrupt("extent", "physical block %d beyond 48 bits", x.Start)
	case x.Unwritten:
		raw += InitMaxLen
	}
	le := binary.LittleEndian
	le.PutUint32(e[0:], x.Logical)
	le.PutUint16(e[4:], uint16(raw))
	le.PutUint16(e[6:], uint16(x.Start>>32))
	le.PutUint32(e[8:], uint32(x.Start))
	return nil
}

// tailOffset returns where the tail of the block node in b is, after
// eh_max entries (kernel: EXT4_EXTENT_TAIL_OFFSET).
func tailOffset(b []byte) (int, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return 0, err
	}
	off := HeaderSize + EntrySize*int(h.Max)
	if off+TailSize > len(b) {
		return 0, fserr.Corrupt("extent node", "eh_max %d leaves no room for the tail in %d bytes", h.Max, len(b))
	}
	return off, nil
}

// Checksum computes the checksum of the block node in b as the kernel's
// ext4_extent_block_csum does: crc32c from the inode's checksum seed
// (inode.Seed(fsSeed, ino, generation)) over the bytes before the tail.
func Checksum(b []byte, inodeSeed uint32) (uint32, error) {
	off, err := tailOffset(b)
	if err != nil {
		return 0, err
	}
	return csum.CRC32C(inodeSeed, b[:off]), nil
}

// VerifyChecksum checks the tail of the block node in b. A mismatch is a
// *fserr.ChecksumError with Block -1 (fserr.At fills it in).
func VerifyChecksum(b []byte, inodeSeed uint32) error {
	c, err := Checksum(b, inodeSeed)
	if err != nil {
		return err
	}
	off, _ := tailOffset(b)
	if stored := binary.LittleEndian.Uint32(b[off:]); stored != c {
		return &fserr.ChecksumError{What: "extent node", Block: -1, Stored: stored, Computed: c}
	}
	return nil
}

// SetChecksum computes and stores the tail of the block node in b.
func SetChecksum(b []byte, inodeSeed uint32) error {
	c, err := Checksum(b, inodeSeed)
	if err != nil {
		return err
	}
	off, _ := tailOffset(b)
	binary.LittleEndian.PutUint32(b[off:], c)
	return nil
}
