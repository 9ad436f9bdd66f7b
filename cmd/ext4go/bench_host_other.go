//go:build !linux

package main

import (
	"fmt"
	"os"
	"runtime"
)

// What the benchmarks ask of the host that only Linux gives: elsewhere
// the benchmarks that need it say so.

func hostFallocate(*os.File, int64, int64) error {
	return fmt.Errorf("fallocate of a host file: Linux only, not %s", runtime.GOOS)
}

func dropCaches() error {
	return fmt.Errorf("dropping the page cache (/proc/sys/vm/drop_caches): Linux only, not %s", runtime.GOOS)
}

// hugePages has no hint to give here.
func hugePages([]byte) {}
