package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// FUSEUringParam is the fuse module's parameter that lets the kernel offer
// FUSE over io_uring to servers that ask for it.
const FUSEUringParam = "/sys/module/fuse/parameters/enable_uring"

// EnableFUSEUring lets the kernel offer FUSE over io_uring for the rest of
// the test, skipping it (with the reason) where the kernel has no such
// transport or the parameter cannot be written (not root). Servers that do
// not ask for the transport are not affected by the parameter.
//
// Tests of several packages run at once: each holds a shared lock on a
// file in the temporary directory while it needs the parameter; the first
// records the value it found there, and the last to leave puts it back.
func EnableFUSEUring(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(FUSEUringParam); err != nil {
		t.Skipf("the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING): %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "ext4go-fuse-uring.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Skipf("FUSE over io_uring: %v", err)
	}
	fd := int(lock.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	old, err := os.ReadFile(lock.Name())
	if err == nil && len(old) == 0 {
		old, err = os.ReadFile(FUSEUringParam)
		if err == nil {
			_, err = lock.WriteAt(old, 0)
		}
	}
	if err == nil {
		err = os.WriteFile(FUSEUringParam, []byte("Y"), 0)
	}
	if err != nil {
		unix.Flock(fd, unix.LOCK_UN)
		lock.Close()
		t.Skipf("cannot enable FUSE over io_uring (needs root): %v", err)
	}
	unix.Flock(fd, unix.LOCK_SH)
	t.Cleanup(func() {
		defer lock.Close()
		// Only the last holder gets the lock exclusively.
		if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
			unix.Flock(fd, unix.LOCK_UN)
			return
		}
		if v := strings.TrimSpace(string(old)); v != "" {
			os.WriteFile(FUSEUringParam, []byte(v), 0)
		}
		lock.Truncate(0)
		unix.Flock(fd, unix.LOCK_UN)
	})
}

// DisableFUSEUring makes the kernel refuse FUSE over io_uring for the rest
// of the test (to check how a server asking for it fails), skipping where
// the parameter cannot be written. It waits until no test needs the
// transport (EnableFUSEUring) and keeps others out until it ends.
func DisableFUSEUring(t testing.TB) {
	t.Helper()
	old, err := os.ReadFile(FUSEUringParam)
	if err != nil {
		t.Skipf("the kernel has no FUSE over io_uring: %v", err)
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "ext4go-fuse-uring.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Skipf("FUSE over io_uring: %v", err)
	}
	fd := int(lock.Fd())
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("lock %s: %v", lock.Name(), err)
	}
	if err := os.WriteFile(FUSEUringParam, []byte("N"), 0); err != nil {
		unix.Flock(fd, unix.LOCK_UN)
		lock.Close()
		t.Skipf("cannot set %s (needs root): %v", FUSEUringParam, err)
	}
	t.Cleanup(func() {
		os.WriteFile(FUSEUringParam, []byte(strings.TrimSpace(string(old))), 0)
		unix.Flock(fd, unix.LOCK_UN)
		lock.Close()
	})
}
