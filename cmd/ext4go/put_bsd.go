//go:build darwin || freebsd

package main

// openNoAtime: there is no O_NOATIME here; reading a host file may move
// its access time, as cp does.
const openNoAtime = 0

// entryPath names the entry for the calls that take a path (the
// attributes of a symbolic link or a device): its path as the walk built
// it, there being no /proc/self/fd.
func entryPath(_ int, _ string, shown string) string { return shown }
