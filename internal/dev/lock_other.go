//go:build !linux && !darwin && !freebsd && !windows

package dev

import "os"

// LockImage takes no lock: WASI (and the other systems without flock or
// LockFileEx here) offers no file locks, so nothing keeps a second writer
// out of an image on these systems. It only ever succeeds.
func LockImage(*os.File, bool) error { return nil }

// UnlockImage has no lock to drop.
func UnlockImage(*os.File) {}
