//go:build linux

package mkfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestKernelMount mounts our images read-write with the kernel's ext4
// driver, creates files and directories, unmounts and requires e2fsck -fn
// to find the result clean.
func TestKernelMount(t *testing.T) {
	testutil.RequireMount(t)
	cases := []struct {
		v    variant
		size int64
		bs   int
	}{
		{variants[0], 64 * miB, 0},
		{variants[0], 300 * miB, 1024},
		{variants[0], 1 * giB, 0},
		{variants[1], 64 * miB, 0},
		{variants[2], 64 * miB, 0},
		{variants[3], 64 * miB, 0},
		{variants[4], 64 * miB, 0},
		{variants[5], 64 * miB, 0},
		{variants[6], 300 * miB, 1024},
		{variants[7], 64 * miB, 0},
		{variants[8], 64 * miB, 0},
		{variants[9], 64 * miB, 0},
		{variants[10], 300 * miB, 0},
		{variants[11], 64 * miB, 0},
		{variants[12], 64 * miB, 0},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dM/%d", c.v.name, c.size/miB, c.bs), func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			if err := Format(img, c.v.options(c.size, c.bs)); err != nil {
				t.Fatal(err)
			}
			// Mount's cleanup unmounts when the subtest ends, before fsck.
			t.Run("write", func(t *testing.T) {
				populate(t, testutil.Mount(t, img, false))
			})
			if ls := testutil.Debugfs(t, img, "ls /a/b/c"); !strings.Contains(ls, "small-199") {
				t.Fatalf("the kernel's writes are not in the image:\n%s", ls)
			}
			if exit, out := testutil.E2fsckFN(t, img); exit != 0 {
				t.Errorf("e2fsck -fn after kernel writes: exit %d\n%s", exit, out)
			}
		})
	}
}

// populate creates a few directories, files of various sizes, a symlink and
// a hard link under mp, and removes one file again.
func populate(t *testing.T, mp string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(mp, "a/b/c"), 0o755))
	for i, n := range []int{0, 1, 100, 4096, 70000, 1 << 20} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(i + j)
		}
		must(os.WriteFile(filepath.Join(mp, "a", fmt.Sprintf("f%d", i)), data, 0o644))
	}
	for i := 0; i < 200; i++ {
		must(os.WriteFile(filepath.Join(mp, "a/b/c", fmt.Sprintf("small-%03d", i)), []byte("x"), 0o600))
	}
	must(os.Symlink("a/f1", filepath.Join(mp, "link")))
	must(os.Link(filepath.Join(mp, "a/f2"), filepath.Join(mp, "hard")))
	must(os.Remove(filepath.Join(mp, "a/f3")))
	must(os.Chtimes(filepath.Join(mp, "a/f4"), time.Unix(1e9, 0), time.Unix(1e9, 0)))
	f, err := os.Open(mp)
	must(err)
	must(f.Sync())
	f.Close()
}
