package dev

import (
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsDevicePath reports whether path names a disk by a name stat does not
// describe: never on FreeBSD, where devices are told by their mode.
func IsDevicePath(string) bool { return false }

// isDeviceMode: FreeBSD has no block devices; disks (/dev/ada0,
// /dev/da0p2, md(4) memory disks) are character devices.
func isDeviceMode(m fs.FileMode) bool { return m&fs.ModeDevice != 0 }

// openDeviceFile opens a disk. GEOM refuses to open a provider with a
// mounted filesystem for writing (EPERM) unless kern.geom.debugflags
// allows it, so no flag is needed for that.
func openDeviceFile(path string, writable bool) (*os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return os.OpenFile(path, flag, 0)
}

// deviceSize is the size of the open disk f in bytes (DIOCGMEDIASIZE, an
// off_t).
func deviceSize(f *os.File) (int64, error) {
	var n int64
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.DIOCGMEDIASIZE, uintptr(unsafe.Pointer(&n))); e != 0 {
		return 0, e
	}
	return n, nil
}
