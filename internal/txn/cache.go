package txn

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
)

// Buffer is a cached block. Its size is a multiple of a cache line, so
// that two buffers allocated one after the other (the extent leaves of two
// files growing at once) never share a line: each is locked and pinned by
// its own writer several times an append, and a shared line would bounce
// between their cores on every one.
type Buffer struct {
	bufferState
	_ [(bufferLine - unsafe.Sizeof(bufferState{})%bufferLine) % bufferLine * pad.On]byte
}

// bufferLine is a cache line. The Go allocator puts an object whose size
// class is a multiple of it at a multiple of that size in a page-aligned
// span, so a Buffer starts on a line boundary too.
const bufferLine = 64

type bufferState struct {
	mu       lockstat.RWMutex[lockstat.MBuffer] // protects data, valid, tx, inflight
	data     []byte
	valid    bool         // data holds the block's content
	tx       *Transaction // the transaction that changed it and has not committed, or nil
	inflight int          // commits writing a frozen copy of it

	// sealed is 1<<32|seed when the content's checksum under seed is
	// known good (ViewSealed, ModifySealed), 0 otherwise. Every change
	// stores it under mu's write lock; a viewer seals under the read lock
	// only what it verified, so a seal always describes the content. A
	// buffer read from the device starts unsealed.
	sealed atomic.Uint64

	// sum, when set, is a checksum a writer left for later (ModifyDeferred):
	// the content is right but its checksum field is stale. It is settled
	// under mu's write lock before anyone may read that field (a View, a
	// ViewSealed under another seal, a Modify that does not defer, and the
	// commit that freezes the block), so that a block changed many times
	// in one transaction is summed once, at its freeze (kernel: jbd2's
	// t_frozen trigger, which ext4 uses to checksum orphan-file blocks).
	sum     SumFunc
	sumSeed uint32

	// pins counts users between cache.get and unpin. It is raised under
	// the shard lock, so a buffer found unpinned there cannot be handed
	// out while it is being evicted.
	pins atomic.Int32
}

func (b *Buffer) unpin() { b.pins.Add(-1) }

// SumFunc computes and stores the checksum of block b under seed; it
// fails only for content it cannot checksum (a malformed header).
type SumFunc func(b []byte, seed uint32) error

// settleSum computes a deferred checksum. b.mu must be held for writing.
// A failure unseals the block, so that a reader verifies it and sees the
// damage, rather than trusting a seal over a stale checksum.
func (b *Buffer) settleSum() error {
	if b.sum == nil {
		return nil
	}
	err := b.sum(b.data, b.sumSeed)
	b.sum = nil
	if err != nil {
		b.sealed.Store(0)
		return fmt.Errorf("txn: checksum of a changed block: %w", err)
	}
	return nil
}

// evictable reports whether b can leave the cache: its content is on disk.
// b.mu must be held.
func (b *Buffer) evictable() bool { return b.tx == nil && b.inflight == 0 }

const cacheShards = 64

// cache maps block numbers to buffers, sharded so concurrent users of
// different blocks rarely share a lock.
type cache struct {
	// A line before the shards keeps the first one's lock off the
	// Manager's fields before it; every get reads the first bytes of the
	// cache (Go's nil check), and two appenders whose leaves fell in shard
	// 0 and another bounced that line on every append.
	_        [pad.Line * pad.On]byte
	shards   [cacheShards]cacheShard
	perShard int
}

// cacheShard is one shard of the cache. Its lock and map are a line
// apart from its neighbours' wherever the array starts (pad.Apart).
type cacheShard struct {
	mu lockstat.Mutex[lockstat.MBufferCache] // protects m
	m  map[uint64]*Buffer
	_  [pad.Line * pad.On]byte
}

func (c *cache) init(capacity int) {
	c.perShard = max(capacity/cacheShards, 16)
	for i := range c.shards {
		c.shards[i].m = map[uint64]*Buffer{}
	}
}

func (c *cache) shard(nr uint64) *cacheShard { return &c.shards[shard.Index(nr, cacheShards)] }

// get returns the buffer of nr pinned, creating an empty (invalid) one if
// needed. The caller must unpin it.
func (c *cache) get(nr uint64, bs int) *Buffer {
	s := c.shard(nr)
	s.mu.Lock()
	b, ok := s.m[nr]
	if !ok {
		if len(s.m) >= 2*c.perShard {
			s.evict(c.perShard)
		}
		b = &Buffer{bufferState: bufferState{data: make([]byte, bs)}}
		s.m[nr] = b
	}
	b.pins.Add(1)
	s.mu.Unlock()
	return b
}

// lookup returns the buffer of nr pinned, or nil.
func (c *cache) lookup(nr uint64) *Buffer {
	s := c.shard(nr)
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.m[nr]
	if b != nil {
		b.pins.Add(1)
	}
	return b
}

// drop removes b (if it is still the buffer of nr).
func (c *cache) drop(nr uint64, b *Buffer) {
	s := c.shard(nr)
	s.mu.Lock()
	if s.m[nr] == b {
		delete(s.m, nr)
	}
	s.mu.Unlock()
}

// trim evicts clean buffers from shards over their share of the capacity.
func (c *cache) trim() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		if len(s.m) > c.perShard {
			s.evict(c.perShard * 3 / 4)
		}
		s.mu.Unlock()
	}
}

// evict removes clean, unpinned buffers until the shard holds at most
// keep. s.mu must be held.
func (s *cacheShard) evict(keep int) {
	for nr, b := range s.m {
		if len(s.m) <= keep {
			return
		}
		if b.pins.Load() != 0 || !b.mu.TryLock() {
			continue
		}
		if b.evictable() {
			delete(s.m, nr)
		}
		b.mu.Unlock()
	}
}

func sortBlocks(bs []Block) {
	slices.SortFunc(bs, func(a, b Block) int {
		switch {
		case a.Nr < b.Nr:
			return -1
		case a.Nr > b.Nr:
			return 1
		}
		return 0
	})
}
