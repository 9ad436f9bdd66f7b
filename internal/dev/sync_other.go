//go:build !linux

package dev

import "os"

// startWriteback does nothing: only Linux has sync_file_range, and the
// call is a hint (the final Sync writes whatever is left).
func startWriteback(*os.File) error { return nil }

// syncData is a full fsync (F_FULLFSYNC on macOS, as os.File.Sync does
// there): fdatasync is Linux's.
func syncData(f *os.File) error { return f.Sync() }
