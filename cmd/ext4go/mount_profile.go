//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
)

// mountProfileEnv names a path prefix: the mount daemon then writes a CPU
// profile of its whole run to PREFIX.cpu and, at unmount, a heap profile
// to PREFIX.heap (go tool pprof reads both), and one to PREFIX.heap.N at
// each SIGUSR1. For finding where a mount's time and memory go.
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
	heap := func(name string) {
		runtime.GC() // the heap profile shows what is live
		if h, err := os.Create(name); err == nil {
			pprof.WriteHeapProfile(h)
			h.Close()
		}
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for i := 1; ; i++ {
			if _, ok := <-usr1; !ok {
				return
			}
			heap(fmt.Sprintf("%s.heap.%d", prefix, i))
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(usr1)
		pprof.StopCPUProfile()
		cpu.Close()
		heap(prefix + ".heap")
	}
}
