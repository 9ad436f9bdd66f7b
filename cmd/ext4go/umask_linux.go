package main

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// processUmask returns the umask, as /proc/self/status shows it: setting
// it to read it (umask(2) has no other way) would change it for a moment
// for every goroutine of the process.
func processUmask() uint32 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Umask:"); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32); err == nil {
					return uint32(m)
				}
			}
		}
	}
	m := unix.Umask(0) // an old kernel: the brief change it is
	unix.Umask(m)
	return uint32(m)
}
