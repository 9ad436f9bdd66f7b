//go:build linux

package mkfs

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

// Test100GiB makes a 100 GiB ext4 image, logs how long it took (there is no
// timed assertion), and checks that it stays sparse and is clean.
func Test100GiB(t *testing.T) {
	if testing.Short() {
		t.Skip("100 GiB image in -short mode")
	}
	img := filepath.Join(t.TempDir(), "big.img")
	o := variants[0].options(100*giB, 0)
	start := time.Now()
	if err := Format(img, o); err != nil {
		t.Fatal(err)
	}
	t.Logf("Format of a 100 GiB ext4 image took %v", time.Since(start))
	var st syscall.Stat_t
	if err := syscall.Stat(img, &st); err != nil {
		t.Fatal(err)
	}
	alloc := st.Blocks * 512
	t.Logf("allocated %d KiB of %d GiB", alloc>>10, st.Size>>30)
	if st.Size != 100*giB {
		t.Errorf("image size %d, want %d", st.Size, 100*giB)
	}
	if alloc > 64*miB {
		t.Errorf("image not sparse: %d bytes allocated", alloc)
	}
	start = time.Now()
	testutil.RequireFsckClean(t, img)
	t.Logf("e2fsck -fn took %v", time.Since(start))
}
