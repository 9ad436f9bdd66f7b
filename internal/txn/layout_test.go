package txn

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/pad"
)

// TestBufferLayout: in the normal build a Buffer fills whole cache lines,
// so two allocated one after the other never share one (see Buffer).
func TestBufferLayout(t *testing.T) {
	size := unsafe.Sizeof(Buffer{})
	if pad.On == 1 && size%bufferLine != 0 {
		t.Fatalf("Buffer is %d bytes, not a multiple of %d", size, bufferLine)
	}
	t.Logf("Buffer: %d bytes (pad.On=%d)", size, pad.On)
}

// BenchmarkNeighbourBuffers: two goroutines each lock and pin their own
// buffer, as two appenders do with their files' extent leaves, the
// buffers next to each other in one array as the allocator placed two
// leaves read one after the other. Run it against -tags nopad to see what
// a shared line costs:
//
//	go test ./internal/txn -run '^$' -bench NeighbourBuffers -count 5
//	go test ./internal/txn -run '^$' -bench NeighbourBuffers -count 5 -tags nopad
func BenchmarkNeighbourBuffers(b *testing.B) {
	bs := make([]Buffer, 2)
	b.Logf("Buffer: %d bytes, neighbours %d bytes apart", unsafe.Sizeof(Buffer{}),
		uintptr(unsafe.Pointer(&bs[1]))-uintptr(unsafe.Pointer(&bs[0])))
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range bs {
		wg.Add(1)
		go func(buf *Buffer) {
			defer wg.Done()
			for range b.N {
				buf.pins.Add(1)
				buf.mu.Lock()
				buf.inflight++
				buf.mu.Unlock()
				buf.pins.Add(-1)
			}
		}(&bs[i])
	}
	wg.Wait()
}
