//go:build darwin || freebsd

package main

// What get asks of macOS and FreeBSD: there is no /proc/self/fd to name an
// open directory, so copyOut keeps the path each was opened by. Those
// paths are used only where a call takes a path (hard links, the
// attributes of symbolic links and devices, mknod on macOS); a directory
// renamed by another program during the copy can make those fail.

func (co *copyOut) dirOpened(fd int, path string) { co.dirs.Store(fd, path) }
func (co *copyOut) dirClosed(fd int)              { co.dirs.Delete(fd) }

// dirPath is the path the directory open as dirfd was opened by.
func (co *copyOut) dirPath(dirfd int) string {
	p, _ := co.dirs.Load(dirfd)
	s, _ := p.(string)
	return s
}

// entryPath names an entry of an open directory by path.
func (co *copyOut) entryPath(dirfd int, name string) string {
	p := co.dirPath(dirfd)
	if p == "" {
		return ""
	}
	return p + "/" + name
}

// xattrPath names an entry of an open directory for the calls that take
// a path (the attributes of a symbolic link or a device).
func (co *copyOut) xattrPath(dirfd int, name string) string { return co.entryPath(dirfd, name) }
