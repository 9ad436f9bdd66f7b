package dir

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io/fs"
	"slices"
	"syscall"

	"github.com/ext4go/ext4go/internal/fserr"
)

// ErrIndexFull is returned by Editor.Add when an htree has as many levels as
// the filesystem allows and every index block on the new name's path is
// full (kernel: "Directory index full", ENOSPC). It matches syscall.ENOSPC.
var ErrIndexFull = fmt.Errorf("dir: directory index full: %w", syscall.ENOSPC)

// Editor changes one directory through a Store, keeping it a valid linear
// directory or htree: the directory write path of the kernel's namei.c
// (ext4_add_entry, make_indexed_dir, ext4_dx_add_entry, do_split,
// ext4_delete_entry). Like the kernel it never shrinks a directory, merges
// leaves or removes index entries: removals leave empty leaves in place.
//
// NBlocks and Indexed describe the directory and are kept up to date by the
// operations: after Add the caller persists i_size (through the Store's
// AppendBlock) and, when Indexed turned true, the inode flag EXT4_INDEX_FL.
// An Editor is not safe for concurrent use; the caller holds the directory's
// lock for the length of each operation.
type Editor struct {
	Format
	Store    Store
	NBlocks  uint32 // i_size / block size
	Indexed  bool   // inode flag EXT4_INDEX_FL: block 0 is an htree root
	CsumSeed uint32 // the directory inode's checksum seed (with Format.Csum)
	Ino      uint32 // the directory's inode number ("." must hold it)

	// DirIndex is the compat feature dir_index: when a one-block linear
	// directory is full, Add turns it into an htree instead of appending a
	// block (kernel: make_indexed_dir).
	DirIndex bool
	// DefHashVersion is s_def_hash_version, the hash a new htree root gets
	// (HashLegacy, HashHalfMD4 or HashTea).
	DefHashVersion uint8
	// NameChecked says the caller has just looked the name up and not
	// found it, with the directory locked: Add then skips its own htree
	// lookup (an insert still refuses a name in the leaf it writes).
	NameChecked bool

	// checked is what CheckAdd found for name, for the Add of that name
	// to go on from instead of reading it all again.
	checked struct {
		name []byte
		fit  int64 // linear: the first block with room, -1 if none
		// htree: the root, the path to the leaf and the name's hash.
		sc     *dxScratch
		frames []frame
		hash   uint32
		eff    int
	}
}

// Dir returns a read-only view of the directory that reads through the
// Store, for lookups and iteration.
func (e *Editor) Dir() *Dir {
	d := &Dir{Format: e.Format, Read: e.Store.ReadBlock, NBlocks: e.NBlocks, Indexed: e.Indexed, CsumSeed: e.CsumSeed, Ino: e.Ino}
	if v, ok := e.Store.(Viewer); ok {
		d.View = v.ViewBlock
	}
	return d
}

func isDots(name []byte) bool {
	return string(name) == "." || string(name) == ".."
}

// checkNewName rejects names no dirent may hold: empty, too long, or with
// a slash or NUL (e2fsck: PR_2_BAD_NAME).
func checkNewName(name []byte) error {
	if len(name) == 0 || len(name) > MaxNameLen || bytes.ContainsAny(name, "/\x00") {
		return fmt.Errorf("dir: invalid name %q: %w", name, fs.ErrInvalid)
	}
	return nil
}

func (e *Editor) corrupt(lblk int64, format string, args ...any) error {
	return &fserr.CorruptError{What: "directory", Block: lblk, Ino: e.Ino, Detail: fmt.Sprintf(format, args...)}
}

// Add inserts ent. It returns an error matching fs.ErrExist if the name is
// already there (".." and "." always are), fs.ErrInvalid for a bad name or
// inode 0, and ErrIndexFull when an htree can grow no further.
//
// A linear directory gets the entry in the first block with room (kernel:
// ext4_add_entry). If none has room, a one-block directory on a dir_index
// filesystem becomes an htree: block 0 turns into the root and its entries,
// with the new one, are split by hash into two new leaves (make_indexed_dir);
// otherwise a block is appended. In an htree the entry goes to the leaf its
// hash selects; a full leaf is split in two by hash, a full index block is
// split, and a full root moves its entries to a new index block one level
// down (ext4_dx_add_entry).
func (e *Editor) Add(ent Entry) error {
	if err := checkNewName(ent.Name); err != nil {
		return err
	}
	if isDots(ent.Name) {
		return fmt.Errorf("dir: %q: %w", ent.Name, fs.ErrExist)
	}
	if ent.Inode == 0 {
		return fmt.Errorf("dir: %q: inode 0: %w", ent.Name, fs.ErrInvalid)
	}
	if !e.FileType {
		ent.FileType = 0
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	if e.Indexed {
		return e.dxAdd(ent)
	}
	return e.linearAdd(ent)
}

// slotRoom is the bytes a new dirent could take from slot s (the test of
// ext4_find_dest_de): all of an
// unused slot, the slack past its entry of a used one.
func slotRoom(s Slot) int {
	if s.Inode == 0 {
		return s.RecLen
	}
	return s.RecLen - slotNeed(s)
}

// CheckAdd makes the reads and checks an Add of name would make before
// its first change, and changes nothing: the caller can then refuse, with
// nothing allocated, a name the directory cannot take (a corrupt block or
// index on the way). It finds no room and allocates nothing: an Add that
// passes may still fail for want of space. The directory must not change
// between CheckAdd and Add (the caller holds its lock).
func (e *Editor) CheckAdd(name []byte) error {
	if err := checkNewName(name); err != nil {
		return err
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	e.dropChecked()
	if !e.Indexed {
		fit, err := e.linearScan(Entry{Name: name})
		if err == nil {
			e.checked.name, e.checked.fit = name, fit
		}
		return err
	}
	d := e.Dir()
	sc := getDxScratch()
	r := &sc.root
	err := d.rootInto(r, sc.entries[:0])
	var eff int
	var h uint32
	var frames []frame
	if err == nil {
		eff = EffectiveVersion(r.HashVersion, e.HashUnsigned)
		h, _, err = hashName(name, eff, e.HashSeed)
	}
	if err == nil {
		frames, err = d.probeInto(r, h, sc.frames[:0], sc)
	}
	if err == nil {
		last := len(frames) - 1
		leaf := frames[last].entries[frames[last].at].Block
		err = d.viewBlock(leaf, "directory block", true, func(b []byte) error {
			if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
				return fserr.At(err, int64(leaf), e.Ino)
			}
			region, err := checkedLeafRegion(b, &e.Format)
			if err == nil {
				err = scanRegion(region, &e.Format, func(Slot) bool { return true })
			}
			return fserr.At(err, int64(leaf), e.Ino)
		})
	}
	if err != nil {
		putDxScratch(sc)
		return err
	}
	c := &e.checked
	c.name, c.sc, c.frames, c.hash, c.eff = name, sc, frames, h, eff
	return nil
}

// takeChecked returns what CheckAdd found if it was for name (it holds
// for the one Add that follows), and forgets it.
func (e *Editor) takeChecked(name []byte) (fit int64, sc *dxScratch, frames []frame, hash uint32, eff int, ok bool) {
	c := &e.checked
	if c.name != nil && bytes.Equal(c.name, name) {
		fit, sc, frames, hash, eff, ok = c.fit, c.sc, c.frames, c.hash, c.eff, true
		c.sc = nil // the caller's now
	}
	e.dropChecked()
	return
}

// dropChecked forgets what CheckAdd found.
func (e *Editor) dropChecked() {
	c := &e.checked
	if c.sc != nil {
		putDxScratch(c.sc)
	}
	*c = struct {
		name   []byte
		fit    int64
		sc     *dxScratch
		frames []frame
		hash   uint32
		eff    int
	}{}
}

func (e *Editor) linearAdd(ent Entry) error {
	fit, _, _, _, _, ok := e.takeChecked(ent.Name)
	if !ok {
		var err error
		if fit, err = e.linearScan(ent); err != nil {
			return err
		}
	}
	if fit >= 0 {
		return e.insertInto(uint32(fit), ent)
	}
	if e.NBlocks == 1 && e.DirIndex {
		// Block 0 is full: its entries (names copied out) seed the index.
		blk, err := e.Dir().leaf(0, false)
		if err != nil {
			return err
		}
		var slots0 []Slot
		if blk != nil {
			slots0 = slices.Clone(blk.Slots)
		}
		for i := range slots0 {
			slots0[i].Name = bytes.Clone(slots0[i].Name)
		}
		if canIndex(slots0, e.Ino) {
			return e.makeIndexed(slots0, ent)
		}
	}
	return e.appendLeaf(ent)
}

// linearScan checks every block of a linear directory as linearAdd reads
// it, and returns the first block with room for ent (-1: none) or an
// error matching fs.ErrExist if the name is there.
func (e *Editor) linearScan(ent Entry) (int64, error) {
	d := e.Dir()
	need := RecLen(len(ent.Name))
	fit := int64(-1)
	for lblk := uint32(0); lblk < e.NBlocks; lblk++ {
		// Looked at in place (a view): only the block written gets copied.
		err := d.viewBlock(lblk, "directory block", false, func(b []byte) error {
			if b == nil {
				return nil // a hole: e2fsck's to fill, not ours
			}
			if err := VerifyLeafChecksum(b, d.Format, d.CsumSeed); err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			region, err := checkedLeafRegion(b, &d.Format)
			if err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			dup := false
			err = scanRegion(region, &d.Format, func(s Slot) bool {
				if s.Inode != 0 && bytes.Equal(s.Name, ent.Name) {
					dup = true
					return false
				}
				if fit < 0 && slotRoom(s) >= need {
					fit = int64(lblk)
				}
				return true
			})
			if err != nil {
				return fserr.At(err, int64(lblk), d.Ino)
			}
			if dup {
				return fmt.Errorf("dir: %q: %w", ent.Name, fs.ErrExist)
			}
			return nil
		})
		if err != nil {
			return -1, err
		}
	}
	return fit, nil
}

// insertInto adds ent to leaf lblk, which is known to have room.
func (e *Editor) insertInto(lblk uint32, ent Entry) error {
	if m, ok := e.Store.(Modifier); ok {
		if lblk >= e.NBlocks {
			return &fserr.CorruptError{What: "directory block", Block: int64(lblk), Ino: e.Ino,
				Detail: fmt.Sprintf("block %d is past the directory's %d blocks", lblk, e.NBlocks)}
		}
		inserted := false
		err := m.ModifyBlock(lblk, func(b []byte) error {
			ok, err := Insert(b, e.Format, ent, e.CsumSeed)
			if err != nil {
				return fserr.At(err, int64(lblk), e.Ino)
			}
			inserted = ok
			return nil
		})
		if err != nil {
			return err
		}
		if !inserted {
			return fmt.Errorf("dir: block %d of inode %d has no room after all", lblk, e.Ino)
		}
		return nil
	}
	b, err := e.Dir().block(lblk, "directory block", true)
	if err != nil {
		return err
	}
	ok, err := Insert(b, e.Format, ent, e.CsumSeed)
	if err != nil {
		return fserr.At(err, int64(lblk), e.Ino)
	}
	if !ok {
		return fmt.Errorf("dir: block %d of inode %d has no room after all", lblk, e.Ino)
	}
	return e.Store.WriteBlock(lblk, b)
}

// appendBlock grows the directory by one block.
func (e *Editor) appendBlock() (uint32, error) {
	lblk, err := e.Store.AppendBlock()
	if err != nil {
		return 0, err
	}
	if lblk != e.NBlocks {
		return 0, fmt.Errorf("dir: store appended block %d to inode %d, want %d", lblk, e.Ino, e.NBlocks)
	}
	e.NBlocks++
	return lblk, nil
}

// appendLeaf appends a block holding ent alone.
func (e *Editor) appendLeaf(ent Entry) error {
	b, err := EncodeBlock(e.Format, []Entry{ent}, e.CsumSeed)
	if err != nil {
		return err
	}
	lblk, err := e.appendBlock()
	if err != nil {
		return err
	}
	return e.Store.WriteBlock(lblk, b)
}

// find locates a used entry other than "." and "..", and returns its leaf
// block's content, verified.
func (e *Editor) find(name []byte) (Result, []byte, error) {
	if isDots(name) {
		return Result{}, nil, fmt.Errorf("dir: %q: %w", name, fs.ErrInvalid)
	}
	d := e.Dir()
	res, err := d.Lookup(name)
	if err != nil {
		return Result{}, nil, err
	}
	b, err := d.block(res.Block, "directory block", true)
	if err != nil {
		return Result{}, nil, err
	}
	if err := VerifyLeafChecksum(b, e.Format, e.CsumSeed); err != nil {
		return Result{}, nil, fserr.At(err, int64(res.Block), e.Ino)
	}
	return res, b, nil
}

// Remove deletes the entry called name and returns it (kernel:
// ext4_delete_entry): its space joins the previous dirent of its block, or
// the dirent is marked unused if it is the block's first. Blocks and index
// entries stay. A missing name gives an error matching fs.ErrNotExist; "."
// and ".." give fs.ErrInvalid.
func (e *Editor) Remove(name []byte) (Entry, error) {
	res, b, err := e.find(name)
	if err != nil {
		return Entry{}, err
	}
	old, ok, err := Delete(b, e.Format, name, e.CsumSeed)
	if err != nil {
		return Entry{}, fserr.At(err, int64(res.Block), e.Ino)
	}
	if !ok {
		return Entry{}, fmt.Errorf("dir: %q vanished from block %d of inode %d", name, res.Block, e.Ino)
	}
	return old, e.Store.WriteBlock(res.Block, b)
}

// Replace points the existing entry called name at inode ino of file type
// ft (a rename over an existing name) and returns the entry as it was.
func (e *Editor) Replace(name []byte, ino uint32, ft uint8) (Entry, error) {
	if ino == 0 {
		return Entry{}, fmt.Errorf("dir: %q: inode 0: %w", name, fs.ErrInvalid)
	}
	res, b, err := e.find(name)
	if err != nil {
		return Entry{}, err
	}
	off := res.Offset
	if off+direntHeader+len(name) > len(b) || !bytes.Equal(b[off+direntHeader:off+direntHeader+len(name)], name) {
		return Entry{}, fmt.Errorf("dir: %q moved in block %d of inode %d", name, res.Block, e.Ino)
	}
	binary.LittleEndian.PutUint32(b[off:], ino)
	if e.FileType {
		b[off+7] = ft
	}
	if e.Csum {
		SetLeafChecksum(b, e.Format, e.CsumSeed)
	}
	return res.Entry, e.Store.WriteBlock(res.Block, b)
}

// SetDotDot makes ".." point at parent (a directory moved to another
// parent): the second dirent of block 0, or the ".." of the htree root.
func (e *Editor) SetDotDot(parent uint32) error {
	if parent == 0 {
		return fmt.Errorf("dir: parent inode 0: %w", fs.ErrInvalid)
	}
	if e.NBlocks == 0 {
		return e.corrupt(-1, "directory has no blocks")
	}
	d := e.Dir()
	b, err := d.block(0, "directory block", true)
	if err != nil {
		return err
	}
	if e.Indexed {
		if _, err := d.root(); err != nil {
			return err
		}
		binary.LittleEndian.PutUint32(b[minRecLen:], parent)
		if e.Csum {
			if err := SetDxChecksum(b, e.Format, e.CsumSeed); err != nil {
				return err
			}
		}
		return e.Store.WriteBlock(0, b)
	}
	blk, err := d.parseLeafView(0, b)
	if err != nil {
		return err
	}
	if len(blk.Slots) < 2 || string(blk.Slots[1].Name) != ".." || string(blk.Slots[0].Name) != "." {
		return e.corrupt(0, `block 0 does not start with "." and ".."`)
	}
	binary.LittleEndian.PutUint32(b[blk.Slots[1].Off:], parent)
	if e.Csum {
		SetLeafChecksum(b, e.Format, e.CsumSeed)
	}
	return e.Store.WriteBlock(0, b)
}

// IsEmpty reports whether the directory holds nothing but "." and ".."
// (kernel: empty_dir, for rmdir).
func (e *Editor) IsEmpty() (bool, error) {
	empty := true
	err := e.Dir().Iterate(func(_ uint32, _ int, x Entry) error {
		if isDots(x.Name) {
			return nil
		}
		empty = false
		return fs.SkipAll
	})
	return empty && err == nil, err
}

// NewDirBlock returns block 0 of a new directory self in parent: "." and
// ".." (file type directory when f.FileType), ".." reaching to the end or,
// with f.Csum, to the checksum tail (kernel: ext4_init_dot_dotdot).
func NewDirBlock(f Format, self, parent, seed uint32) ([]byte, error) {
	return EncodeBlock(f, []Entry{
		{Inode: self, Name: []byte("."), FileType: FTDir},
		{Inode: parent, Name: []byte(".."), FileType: FTDir},
	}, seed)
}
