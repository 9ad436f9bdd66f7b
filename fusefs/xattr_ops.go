//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"encoding/binary"
	"strings"
	"sync"
	"syscall"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func (r *rawFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	v, err := f.GetXattr(attr)
	if err != nil {
		return 0, status(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

// ListXAttr lists a file's attributes as the kernel's ext4 lists them to
// its caller: trusted.* only to one with CAP_SYS_ADMIN (kernel:
// ext4_xattr_trusted_list); the kernel does not filter a FUSE server's
// list. Reading and writing trusted.* need no check here: the VFS refuses
// them to such a caller before asking the server (xattr_permission:
// ENODATA, EPERM), judging its credentials better than callerCapable can.
func (r *rawFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	names, err := f.ListXattr()
	if err != nil {
		return 0, status(err)
	}
	var b []byte
	// Looked up once, and only for a file that has such attributes.
	privileged := sync.OnceValue(func() bool { return callerCapable(h, capSysAdmin) })
	for _, n := range names {
		if strings.HasPrefix(n, "trusted.") && !privileged() {
			continue
		}
		b = append(append(b, n...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), fuse.ERANGE
	}
	return uint32(copy(dest, b)), fuse.OK
}

func (r *rawFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	if err := f.SetXattr(attr, data, int(in.Flags)); err != nil {
		return status(err)
	}
	if attr == "system.posix_acl_access" {
		// Setting an access ACL drops setgid when the caller is neither
		// in the file's group nor privileged (kernel:
		// posix_acl_update_mode, in_group_or_capable).
		s, err := statOf(f)
		if err != nil {
			return status(err)
		}
		if s.Mode&syscall.S_ISGID != 0 && !inGroupOrCapable(&in.InHeader)(s.GID) {
			if err := f.Chmod(unixMode(uint32(s.Mode) &^ syscall.S_ISGID)); err != nil {
				return status(err)
			}
		}
		r.invalidateAttr(in.NodeId)
	}
	return fuse.OK
}

// setFlags is File.SetFlags for the ioctls, whose replies carry no
// attributes: the kernel is told its cached ones (ctime) are stale.
func (r *rawFS) setFlags(f *ext4go.File, id uint64, flags uint32) fuse.Status {
	if err := f.SetFlags(flags); err != nil {
		return status(err)
	}
	r.invalidateAttr(id)
	return fuse.OK
}

// invalidateAttr tells the kernel its cached attributes of node id are
// stale. It is called before the reply of a request that changed them
// without returning them: an attributes-only invalidation (offset -1)
// takes no lock the kernel holds while it waits for the reply.
func (r *rawFS) invalidateAttr(id uint64) {
	if srv := r.srv.Load(); srv != nil {
		srv.InodeNotify(id, -1, 0)
	}
}

func (r *rawFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(f.RemoveXattr(attr))
}

// The ioctls served: FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (lsattr, chattr),
// matched by direction, type and number (the kernel sends them with an
// int's size whatever the caller's long).
const (
	ioctlMatch       = 0xC000FFFF
	ioctlGetFlags    = 0x80006601
	ioctlSetFlags    = 0x40006602
	ioctlFSGetXattr  = 0x8000581f // struct fsxattr: the VFS reads the flags so before a set
	ioctlFSSetXattr  = 0x40005820
	fsxattrSize      = 28
	fsxattrXflagsOff = 0
	fsxattrProjidOff = 12
)

// xflagBits pairs the inode flags with the FS_XFLAG_* bits that stand for
// them in struct fsxattr (kernel: ext4_iflags_to_xflags).
var xflagBits = [...][2]uint32{
	{0x00000008, 0x00000020}, // sync
	{0x00000010, 0x00000008}, // immutable
	{0x00000020, 0x00000010}, // append
	{0x00000040, 0x00000080}, // nodump
	{0x00000080, 0x00000040}, // noatime
	{0x20000000, 0x00000200}, // project inherit
	{0x02000000, 0x00008000}, // DAX
}

func (r *rawFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	switch in.Cmd & ioctlMatch {
	case ioctlGetFlags:
		if len(outbuf) < 4 {
			return fuse.EINVAL
		}
		flags, err := f.Flags()
		if err != nil {
			return status(err)
		}
		binary.LittleEndian.PutUint32(outbuf, flags)
		clear(outbuf[4:])
		return fuse.OK
	case ioctlSetFlags:
		if len(inbuf) < 4 {
			return fuse.EINVAL
		}
		return r.setFlags(f, in.NodeId, binary.LittleEndian.Uint32(inbuf))
	case ioctlFSGetXattr:
		if len(outbuf) < fsxattrSize {
			return fuse.EINVAL
		}
		st, err := statOf(f)
		if err != nil {
			return status(err)
		}
		var x uint32
		for _, b := range xflagBits {
			if st.Flags&b[0] != 0 {
				x |= b[1]
			}
		}
		clear(outbuf)
		binary.LittleEndian.PutUint32(outbuf[fsxattrXflagsOff:], x)
		binary.LittleEndian.PutUint32(outbuf[fsxattrProjidOff:], st.ProjectID)
		return fuse.OK
	case ioctlFSSetXattr:
		if len(inbuf) < fsxattrSize {
			return fuse.EINVAL
		}
		st, err := statOf(f)
		if err != nil {
			return status(err)
		}
		if binary.LittleEndian.Uint32(inbuf[fsxattrProjidOff:]) != st.ProjectID {
			return fuse.Status(syscall.EOPNOTSUPP) // project quotas are not kept
		}
		x := binary.LittleEndian.Uint32(inbuf[fsxattrXflagsOff:])
		flags := st.Flags
		for _, b := range xflagBits {
			flags &^= b[0]
			if x&b[1] != 0 {
				flags |= b[0]
			}
		}
		return r.setFlags(f, in.NodeId, flags)
	}
	return fuse.Status(syscall.ENOTTY)
}
