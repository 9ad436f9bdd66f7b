//go:build darwin || freebsd

package host

import (
	"time"

	"golang.org/x/sys/unix"
)

// SetTimes sets the access and modification times of host file name in
// dirfd, not following a last symlink (the file may be open as fd, which
// is not used: by name, as x/sys/unix offers no futimens here).
func SetTimes(_, dirfd int, name string, atime, mtime time.Time) error {
	a, err := unix.TimeToTimespec(atime)
	if err != nil {
		return err
	}
	m, err := unix.TimeToTimespec(mtime)
	if err != nil {
		return err
	}
	return unix.UtimesNanoAt(dirfd, name, []unix.Timespec{a, m}, unix.AT_SYMLINK_NOFOLLOW)
}
