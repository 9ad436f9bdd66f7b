package host

import (
	"io/fs"
	"os"
	"syscall"
	"time"
)

// fileInfoSys adds what WASI's filestat has beyond fs.FileInfo: the
// device and inode numbers, the link count and the access time. WASI
// has no owners and no permission bits.
func fileInfoSys(fi fs.FileInfo, s *Stat) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Dev, s.Ino, s.Nlink, s.HasID = st.Dev, st.Ino, st.Nlink, true
		s.Atime = time.Unix(0, int64(st.Atime))
	}
}

// FileID has nothing to add: Lstat gave the identity already.
func FileID(*os.File, *Stat) error { return nil }
