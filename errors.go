package ext4go

import (
	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/fserr"
)

// Error types and sentinels. A *ChecksumError also matches ErrCorrupt.
type (
	CorruptError     = fserr.CorruptError
	ChecksumError    = fserr.ChecksumError
	UnsupportedError = fserr.UnsupportedError
)

var (
	ErrCorrupt     = fserr.ErrCorrupt
	ErrChecksum    = fserr.ErrChecksum
	ErrUnsupported = fserr.ErrUnsupported
	// ErrBusy is returned by Open when another writer holds the image
	// (or, for a writable open, any reader does).
	ErrBusy = dev.ErrBusy
)
