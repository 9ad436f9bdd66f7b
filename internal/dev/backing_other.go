//go:build !linux

package dev

import "os"

// lockBacking: loop devices, whose backing file a lock must also cover,
// are Linux's (backing_linux.go).
func lockBacking(*os.File, bool) (*os.File, error) { return nil, nil }
