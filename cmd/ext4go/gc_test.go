package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestCollectLess: the bench loops' collector target and soft limit, undone
// by the restore; a GOGC in the environment wins.
func TestCollectLess(t *testing.T) {
	old, had := os.LookupEnv("GOGC")
	defer func() {
		if had {
			os.Setenv("GOGC", old)
		} else {
			os.Unsetenv("GOGC")
		}
	}()
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		t.Skip("GOMEMLIMIT is set: collectLess leaves the collector alone")
	}
	os.Unsetenv("GOGC")
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	restore := collectLess()
	percent, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(percent)
	if percent != 800 || limit != 1<<30 {
		t.Errorf("collectLess: GC percent %d, limit %d; want 800 and 1 GiB", percent, limit)
	}
	restore()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("after restore: GC percent %d, want 100", p)
	}
	os.Setenv("GOGC", "50")
	collectLess()()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Errorf("with GOGC set, collectLess changed the GC percent to %d", p)
	}
}
