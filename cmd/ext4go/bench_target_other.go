//go:build !linux

package main

import (
	"fmt"
	"runtime"
)

// dirTarget would run the workload on the kernel's ext4 in a mounted
// directory, for comparison: Linux only (FIFREEZE, FIEMAP, syncfs,
// /proc/self/mountinfo).
type dirTarget struct{ benchTarget }

func (*dirTarget) cleanup() {}

func newDirTarget(dir string) (*dirTarget, error) {
	return nil, fmt.Errorf("-dir %s: comparing with the kernel's ext4 needs Linux, not %s", dir, runtime.GOOS)
}
