//go:build linux || darwin || freebsd

package main

import (
	"fmt"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// anonMemory is n bytes of memory outside Go's heap (an image of a few
// GiB in the heap sat above the bench's memory limit, collectLess, and
// kept the collector running), in huge pages where the host gives them,
// every page written once: a page's first write costs this machine about
// 11 µs (a copy into fresh memory ran at 0.4 GB/s, into written memory at
// 16 GB/s), which the bench would otherwise time as ext4go's.
func anonMemory(n int64) ([]byte, error) {
	if n < 0 || n > math.MaxInt {
		return nil, fmt.Errorf("memory for a %d-byte image: more than this process can address", n)
	}
	b, err := unix.Mmap(-1, 0, int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("memory for a %d-byte image: %w", n, err)
	}
	hugePages(b)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 0
	}
	return b, nil
}

// freeMemory gives back what anonMemory gave.
func freeMemory(b []byte) { unix.Munmap(b) }

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
