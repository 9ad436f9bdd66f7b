//go:build nopad

package pad

// On is 1 in the normal build and 0 with -tags nopad.
const On = 0
