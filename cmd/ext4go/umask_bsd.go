//go:build darwin || freebsd

package main

import "golang.org/x/sys/unix"

// processUmask returns the umask: umask(2) is the only way to read it,
// which sets it for a moment for every goroutine of the process.
func processUmask() uint32 {
	m := unix.Umask(0)
	unix.Umask(m)
	return uint32(m)
}
