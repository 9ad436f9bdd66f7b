package devnum

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestSameAsUnix: on Linux the encoding is the host's own.
func TestSameAsUnix(t *testing.T) {
	for _, c := range [][2]uint32{{1, 3}, {8, 1}, {4095, 1048575}, {0xfffff, 0xffffff}} {
		if a, b := Mkdev(c[0], c[1]), unix.Mkdev(c[0], c[1]); a != b {
			t.Errorf("Mkdev(%d, %d) = %#x, unix.Mkdev %#x", c[0], c[1], a, b)
		}
		d := unix.Mkdev(c[0], c[1])
		if Major(d) != unix.Major(d) || Minor(d) != unix.Minor(d) {
			t.Errorf("%#x: %d,%d, unix %d,%d", d, Major(d), Minor(d), unix.Major(d), unix.Minor(d))
		}
	}
}
