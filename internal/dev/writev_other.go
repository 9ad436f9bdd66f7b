//go:build !linux && !darwin

package dev

import "os"

// writeVAt writes bufs one after another from off, a pwrite each: x/sys
// offers pwritev on Linux and macOS only.
func writeVAt(f *os.File, bufs [][]byte, off int64) (int, error) {
	total := 0
	for _, b := range bufs {
		n, err := f.WriteAt(b, off)
		total += n
		if err != nil {
			return total, err
		}
		off += int64(n)
	}
	return total, nil
}
