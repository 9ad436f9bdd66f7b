package ext4go

import (
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/xattr"
)

// privCaller is whom a change of a file is made for, as far as the rules
// that take a file's privileges away go (kernel: file_remove_privs).
type privCaller struct {
	// unprivileged: the caller lacks CAP_FSETID, so a change of the
	// data drops the setuid bit, and the setgid bit as setgidDropped
	// says.
	unprivileged bool
	// inGroup reports whether the caller is in group gid (its own or a
	// supplementary one) or holds CAP_FSETID over the file (kernel:
	// in_group_or_capable); nil when that is not known, which counts as
	// yes: nothing is dropped on a guess.
	inGroup func(gid uint32) bool
}

// libraryCaller is the caller of the library's own calls (File.Write,
// WriteAt, Truncate, Fallocate, an open with O_TRUNC), which carry no
// identity: privileged, as root with CAP_FSETID, the same as every other
// library call, which checks no permissions. Their changes keep the
// setuid and setgid bits and drop security.capability, as the kernel's do
// for root. A server acting for other users says who they are through
// File.KillPriv before the change (fusefs does).
var libraryCaller = privCaller{}

// setgidDropped reports whether a change of the data of a file with mode
// and group gid by an unprivileged caller drops its setgid bit (kernel:
// setattr_should_drop_sgid): always on a group-executable file (setgid
// then means "runs as the group"), otherwise (mandatory locking, gone
// from the kernel but the bit kept) only when the caller is not in the
// file's group.
func (c privCaller) setgidDropped(mode uint16, gid uint32) bool {
	if mode&0o2000 == 0 {
		return false
	}
	return mode&0o010 != 0 || c.inGroup != nil && !c.inGroup(gid)
}

// removePrivs drops what a change by c of n's data, size or owner takes
// away on Linux, in one transaction: the setuid bit and the setgid bit as
// c's privileges say (kernel: setattr_should_drop_suidgid), and the
// security.capability attribute whoever c is (kernel:
// cap_inode_need_killpriv, which asks no capability). A directory keeps
// everything (a chown does not touch its bits); other non-regular files
// only reach here through a chown, which drops them as from a regular
// file. It changes and commits nothing when there is nothing to drop;
// changed reports whether it dropped anything.
//
// Every path that changes a file's data calls it before the change:
// File.Write, WriteAt, Truncate and Fallocate, the truncation of an
// O_TRUNC open, and File.KillPriv for a server that knows its caller.
// n.mu is held exclusively.
func (f *FS) removePrivs(n *node, c privCaller) (changed bool, err error) {
	// The lock holder's reads (inLocked), not a reader's (in), which
	// would keep the next editInodeHot from reusing the inode.
	in := n.inLocked()
	if f.w == nil || in.IsDir() {
		return false, nil
	}
	mode := in.Mode
	if c.unprivileged {
		mode &^= 0o4000
		if c.setgidDropped(in.Mode, in.GID) {
			mode &^= 0o2000
		}
	}
	hasCap, err := f.hasXattr(n, xattr.IndexSecurity, "capability")
	if err != nil {
		return false, err
	}
	if mode == in.Mode && !hasCap {
		return false, nil
	}
	err = f.retryAlloc(func() error {
		h, err := f.begin()
		if err != nil {
			return err
		}
		if hasCap {
			err = f.changeXattr(h, n, xattrChange{name: "security.capability", remove: true})
		}
		if err == nil && mode != n.inLocked().Mode {
			in := editInode(n)
			in.Mode = mode
			in.Ctime = inode.FromTime(f.now())
			err = f.setInode(h, n, in)
		}
		if e := h.End(); err == nil {
			err = e
		}
		return err
	})
	return err == nil, err
}
