//go:build darwin || freebsd

package ext4go

import "syscall"

// ErrNoXattr is the error of getting, replacing or removing an extended
// attribute that is not there: ENOATTR, as this system's getxattr(2) and
// extattr_get_file(2) say it (Linux says ENODATA).
var ErrNoXattr error = syscall.ENOATTR
