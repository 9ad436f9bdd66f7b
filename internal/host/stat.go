// Package host reads and writes what a host filesystem keeps of a file,
// in ext4's terms, on every system: mkfs -d and put read it, get writes
// it. What each system keeps differs, and lives in small files per system:
//
//   - stat_linux.go, stat_darwin.go, stat_freebsd.go: FromUnix, from
//     stat(2) (owners, modes, times, device numbers, links, inode numbers);
//   - fileinfo_windows.go, fileinfo_wasip1.go, fileinfo_other.go:
//     FromFileInfo, from what os.Lstat gives where there is no stat(2);
//   - xattr_linux.go, xattr_darwin.go, xattr_freebsd.go: extended
//     attributes, named as ext4 names them.
package host

import (
	"io/fs"
	"time"
)

// The file types of Stat.Mode, as Linux (and ext4's i_mode) numbers them;
// macOS and FreeBSD number them the same.
const (
	IFMT   = 0o170000
	IFSOCK = 0o140000
	IFLNK  = 0o120000
	IFREG  = 0o100000
	IFBLK  = 0o060000
	IFDIR  = 0o040000
	IFCHR  = 0o020000
	IFIFO  = 0o010000
)

// Stat is what the host keeps of one file.
type Stat struct {
	Mode     uint32 // IF* file type and the permission bits (07777)
	UID, GID uint32 // 0 where the host has no owners
	Nlink    uint64 // 1 where the host does not count links
	// Dev and Ino identify the file, for hard links and loops; HasID is
	// false where the host gives no identity.
	Dev, Ino uint64
	HasID    bool
	Rdev     uint64 // device nodes: the device number, Linux's dev_t (devnum)
	Size     int64
	// Blocks is the space allocated, in 512-byte units, and Blksize the
	// host's block size; Blocks is -1 where the host does not say.
	Blocks       int64
	Blksize      int64
	Atime, Mtime time.Time
}

// Type is the file type bits of s.Mode.
func (s *Stat) Type() uint32 { return s.Mode & IFMT }

// ModeOf returns the ext4 mode (file type and permission bits) of an
// fs.FileMode; the type bits are 0 for fs.ModeIrregular (a kind the host
// does not say, such as a Windows junction).
func ModeOf(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	switch {
	case m.IsDir():
		mode |= IFDIR
	case m&fs.ModeSymlink != 0:
		mode |= IFLNK
	case m&fs.ModeNamedPipe != 0:
		mode |= IFIFO
	case m&fs.ModeSocket != 0:
		mode |= IFSOCK
	case m&fs.ModeCharDevice != 0:
		mode |= IFCHR
	case m&fs.ModeDevice != 0:
		mode |= IFBLK
	case m&fs.ModeIrregular != 0:
	default:
		mode |= IFREG
	}
	return mode
}
