package ext4go

import (
	"bytes"
	"errors"
	"io/fs"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/jbd2"
)

// endHandle ends h, keeping the first error.
func endHandle(h handle, err *error) {
	if e := h.End(); *err == nil {
		*err = e
	}
}

// addEntry adds name -> child to directory parent (mu held) unless the
// name is there already; it reports whether it added it.
func (r *fcReplay) addEntry(h handle, parent, child *node, name []byte) (bool, error) {
	f := r.f
	if !parent.isDir() {
		return false, nil
	}
	if _, err := f.lookup(parent, string(name)); err == nil {
		return false, nil
	}
	if parent.in().HasFlag(inode.FlagInlineData) {
		return false, &UnsupportedError{Feature: "fast-commit replay into an inline-data directory"}
	}
	r.record(parent.ino)
	pin := editInode(parent)
	ed := f.dirEditor(f.newDirStore(h, parent, pin, nil))
	if err := ed.Add(dir.Entry{Inode: child.ino, Name: name, FileType: f.fileType(child.in().Mode)}); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	f.finishDir(ed, pin)
	now := inode.FromTime(f.now())
	pin.Mtime, pin.Ctime = now, now
	return true, f.setInode(h, parent, pin)
}

// validName reports whether a record's name can be a directory entry.
func validName(name []byte) bool {
	return len(name) > 0 && len(name) <= 255 && !bytes.ContainsAny(name, "/\x00") &&
		string(name) != "." && string(name) != ".."
}

// create applies a CREAT_DENTRY record (kernel: ext4_fc_replay_create).
func (r *fcReplay) create(x jbd2.FCDentry) (err error) {
	f := r.f
	if x.Ino < f.sb.FirstInode() {
		return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: "fast-commit CREAT_DENTRY of a reserved inode"}
	}
	child, ok := r.inode(x.Ino)
	if !ok {
		return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: "fast-commit CREAT_DENTRY of an inode that is not there"}
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	if _, err := f.w.ialloc.MarkUsed(h, x.Ino, child.isDir()); err != nil {
		return err
	}
	r.record(x.Ino)
	parent, ok := r.inode(x.Parent)
	if ok && (!validName(x.Name) || parent == child) {
		ok = false
	}
	if ok {
		parent.mu.Lock()
		defer parent.mu.Unlock()
	}
	child.mu.Lock()
	defer child.mu.Unlock()
	if child.isDir() {
		if !ok {
			return nil
		}
		// A new directory's first block, "." and "..", made anew
		// (kernel: ext4_init_new_dir after setting i_size to 0); one
		// that maps a block 0 already is not a new one, and the record
		// is skipped, as the kernel's ext4_append refuses it.
		in := editInode(child)
		if in.HasFlag(inode.FlagInlineData) {
			return &UnsupportedError{Feature: "fast-commit replay of an inline-data directory"}
		}
		if ed := r.rangeEditor(h, child, in); ed != nil {
			m, err := ed.Tree().Lookup(0)
			if err != nil {
				return err
			}
			if !m.Hole() {
				return nil
			}
		}
		in.Size = 0
		in.Flags &^= inode.FlagIndex
		if err := f.setInode(h, child, in); err != nil {
			return err
		}
		if err := f.initInode(h, parent, child, newEntry{mode: in.Mode}, nil); err != nil {
			return err
		}
	}
	added := false
	if ok {
		if added, err = r.addEntry(h, parent, child, x.Name); err != nil {
			return err
		}
	}
	// The links of a new entry (kernel: set_nlink(1)). A directory gets
	// the two of a mkdir and adds one to its parent, where the kernel
	// leaves that to the INODE records that follow (and overwrite it): a
	// replay ending here is consistent too.
	in := editInode(child)
	in.LinksCount = 1
	if child.isDir() {
		in.LinksCount = 2
		if added {
			pin := editInode(parent)
			f.incLinks(pin)
			if err := f.setInode(h, parent, pin); err != nil {
				return err
			}
		}
	}
	return f.setInode(h, child, in)
}

// link applies an ADD_ENTRY record (kernel: ext4_fc_replay_link).
func (r *fcReplay) link(x jbd2.FCDentry) (err error) {
	f := r.f
	child, ok := r.inode(x.Ino)
	if !ok {
		return nil
	}
	parent, ok := r.inode(x.Parent)
	if !ok || parent == child || !validName(x.Name) {
		return nil
	}
	if child.isDir() {
		// link(2) refuses directories: the kernel never logs this.
		return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: "fast-commit ADD_ENTRY of a directory"}
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	parent.mu.Lock()
	defer parent.mu.Unlock()
	child.mu.Lock()
	defer child.mu.Unlock()
	added, err := r.addEntry(h, parent, child, x.Name)
	if err != nil || !added {
		return err
	}
	r.record(x.Ino)
	in := editInode(child)
	if in.LinksCount < linkMax {
		in.LinksCount++
	}
	return f.setInode(h, child, in)
}

// unlink applies a DEL_ENTRY record (kernel: ext4_fc_replay_unlink): the
// entry goes if it names the inode, and the inode loses a link if the
// name was there (kernel: __ext4_unlink drops it even when the name
// now names another inode).
func (r *fcReplay) unlink(x jbd2.FCDentry) (err error) {
	f := r.f
	child, ok := r.inode(x.Ino)
	if !ok {
		return nil
	}
	parent, ok := r.inode(x.Parent)
	if !ok || !parent.isDir() || parent == child || !validName(x.Name) {
		return nil
	}
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer endHandle(h, &err)
	parent.mu.Lock()
	defer parent.mu.Unlock()
	child.mu.Lock()
	defer child.mu.Unlock()
	ino, err := f.lookup(parent, string(x.Name))
	if err != nil {
		return nil // gone already
	}
	now := inode.FromTime(f.now())
	isDir := child.isDir()
	if isDir {
		// An rmdir: the directory must be empty, and goes with all its
		// links (kernel: ext4_rmdir's clear_nlink).
		if ino != x.Ino {
			return nil
		}
		empty, err := f.dirIsEmpty(child)
		if err != nil {
			return err
		}
		if !empty {
			return &CorruptError{What: "journal", Block: -1, Ino: x.Ino, Detail: "fast-commit DEL_ENTRY of a directory that is not empty"}
		}
	}
	if ino == x.Ino {
		if parent.in().HasFlag(inode.FlagInlineData) {
			return &UnsupportedError{Feature: "fast-commit replay in an inline-data directory"}
		}
		pin := editInode(parent)
		ed := f.dirEditor(f.newDirStore(h, parent, pin, nil))
		if _, err := ed.Remove(x.Name); err != nil {
			return err
		}
		pin.Mtime, pin.Ctime = now, now
		if isDir {
			decLinks(pin)
		}
		if err := f.setInode(h, parent, pin); err != nil {
			return err
		}
		r.record(parent.ino)
	}
	in := editInode(child)
	if isDir {
		in.LinksCount = 0
	} else if in.LinksCount > 0 {
		in.LinksCount--
	}
	in.Ctime = now
	r.unlinked[x.Ino] = true
	r.record(x.Ino)
	return f.setInode(h, child, in)
}
