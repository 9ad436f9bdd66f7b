package ext4go

import (
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/pad"
)

// TestHotLayout: the objects each file owns and writes on every change
// fill a size class whose objects start a multiple of 64 bytes apart
// (node 192, File 128), so that the node and File of files created one
// after the other never share a cache line (without it, fallocate2 at P=2
// ran from 0.86M to 1.38M ops/s from one run to the next); the group
// descriptors' locks fill whole lines.
func TestHotLayout(t *testing.T) {
	if pad.On == 0 {
		t.Skip("built with -tags nopad")
	}
	for name, want := range map[string]uintptr{"node": 192, "File": 128} {
		size := map[string]uintptr{"node": unsafe.Sizeof(node{}), "File": unsafe.Sizeof(File{})}[name]
		if size != want {
			t.Errorf("%s is %d bytes, want %d", name, size, want)
		}
	}
	if size := unsafe.Sizeof(hotInode{}); size != 256 {
		t.Errorf("hotInode is %d bytes, want 256", size)
	}
	if size := unsafe.Sizeof(groupDescLock{}); size%64 != 0 {
		t.Errorf("groupDescLock is %d bytes, not whole cache lines", size)
	}
}
