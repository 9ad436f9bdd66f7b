//go:build !linux && !darwin && !freebsd

package main

import (
	"fmt"
	"math"
	"time"
)

// anonMemory is n bytes of Go heap: there is no mmap here, so a large
// image keeps the collector busier than on Unix (bench_mem_unix.go).
func anonMemory(n int64) ([]byte, error) {
	if n < 0 || n > math.MaxInt {
		return nil, fmt.Errorf("memory for a %d-byte image: more than this process can address", n)
	}
	return make([]byte, n), nil
}

// freeMemory leaves the memory to the collector.
func freeMemory([]byte) {}

// cpuTime is 0: the process's CPU time (getrusage) is not read on this
// system, and the benchmarks report no CPU figures.
func cpuTime() time.Duration { return 0 }
