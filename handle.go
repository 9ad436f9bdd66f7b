package ext4go

import (
	"errors"
	"io/fs"
	"strconv"
	"syscall"
)

// OpenInode opens inode ino as LookupAt would have found it (a File for
// the *at calls, Stat and Reopen, reading and writing nothing itself),
// for file handles: a server that exports the filesystem (NFS, a FUSE
// mount's open_by_handle_at) names files by inode number and generation.
// A generation of 0 accepts any; the File's Stat tells which it has.
//
// An inode that is not in use, is no longer linked, or has another
// generation gives syscall.ESTALE, as the kernel's ext4_nfs_get_inode
// does, and so does a reserved inode other than the root.
func (f *FS) OpenInode(ino, generation uint32) (*File, error) {
	name := "#" + strconv.FormatUint(uint64(ino), 10)
	if err := f.checkClosed("openinode", name); err != nil {
		return nil, err
	}
	stale := &fs.PathError{Op: "openinode", Path: name, Err: syscall.ESTALE}
	if ino == 0 || ino > f.sb.InodesCount || ino < f.sb.FirstInode() && ino != rootIno {
		return nil, stale
	}
	n, err := f.inode(ino)
	if err != nil {
		var ce *CorruptError
		if errors.Is(err, errBeingCreated) || errors.As(err, &ce) && ce.Ino == ino && ce.Detail == detailNotInUse {
			return nil, stale // not in use (or being created)
		}
		return nil, &fs.PathError{Op: "openinode", Path: name, Err: err}
	}
	// See lifetime.go, "Finding by number".
	n.mu.RLock()
	defer n.mu.RUnlock()
	if f.named(n) != nil || generation != 0 && n.in().Generation != generation {
		return nil, stale
	}
	n.opens.Add(1)
	return &File{fsys: f, n: n, name: name}, nil
}
