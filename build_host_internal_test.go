package ext4go

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

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

// TestOpenHostDirEntries: openHostDir gives what os.ReadDir gives, in the
// same order, on every system.
func TestOpenHostDirEntries(t *testing.T) {
	dir := t.TempDir()
	for i := range 300 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink("sub", filepath.Join(dir, "link")) // where the system lets us
	hd, got, err := openHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.close()
	if _, _, err := hd.id(); err != nil {
		t.Errorf("id: %v", err)
	}
	want, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries, os.ReadDir gives %d", len(got), len(want))
	}
	for i, w := range want {
		if got[i].name != w.Name() || got[i].typ != w.Type() {
			t.Errorf("entry %d: %q %v, os.ReadDir gives %q %v", i, got[i].name, got[i].typ, w.Name(), w.Type())
		}
	}
	if _, _, err := openHostDir(filepath.Join(dir, "f000")); err == nil {
		t.Error("a regular file opened as a directory")
	}
}
