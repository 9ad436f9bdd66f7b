package ext4go

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/ext4go/ext4go/internal/inode"
)

// The inode flags chattr and lsattr see (kernel: EXT4_FL_USER_VISIBLE and
// EXT4_FL_USER_MODIFIABLE).
const (
	flagsUserVisible    = 0x725BDFFF
	flagsUserModifiable = 0x624BC0FF
	// flagsChangeable are the modifiable flags ext4go changes: the
	// others (extents, data journalling, casefold, the old EOFBLOCKS)
	// need a conversion of the inode it does not make. DAX only asks
	// for direct access where a mount offers it (never here, and the
	// kernel's dax=inode mounts read it at the next load): the flag
	// alone changes.
	flagsChangeable = inode.FlagSecRm | inode.FlagUnRm | inode.FlagCompr | inode.FlagSync |
		inode.FlagImmutable | inode.FlagAppend | inode.FlagNoDump | inode.FlagNoAtime |
		inode.FlagNoTail | inode.FlagDirSync | inode.FlagTopDir | inode.FlagProjInherit |
		inode.FlagDAX
)

// Flags returns the file's inode flags as FS_IOC_GETFLAGS (lsattr) gives
// them: the FS_*_FL bits, which are ext4's i_flags.
func (f *File) Flags() (uint32, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Sys().(*Stat).Flags & flagsUserVisible, nil
}

// SetFlags sets the file's inode flags as FS_IOC_SETFLAGS (chattr) does
// (kernel: ext4_ioctl_setflags): a flag that does not apply to the file's
// type is syscall.EOPNOTSUPP, flags no one may change keep their value.
// Changing the
// extents, data-journalling or casefold flag, which needs a conversion of
// the inode, is an *UnsupportedError; DAX on an inode with inline data,
// encryption or verity is syscall.EOPNOTSUPP (kernel: dax_compatible). Who may change the
// immutable and append-only flags (CAP_LINUX_IMMUTABLE) is the caller's
// check.
func (f *File) SetFlags(flags uint32) error {
	return f.setAttrFlags("setflags", func(in *inode.Inode) error {
		// chattr sets what lsattr read, changed: visible flags no one
		// may set are dropped, a flag the file's type cannot have is
		// refused.
		flags := flags & flagsUserModifiable
		if maskFlags(in.Mode, flags) != flags {
			return syscall.EOPNOTSUPP
		}
		old := in.Flags
		if flags&inode.FlagDAX != 0 && old&(inode.FlagInlineData|inode.FlagEncrypt|inode.FlagVerity) != 0 {
			return syscall.EOPNOTSUPP
		}
		if ch := (flags ^ old) & flagsUserModifiable &^ flagsChangeable; ch != 0 {
			return &UnsupportedError{Feature: fmt.Sprintf("changing inode flags %#x", ch)}
		}
		in.Flags = old&^flagsUserModifiable | flags&flagsUserModifiable
		return nil
	})
}

// maskFlags keeps the flags that apply to an inode of mode (kernel:
// ext4_mask_flags): no directory-only flags on regular files, only nodump
// and noatime on anything else but directories.
func maskFlags(mode uint16, flags uint32) uint32 {
	switch mode & 0xF000 {
	case 0x4000:
		return flags
	case 0x8000:
		return flags &^ (inode.FlagDirSync | inode.FlagTopDir | inode.FlagCasefold | inode.FlagProjInherit)
	}
	return flags & (inode.FlagNoDump | inode.FlagNoAtime)
}

// frozen reports whether in's immutable or append-only flag forbids
// changing its attributes, xattrs or links (the VFS's IS_IMMUTABLE ||
// IS_APPEND checks, which a FUSE kernel cannot make: it does not see the
// flags).
func frozen(in *inode.Inode) bool {
	return in.HasFlag(inode.FlagImmutable) || in.HasFlag(inode.FlagAppend)
}

// checkOpenFlags refuses an open that the immutable and append-only flags
// forbid (the VFS's may_open): writing an immutable file, writing an
// append-only one other than by appending, truncating either.
func checkOpenFlags(in *inode.Inode, flag int, writable bool) error {
	switch {
	case in.HasFlag(inode.FlagImmutable) && (writable || flag&os.O_TRUNC != 0):
		return syscall.EPERM
	case in.HasFlag(inode.FlagAppend) && (writable && flag&os.O_APPEND == 0 || flag&os.O_TRUNC != 0):
		return syscall.EPERM
	}
	return nil
}

// KillPriv drops what a change of the file's data, size or owner by the
// caller it describes drops on Linux (kernel: file_remove_privs, and
// chown_common for a chown): the security.capability attribute always;
// with suidgid (the caller lacks CAP_FSETID, or the change is a chown)
// the setuid bit, and the setgid bit of a group-executable file, or of
// any file when inGroup (nil: not known, taken as yes) says the caller is
// neither in the file's group nor holds CAP_FSETID over it (kernel:
// setattr_should_drop_sgid, in_group_or_capable). A directory keeps
// everything. It changes, and commits, nothing where
// there is nothing to drop; changed reports whether it dropped anything.
//
// The library's own changes of a file's data (Write, WriteAt, Truncate,
// Fallocate, an O_TRUNC open) drop them as for a privileged caller, root
// with CAP_FSETID: security.capability goes, the setuid and setgid bits
// stay. A server acting for other users (fusefs) calls KillPriv with
// what it knows of its caller before each such change.
func (f *File) KillPriv(suidgid bool, inGroup func(gid uint32) bool) (changed bool, err error) {
	defer f.fsys.noteError("File.KillPriv", &err)
	if err := f.checkOpen("killpriv"); err != nil {
		return false, err
	}
	n := f.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.freed.Load() {
		return false, nil
	}
	changed, err = f.fsys.removePrivs(n, privCaller{unprivileged: suidgid, inGroup: inGroup})
	if err != nil {
		return false, &fs.PathError{Op: "killpriv", Path: f.name, Err: err}
	}
	return changed, nil
}
