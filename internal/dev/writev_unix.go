//go:build linux || darwin

package dev

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// writeVAt writes bufs one after another from off with pwritev, looping
// over short writes.
func writeVAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	fd := int(f.Fd())
	total := 0
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := unix.Pwritev(fd, bufs[:min(len(bufs), MaxIovecs)], off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return total, &os.PathError{Op: "pwritev", Path: f.Name(), Err: err}
		}
		if n == 0 {
			return total, io.ErrShortWrite
		}
		total += n
		off += int64(n)
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
	return total, nil
}
