// Package shard spreads hot shared state over cache lines: Index picks a
// shard for a key, and Counter is a counter written in per-shard lines and
// read, approximately, from one central line (kernel: percpu_counter).
//
// Go has no cheap CPU identity, so shards are chosen by a key the caller
// owns (an inode or group number). Index hashes it, because such keys are
// structured: the inodes of groups 16 and 32 are equal modulo every small
// power of two, and a plain modulo would put two writers in different
// groups on one line.
//
// A Counter's shards and its central value are atomics; no lock protects
// them. Sum is exact when no Add runs; during Adds it may miss a fold in
// flight, as any unlocked sum of shards may miss an Add.
package shard

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
)

// Index returns the shard of key among n (a power of two). The key is
// mixed (murmur3's finaliser) so that keys differing only in high bits
// still spread.
func Index(key uint64, n int) int {
	key ^= key >> 33
	key *= 0xff51afd7ed558ccd
	key ^= key >> 33
	return int(key & uint64(n-1))
}

// RoundUp returns the power of two at or above n (at least 1).
func RoundUp(n int) int { return 1 << bits.Len(uint(max(n, 1)-1)) }

type paddedInt64 struct {
	v atomic.Int64
	_ [56 * pad.On]byte
}

// Counter is a sharded counter. Adds change their key's shard; a shard
// that drifts by batch or more folds into the central value, so Read costs
// one load of a line written once per batch changes rather than a load of
// every shard (kernel: percpu_counter_add_batch, percpu_counter_read).
type Counter struct {
	central paddedInt64
	shards  []paddedInt64
	batch   int64
	site    lockstat.Site // counted at each write of the centre
	// Whole lines (128 bytes): counters allocated one after the other
	// would put one's centre, written at each fold, on the line of the
	// next one's shards and batch, read at every Add.
	_ [(pad.Line - (unsafe.Sizeof([]paddedInt64{})+16)%pad.Line) % pad.Line * pad.On]byte
}

// NewCounter returns a counter of n shards (rounded up to a power of two)
// that folds a shard into the central value when it drifts by batch; site
// names the centre for lockstat.
func NewCounter(n int, batch int64, site lockstat.Site) *Counter {
	return &Counter{shards: make([]paddedInt64, RoundUp(n)), batch: max(batch, 1), site: site}
}

// Add adds d to the counter on key's shard.
func (c *Counter) Add(key uint64, d int64) {
	if d >= c.batch || d <= -c.batch {
		c.central.v.Add(d)
		lockstat.Count(c.site)
		return
	}
	s := &c.shards[Index(key, len(c.shards))].v
	v := s.Add(d)
	// Whoever moves the shard out of the band folds it; a failed swap
	// means another Add got in, and it checks the band itself.
	if (v >= c.batch || v <= -c.batch) && s.CompareAndSwap(v, 0) {
		c.central.v.Add(v)
		lockstat.Count(c.site)
	}
}

// Read returns the counter within Slack of its value, from one line.
func (c *Counter) Read() int64 { return c.central.v.Load() }

// Slack bounds how far Read may be from Sum when no Add runs.
func (c *Counter) Slack() int64 { return int64(len(c.shards)) * c.batch }

// Sum returns the counter's value, reading every shard.
func (c *Counter) Sum() int64 {
	s := c.central.v.Load()
	for i := range c.shards {
		s += c.shards[i].v.Load()
	}
	return s
}
