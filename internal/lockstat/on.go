//go:build lockstat

package lockstat

import (
	"sync"
	"sync/atomic"
)

// Enabled reports whether counting is compiled in (build tag lockstat).
const Enabled = true

var counts [numSites]struct {
	n atomic.Uint64
	_ [56]byte
}

// Count notes one write of a shared counter.
func Count(s Site) { counts[s].n.Add(1) }

// Snapshot returns the counts so far.
func Snapshot() Counts {
	var c Counts
	for i := range counts {
		c[i] = counts[i].n.Load()
	}
	return c
}

// Mutex is a sync.Mutex whose acquisitions count under K's site.
type Mutex[K Marker] struct{ sync.Mutex }

func (m *Mutex[K]) Lock() {
	var k K
	Count(k.site())
	m.Mutex.Lock()
}

func (m *Mutex[K]) TryLock() bool {
	var k K
	Count(k.site())
	return m.Mutex.TryLock()
}

// RWMutex is a sync.RWMutex whose acquisitions count under K's site.
type RWMutex[K Marker] struct{ sync.RWMutex }

func (m *RWMutex[K]) Lock() {
	var k K
	Count(k.site())
	m.RWMutex.Lock()
}

func (m *RWMutex[K]) RLock() {
	var k K
	Count(k.site())
	m.RWMutex.RLock()
}

func (m *RWMutex[K]) TryLock() bool {
	var k K
	Count(k.site())
	return m.RWMutex.TryLock()
}

func (m *RWMutex[K]) TryRLock() bool {
	var k K
	Count(k.site())
	return m.RWMutex.TryRLock()
}
