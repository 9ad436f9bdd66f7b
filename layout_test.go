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
	// The paddings of node, File and hotInode are counted for 64-bit
	// pointers and ints; on a 32-bit system the objects come out smaller
	// and may share lines, which costs speed, not correctness.
	if unsafe.Sizeof(uintptr(0)) == 8 {
		for name, want := range map[string]uintptr{"node": 192, "File": 128} {
			size := map[string]uintptr{"node": unsafe.Sizeof(node{}), "File": unsafe.Sizeof(File{})}[name]
			if size != want {
				t.Errorf("%s is %d bytes, want %d", name, size, want)
			}
		}
		if size := unsafe.Sizeof(hotInode{}); size != 256 {
			t.Errorf("hotInode is %d bytes, want 256", size)
		}
	}
	// Arrays of shards: each element's hot fields a line from its
	// neighbours' wherever the array starts (pad.Apart).
	var gd groupDescLock
	var ds deferShard
	var is inodeShard
	for _, c := range []struct {
		name        string
		stride, hot uintptr
	}{
		{"groupDescLock", unsafe.Sizeof(gd), unsafe.Offsetof(gd.bitmapDirty) + unsafe.Sizeof(gd.bitmapDirty)},
		{"deferShard", unsafe.Sizeof(ds), unsafe.Offsetof(ds.nodes) + unsafe.Sizeof(ds.nodes)},
		{"inodeShard", unsafe.Sizeof(is), unsafe.Offsetof(is.next) + unsafe.Sizeof(is.next)},
	} {
		if !pad.Apart(c.stride, c.hot) {
			t.Errorf("%s: %d bytes with %d hot: neighbours may share a line", c.name, c.stride, c.hot)
		}
	}
	var w writer
	if gap := unsafe.Offsetof(w.deferred) - unsafe.Offsetof(w.gdMu) - unsafe.Sizeof(w.gdMu); gap < pad.Line-8 {
		t.Errorf("writer.deferred only %d bytes after gdMu", gap)
	}
	var ic inodeCache
	if off := unsafe.Offsetof(ic.shards); off < pad.Line-8 {
		t.Errorf("inodeCache.shards at %d: shard 0 may share a line with the fields before", off)
	}
}
