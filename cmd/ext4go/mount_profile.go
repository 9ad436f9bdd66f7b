//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// mountProfileEnv names a path prefix: the mount daemon then writes a CPU
// profile of its whole run to PREFIX.cpu and, at unmount, a heap profile
// to PREFIX.heap (go tool pprof reads both). For finding where a mount's
// time and memory go.
const mountProfileEnv = "EXT4GO_MOUNT_PROFILE"

// startMountProfile starts the profiles mountProfileEnv asks for and
// returns what ends them (nothing when it is unset).
func startMountProfile() (stop func()) {
	prefix := os.Getenv(mountProfileEnv)
	if prefix == "" {
		return func() {}
	}
	cpu, err := os.Create(prefix + ".cpu")
	if err != nil {
		fmt.Fprintf(os.Stderr, "ext4go mount: %s: %v\n", mountProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		fmt.Fprintf(os.Stderr, "ext4go mount: %s: %v\n", mountProfileEnv, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		runtime.GC() // the heap profile shows what is live
		if h, err := os.Create(prefix + ".heap"); err == nil {
			pprof.WriteHeapProfile(h)
			h.Close()
		}
	}
}
