//go:build darwin || freebsd

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileIsTerminal: a terminal answers TIOCGETA.
func fileIsTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}
