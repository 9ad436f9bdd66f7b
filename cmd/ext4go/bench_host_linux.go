package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// What the benchmarks ask of the host that only Linux gives.

// hostFallocate allocates n bytes of the host file f from off (fallocate).
func hostFallocate(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), 0, off, n)
}

// dropCaches writes back dirty pages and drops the page cache (root only).
func dropCaches() error {
	unix.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("3\n"), 0)
}

// hugePages asks for b to be backed by huge pages (MADV_HUGEPAGE): a hint,
// without which the bench is only slower.
func hugePages(b []byte) { unix.Madvise(b, unix.MADV_HUGEPAGE) }
