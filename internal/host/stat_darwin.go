package host

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/devnum"
)

// FromUnix converts a stat(2) result. macOS's dev_t is 8 bits of major
// and 24 of minor (<sys/types.h> major(), minor()).
func FromUnix(st *unix.Stat_t) Stat {
	rdev := uint32(st.Rdev)
	return Stat{
		Mode: uint32(st.Mode), UID: st.Uid, GID: st.Gid, Nlink: uint64(st.Nlink),
		Dev: uint64(uint32(st.Dev)), Ino: st.Ino, HasID: true, Rdev: devnum.Mkdev(rdev>>24, rdev&0xffffff),
		Size: st.Size, Blocks: st.Blocks, Blksize: int64(st.Blksize),
		Atime: time.Unix(st.Atim.Unix()), Mtime: time.Unix(st.Mtim.Unix()),
	}
}

// HostDev is the host's dev_t of ext4's device number dev; majors past
// 255 and minors past 2^24-1 do not fit and are cut (macOS makes none).
func HostDev(dev uint64) uint64 {
	return uint64((devnum.Major(dev)&0xff)<<24 | devnum.Minor(dev)&0xffffff)
}
