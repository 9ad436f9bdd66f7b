package mballoc_test

import (
	"fmt"
	"testing"

	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/mballoc/bench"
)

// BenchmarkFallocate2 runs will-it-scale's fallocate2 at the allocator with
// P goroutines, in the default and the legacy configuration; one op is one
// 8 KiB fallocate (not normalized, as the kernel's fallocate path does).
func BenchmarkFallocate2(b *testing.B) {
	for _, cfg := range []string{"default", "legacy"} {
		for _, p := range []int{1, 2, 4, 8, 16} {
			b.Run(fmt.Sprintf("%s/p=%d", cfg, p), func(b *testing.B) {
				o := bench.Options{Legacy: cfg == "legacy", Size: 16 << 30}
				b.ReportAllocs()
				b.ResetTimer()
				r, err := bench.Fallocate2(o, p, 0, int64(b.N))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.OpsPerSec, "ops/s")
				b.ReportMetric(float64(r.CPUPerOp.Nanoseconds()), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkAppend is BenchmarkFallocate2 with preallocating requests.
func BenchmarkAppend(b *testing.B) {
	for _, cfg := range []string{"default", "legacy"} {
		for _, p := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/p=%d", cfg, p), func(b *testing.B) {
				r, err := bench.Append(bench.Options{Legacy: cfg == "legacy", Size: 16 << 30}, p, 0, int64(b.N))
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.OpsPerSec, "ops/s")
				b.ReportMetric(float64(r.CPUPerOp.Nanoseconds()), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkFragmentation reports the extents per file of 8 concurrent
// streaming writers.
func BenchmarkFragmentation(b *testing.B) {
	for _, cfg := range []string{"default", "legacy"} {
		b.Run(cfg, func(b *testing.B) {
			var rows []bench.Row
			for b.Loop() {
				var err error
				rows, err = bench.Fragmentation(bench.Options{Legacy: cfg == "legacy", Size: 16 << 30})
				if err != nil {
					b.Fatal(err)
				}
			}
			for _, r := range rows {
				b.ReportMetric(r.Value, r.Metric)
			}
		})
	}
}

// BenchmarkAllocateFree measures one small metadata allocation and its
// free, single-threaded.
func BenchmarkAllocateFree(b *testing.B) {
	gm := mballoc.GeometryFor(16<<30, 4096)
	s, _ := mballoc.NewMemStore(gm, mballoc.MemStoreOptions{})
	a, err := mballoc.New(gm, s, mballoc.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e, err := a.Allocate(nil, mballoc.Request{Len: 1, Goal: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Free(nil, e.Start, uint64(e.Len), 0); err != nil {
			b.Fatal(err)
		}
	}
}
