package shard

import (
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
)

func TestIndexSpreadsStructuredKeys(t *testing.T) {
	for _, n := range []int{1, 2, 4, 16, 64} {
		seen := map[int]bool{}
		// Inode 12 of groups 0, 16, 32, ... of 8192 inodes each: equal
		// modulo n, so a modulo would give one shard for all.
		for g := uint64(0); g < 64; g += 16 {
			i := Index(g*8192+12, n)
			if i < 0 || i >= n {
				t.Fatalf("Index(%d, %d) = %d", g*8192+12, n, i)
			}
			seen[i] = true
		}
		if want := min(n, 2); len(seen) < want {
			t.Errorf("n=%d: 4 group-strided keys in %d shards, want at least %d", n, len(seen), want)
		}
	}
	// Consecutive keys fill every shard.
	seen := map[int]bool{}
	for k := uint64(0); k < 64; k++ {
		seen[Index(k, 16)] = true
	}
	if len(seen) != 16 {
		t.Errorf("64 consecutive keys in %d of 16 shards", len(seen))
	}
}

func TestRoundUp(t *testing.T) {
	for n, want := range map[int]int{-1: 1, 0: 1, 1: 1, 2: 2, 3: 4, 8: 8, 9: 16} {
		if got := RoundUp(n); got != want {
			t.Errorf("RoundUp(%d) = %d, want %d", n, got, want)
		}
	}
}

// Concurrent adds of both signs and all sizes: the sum is exact once they
// stop, and the central read is within the slack.
func TestCounterConcurrent(t *testing.T) {
	c := NewCounter(8, 64, lockstat.AllocCounterFold)
	var wg sync.WaitGroup
	var want [8]int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := 0; i < 20000; i++ {
				d := r.Int64N(200) - 90
				if i%1000 == 0 {
					d *= 50 // above the batch: straight to the centre
				}
				c.Add(uint64(r.IntN(40)), d)
				want[w] += d
			}
		}()
	}
	wg.Wait()
	var total int64
	for _, v := range want {
		total += v
	}
	if got := c.Sum(); got != total {
		t.Fatalf("Sum = %d, want %d", got, total)
	}
	if d := c.Read() - total; d > c.Slack() || d < -c.Slack() {
		t.Fatalf("Read = %d, %d from the sum, slack %d", c.Read(), d, c.Slack())
	}
	for i := range c.shards {
		if v := c.shards[i].v.Load(); v >= c.batch || v <= -c.batch {
			t.Errorf("shard %d holds %d, outside the batch %d", i, v, c.batch)
		}
	}
}

func BenchmarkCounterAddRead(b *testing.B) {
	c := NewCounter(8, 256, lockstat.AllocCounterFold)
	b.RunParallel(func(pb *testing.PB) {
		k := rand.Uint64()
		for pb.Next() {
			c.Add(k, -2)
			_ = c.Read()
		}
	})
}

// TestCounterLayout: a Counter fills whole lines, so counters allocated
// one after the other share none (see Counter).
func TestCounterLayout(t *testing.T) {
	if pad.On == 1 && unsafe.Sizeof(Counter{})%pad.Line != 0 {
		t.Fatalf("Counter is %d bytes, not whole lines", unsafe.Sizeof(Counter{}))
	}
}
