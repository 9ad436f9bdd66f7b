package main

import "golang.org/x/sys/unix"

// mknodAt makes the device node, fifo or socket name in dirfd.
func mknodAt(_ *copyOut, dirfd int, name string, mode uint32, dev uint64) error {
	return unix.Mknodat(dirfd, name, mode, dev)
}
