package ext4go

import (
	"fmt"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/xattr"
)

// uninlineFile moves an inline-data file's bytes out of the inode into an
// extent-mapped block, as the kernel does before a write that does not fit
// (ext4_convert_inline_data). n.mu must be held.
func (f *FS) uninlineFile(n *node) error {
	if !f.sb.HasIncompat(0x0040) { // extent
		return &UnsupportedError{Feature: "converting inline data without the extent feature"}
	}
	data, err := f.inlineData(n)
	if err != nil {
		return err
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	in := editInode(n)
	if err := f.dropInlineData(in); err != nil {
		h.End()
		return err
	}
	size := in.Size
	in.Size = 0
	err = f.setInode(h, n, in)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	if len(data) > 0 {
		if _, err := f.writeAt(n, data, 0, false, false); err != nil {
			return fmt.Errorf("moving inline data out: %w", err)
		}
	}
	h, err = f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	in = editInode(n)
	in.Size = size
	return f.setInode(h, n, in)
}

// dropInlineData turns in from an inline-data inode into an empty
// extent-mapped one: system.data leaves the in-inode xattrs.
func (f *FS) dropInlineData(in *inode.Inode) error {
	area, _ := xattr.IBodyArea(in.Raw, int(in.ExtraIsize))
	if area != nil {
		es, err := xattr.DecodeIBody(area, f.xattrOptions())
		if err != nil {
			return err
		}
		kept := es[:0]
		for _, e := range es {
			if !(e.Index == xattr.IndexSystem && string(e.Name) == "data") {
				kept = append(kept, e)
			}
		}
		enc, err := xattr.EncodeIBody(len(area), kept)
		if err != nil {
			return err
		}
		copy(area, enc)
	}
	in.Flags &^= inode.FlagInlineData
	in.Flags |= inode.FlagExtents
	in.Block = [60]byte{}
	return newExtentRoot(in)
}

// uninlineDir turns an inline-data directory into a block directory with
// the same entries (kernel: ext4_convert_inline_data_nolock). n.mu must be
// held.
func (f *FS) uninlineDir(n *node) error {
	if !f.sb.HasIncompat(0x0040) { // extent
		return &UnsupportedError{Feature: "converting inline data without the extent feature"}
	}
	inl, err := f.inlineDir(n)
	if err != nil {
		return err
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	// An entry the block cannot take (a corrupt name) is met after the
	// block is allocated: undone then, the directory stays as it was.
	u := newUndo(f, h)
	defer u.release()
	if err = f.uninlineDirIn(h, n, inl, u); err != nil {
		u.undo()
	}
	return err
}

// uninlineDirIn is uninlineDir's change, in h, recorded in u.
func (f *FS) uninlineDirIn(h handle, n *node, inl *dir.Inline, u *undoLog) error {
	in := editInode(n)
	if err := f.dropInlineData(in); err != nil {
		return err
	}
	in.Size = 0
	ds := f.newDirStore(h, n, in, u)
	defer ds.release()
	lblk, err := ds.AppendBlock()
	if err != nil {
		return err
	}
	b, err := dir.NewDirBlock(f.dirFormat(), n.ino, inl.Parent, inode.Seed(f.seed, n.ino, in.Generation))
	if err != nil {
		return err
	}
	if err := ds.WriteBlock(lblk, b); err != nil {
		return err
	}
	ed := f.dirEditor(ds)
	for _, e := range inl.Entries() {
		if e.Inode == 0 {
			continue
		}
		if err := ed.Add(e); err != nil {
			return &CorruptError{What: "inline directory", Block: -1, Ino: n.ino,
				Detail: fmt.Sprintf("entry %q (inode %d) cannot move to a block: %v", e.Name, e.Inode, err)}
		}
	}
	f.finishDir(ed, in)
	return u.setInode(n, in)
}
