//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package main

import (
	"fmt"
	"io"
	"log/syslog"
	"sync"
)

// mountLog is where the mount daemon reports filesystem errors, as the
// kernel's printk does: stderr while the daemon has one (-f, or until the
// mount is live), syslog (daemon facility) once it is detached, when
// there is a syslog to write to.
type mountLog struct {
	mu     sync.Mutex
	stderr io.Writer
	sys    *syslog.Writer
}

func newMountLog(stderr io.Writer) *mountLog { return &mountLog{stderr: stderr} }

// detach sends later lines to syslog: stderr is /dev/null now.
func (l *mountLog) detach() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stderr = nil
	if w, err := syslog.New(syslog.LOG_DAEMON|syslog.LOG_ERR, "ext4go"); err == nil {
		l.sys = w
	}
}

func (l *mountLog) print(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stderr != nil {
		fmt.Fprintln(l.stderr, line)
	}
	if l.sys != nil {
		l.sys.Err(line)
	}
}
