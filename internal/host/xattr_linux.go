package host

import (
	"golang.org/x/sys/unix"
)

// errNoAttr is the error of getting an attribute that is not there.
var errNoAttr error = unix.ENODATA

// ext4Name: Linux names attributes as ext4 does.
func ext4Name(n string) string { return n }

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
	return unix.Fsetxattr(fd, name, value, 0)
}

// SetLinkXattr sets the ext4 attribute name on the file at path, not
// following a symbolic link.
func SetLinkXattr(path, name string, value []byte) error {
	return unix.Lsetxattr(path, name, value, 0)
}
