//go:build linux || windows

package ext4go

import "syscall"

// ErrNoXattr is the error of getting, replacing or removing an extended
// attribute that is not there: ENODATA, as Linux's getxattr(2) says it.
var ErrNoXattr error = syscall.ENODATA
