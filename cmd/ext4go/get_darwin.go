package main

import "golang.org/x/sys/unix"

// mknodAt makes the device node, fifo or socket name in dirfd: by path,
// as x/sys/unix has no mknodat for macOS.
func mknodAt(co *copyOut, dirfd int, name string, mode uint32, dev uint64) error {
	return unix.Mknod(co.entryPath(dirfd, name), mode, int(dev))
}
