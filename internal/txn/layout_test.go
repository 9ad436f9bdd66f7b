package txn

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
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

// TestShardLayout: the lock and map of each cache shard and dirty shard
// never share a line with a neighbour's, wherever the heap or the
// enclosing struct puts the array, nor the first one with the fields
// before it (pad.Apart).
func TestShardLayout(t *testing.T) {
	if pad.On == 0 {
		t.Skip("built with -tags nopad")
	}
	var c cacheShard
	if hot := unsafe.Offsetof(c.m) + unsafe.Sizeof(c.m); !pad.Apart(unsafe.Sizeof(c), hot) {
		t.Errorf("cacheShard: %d bytes with %d hot", unsafe.Sizeof(c), hot)
	}
	var d dirtyShard
	if hot := unsafe.Offsetof(d.m) + unsafe.Sizeof(d.m); !pad.Apart(unsafe.Sizeof(d), hot) {
		t.Errorf("dirtyShard: %d bytes with %d hot", unsafe.Sizeof(d), hot)
	}
	var m Manager
	if gap := unsafe.Offsetof(m.cache) + unsafe.Offsetof(m.cache.shards) - unsafe.Offsetof(m.opts) - unsafe.Sizeof(m.opts); gap < pad.Line-8 {
		t.Errorf("cache.shards only %d bytes after Manager.opts", gap)
	}
	var tx Transaction
	if gap := unsafe.Offsetof(tx.updates) - unsafe.Offsetof(tx.tid) - unsafe.Sizeof(tx.tid); gap < pad.Line-8 {
		t.Errorf("Transaction.updates only %d bytes after tid", gap)
	}
	if gap := unsafe.Offsetof(tx.dirty) - unsafe.Offsetof(tx.nrevoke) - unsafe.Sizeof(tx.nrevoke); gap < pad.Line-8 {
		t.Errorf("Transaction.dirty only %d bytes after nrevoke", gap)
	}
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

// BenchmarkNeighbourShards: two goroutines each get and unpin a block of
// its own from the cache, the blocks in shards 0 and 1, as two appenders
// get their leaves: with the shards a line apart neither touches a line
// the other writes. Run it against -tags nopad to see what a shared line
// costs (scripts/bench-padding.sh runs both).
func BenchmarkNeighbourShards(b *testing.B) {
	var c cache
	c.init(1024)
	var blocks []uint64
	for _, want := range []int{0, 1} {
		for nr := uint64(0); ; nr++ {
			if shard.Index(nr, cacheShards) == want {
				blocks = append(blocks, nr)
				break
			}
		}
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for _, nr := range blocks {
		wg.Add(1)
		go func(nr uint64) {
			defer wg.Done()
			for range b.N {
				c.get(nr, 64).unpin()
			}
		}(nr)
	}
	wg.Wait()
}
