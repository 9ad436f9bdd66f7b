//go:build !linux

package testutil

import (
	"runtime"
	"testing"
)

// CanMount is false: loop mounts of ext4 images are Linux's (mount.go).
func CanMount() (ok bool, reason string) {
	return false, "loop-mounting ext4 images needs Linux, not " + runtime.GOOS
}

// RequireMount skips the test: see CanMount.
func RequireMount(t testing.TB) {
	t.Helper()
	_, reason := CanMount()
	t.Skip(reason)
}
