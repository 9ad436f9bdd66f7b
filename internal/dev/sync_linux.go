package dev

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback starts writeback of f's dirty pages without waiting
// (sync_file_range SYNC_FILE_RANGE_WRITE).
func startWriteback(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}

// syncData makes f's data durable, without the metadata fsync would also
// write when only times changed (fdatasync).
func syncData(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
