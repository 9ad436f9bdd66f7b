//go:build darwin || freebsd

package fusefs

import (
	"errors"
	"syscall"
)

// What macFUSE and FreeBSD's fusefs(5) lack of Linux's FUSE.

// capHandleKillprivV2 is not asked for: neither kernel knows it (the
// server drops setuid bits itself either way).
const capHandleKillprivV2 = 0

// errCorrupted stands for ext4's EFSCORRUPTED (EUCLEAN on Linux), which
// this system does not have.
const errCorrupted = syscall.EIO

// setReadahead fails: the readahead of a mount is set through Linux's
// /sys/class/bdi; here the kernel's FUSE keeps its own.
func setReadahead(string, int) error {
	return errors.New("the readahead of a FUSE mount is set on Linux only")
}

// detachMount has no lazy unmount to do here: Unmount's error stands.
func detachMount(string) {}
