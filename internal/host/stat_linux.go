package host

import (
	"time"

	"golang.org/x/sys/unix"
)

// FromUnix converts a stat(2) result. Linux's dev_t is already ext4's
// device number.
func FromUnix(st *unix.Stat_t) Stat {
	return Stat{
		Mode: st.Mode, UID: st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink),
		Dev: st.Dev, Ino: st.Ino, HasID: true, Rdev: st.Rdev,
		Size: st.Size, Blocks: st.Blocks, Blksize: int64(st.Blksize),
		Atime: time.Unix(st.Atim.Unix()), Mtime: time.Unix(st.Mtim.Unix()),
	}
}

// StatAt is statx(2) of name in dirfd, not following a last symlink;
// with name "" it is of dirfd itself. statx, not fstatat: its seconds
// have 64 bits where struct stat's have 32 (386, arm: a time past 2038
// read as 1963), and qemu-user answers stat for some platforms (s390x)
// without nanoseconds but statx with them. A kernel without statx (before
// 4.11) gets fstatat.
func StatAt(dirfd int, name string) (Stat, error) {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	var sx unix.Statx_t
	err := unix.Statx(dirfd, name, flags, unix.STATX_BASIC_STATS, &sx)
	if err == nil {
		return fromStatx(&sx), nil
	}
	if err != unix.ENOSYS {
		return Stat{}, err
	}
	var st unix.Stat_t
	if name == "" {
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return Stat{}, err
	}
	return FromUnix(&st), nil
}

func fromStatx(sx *unix.Statx_t) Stat {
	return Stat{
		Mode: uint32(sx.Mode), UID: sx.Uid, GID: sx.Gid, Nlink: uint64(sx.Nlink),
		Dev: unix.Mkdev(sx.Dev_major, sx.Dev_minor), Ino: sx.Ino, HasID: true,
		Rdev: unix.Mkdev(sx.Rdev_major, sx.Rdev_minor),
		Size: int64(sx.Size), Blocks: int64(sx.Blocks), Blksize: int64(sx.Blksize),
		Atime: time.Unix(sx.Atime.Sec, int64(sx.Atime.Nsec)), Mtime: time.Unix(sx.Mtime.Sec, int64(sx.Mtime.Nsec)),
	}
}

// HostDev is the host's dev_t of ext4's device number dev (Linux's).
func HostDev(dev uint64) uint64 { return dev }
