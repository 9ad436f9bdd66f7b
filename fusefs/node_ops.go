//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func (r *rawFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(h.NodeId)
	if name == "." {
		// The kernel decoding a file handle (fuse_get_dentry); it checks
		// the generation itself.
		var f *ext4go.File
		var err error
		if st.Ok() {
			f, err = d.Reopen(oPath)
		} else if ino, ok := inoOf(h.NodeId); ok {
			f, err = r.fsys.OpenInode(ino, 0)
		} else {
			return st
		}
		if err != nil {
			return status(err)
		}
		return r.entry(f, out)
	}
	if !st.Ok() {
		return st
	}
	if name == ".." {
		// The kernel connecting a directory decoded from a handle to
		// the tree (fuse_get_parent).
		ino, err := d.Parent()
		if err != nil {
			return status(err)
		}
		p, err := r.fsys.OpenInode(ino, 0)
		if err != nil {
			return status(err)
		}
		return r.entry(p, out)
	}
	f, err := d.LookupAt(name)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		// A negative entry the kernel may cache as long as a positive
		// one (libfuse's negative_timeout): every create goes through
		// this server, which the kernel then asks.
		out.NodeId = 0
		out.SetEntryTimeout(r.timeout)
		return fuse.OK
	}
	if err != nil {
		return status(err)
	}
	return r.entry(f, out)
}

func (r *rawFS) Forget(id, n uint64) { r.nodes.forget(id, n) }

func (r *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	s, err := statOf(f)
	if err != nil {
		return status(err)
	}
	fillAttr(&out.Attr, s, uint32(r.fsys.BlockSize()))
	out.SetTimeout(r.timeout)
	return fuse.OK
}

func (r *rawFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	if in.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		uid, gid := -1, -1
		if in.Valid&fuse.FATTR_UID != 0 {
			uid = int(in.Uid)
		}
		if in.Valid&fuse.FATTR_GID != 0 {
			gid = int(in.Gid)
		}
		// A chown drops the setuid bit whoever makes it, and the setgid
		// bit as a write by a caller without CAP_FSETID does, judged on
		// the group before the change (kernel: chown_common); after it,
		// so that a chown refused (an immutable file) drops nothing.
		s, err := statOf(f)
		if err != nil {
			return status(err)
		}
		keepsSetgid := inGroupOrCapable(&in.InHeader)(s.GID)
		if err := f.Chown(uid, gid); err != nil {
			return status(err)
		}
		if _, err := f.KillPriv(true, func(uint32) bool { return keepsSetgid }); err != nil {
			return status(err)
		}
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		if err := f.Chmod(unixMode(in.Mode)); err != nil {
			return status(err)
		}
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		w := r.handles.get(in.Fh)
		if in.Valid&fuse.FATTR_FH == 0 || w == nil {
			var err error
			if w, err = f.Reopen(os.O_WRONLY); err != nil {
				return status(err)
			}
			defer w.Close()
		}
		if err := w.Truncate(int64(in.Size)); err != nil {
			return status(err)
		}
		if err := r.removePrivs(w, &in.InHeader, in.NodeId, killFlag(in.Valid&fuse.FATTR_KILL_SUIDGID != 0)); err != nil {
			return status(err)
		}
	}
	var atime, mtime time.Time
	now := time.Now()
	switch {
	case in.Valid&fuse.FATTR_ATIME_NOW != 0:
		atime = now
	case in.Valid&fuse.FATTR_ATIME != 0:
		atime = time.Unix(int64(in.Atime), int64(in.Atimensec))
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		mtime = now
	case in.Valid&fuse.FATTR_MTIME != 0:
		mtime = time.Unix(int64(in.Mtime), int64(in.Mtimensec))
	}
	if !atime.IsZero() || !mtime.IsZero() {
		// Times of nobody's choosing may change an append-only file:
		// utimes(NULL) or both times now (the kernel's ATTR_TOUCH), and
		// with the writeback cache the kernel's own write-back of the
		// times it kept (fuse_flush_times: mtime and ctime through a
		// handle, nothing else). One time alone, even now, is an
		// explicit setting.
		const bothNow = fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW
		const flushTimes = fuse.FATTR_MTIME | fuse.FATTR_CTIME | fuse.FATTR_FH
		touch := in.Valid&bothNow == bothNow || r.o.WritebackCache && in.Valid&^fuse.FATTR_LOCKOWNER == flushTimes ||
			// With the writeback cache the kernel sends its own mtime
			// for "now" (no MTIME_NOW), atime still as now.
			r.o.WritebackCache && in.Valid&fuse.FATTR_ATIME_NOW != 0 && in.Valid&fuse.FATTR_MTIME != 0
		var err error
		if touch {
			err = f.Touch(atime, mtime)
		} else {
			err = f.Chtimes(atime, mtime)
		}
		if err != nil {
			return status(err)
		}
	}
	s, err := statOf(f)
	if err != nil {
		return status(err)
	}
	fillAttr(&out.Attr, s, uint32(r.fsys.BlockSize()))
	out.SetTimeout(r.timeout)
	return fuse.OK
}

// unixMode turns st_mode permission and special bits into an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func (r *rawFS) make(h *fuse.InHeader, name string, ni ext4go.NewInode, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	ni.UID, ni.GID = r.owner(h)
	f, err := d.MakeAt(name, ni, os.O_RDONLY)
	if err != nil {
		return status(err)
	}
	p, err := f.Reopen(oPath)
	f.Close()
	if err != nil {
		return status(err)
	}
	return r.entry(p, out)
}

// owner is who owns an inode h's caller makes.
func (r *rawFS) owner(h *fuse.InHeader) (uid, gid uint32) {
	uid, gid = h.Uid, h.Gid
	if r.o.UID >= 0 {
		uid = uint32(r.o.UID)
	}
	if r.o.GID >= 0 {
		gid = uint32(r.o.GID)
	}
	return uid, gid
}

func (r *rawFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(&in.InHeader, name, ext4go.NewInode{Mode: in.Mode, Rdev: uint64(in.Rdev), Umask: in.Umask}, out)
}

func (r *rawFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(&in.InHeader, name, ext4go.NewInode{Mode: syscall.S_IFDIR | in.Mode&0o7777, Umask: in.Umask}, out)
}

func (r *rawFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(h, name, ext4go.NewInode{Mode: syscall.S_IFLNK | 0o777, Target: target}, out)
}

func (r *rawFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(d.UnlinkAt(name, false))
}

func (r *rawFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(d.UnlinkAt(name, true))
}

func (r *rawFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	d, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	nd, st := r.node(in.Newdir)
	if !st.Ok() {
		return st
	}
	return status(d.RenameAt(oldName, nd, newName, int(in.Flags)))
}

func (r *rawFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	old, st := r.node(in.Oldnodeid)
	if !st.Ok() {
		return st
	}
	if err := d.LinkAt(old, name); err != nil {
		return status(err)
	}
	p, err := old.Reopen(oPath)
	if err != nil {
		return status(err)
	}
	return r.entry(p, out)
}

func (r *rawFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return nil, st
	}
	t, err := f.ReadLink()
	if err != nil {
		return nil, status(err)
	}
	return []byte(t), fuse.OK
}

func (r *rawFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	// Permissions are the kernel's (default_permissions) or nobody's.
	if _, st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	return fuse.OK
}

func (r *rawFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	u := r.fsys.Usage()
	out.Blocks, out.Bfree, out.Bavail = u.Blocks, u.FreeBlocks, u.Available
	out.Files, out.Ffree = u.Inodes, u.FreeInodes
	out.Bsize, out.Frsize, out.NameLen = u.BlockSize, u.BlockSize, u.NameMax
	return fuse.OK
}
