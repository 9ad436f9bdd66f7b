package dev

import (
	"io/fs"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IsDevicePath reports whether path names a disk by a name stat does not
// describe: never on macOS, where devices are told by their mode.
func IsDevicePath(string) bool { return false }

// isDeviceMode: a disk is /dev/diskN (a block device) or /dev/rdiskN (the
// same disk as a character device, unbuffered and faster).
func isDeviceMode(m fs.FileMode) bool { return m&fs.ModeDevice != 0 }

// openDeviceFile opens a disk. macOS itself refuses to open a disk with a
// mounted volume for writing (EBUSY), so no flag is needed for that.
func openDeviceFile(path string, writable bool) (*os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return os.OpenFile(path, flag, 0)
}

// The disk ioctls of <sys/disk.h>, which x/sys/unix does not define:
// DKIOCGETBLOCKSIZE is _IOR('d', 24, uint32_t), DKIOCGETBLOCKCOUNT
// _IOR('d', 25, uint64_t).
const (
	dkiocGetBlockSize  = 0x40046418
	dkiocGetBlockCount = 0x40086419
)

// deviceSize is the size of the open disk f in bytes: its block count
// times its block size.
func deviceSize(f *os.File) (int64, error) {
	var bs uint32
	var count uint64
	fd := f.Fd()
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, dkiocGetBlockSize, uintptr(unsafe.Pointer(&bs))); e != 0 {
		return 0, e
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, fd, dkiocGetBlockCount, uintptr(unsafe.Pointer(&count))); e != 0 {
		return 0, e
	}
	return int64(count) * int64(bs), nil
}
