//go:build linux || darwin || freebsd

package dev

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// LockImage takes an advisory lock on the open image file f: shared for a
// reader, exclusive for a writer (flock, non-blocking). A lock another
// program holds against it gives ErrBusy.
func LockImage(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrBusy
		}
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

// UnlockImage drops the lock LockImage took.
func UnlockImage(f *os.File) {
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
