//go:build !linux

package mkfs

import (
	"errors"
	"os"
)

// punchHole is not offered outside Linux (macOS's F_PUNCHHOLE and
// FreeBSD's fspacectl have alignment rules of their own, Windows'
// FSCTL_SET_ZERO_DATA wants a sparse file): Mkfs then writes the zeros
// itself, which costs time, not correctness.
func punchHole(*os.File, int64, int64) error { return errors.ErrUnsupported }
