package mballoc

import (
	"fmt"
	"syscall"
)

type noSpace struct{}

func (noSpace) Error() string   { return "mballoc: no space left on device" }
func (noSpace) Is(t error) bool { return t == syscall.ENOSPC }

// ErrNoSpace is the sentinel for a failed allocation; every such error also
// matches syscall.ENOSPC with errors.Is.
var ErrNoSpace error = noSpace{}

// NoSpaceError is returned when no free extent can be found after the
// preallocations were discarded. Pending is the number of clusters freed by
// transactions that have not committed yet: if it is not zero, committing
// the journal and retrying may succeed (kernel: ext4_should_retry_alloc).
type NoSpaceError struct {
	Pending int64
}

func (e *NoSpaceError) Error() string {
	if e.Pending > 0 {
		return fmt.Sprintf("mballoc: no space left on device (%d clusters wait for a commit)", e.Pending)
	}
	return "mballoc: no space left on device"
}

// Is makes errors.Is(err, ErrNoSpace) and errors.Is(err, syscall.ENOSPC) true.
func (e *NoSpaceError) Is(t error) bool { return t == ErrNoSpace || t == syscall.ENOSPC }
