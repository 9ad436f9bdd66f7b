package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// openNoAtime opens a host file without moving its access time.
const openNoAtime = unix.O_NOATIME

// entryPath names the entry name of the open directory dirfd for the
// calls that take a path (the attributes of a symbolic link or a device):
// through /proc/self/fd, so no path is walked again.
func entryPath(dirfd int, name, _ string) string {
	return fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name)
}
