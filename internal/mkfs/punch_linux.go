package mkfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// punchHole makes n bytes of f from off read back as zeros, keeping the
// file size (fallocate FALLOC_FL_PUNCH_HOLE).
func punchHole(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		return errors.ErrUnsupported
	}
	return err
}
