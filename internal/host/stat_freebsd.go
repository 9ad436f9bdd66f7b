package host

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/devnum"
)

// FromUnix converts a stat(2) result, with FreeBSD's dev_t split by its
// own major() and minor().
func FromUnix(st *unix.Stat_t) Stat {
	return Stat{
		Mode: uint32(st.Mode), UID: st.Uid, GID: st.Gid, Nlink: st.Nlink,
		Dev: st.Dev, Ino: st.Ino, HasID: true, Rdev: devnum.Mkdev(unix.Major(st.Rdev), unix.Minor(st.Rdev)),
		Size: st.Size, Blocks: st.Blocks, Blksize: int64(st.Blksize),
		Atime: time.Unix(st.Atim.Unix()), Mtime: time.Unix(st.Mtim.Unix()),
	}
}

// HostDev is the host's dev_t of ext4's device number dev.
func HostDev(dev uint64) uint64 { return unix.Mkdev(devnum.Major(dev), devnum.Minor(dev)) }
