package ext4go

import (
	"fmt"
	"io/fs"
	"time"

	"github.com/ext4go/ext4go/internal/devnum"
)

// Stat is the ext4 view of a file: what FileInfo.Sys returns for files of
// an *FS.
type Stat struct {
	Ino        uint32
	Mode       uint16 // i_mode as stored: S_IF* type and permission bits
	UID, GID   uint32
	Size       int64
	Nlink      uint32 // link count (1 for a directory past 65000 links with dir_nlink)
	Blocks     int64  // 512-byte sectors allocated, as st_blocks
	Atime      time.Time
	Mtime      time.Time
	Ctime      time.Time
	Crtime     time.Time // creation time; zero time when the inode does not hold one
	Dtime      uint32
	Flags      uint32 // i_flags (the chattr flags and ext4 internals)
	Generation uint32
	Rdev       uint64 // device number for device nodes (Mkdev form: Linux's dev_t)
	FileACL    uint64 // xattr block, 0 if none
	ProjectID  uint32

	fsys *FS
	n    *node
}

// Major and Minor split Rdev as Linux does.
func (s *Stat) Major() uint32 { return devnum.Major(s.Rdev) }
func (s *Stat) Minor() uint32 { return devnum.Minor(s.Rdev) }

// Mkdev returns the device number of major and minor as the API takes and
// gives it (Stat.Rdev, Mknod, NewInode.Rdev): Linux's dev_t, which is
// unix.Mkdev on Linux, on every system.
func Mkdev(major, minor uint32) uint64 { return devnum.Mkdev(major, minor) }

// fileInfo implements fs.FileInfo and fs.DirEntry.
type fileInfo struct {
	name string
	st   *Stat
}

func (fi *fileInfo) Name() string       { return fi.name }
func (fi *fileInfo) Size() int64        { return fi.st.Size }
func (fi *fileInfo) Mode() fs.FileMode  { return goMode(fi.st.Mode) }
func (fi *fileInfo) ModTime() time.Time { return fi.st.Mtime }
func (fi *fileInfo) IsDir() bool        { return fi.st.Mode&0xF000 == 0x4000 }
func (fi *fileInfo) Sys() any           { return fi.st }
func (fi *fileInfo) Type() fs.FileMode  { return fi.Mode().Type() }
func (fi *fileInfo) Info() (fs.FileInfo, error) {
	return fi, nil
}
func (fi *fileInfo) String() string { return fs.FormatFileInfo(fi) }

// goMode converts an i_mode to an fs.FileMode.
func goMode(m uint16) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0xF000 {
	case 0x4000:
		mode |= fs.ModeDir
	case 0xA000:
		mode |= fs.ModeSymlink
	case 0x2000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0x6000:
		mode |= fs.ModeDevice
	case 0x1000:
		mode |= fs.ModeNamedPipe
	case 0xC000:
		mode |= fs.ModeSocket
	case 0x8000:
	default:
		mode |= fs.ModeIrregular
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// dirEntry is an fs.DirEntry read from a directory block: the type comes
// from the entry (or the inode when the filesystem has no filetype feature)
// and Info loads the inode on demand.
type dirEntry struct {
	fsys *FS
	name string
	ino  uint32
	typ  fs.FileMode
}

func (d *dirEntry) Name() string      { return d.name }
func (d *dirEntry) Ino() uint32       { return d.ino } // the entry's inode number, without reading the inode
func (d *dirEntry) IsDir() bool       { return d.typ.IsDir() }
func (d *dirEntry) Type() fs.FileMode { return d.typ }
func (d *dirEntry) Info() (fs.FileInfo, error) {
	n, err := d.fsys.inode(d.ino)
	if err == nil {
		err = n.checkNamed()
	}
	if err != nil {
		return nil, err
	}
	return &fileInfo{name: d.name, st: n.stat(d.fsys)}, nil
}
func (d *dirEntry) String() string { return fs.FormatDirEntry(d) }

// inodeFlagNames are the names lsattr and debugfs use for i_flags bits.
var inodeFlagNames = []struct {
	bit  uint32
	name string
}{
	{0x1, "secure_rm"}, {0x2, "undelete"}, {0x4, "compress"}, {0x8, "sync"},
	{0x10, "immutable"}, {0x20, "append"}, {0x40, "nodump"}, {0x80, "noatime"},
	{0x800, "encrypted"}, {0x1000, "indexed"}, {0x4000, "journal_data"},
	{0x8000, "notail"}, {0x10000, "dirsync"}, {0x20000, "topdir"},
	{0x40000, "huge_file"}, {0x80000, "extents"}, {0x100000, "verity"},
	{0x200000, "ea_inode"}, {0x2000000, "dax"}, {0x10000000, "inline_data"},
	{0x20000000, "project_inherit"}, {0x40000000, "casefold"},
}

// InodeFlagNames names the bits set in an i_flags value.
func InodeFlagNames(flags uint32) []string {
	var out []string
	for _, f := range inodeFlagNames {
		if flags&f.bit != 0 {
			out = append(out, f.name)
			flags &^= f.bit
		}
	}
	if flags != 0 {
		out = append(out, fmt.Sprintf("%#x", flags))
	}
	return out
}
