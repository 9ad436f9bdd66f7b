package dev

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/windows"
)

// Windows byte-range locks are mandatory: a locked range cannot be read or
// written through other handles. So the lock covers one byte far past any
// image's end (locking beyond the end of a file is allowed) rather than
// the data: it keeps a second writer out without stopping other programs
// from reading the image.
const (
	lockOffsetLow  = 0xfffffffe
	lockOffsetHigh = 0x7fffffff
)

// LockImage locks the open image file f: shared for a reader, exclusive
// for a writer (LockFileEx, failing at once). A lock another program
// holds against it gives ErrBusy.
func LockImage(f *os.File, exclusive bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	if err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &ol); err != nil {
		if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
			return ErrBusy
		}
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

// UnlockImage drops the lock LockImage took.
func UnlockImage(f *os.File) {
	ol := windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}
