//go:build !lockstat

package lockstat

import "sync"

// Enabled reports whether counting is compiled in (build tag lockstat).
const Enabled = false

// Count notes one write of a shared counter (nothing without the tag).
func Count(Site) {}

// Snapshot returns the counts so far (zeros without the tag).
func Snapshot() Counts { return Counts{} }

// Mutex is a sync.Mutex whose acquisitions count under K's site.
type Mutex[K Marker] struct{ sync.Mutex }

// RWMutex is a sync.RWMutex whose acquisitions count under K's site.
type RWMutex[K Marker] struct{ sync.RWMutex }
