package ext4go

import "testing"

// TestDataBufClasses: every small file's size has a class, the classes end
// at smallFile, and each buffer comes back to the class it came from.
func TestDataBufClasses(t *testing.T) {
	if got := minDataBuf << (dataBufClasses - 1); got != smallFile {
		t.Fatalf("largest data buffer %d, want smallFile %d", got, smallFile)
	}
	for _, n := range []int{1, minDataBuf - 1, minDataBuf, minDataBuf + 1, 4095, 4096, 4097, smallFile - 1, smallFile} {
		d := getDataBuf(n)
		if len(d.b) < n || (d.class > 0 && len(d.b)/2 >= n) {
			t.Errorf("size %d: buffer of %d bytes (class %d)", n, len(d.b), d.class)
		}
		if len(d.b) != minDataBuf<<d.class {
			t.Errorf("size %d: buffer of %d bytes in class %d", n, len(d.b), d.class)
		}
		if d.refs.Load() != 1 {
			t.Errorf("size %d: %d references, want 1", n, d.refs.Load())
		}
		d.hold()
		d.release()
		if d.refs.Load() != 1 {
			t.Errorf("size %d: hold+release left %d references", n, d.refs.Load())
		}
		d.release()
	}
	var nilBuf *dataBuf
	nilBuf.release() // data not from the pool: nothing to give back
}
