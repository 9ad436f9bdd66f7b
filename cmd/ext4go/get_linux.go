package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// What get asks of Linux: /proc/self/fd names an open directory, so no
// path needs keeping (dirOpened and dirClosed do nothing).

func (co *copyOut) dirOpened(int, string) {}
func (co *copyOut) dirClosed(int)         {}

// dirPath is the directory open as dirfd, as the kernel names it.
func (co *copyOut) dirPath(dirfd int) string {
	p, _ := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", dirfd))
	return p
}

// entryPath names an entry of an open directory in a way linkat can use
// later without walking a path the image controls.
func (co *copyOut) entryPath(dirfd int, name string) string {
	p := co.dirPath(dirfd)
	if p == "" {
		return ""
	}
	return p + "/" + name
}

// xattrPath names an entry of an open directory for the calls that take
// a path (the attributes of a symbolic link or a device), through
// /proc/self/fd: no path is walked again.
func (co *copyOut) xattrPath(dirfd int, name string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name)
}

// mknodAt makes the device node, fifo or socket name in dirfd.
func mknodAt(_ *copyOut, dirfd int, name string, mode uint32, dev uint64) error {
	return unix.Mknodat(dirfd, name, mode, int(dev))
}
