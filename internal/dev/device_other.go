//go:build !linux && !darwin && !freebsd && !windows

package dev

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// IsDevicePath reports whether path names a disk by a name stat does not
// describe: never here.
func IsDevicePath(string) bool { return false }

// isDeviceMode takes any device, so that opening one says why it fails
// (deviceSize) rather than calling it no regular file.
func isDeviceMode(m fs.FileMode) bool { return m&fs.ModeDevice != 0 }

func openDeviceFile(path string, writable bool) (*os.File, error) {
	flag := os.O_RDONLY
	if writable {
		flag = os.O_RDWR
	}
	return os.OpenFile(path, flag, 0)
}

// deviceSize fails: there is no way known here to ask this system for a
// device's size.
func deviceSize(*os.File) (int64, error) {
	return 0, fmt.Errorf("block devices are not supported on %s (only image files)", runtime.GOOS)
}
