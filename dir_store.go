package ext4go

import (
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/super"
)

// dirStore is a directory's blocks as the directory editor sees them,
// inside one handle. in is the directory inode being edited.
type dirStore struct {
	f     *FS
	h     handle
	n     *node
	in    *inode.Inode
	es    *extStore
	fresh map[uint32]bool // blocks appended in this change: written without reading
}

// newDirStore returns the store of directory n (in is the copy of its
// inode being changed) in h; u, if not nil, records the changes for undo.
// Its extent store is pooled: a caller done with the store and its editors
// may give it back with release (create, link and unlink do: once per
// name).
func (f *FS) newDirStore(h handle, n *node, in *inode.Inode, u *undoLog) *dirStore {
	es := pooledExtStore(f, h, n.ino)
	es.undo = u
	return &dirStore{f: f, h: h, n: n, in: in, es: es}
}

// release gives the store's extent store back to its pool; s and the
// editors made over it must not be used after.
func (s *dirStore) release() {
	putExtStore(s.es)
	s.es = nil
}

// physical maps a directory block, 0 for a hole.
func (s *dirStore) physical(lblk uint32) (uint64, error) {
	if !s.in.HasFlag(inode.FlagExtents) {
		runs, err := s.f.buildMapping(s.n, s.in)
		if err != nil {
			return 0, err
		}
		i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > uint64(lblk) })
		if i == len(runs) || runs[i].logical > uint64(lblk) {
			return 0, nil
		}
		return runs[i].physical + uint64(lblk) - runs[i].logical, nil
	}
	mp, err := s.f.editor(s.n, s.in, s.es).Lookup(lblk)
	if err != nil || mp.Hole() || mp.Unwritten {
		return 0, err
	}
	return mp.Physical, nil
}

func (s *dirStore) ReadBlock(lblk uint32) ([]byte, error) {
	p, err := s.physical(lblk)
	if err != nil || p == 0 {
		return nil, err
	}
	return s.f.readBlock(p, "directory block")
}

// ViewBlock shows block lblk without copying it (dir.Viewer).
func (s *dirStore) ViewBlock(lblk uint32, fn func(b []byte) error) error {
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return fn(nil)
	}
	return s.f.viewDirBlock(p, fn)
}

// ModifyBlock changes block lblk in place (dir.Modifier), recorded as
// WriteBlock records a change. A block appended in this change has no
// content to change yet: it goes through ReadBlock and WriteBlock.
func (s *dirStore) ModifyBlock(lblk uint32, fn func(b []byte) error) error {
	if s.fresh[lblk] {
		b, err := s.ReadBlock(lblk)
		if err == nil && b == nil {
			err = &CorruptError{What: "directory block", Block: int64(lblk), Ino: s.n.ino, Detail: "directory hole"}
		}
		if err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
		return s.WriteBlock(lblk, b)
	}
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return &CorruptError{What: "directory block", Block: int64(lblk), Ino: s.n.ino, Detail: "directory hole"}
	}
	if p >= s.f.sb.BlocksCount() {
		return &CorruptError{What: "directory block", Block: int64(p), Detail: fmt.Sprintf("block number outside the filesystem (%d blocks)", s.f.sb.BlocksCount())}
	}
	if s.es.undo != nil {
		return s.es.undo.modify(p, fn)
	}
	return s.h.Modify(p, fn)
}

func (s *dirStore) WriteBlock(lblk uint32, b []byte) error {
	p, err := s.physical(lblk)
	if err != nil {
		return err
	}
	if p == 0 {
		return &CorruptError{What: "directory", Block: -1, Ino: s.n.ino, Detail: fmt.Sprintf("write to hole at block %d", lblk)}
	}
	put := func(dst []byte) error { copy(dst, b); return nil }
	if s.fresh[lblk] {
		return s.h.Create(p, put)
	}
	if s.es.undo != nil {
		return s.es.undo.modify(p, put)
	}
	return s.h.Modify(p, put)
}

func (s *dirStore) AppendBlock() (uint32, error) {
	f := s.f
	lblk := uint32(s.in.Size / uint64(f.blockSize))
	ed := f.editor(s.n, s.in, s.es)
	req := mballoc.Request{Inode: s.n.ino, Logical: uint64(lblk), Len: 1}
	f.setNeighbours(ed, &req)
	if req.LeftPhysical != 0 {
		req.Goal = req.LeftPhysical + 1
	}
	// Otherwise the allocator's inode goal: the first group of the
	// directory's flex group, where the flex group's directory blocks
	// gather, not the group of the inode (kernel:
	// ext4_inode_to_goal_block).
	ext, err := f.allocBlocks(s.h, req)
	if err != nil {
		var ns *mballoc.NoSpaceError
		if errors.As(err, &ns) {
			return 0, syscall.ENOSPC
		}
		return 0, err
	}
	if err := ed.Insert(extent.Extent{Logical: lblk, Len: 1, Start: ext.Start}); err != nil {
		f.freeBlocks(s.h, ext.Start, 1, 0)
		return 0, err
	}
	s.es.undo.allocated(ext.Start)
	s.es.undo.touched(s.n)
	if err := f.addBlocks(s.in, s.es.delta+1); err != nil {
		return 0, err
	}
	s.es.delta = 0
	s.in.Size += uint64(f.blockSize)
	if s.fresh == nil {
		s.fresh = map[uint32]bool{}
	}
	s.fresh[lblk] = true
	return lblk, nil
}

// dirEditor returns an editor of directory n (whose inode copy in is being
// changed) in h.
func (f *FS) dirEditor(s *dirStore) *dir.Editor {
	in := s.in
	return &dir.Editor{
		Format:         f.dirFormat(),
		Store:          s,
		NBlocks:        uint32(in.Size / uint64(f.blockSize)),
		Indexed:        in.HasFlag(inode.FlagIndex) && f.sb.HasCompat(super.CompatDirIndex),
		CsumSeed:       inode.Seed(f.seed, s.n.ino, in.Generation),
		Ino:            s.n.ino,
		DirIndex:       f.sb.HasCompat(super.CompatDirIndex),
		DefHashVersion: f.sb.DefHashVersion,
	}
}

// finishDir records what the editor changed about the directory inode.
func (f *FS) finishDir(ed *dir.Editor, in *inode.Inode) {
	if ed.Indexed {
		in.Flags |= inode.FlagIndex
	}
}
