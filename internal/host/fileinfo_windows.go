package host

import (
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/windows"
)

// fileInfoSys adds the access time Windows keeps. Windows has no owners
// or modes as ext4 has (os gives 0666, or 0444 for read-only files, and
// 0777 for directories) and no device nodes; identities and link counts
// need the file open (FileID).
func fileInfoSys(fi fs.FileInfo, s *Stat) {
	if d, ok := fi.Sys().(*syscall.Win32FileAttributeData); ok {
		s.Atime = time.Unix(0, d.LastAccessTime.Nanoseconds())
	}
}

// FileID fills in the identity and link count of the open file f
// (GetFileInformationByHandle: volume serial number and file index), so
// hard links are kept and loops found on NTFS.
func FileID(f *os.File, s *Stat) error {
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.Fd()), &info); err != nil {
		return err
	}
	s.Dev = uint64(info.VolumeSerialNumber)
	s.Ino = uint64(info.FileIndexHigh)<<32 | uint64(info.FileIndexLow)
	s.Nlink = uint64(info.NumberOfLinks)
	s.HasID = true
	return nil
}
