package dev

import (
	"io/fs"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
)

// IsDevicePath reports whether path names a disk by a name stat does not
// describe: on Windows, the Win32 device namespace (\\.\PhysicalDriveN for
// disks, \\.\X: for volumes).
func IsDevicePath(path string) bool {
	return strings.HasPrefix(path, `\\.\`) || strings.HasPrefix(path, `//./`)
}

// isDeviceMode: nothing stat describes is a disk on Windows.
func isDeviceMode(fs.FileMode) bool { return false }

// openDeviceFile opens a disk or volume. Windows refuses writes into the
// sectors of a mounted volume, so a volume must be unmounted (or hold no
// filesystem Windows knows) to be written.
func openDeviceFile(path string, writable bool) (*os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return os.OpenFile(path, flag, 0)
}

// ioctlDiskGetLengthInfo is IOCTL_DISK_GET_LENGTH_INFO of <winioctl.h>:
// CTL_CODE(IOCTL_DISK_BASE, 0x0017, METHOD_BUFFERED, FILE_READ_ACCESS),
// which x/sys/windows does not define. It answers a
// GET_LENGTH_INFORMATION, one LARGE_INTEGER, for disks and volumes.
const ioctlDiskGetLengthInfo = 0x0007405c

// deviceSize is the size of the open disk or volume f in bytes.
func deviceSize(f *os.File) (int64, error) {
	var length int64
	var got uint32
	err := windows.DeviceIoControl(windows.Handle(f.Fd()), ioctlDiskGetLengthInfo, nil, 0,
		(*byte)(unsafe.Pointer(&length)), uint32(unsafe.Sizeof(length)), &got, nil)
	if err != nil {
		return 0, err
	}
	return length, nil
}
