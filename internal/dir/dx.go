package dir

import (
	"encoding/binary"
	"fmt"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
)

// htree layout constants.
const (
	dxEntrySize      = 8  // struct dx_entry: le32 hash, le32 block
	dxRootInfoLen    = 8  // sizeof(struct dx_root_info)
	dxRootCountOff   = 32 // "." (12) + ".." header (12) + dx_root_info (8)
	dxNodeCountOff   = 8  // the fake dirent header
	dxTailSize       = 8  // struct dx_tail: le32 reserved, le32 checksum
	dxBlockMask      = 0x0FFFFFFF
	dxMaxLevels      = 2 // without largedir (kernel: ext4_dir_htree_level)
	dxMaxLevelsLarge = 3 // with largedir (EXT4_HTREE_LEVEL)
)

// DxEntry is one (hash, block) pair of an htree index. The first entry of a
// root or node has no hash on disk (its slot holds count/limit); it covers
// every hash below the second entry's, and decodes with Hash 0. A set low bit
// in Hash says the previous block's names continue with that same hash.
type DxEntry struct {
	Hash  uint32
	Block uint32 // logical block in the directory (the top 4 bits, reserved, are masked off)
}

// DxRoot is a decoded htree root: logical block 0 of an indexed directory.
type DxRoot struct {
	DotInode       uint32 // inode of "." (the directory itself)
	DotDotInode    uint32 // inode of ".." (the parent)
	HashVersion    uint8  // as stored; see EffectiveVersion
	IndirectLevels uint8  // 0: the root points at leaves
	UnusedFlags    uint8
	Limit          uint16
	Entries        []DxEntry // count entries, count ≥ 1
	Checksum       uint32    // the dx_tail checksum as stored, with f.Csum
}

// DxNode is a decoded interior htree block.
type DxNode struct {
	Limit    uint16
	Entries  []DxEntry
	Checksum uint32 // the dx_tail checksum as stored, with f.Csum
}

// DxRootLimit is the number of dx entries a root block holds (kernel:
// dx_root_limit with info_length 8).
func DxRootLimit(f Format) int {
	n := f.BlockSize - dxRootCountOff
	if f.Csum {
		n -= dxTailSize
	}
	return n / dxEntrySize
}

// DxNodeLimit is the number of dx entries an interior block holds (kernel:
// dx_node_limit).
func DxNodeLimit(f Format) int {
	n := f.BlockSize - dxNodeCountOff
	if f.Csum {
		n -= dxTailSize
	}
	return n / dxEntrySize
}

// MaxLevels is the number of index levels (root included) f allows.
func MaxLevels(f Format) int {
	if f.LargeDir {
		return dxMaxLevelsLarge
	}
	return dxMaxLevels
}

// IsDxNode reports whether a block of an indexed directory is an interior
// index block: its first dirent is unused and spans the whole block (kernel:
// is_dx_internal_node, for blocks other than 0).
func IsDxNode(b []byte, f Format) bool {
	if len(b) != f.BlockSize || len(b) < dxNodeCountOff {
		return false
	}
	return binary.LittleEndian.Uint32(b) == 0 &&
		RecLenFromDisk(binary.LittleEndian.Uint16(b[4:]), f.BlockSize) == f.BlockSize
}

// parseDxEntries decodes the count/limit header at off and the entries after
// it, checking limit == want, 1 ≤ count ≤ limit and that hashes never go
// down. The entries go into dst's array when it is large enough.
func parseDxEntries(b []byte, off, want int, what string, dst []DxEntry) (uint16, []DxEntry, error) {
	limit := int(binary.LittleEndian.Uint16(b[off:]))
	count := int(binary.LittleEndian.Uint16(b[off+2:]))
	if limit != want {
		return 0, nil, fserr.Corrupt(what, "dx limit %d, want %d", limit, want)
	}
	if count == 0 || count > limit {
		return 0, nil, fserr.Corrupt(what, "dx count %d beyond limit %d", count, limit)
	}
	// want was derived from the block size, so count entries fit.
	var es []DxEntry
	if cap(dst) >= count {
		es = dst[:count]
	} else {
		es = make([]DxEntry, count)
	}
	for i := range es {
		es[i].Hash = 0
		p := b[off+i*dxEntrySize:]
		if i > 0 {
			es[i].Hash = binary.LittleEndian.Uint32(p)
			if i > 1 && es[i].Hash < es[i-1].Hash {
				return 0, nil, fserr.Corrupt(what, "dx entry %d hash %#x below the previous %#x", i, es[i].Hash, es[i-1].Hash)
			}
		}
		es[i].Block = binary.LittleEndian.Uint32(p[4:]) & dxBlockMask
	}
	return uint16(limit), es, nil
}

// ParseDxRoot decodes and validates an htree root block (kernel: dx_probe's
// checks on block 0): fake "." (rec_len 12) and ".." (rec_len to the block
// end) dirents, dx_root_info with info_length 8, a supported hash version,
// no unknown flags, indirect_levels below MaxLevels, and a count/limit that
// matches the block size. Siphash roots give an *fserr.UnsupportedError.
func ParseDxRoot(b []byte, f Format) (*DxRoot, error) {
	r := new(DxRoot)
	if err := parseDxRoot(b, f, r, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// parseDxRoot is ParseDxRoot into r, with the entries in dst's array when
// it is large enough (lookups parse the root of every indexed directory
// they search: no allocation).
func parseDxRoot(b []byte, f Format, r *DxRoot, dst []DxEntry) error {
	const what = "htree root"
	if len(b) != f.BlockSize || !ValidBlockSize(f.BlockSize) {
		return fserr.Corrupt(what, "%d bytes, want block size %d", len(b), f.BlockSize)
	}
	dotIno, dotLen, dotNameLen, _ := readDirent(b, 0, &f)
	if dotLen != minRecLen || dotNameLen != 1 || b[8] != '.' {
		return fserr.Corrupt(what, `bad "." entry (rec_len %d, name_len %d)`, dotLen, dotNameLen)
	}
	ddIno, ddLen, ddNameLen, _ := readDirent(b, minRecLen, &f)
	if ddLen != f.BlockSize-minRecLen || ddNameLen != 2 || b[20] != '.' || b[21] != '.' {
		return fserr.Corrupt(what, `bad ".." entry (rec_len %d, name_len %d)`, ddLen, ddNameLen)
	}
	*r = DxRoot{
		DotInode:       dotIno,
		DotDotInode:    ddIno,
		HashVersion:    b[28],
		IndirectLevels: b[30],
		UnusedFlags:    b[31],
	}
	if infoLen := b[29]; infoLen != dxRootInfoLen {
		return fserr.Corrupt(what, "info_length %d, want %d", infoLen, dxRootInfoLen)
	}
	switch r.HashVersion {
	case HashLegacy, HashHalfMD4, HashTea:
	case HashSiphash:
		return &fserr.UnsupportedError{Feature: "siphash directory hash", Detail: "casefolded encrypted directories"}
	default:
		return fserr.Corrupt(what, "unrecognised hash version %d", r.HashVersion)
	}
	if r.UnusedFlags&1 != 0 {
		return fserr.Corrupt(what, "unimplemented hash flags %#x", r.UnusedFlags)
	}
	if int(r.IndirectLevels) >= MaxLevels(f) {
		return fserr.Corrupt(what, "indirect_levels %d exceeds the supported %d (largedir %v)", r.IndirectLevels, MaxLevels(f)-1, f.LargeDir)
	}
	limit, es, err := parseDxEntries(b, dxRootCountOff, DxRootLimit(f), what, dst)
	if err != nil {
		return err
	}
	r.Limit, r.Entries = limit, es
	if f.Csum {
		r.Checksum = binary.LittleEndian.Uint32(b[dxRootCountOff+int(limit)*dxEntrySize+4:])
	}
	return nil
}

// ParseDxNode decodes and validates an interior htree block: a fake unused
// dirent spanning the block, then count/limit and the entries.
func ParseDxNode(b []byte, f Format) (*DxNode, error) {
	n := new(DxNode)
	if err := parseDxNode(b, f, n, nil); err != nil {
		return nil, err
	}
	return n, nil
}

// parseDxNode is ParseDxNode into n, with the entries in dst's array when
// it is large enough.
func parseDxNode(b []byte, f Format, n *DxNode, dst []DxEntry) error {
	const what = "htree node"
	if len(b) != f.BlockSize || !ValidBlockSize(f.BlockSize) {
		return fserr.Corrupt(what, "%d bytes, want block size %d", len(b), f.BlockSize)
	}
	if !IsDxNode(b, f) {
		return fserr.Corrupt(what, "fake dirent is not an empty entry spanning the block")
	}
	limit, es, err := parseDxEntries(b, dxNodeCountOff, DxNodeLimit(f), what, dst)
	if err != nil {
		return err
	}
	*n = DxNode{Limit: limit, Entries: es}
	if f.Csum {
		n.Checksum = binary.LittleEndian.Uint32(b[dxNodeCountOff+int(limit)*dxEntrySize+4:])
	}
	return nil
}

// putDxEntries writes count/limit and the entries at off.
func putDxEntries(b []byte, off, limit int, es []DxEntry) {
	for i, e := range es {
		p := b[off+i*dxEntrySize:]
		if i > 0 {
			binary.LittleEndian.PutUint32(p, e.Hash)
		}
		binary.LittleEndian.PutUint32(p[4:], e.Block)
	}
	binary.LittleEndian.PutUint16(b[off:], uint16(limit))
	binary.LittleEndian.PutUint16(b[off+2:], uint16(len(es)))
}

func checkDxEntries(es []DxEntry, limit int) error {
	if len(es) == 0 || len(es) > limit {
		return fmt.Errorf("dir: %d dx entries, want 1..%d", len(es), limit)
	}
	for i := 2; i < len(es); i++ {
		if es[i].Hash < es[i-1].Hash {
			return fmt.Errorf("dir: dx entry %d hash %#x below the previous %#x", i, es[i].Hash, es[i-1].Hash)
		}
	}
	for i, e := range es {
		if e.Block > dxBlockMask {
			return fmt.Errorf("dir: dx entry %d block %d beyond %#x", i, e.Block, dxBlockMask)
		}
	}
	return nil
}

// EncodeDxRoot builds an htree root block from r (Limit and Checksum are
// computed, not taken from r; "." and ".." get file type FTDir when the
// filetype feature is on) and, with f.Csum, sets its dx_tail checksum.
func EncodeDxRoot(f Format, r *DxRoot, seed uint32) ([]byte, error) {
	limit := DxRootLimit(f)
	if err := checkDxEntries(r.Entries, limit); err != nil {
		return nil, err
	}
	if int(r.IndirectLevels) >= MaxLevels(f) {
		return nil, fmt.Errorf("dir: indirect_levels %d, at most %d", r.IndirectLevels, MaxLevels(f)-1)
	}
	b := make([]byte, f.BlockSize)
	putDirent(b, 0, minRecLen, Entry{Inode: r.DotInode, Name: []byte("."), FileType: FTDir}, &f)
	putDirent(b, minRecLen, f.BlockSize-minRecLen, Entry{Inode: r.DotDotInode, Name: []byte(".."), FileType: FTDir}, &f)
	b[28] = r.HashVersion
	b[29] = dxRootInfoLen
	b[30] = r.IndirectLevels
	b[31] = r.UnusedFlags
	putDxEntries(b, dxRootCountOff, limit, r.Entries)
	if f.Csum {
		if err := SetDxChecksum(b, f, seed); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// EncodeDxNode builds an interior htree block from n (Limit and Checksum are
// computed) and, with f.Csum, sets its dx_tail checksum.
func EncodeDxNode(f Format, n *DxNode, seed uint32) ([]byte, error) {
	limit := DxNodeLimit(f)
	if err := checkDxEntries(n.Entries, limit); err != nil {
		return nil, err
	}
	b := make([]byte, f.BlockSize)
	binary.LittleEndian.PutUint16(b[4:], RecLenToDisk(f.BlockSize, f.BlockSize))
	putDxEntries(b, dxNodeCountOff, limit, n.Entries)
	if f.Csum {
		if err := SetDxChecksum(b, f, seed); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// dxCountOffset finds where count/limit live in a root or node block
// (kernel: get_dx_countlimit).
func dxCountOffset(b []byte, f *Format) (int, error) {
	if len(b) != f.BlockSize || !ValidBlockSize(f.BlockSize) {
		return 0, fserr.Corrupt("htree block", "%d bytes, want block size %d", len(b), f.BlockSize)
	}
	switch RecLenFromDisk(binary.LittleEndian.Uint16(b[4:]), f.BlockSize) {
	case f.BlockSize:
		return dxNodeCountOff, nil
	case minRecLen:
		if RecLenFromDisk(binary.LittleEndian.Uint16(b[16:]), f.BlockSize) != f.BlockSize-minRecLen ||
			binary.LittleEndian.Uint32(b[24:]) != 0 || b[29] != dxRootInfoLen {
			return 0, fserr.Corrupt("htree root", "not an htree root (checksum layout)")
		}
		return dxRootCountOff, nil
	}
	return 0, fserr.Corrupt("htree block", "neither an htree root nor a node")
}

// DxChecksum computes the dx_tail checksum of an htree root or node: raw
// crc32c seeded with the directory's checksum seed over the block up to the
// last used dx entry, then dt_reserved and a zero checksum (kernel:
// ext4_dx_csum).
func DxChecksum(b []byte, f Format, seed uint32) (uint32, error) {
	off, err := dxCountOffset(b, &f)
	if err != nil {
		return 0, err
	}
	limit := int(binary.LittleEndian.Uint16(b[off:]))
	count := int(binary.LittleEndian.Uint16(b[off+2:]))
	tail := off + limit*dxEntrySize
	if tail > len(b)-dxTailSize {
		return 0, fserr.Corrupt("htree block", "no space for the dx tail (limit %d)", limit)
	}
	if count > limit {
		return 0, fserr.Corrupt("htree block", "dx count %d beyond limit %d", count, limit)
	}
	c := csum.CRC32C(seed, b[:off+count*dxEntrySize])
	c = csum.CRC32C(c, b[tail:tail+4])
	c = csum.CRC32C(c, []byte{0, 0, 0, 0})
	return c, nil
}

// VerifyDxChecksum checks the dx_tail checksum of an htree root or node.
// Without f.Csum there is nothing to check.
func VerifyDxChecksum(b []byte, f Format, seed uint32) error {
	if !f.Csum || f.NoVerify {
		return nil
	}
	c, err := DxChecksum(b, f, seed)
	if err != nil {
		return err
	}
	off, _ := dxCountOffset(b, &f)
	tail := off + int(binary.LittleEndian.Uint16(b[off:]))*dxEntrySize
	stored := binary.LittleEndian.Uint32(b[tail+4:])
	if stored != c {
		what := "htree node"
		if off == dxRootCountOff {
			what = "htree root"
		}
		return &fserr.ChecksumError{What: what, Block: -1, Stored: stored, Computed: c}
	}
	return nil
}

// SetDxChecksum stores the dx_tail checksum of an htree root or node.
func SetDxChecksum(b []byte, f Format, seed uint32) error {
	c, err := DxChecksum(b, f, seed)
	if err != nil {
		return err
	}
	off, _ := dxCountOffset(b, &f)
	tail := off + int(binary.LittleEndian.Uint16(b[off:]))*dxEntrySize
	binary.LittleEndian.PutUint32(b[tail+4:], c)
	return nil
}
