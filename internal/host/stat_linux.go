package host

import (
	"time"
	"unsafe"

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

// StatAt is fstatat(2) of name in dirfd, not following a last symlink;
// with name "" it is fstat(2) of dirfd itself.
//
// Where struct stat holds 32-bit seconds (386, arm) the kernel cuts times
// past 2038 to fit (2100 reads as 1963), so the times are read again with
// statx(2), whose seconds have 64 bits.
func StatAt(dirfd int, name string) (Stat, error) {
	var st unix.Stat_t
	flags := unix.AT_SYMLINK_NOFOLLOW
	var err error
	if name == "" {
		flags = unix.AT_EMPTY_PATH
		err = unix.Fstat(dirfd, &st)
	} else {
		err = unix.Fstatat(dirfd, name, &st, flags)
	}
	if err != nil {
		return Stat{}, err
	}
	s := FromUnix(&st)
	if unsafe.Sizeof(st.Mtim.Sec) < 8 {
		const want = unix.STATX_ATIME | unix.STATX_MTIME
		var sx unix.Statx_t
		if unix.Statx(dirfd, name, flags, want, &sx) == nil && sx.Mask&want == want {
			s.Atime = time.Unix(sx.Atime.Sec, int64(sx.Atime.Nsec))
			s.Mtime = time.Unix(sx.Mtime.Sec, int64(sx.Mtime.Nsec))
		}
	}
	return s, nil
}

// HostDev is the host's dev_t of ext4's device number dev (Linux's).
func HostDev(dev uint64) uint64 { return dev }
