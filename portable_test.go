package ext4go_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ext4go/ext4go"
)

// The root package's other tests compare with e2fsprogs and the kernel's
// ext4, and use Linux's system calls: they carry //go:build linux. These
// run on every system: make an image, copy a host tree in (AddDir, through
// what the host keeps: internal/host), and read everything back.

// TestPortableImage: an image made, filled from a host directory and
// written through the API reads back the same, on any system.
func TestPortableImage(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o755))
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // past smallFile: read by the fill workers
	must(os.WriteFile(filepath.Join(src, "small.txt"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(src, "sub", "big.bin"), big, 0o644))
	must(os.WriteFile(filepath.Join(src, "sub", "deeper", "empty"), nil, 0o644))
	hasLink := os.Symlink("../small.txt", filepath.Join(src, "sub", "link")) == nil // Windows: only with the privilege

	image := filepath.Join(dir, "img")
	est, err := ext4go.EstimateDir(src, 4096)
	must(err)
	if est.Inodes < 6 || est.DataBytes < int64(len(big)) {
		t.Errorf("EstimateDir: %+v", est)
	}
	must(ext4go.Mkfs(image, ext4go.MkfsOptions{Size: 32 << 20}))
	fsys, err := ext4go.OpenForBuild(image)
	must(err)
	must(fsys.AddDir(".", src, &ext4go.BuildOptions{UID: 1000, GID: 100}))
	must(fsys.WriteFile("api.txt", []byte("written through the API"), 0o600))
	must(fsys.Mknod("null", 0o20666, ext4go.Mkdev(1, 3)))
	if _, err := fsys.GetXattr("api.txt", "user.missing"); !errors.Is(err, ext4go.ErrNoXattr) {
		t.Errorf("GetXattr of a missing attribute: %v, want ErrNoXattr", err)
	}
	must(fsys.SetXattr("api.txt", "user.k", []byte("v"), 0))
	must(fsys.Close())

	fsys, err = ext4go.Open(image, nil)
	must(err)
	defer fsys.Close()
	for name, want := range map[string][]byte{"small.txt": []byte("hello\n"), "sub/big.bin": big, "sub/deeper/empty": {}, "api.txt": []byte("written through the API")} {
		got, err := fsys.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	fi, err := fsys.Lstat("sub/big.bin")
	must(err)
	if st := fi.Sys().(*ext4go.Stat); st.UID != 1000 || st.GID != 100 {
		t.Errorf("sub/big.bin owned by %d:%d, want 1000:100", st.UID, st.GID)
	}
	if runtime.GOOS != "windows" && runtime.GOOS != "wasip1" && fi.Mode().Perm() != 0o644 { // neither keeps Unix modes
		t.Errorf("sub/big.bin: mode %v, want 0644", fi.Mode())
	}
	if hasLink {
		if target, err := fsys.ReadLink("sub/link"); err != nil || target != "../small.txt" {
			t.Errorf("sub/link: %q, %v", target, err)
		}
	}
	fi, err = fsys.Lstat("null")
	must(err)
	if st := fi.Sys().(*ext4go.Stat); st.Major() != 1 || st.Minor() != 3 || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("null: %v %d,%d", fi.Mode(), st.Major(), st.Minor())
	}
	if v, err := fsys.GetXattr("api.txt", "user.k"); err != nil || string(v) != "v" {
		t.Errorf("user.k: %q, %v", v, err)
	}
	if _, err := ext4go.Open(image, &ext4go.Options{Writable: true}); runtime.GOOS != "wasip1" && !errors.Is(err, ext4go.ErrBusy) {
		t.Errorf("a writer while a reader has the image: %v, want ErrBusy", err)
	}
}
