//go:build !linux

package mkfs

import (
	"os"
	"testing"
)

// unionData is the whole of both files: SEEK_DATA's whence differs between
// systems (3 on Linux and FreeBSD, 4 on macOS), and the comparison only
// reads more without it.
func unionData(_ *testing.T, _, _ *os.File, size, bs int64) [][2]int64 {
	return [][2]int64{{0, (size + bs - 1) / bs * bs}}
}
