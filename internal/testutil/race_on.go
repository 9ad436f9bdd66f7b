//go:build race

package testutil

// RaceEnabled reports whether the race detector is on (it changes
// allocation counts and timings).
const RaceEnabled = true
