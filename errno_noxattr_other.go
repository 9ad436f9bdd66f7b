//go:build !linux && !windows && !darwin && !freebsd

package ext4go

import "errors"

// ErrNoXattr is the error of getting, replacing or removing an extended
// attribute that is not there. This system has no errno for it (WASI has
// neither ENODATA nor ENOATTR), so it is an error of its own.
var ErrNoXattr = errors.New("no such attribute")
