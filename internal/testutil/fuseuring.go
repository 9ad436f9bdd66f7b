//go:build linux

package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FUSEUringParam is the fuse module's parameter that lets the kernel offer
// FUSE over io_uring to servers that ask for it.
const FUSEUringParam = "/sys/module/fuse/parameters/enable_uring"

// Tests of several packages run at once and share the parameter through
// two lock files in the temporary directory:
//
//   - the guard, held exclusively for every change of the parameter or of
//     the users' lock, records the value found before the first user;
//   - the users' lock is held shared by every test that needs the
//     transport, for as long as it does. Only under the guard does anyone
//     try it exclusively: the first user (nobody held it) records the
//     value, the last (nobody else holds it) puts it back.
//
// A test that needs the transport off (DisableFUSEUring) holds both
// exclusively for its whole run. (scripts/run-suites.sh and bench-mount.sh
// set the parameter without these locks: do not run them beside the tests.)
type uringLocks struct{ guard, users *os.File }

func openUringLocks(dir string) (uringLocks, error) {
	var l uringLocks
	var err error
	if l.guard, err = os.OpenFile(filepath.Join(dir, "ext4go-fuse-uring.guard"), os.O_RDWR|os.O_CREATE, 0o600); err == nil {
		l.users, err = os.OpenFile(filepath.Join(dir, "ext4go-fuse-uring.users"), os.O_RDWR|os.O_CREATE, 0o600)
	}
	if err != nil {
		l.close()
	}
	return l, err
}

// close drops both locks, the users' first: whoever gets the guard next
// must find the users' lock as it will stay (else a new user, seeing it
// still held, would take itself for a later one and record nothing).
func (l uringLocks) close() {
	for _, f := range []*os.File{l.users, l.guard} {
		if f != nil {
			f.Close() // drops its locks
		}
	}
}

// flock is flock(2) retried on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// errParam is a parameter that cannot be read or written: the caller
// skips.
type errParam struct{ error }

// enableUring sets param to Y as one of its users (locks in dir) and
// returns the release that leaves; the last to leave puts back the value
// the first found.
func enableUring(param, dir string) (release func(), err error) {
	l, err := openUringLocks(dir)
	if err != nil {
		return nil, errParam{err}
	}
	if err := flock(l.guard, unix.LOCK_EX); err != nil {
		l.close()
		return nil, err
	}
	if flock(l.users, unix.LOCK_EX|unix.LOCK_NB) == nil {
		// The first user: record what the parameter was.
		old, err := os.ReadFile(param)
		if err == nil {
			err = l.guard.Truncate(0)
		}
		if err == nil {
			_, err = l.guard.WriteAt(old, 0)
		}
		if err != nil {
			l.close()
			return nil, errParam{err}
		}
	}
	// Under the guard nobody else tries the users' lock exclusively, so
	// the change to shared cannot let anyone in between.
	if err := flock(l.users, unix.LOCK_SH); err != nil {
		l.close()
		return nil, err
	}
	if err := os.WriteFile(param, []byte("Y"), 0); err != nil {
		leaveUring(l, param)
		return nil, errParam{err}
	}
	flock(l.guard, unix.LOCK_UN)
	return func() {
		flock(l.guard, unix.LOCK_EX)
		leaveUring(l, param)
	}, nil
}

// leaveUring drops a user's shared lock, holding the guard; the last user
// puts the recorded value back.
func leaveUring(l uringLocks, param string) {
	defer l.close()
	flock(l.users, unix.LOCK_UN)
	if flock(l.users, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // others still need it
	}
	if old, err := os.ReadFile(l.guard.Name()); err == nil {
		if v := strings.TrimSpace(string(old)); v != "" {
			os.WriteFile(param, []byte(v), 0)
		}
	}
	l.guard.Truncate(0)
}

// disableUring sets param to N once no user is left (locks in dir) and
// keeps users out until the returned release puts the value back.
func disableUring(param, dir string) (release func(), err error) {
	l, err := openUringLocks(dir)
	if err != nil {
		return nil, errParam{err}
	}
	for {
		if err := flock(l.guard, unix.LOCK_EX); err != nil {
			l.close()
			return nil, err
		}
		if flock(l.users, unix.LOCK_EX|unix.LOCK_NB) == nil {
			break
		}
		// Users leave under the guard: let them.
		flock(l.guard, unix.LOCK_UN)
		time.Sleep(20 * time.Millisecond)
	}
	old, err := os.ReadFile(param)
	if err == nil {
		err = os.WriteFile(param, []byte("N"), 0)
	}
	if err != nil {
		l.close()
		return nil, errParam{err}
	}
	return func() {
		os.WriteFile(param, []byte(strings.TrimSpace(string(old))), 0)
		l.close()
	}, nil
}

// EnableFUSEUring lets the kernel offer FUSE over io_uring for the rest of
// the test, skipping it (with the reason) where the kernel has no such
// transport or the parameter cannot be written (not root). Servers that do
// not ask for the transport are not affected by the parameter.
func EnableFUSEUring(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(FUSEUringParam); err != nil {
		t.Skipf("the kernel has no FUSE over io_uring (Linux 6.14+, CONFIG_FUSE_IO_URING): %v", err)
	}
	release, err := enableUring(FUSEUringParam, os.TempDir())
	skipOrFail(t, "cannot enable FUSE over io_uring (needs root)", err)
	t.Cleanup(release)
}

// DisableFUSEUring makes the kernel refuse FUSE over io_uring for the rest
// of the test (to check how a server asking for it fails), skipping where
// the parameter cannot be written. It waits until no test needs the
// transport (EnableFUSEUring) and keeps them out until it ends.
func DisableFUSEUring(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(FUSEUringParam); err != nil {
		t.Skipf("the kernel has no FUSE over io_uring: %v", err)
	}
	release, err := disableUring(FUSEUringParam, os.TempDir())
	skipOrFail(t, "cannot disable FUSE over io_uring (needs root)", err)
	t.Cleanup(release)
}

func skipOrFail(t testing.TB, why string, err error) {
	t.Helper()
	var p errParam
	switch {
	case err == nil:
	case errors.As(err, &p):
		t.Skipf("%s: %v", why, err)
	default:
		t.Fatal(fmt.Errorf("%s: %w", why, err))
	}
}
