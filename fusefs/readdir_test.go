//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/testutil"
)

// direntInos reads dir with getdents64 and returns each name's d_ino.
func direntInos(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]uint64{}
	buf := make([]byte, 8192)
	for {
		n, err := syscall.ReadDirent(int(f.Fd()), buf)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return out
		}
		for b := buf[:n]; len(b) > 19; {
			reclen := int(binary.LittleEndian.Uint16(b[16:]))
			name := b[19:reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			out[string(name)] = binary.LittleEndian.Uint64(b)
			b = b[reclen:]
		}
	}
}

// TestMountReaddirInodes: readdir gives every entry, "." and ".."
// included, the inode number stat gives it.
func TestMountReaddirInodes(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	dir, _, _ := mount(t, image)
	if err := os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a/b/f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".", "a", "a/b", "a/b/c"} {
		for name, ino := range direntInos(t, filepath.Join(dir, d)) {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(dir, d, name), &st); err != nil {
				t.Fatal(err)
			}
			if d == "." && name == ".." {
				continue // the mount's parent is not ours
			}
			if st.Ino != ino {
				t.Errorf("%s/%s: d_ino %d, stat %d", d, name, ino, st.Ino)
			}
		}
	}
}

// TestMountSeekDataFresh: SEEK_DATA right after a write past a hole finds
// the written data, whether the kernel keeps the pages (writeback cache)
// or not.
func TestMountSeekDataFresh(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	dir, _, _ := mount(t, image)
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("data"), 1<<20); err != nil {
		t.Fatal(err)
	}
	off, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA)
	if err != nil || off > 1<<20 {
		t.Errorf("SEEK_DATA from 0: %d, %v; want at most %d", off, err, 1<<20)
	}
}
