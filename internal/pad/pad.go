//go:build !nopad

// Package pad switches the cache-line padding of the hot structures (seed
// 003: fields written by different goroutines never share a 64-byte
// line). A padding array is declared as [n * pad.On]byte; building with
// -tags nopad makes every one empty, so that a benchmark can run the
// padded layout against the unpadded one (scripts/bench-padding.sh).
package pad

// On is 1 in the normal build and 0 with -tags nopad.
const On = 1
