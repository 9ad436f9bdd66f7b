package ext4go

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
)

// Flags of RenameWith (Linux RENAME_NOREPLACE, RENAME_EXCHANGE).
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// Rename moves oldname to newname, replacing newname if it exists (a file
// by a file, a directory by an empty directory), as os.Rename.
func (f *FS) Rename(oldname, newname string) error {
	return f.RenameWith(oldname, newname, 0)
}

// RenameWith is Rename with renameat2 flags: RenameNoReplace fails if
// newname exists; RenameExchange swaps the two names atomically.
func (f *FS) RenameWith(oldname, newname string, flags int) (err error) {
	defer f.noteError("FS.Rename", &err)
	err = f.retryAlloc(func() error { return f.rename(oldname, newname, flags) })
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: unwrapPath(err)}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (f *FS) rename(oldname, newname string, flags int) (err error) {
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return syscall.EINVAL
	}
	oldParent, oldBase, err := f.parentOf("rename", oldname)
	if err != nil {
		return err
	}
	newParent, newBase, err := f.parentOf("rename", newname)
	if err != nil {
		return err
	}
	return f.renameIn(oldParent, oldBase, newParent, newBase, flags)
}

// renameIn moves oldBase of directory oldParent to newBase of newParent
// (flags checked); it takes the directories' locks.
func (f *FS) renameIn(oldParent *node, oldBase string, newParent *node, newBase string, flags int) (err error) {
	cross := oldParent != newParent
	if cross {
		f.w.renameMu.Lock()
		defer f.w.renameMu.Unlock()
	}
	// Parents in inode order.
	first, second := oldParent, newParent
	if cross && second.ino < first.ino {
		first, second = second, first
	}
	first.mu.Lock()
	defer first.mu.Unlock()
	if cross {
		second.mu.Lock()
		defer second.mu.Unlock()
	}
	if err := f.checkDirWritable(oldParent); err != nil {
		return err
	}
	if err := f.checkDirWritable(newParent); err != nil {
		return err
	}
	srcIno, err := f.lookup(oldParent, oldBase)
	if err != nil {
		return err
	}
	src, err := f.inode(srcIno)
	if err != nil {
		return err
	}
	var dst *node
	if dstIno, err := f.lookup(newParent, newBase); err == nil {
		if dst, err = f.inode(dstIno); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The checks come in Linux's order (do_renameat2, then vfs_rename), so
	// that a rename breaking several rules fails as it would there: the
	// flags' conditions first (even for two links to one inode), then
	// "source above target" (EINVAL), then "target above source"
	// (ENOTEMPTY, or EINVAL for an exchange), and only then the no-op of
	// renaming an inode onto itself.
	switch {
	case flags&RenameNoReplace != 0 && dst != nil:
		return fs.ErrExist
	case flags&RenameExchange != 0 && dst == nil:
		return fs.ErrNotExist
	}
	if src == newParent || src == oldParent {
		return syscall.EINVAL
	}
	if dst == newParent {
		// (dst == oldParent is a target above the source, refused below.)
		return &CorruptError{What: "directory entry", Block: -1, Ino: newParent.ino, Detail: fmt.Sprintf("%q names its own directory", newBase)}
	}
	srcDir := src.isDir()
	if cross && srcDir {
		if err := f.checkNotAncestor(src, newParent); err != nil {
			return err
		}
	}
	if dst != nil && cross && dst.isDir() {
		if err := f.checkNotAncestor(dst, oldParent); err != nil {
			if errors.Is(err, syscall.EINVAL) && flags&RenameExchange == 0 {
				return syscall.ENOTEMPTY // kernel: the "trap" check
			}
			return err
		}
	}
	if dst == src {
		if flags&RenameNoReplace != 0 {
			return fs.ErrExist
		}
		return nil // both names are links to one inode: nothing to do
	}
	// Children in inode order.
	if dst != nil && dst.ino < src.ino {
		dst.mu.Lock()
		defer dst.mu.Unlock()
		src.mu.Lock()
		defer src.mu.Unlock()
	} else {
		src.mu.Lock()
		defer src.mu.Unlock()
		if dst != nil {
			dst.mu.Lock()
			defer dst.mu.Unlock()
		}
	}
	switch {
	case dst != nil && flags&RenameExchange == 0:
		if srcDir && !dst.isDir() {
			return syscall.ENOTDIR
		}
		if !srcDir && dst.isDir() {
			return syscall.EISDIR
		}
		if dst.isDir() {
			empty, err := f.dirIsEmpty(dst)
			if err != nil {
				return err
			}
			if !empty {
				return syscall.ENOTEMPTY
			}
		}
	}
	for _, n := range []*node{src, dst} {
		if n != nil && (n.in().HasFlag(inode.FlagImmutable) || n.in().HasFlag(inode.FlagAppend)) {
			return syscall.EPERM
		}
	}
	if oldParent.in().HasFlag(inode.FlagAppend) || dst != nil && newParent.in().HasFlag(inode.FlagAppend) {
		return syscall.EPERM
	}
	if cross && srcDir && (dst == nil || !dst.isDir()) && newParent.in().LinksCount >= linkMax &&
		!(f.sb.HasROCompat(super.ROCompatDirNlink) && newParent.in().HasFlag(inode.FlagIndex)) {
		return syscall.EMLINK
	}
	if dst != nil && flags&RenameExchange == 0 && (dst.isDir() || dst.in().LinksCount <= 1) {
		if err := f.checkFreeable(dst); err != nil {
			return err
		}
	}
	for _, p := range []*node{oldParent, newParent} {
		if p.in().HasFlag(inode.FlagInlineData) {
			if err := f.uninlineDir(p); err != nil {
				return err
			}
		}
	}

	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	// A failure at any step below puts everything back (see undoLog).
	u := newUndo(f, h)
	defer u.release()
	defer func() {
		if err != nil {
			u.undo()
		}
	}()
	opin := editInode(oldParent)
	oed := f.dirEditor(f.newDirStore(h, oldParent, opin, u))
	npin, ned := opin, oed
	if cross {
		npin = editInode(newParent)
		ned = f.dirEditor(f.newDirStore(h, newParent, npin, u))
	}
	srcFT := f.fileType(src.in().Mode)
	now := inode.FromTime(f.now())
	dropDst := false
	switch {
	case flags&RenameExchange != 0:
		if _, err := ned.Replace([]byte(newBase), src.ino, srcFT); err != nil {
			return err
		}
		if _, err := oed.Replace([]byte(oldBase), dst.ino, f.fileType(dst.in().Mode)); err != nil {
			return err
		}
		if cross {
			if srcDir {
				if err := f.setDotDot(u, src, newParent.ino); err != nil {
					return err
				}
				decLinks(opin)
				f.incLinks(npin)
			}
			if dst.isDir() {
				if err := f.setDotDot(u, dst, oldParent.ino); err != nil {
					return err
				}
				decLinks(npin)
				f.incLinks(opin)
			}
		}
		if err := f.touchCtime(u, dst, now); err != nil {
			return err
		}
	case dst != nil:
		if _, err := ned.Replace([]byte(newBase), src.ino, srcFT); err != nil {
			return err
		}
		if _, err := oed.Remove([]byte(oldBase)); err != nil {
			return err
		}
		dstDir := dst.isDir()
		dropDst = true // last: a freed inode cannot be undone
		if dstDir {
			decLinks(npin)
		}
		if cross && srcDir {
			if err := f.setDotDot(u, src, newParent.ino); err != nil {
				return err
			}
			decLinks(opin)
			f.incLinks(npin)
		}
	default:
		if err := ned.Add(dir.Entry{Inode: src.ino, Name: []byte(newBase), FileType: srcFT}); err != nil {
			return err
		}
		if _, err := oed.Remove([]byte(oldBase)); err != nil {
			return err
		}
		if cross && srcDir {
			if err := f.setDotDot(u, src, newParent.ino); err != nil {
				return err
			}
			decLinks(opin)
			f.incLinks(npin)
		}
	}
	f.finishDir(oed, opin)
	opin.Mtime, opin.Ctime = now, now
	if err := u.setInode(oldParent, opin); err != nil {
		return err
	}
	if cross {
		f.finishDir(ned, npin)
		npin.Mtime, npin.Ctime = now, now
		if err := u.setInode(newParent, npin); err != nil {
			return err
		}
	}
	if err := f.touchCtime(u, src, now); err != nil {
		return err
	}
	if dropDst {
		return f.dropLink(h, dst, dst.isDir())
	}
	return nil
}

func (f *FS) touchCtime(u *undoLog, n *node, now inode.Timestamp) error {
	in := editInode(n)
	in.Ctime = now
	return u.setInode(n, in)
}

// setDotDot points directory n's ".." at parent (n.mu held).
func (f *FS) setDotDot(u *undoLog, n *node, parent uint32) error {
	in := editInode(n)
	if in.HasFlag(inode.FlagInlineData) {
		binary.LittleEndian.PutUint32(in.Block[0:4], parent)
		return u.setInode(n, in)
	}
	ed := f.dirEditor(f.newDirStore(u.h, n, in, u))
	if err := ed.SetDotDot(parent); err != nil {
		return err
	}
	return u.setInode(n, in)
}

// checkNotAncestor refuses to move directory d into target or below it.
// The caller holds renameMu, so the tree's shape cannot change meanwhile.
func (f *FS) checkNotAncestor(d, target *node) error {
	cur := target
	for hops := 0; cur.ino != rootIno; hops++ {
		if cur == d || cur.ino == d.ino {
			return syscall.EINVAL
		}
		if hops > 1<<16 {
			return &CorruptError{What: "directory tree", Block: -1, Ino: target.ino, Detail: "'..' chain does not reach the root"}
		}
		up, err := f.lookup(cur, "..")
		if err != nil {
			return err
		}
		if cur, err = f.inode(up); err != nil {
			return err
		}
	}
	if d.ino == rootIno {
		return syscall.EINVAL
	}
	return nil
}
