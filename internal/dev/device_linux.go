package dev

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// IsDevicePath reports whether path names a disk by a name stat does not
// describe: never on Linux, where devices are told by their mode.
func IsDevicePath(string) bool { return false }

// isDeviceMode: a filesystem lives on a block device (character devices
// are not disks on Linux).
func isDeviceMode(m fs.FileMode) bool { return m&fs.ModeDevice != 0 && m&fs.ModeCharDevice == 0 }

// openDeviceFile opens a block device, for writing with O_EXCL, which the
// kernel refuses while the device is mounted or opened exclusively
// (blkdev_open's bd_prepare_to_claim).
func openDeviceFile(path string, writable bool) (*os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR | unix.O_EXCL
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil && writable && errors.Is(err, unix.EBUSY) {
		return nil, fmt.Errorf("%s: %w (mounted or opened exclusively)", path, ErrBusy)
	}
	return f, err
}

// deviceSize is the size of the open block device f in bytes
// (BLKGETSIZE64).
func deviceSize(f *os.File) (int64, error) {
	n, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
	return int64(n), err
}
