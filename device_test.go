//go:build linux

package ext4go_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// memDevice is an image in memory, as a user of OpenDevice would make one.
type memDevice struct {
	mu     sync.RWMutex
	b      []byte
	syncs  int
	closed bool
}

func (d *memDevice) ReadAt(p []byte, off int64) (int, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *memDevice) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if off < 0 || off+int64(len(p)) > int64(len(d.b)) {
		return 0, fmt.Errorf("write of %d bytes at %d past the end", len(p), off)
	}
	return copy(d.b[off:], p), nil
}

func (d *memDevice) Size() int64 { return int64(len(d.b)) }
func (d *memDevice) Sync() error { d.mu.Lock(); d.syncs++; d.mu.Unlock(); return nil }
func (d *memDevice) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return nil
}

// TestOpenDevice: a filesystem on a Device of the caller's (here memory)
// is read and written like one in an image file; written out, the image
// is e2fsck-clean and the kernel reads what was written.
func TestOpenDevice(t *testing.T) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	d := &memDevice{b: b}
	fsys, err := ext4go.OpenDevice(d, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{}
	if err := fsys.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 20 {
				name := fmt.Sprintf("d/f%d-%d", i, j)
				data := bytes.Repeat([]byte{byte(i*20 + j)}, 1000*(j+1))
				if err := fsys.WriteFile(name, data, 0o644); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want[name] = data
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for name, data := range want {
		if got, err := fsys.ReadFile(name); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s through the device: %d bytes, %v", name, len(got), err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if !d.closed || d.syncs == 0 {
		t.Errorf("Close: device closed %v, synced %d times", d.closed, d.syncs)
	}
	if bytes.Equal(d.b, mustRead(t, image)) {
		t.Fatal("nothing was written to the device")
	}
	out := filepath.Join(dir, "out")
	if err := os.WriteFile(out, d.b, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, out)
	check := func(how string, read func(string) ([]byte, error)) {
		for name, data := range want {
			if got, err := read(name); err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %s: %d bytes, %v", how, name, len(got), err)
			}
		}
	}
	back, err := ext4go.Open(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("ext4go from the file", back.ReadFile)
	back.Close()
	if ok, why := testutil.CanMount(); ok {
		mp := testutil.Mount(t, out, true)
		check("kernel", func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(mp, name)) })
	} else {
		t.Logf("kernel read-back skipped: %s", why)
	}
}

// TestOpenDeviceBad: a nil Device and one that holds no ext4 are errors.
func TestOpenDeviceBad(t *testing.T) {
	if _, err := ext4go.OpenDevice(nil, nil); err == nil {
		t.Error("OpenDevice(nil): no error")
	}
	if _, err := ext4go.OpenDevice(&memDevice{b: make([]byte, 100)}, nil); err == nil {
		t.Error("a 100-byte device: no error")
	}
	if _, err := ext4go.OpenDevice(&memDevice{b: make([]byte, 1<<20)}, &ext4go.Options{Writable: true}); err == nil {
		t.Error("a device of zeros: no error")
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
