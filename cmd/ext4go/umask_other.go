//go:build !linux && !darwin && !freebsd

package main

// processUmask: this system has no umask (Windows, WASI); chmod +x and
// get act as under the usual 022.
func processUmask() uint32 { return 0o022 }
