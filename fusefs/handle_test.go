//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMountFileHandles: name_to_handle_at and open_by_handle_at work on
// the mount, also once the kernel has dropped the inodes (it then asks
// the server for the node by number: FS.OpenInode), and a handle of a
// removed file is stale (xfstests generic/426, 467, 477).
func TestMountFileHandles(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	dir, fsys, srv := mount(t, image)
	files := map[string]string{"f": "contents of f", "d/g": "contents of g", "d/e/h": "contents of h"}
	if err := os.MkdirAll(filepath.Join(dir, "d", "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "d", "link")); err != nil {
		t.Fatal(err)
	}
	handles := map[string]unix.FileHandle{}
	for _, name := range []string{"f", "d/g", "d/e/h", "d/link", "d", "d/e"} {
		h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, filepath.Join(dir, name), 0)
		if err != nil {
			t.Fatalf("name_to_handle_at %s: %v", name, err)
		}
		handles[name] = h
	}
	mountFD, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() { // before the mount's own cleanup, on a failure
		if !closed {
			unix.Close(mountFD)
		}
	})
	dropInodes := func() {
		t.Helper()
		unix.Sync()
		if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("2"), 0); err != nil {
			t.Skipf("cannot drop the kernel's inodes: %v", err)
		}
	}
	check := func(when string) {
		t.Helper()
		for name, h := range handles {
			fd, err := unix.OpenByHandleAt(mountFD, h, unix.O_RDONLY)
			if err != nil {
				t.Errorf("%s: open_by_handle_at %s: %v", when, name, err)
				continue
			}
			want, isFile := files[name]
			if name == "d/link" {
				want, isFile = files["f"], true
			}
			if isFile {
				buf := make([]byte, 64)
				n, _ := unix.Pread(fd, buf, 0)
				if string(buf[:n]) != want {
					t.Errorf("%s: %s through its handle reads %q", when, name, buf[:n])
				}
			}
			unix.Close(fd)
		}
	}
	check("cached")
	dropInodes()
	check("after the kernel dropped its inodes")
	// Removing one name of a linked file keeps the handle good; removing
	// the last makes it stale.
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	dropInodes()
	delete(handles, "f") // same inode as d/link
	check("after removing one of two links")
	if err := os.Remove(filepath.Join(dir, "d", "link")); err != nil {
		t.Fatal(err)
	}
	// The kernel lets go of the inode (and the server of its node, on
	// FORGET) asynchronously after the drop: a loaded machine may answer
	// from the kernel's cache once or twice before the handle goes stale.
	for try := 0; try < 20; try++ {
		dropInodes()
		var fd int
		fd, err = unix.OpenByHandleAt(mountFD, handles["d/link"], unix.O_RDONLY)
		if err == nil {
			unix.Close(fd)
		}
		if errors.Is(err, syscall.ESTALE) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !errors.Is(err, syscall.ESTALE) {
		t.Errorf("open_by_handle_at of a removed file: %v, want ESTALE", err)
	}
	unix.Close(mountFD)
	closed = true
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
}
