package host

import (
	"golang.org/x/sys/unix"
)

// errNoAttr is the error of getting an attribute that is not there
// (FreeBSD says ENOATTR).
var errNoAttr error = unix.ENOATTR

// FreeBSD's extattr namespaces are user and system. Only the user one is
// copied: as "user." and the name, which x/sys/unix's Getxattr and
// Setxattr map back. Its system namespace holds FreeBSD's own formats
// (POSIX.1e ACLs, MAC labels), not Linux's system.posix_acl_*, and is
// left out; ext4's trusted and security attributes have no place on
// FreeBSD (setting one fails, and get warns).
func ext4Name(n string) string { return n }

// userNames splits an extattr_list_* result (each name after a length
// byte) into ext4 names.
func userNames(b []byte) []string {
	var out []string
	for len(b) > 0 {
		n := int(b[0])
		if 1+n > len(b) {
			break
		}
		out = append(out, "user."+string(b[1:1+n]))
		b = b[1+n:]
	}
	return out
}

// FdXattrs returns the extended attributes of the open file fd, sorted by
// name.
func FdXattrs(fd int) ([]Xattr, error) {
	return readXattrs(func(b []byte) (int, error) { return unix.FlistxattrNS(fd, unix.EXTATTR_NAMESPACE_USER, b) }, userNames,
		func(n string, b []byte) (int, error) { return unix.Fgetxattr(fd, n, b) })
}

// LinkXattrs returns the extended attributes of the file at path, not
// following a symbolic link, sorted by name.
func LinkXattrs(path string) ([]Xattr, error) {
	return readXattrs(func(b []byte) (int, error) { return unix.LlistxattrNS(path, unix.EXTATTR_NAMESPACE_USER, b) }, userNames,
		func(n string, b []byte) (int, error) { return unix.Lgetxattr(path, n, b) })
}

// XattrListSize is the length of the list of attribute names of path
// (not following a symbolic link), 0 where there are none.
func XattrListSize(path string) int {
	n, err := unix.LlistxattrNS(path, unix.EXTATTR_NAMESPACE_USER, nil)
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
