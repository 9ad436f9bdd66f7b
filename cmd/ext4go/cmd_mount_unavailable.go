//go:build !((linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd)

package main

import (
	"fmt"
	"runtime"
	"time"
)

// errNoMount says why this build has no FUSE mount: the library (go-fuse)
// builds for 64-bit Linux, macOS and FreeBSD only (fusefs/doc.go).
func errNoMount() error {
	if runtime.GOOS == "linux" {
		return fmt.Errorf("not available on linux/%s: the FUSE library (go-fuse v2.12.1) does not build for 32-bit Linux", runtime.GOARCH)
	}
	return fmt.Errorf("not available on %s: FUSE mounts need Linux, macOS (macFUSE) or FreeBSD", runtime.GOOS)
}

func mount(*env, []string, string, string, bool, []string) error { return errNoMount() }
func umount(*env, string, string, time.Duration) error           { return errNoMount() }
