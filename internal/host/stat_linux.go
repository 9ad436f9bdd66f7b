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

// HostDev is the host's dev_t of ext4's device number dev (Linux's).
func HostDev(dev uint64) uint64 { return dev }
