package host

import (
	"strings"

	"golang.org/x/sys/unix"
)

// errNoAttr is the error of getting an attribute that is not there
// (macOS says ENOATTR).
var errNoAttr error = unix.ENOATTR

// macOS names attributes freely ("com.apple.quarantine"); ext4 keeps only
// the user, trusted, security and system namespaces. A macOS name outside
// them goes into the image as "user." and the name, and comes back out
// without that prefix (hostName), so a file copied in and out keeps its
// attributes. (A macOS attribute literally named "user.x" comes back as
// "x".)
func ext4Name(n string) string {
	if HasNamespace(n) {
		return n
	}
	return "user." + n
}

// hostName is the macOS name of the ext4 attribute name.
func hostName(n string) string {
	if rest, ok := strings.CutPrefix(n, "user."); ok {
		return rest
	}
	return n
}

// FdXattrs returns the extended attributes of the open file fd, sorted by
// name.
func FdXattrs(fd int) ([]Xattr, error) {
	return readXattrs(func(b []byte) (int, error) { return unix.Flistxattr(fd, b) }, splitNul,
		func(n string, b []byte) (int, error) { return unix.Fgetxattr(fd, n, b) })
}

// LinkXattrs returns the extended attributes of the file at path, not
// following a symbolic link, sorted by name.
func LinkXattrs(path string) ([]Xattr, error) {
	return readXattrs(func(b []byte) (int, error) { return unix.Llistxattr(path, b) }, splitNul,
		func(n string, b []byte) (int, error) { return unix.Lgetxattr(path, n, b) })
}

// XattrListSize is the length of the list of attribute names of path
// (not following a symbolic link), 0 where there are none.
func XattrListSize(path string) int {
	n, err := unix.Llistxattr(path, nil)
	if err != nil {
		return 0
	}
	return n
}

// SetFdXattr sets the ext4 attribute name on the open file fd.
func SetFdXattr(fd int, name string, value []byte) error {
	return unix.Fsetxattr(fd, hostName(name), value, 0)
}

// SetLinkXattr sets the ext4 attribute name on the file at path, not
// following a symbolic link.
func SetLinkXattr(path, name string, value []byte) error {
	return unix.Lsetxattr(path, hostName(name), value, 0)
}
