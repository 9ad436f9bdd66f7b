package devnum

import "testing"

func TestRoundTrip(t *testing.T) {
	for _, c := range [][2]uint32{{0, 0}, {1, 3}, {8, 1}, {7, 3}, {4095, 1048575}, {256, 256}, {0xffffffff, 0xffffffff}, {259, 65536}} {
		d := Mkdev(c[0], c[1])
		if Major(d) != c[0] || Minor(d) != c[1] {
			t.Errorf("Mkdev(%d, %d) = %#x: back to %d, %d", c[0], c[1], d, Major(d), Minor(d))
		}
	}
	// Linux's own values (include/linux/kdev_t.h new_encode_dev, as glibc).
	if got := Mkdev(8, 1); got != 0x801 {
		t.Errorf("Mkdev(8, 1) = %#x, want 0x801", got)
	}
	if got := Mkdev(4095, 1048575); got != 0xffffffff {
		t.Errorf("Mkdev(4095, 1048575) = %#x, want 0xffffffff", got)
	}
}
