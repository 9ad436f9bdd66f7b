//go:build amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le

package fusefs

// Scheduling of the ring threads under Options.UringIdle (opt-in).
//
// A ring thread answers on its caller's CPU, and wakes the caller there
// while it is still running itself. The scheduler puts a woken task on an
// idle CPU when the one it slept on is busy (kernel: select_idle_sibling),
// so with a CPU free a synchronous caller moves to it at every request,
// and every move costs an interrupt between CPUs and the other CPU's way
// out of idle. A CPU that runs only SCHED_IDLE tasks counts as idle there
// (sched_idle_cpu): a ring thread under SCHED_IDLE keeps its caller on
// its CPU. The caller preempts the thread at once, and the thread finishes
// its way back into io_uring_enter when the caller next waits. On the
// 2-CPU VM of the benchmarks a request that does nothing (fstatfs) took
// 16-18 µs against 24-30. An untar of /usr/local/go moved tar between CPUs
// 575 times instead of 28.7k, but took as long (its time goes to the
// server's work), and in scripts/bench-mount.sh fallocate2 and fio's random
// writes did not gain beyond the noise either (alternating pairs had shown
// 16%).
//
// SCHED_IDLE yields to every normal task, so a thread keeps it only for
// requests whose work is small and bounded (lightRequest): lookups,
// attributes, extended attributes, creates, reads and writes up to
// lightIO. For the others (larger I/O, a truncate or unlink that may free
// a large file, fsync, listings, ...) it takes the normal policy for the
// request and gives it up after: two system calls, for a request that
// costs far more.
//
// The gain needs an idle CPU to move to; without one SCHED_IDLE only costs
// the threads their share of the CPU (a request that does nothing took
// 30-38 µs against 23 µs with a busy loop on every CPU). So the transport
// reads the machine's CPU times every idleWatchInterval, and the threads
// take SCHED_IDLE only while the CPUs were idle for at least half a CPU's
// time in the last interval (idleNow; a thread follows it after its next
// request).
//
// Leaving SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows the
// thread's nice value; where it is refused (checked once, on a thread of
// its own) or the daemon does not run under the normal policy, the
// threads keep the policy they have.
//
// Why it is opt-in (a review's findings, not yet mended): the watcher
// looks at the machine, but a thread is pinned to one CPU; with that CPU
// kept busy by other work while another idles, the thread waits behind
// that work, at a weight of 3 against 1024: for its wake-up, for the
// reply, and for its way back to the normal policy. Meanwhile it holds a
// Go P, so a collection's stop-the-world waits for it too. And a light
// request can hold what others wait for: a transaction handle (a commit
// waits for it) or the commit itself (txn commits inline at its limits).
// A mend would judge each thread by its own run-queue delay
// (/proc/thread-self/schedstat), let the watcher move starved threads
// back by thread id, and serve requests that may commit under the normal
// policy.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

const (
	schedNormal = 0 // SCHED_OTHER
	schedIdle   = 5

	// lightIO is the largest read or write served under SCHED_IDLE:
	// copying it takes a few microseconds.
	lightIO = 128 << 10
	// lightFallocate is the longest range allocated under SCHED_IDLE.
	lightFallocate = 1 << 20
	// idleWatchInterval is how often the transport looks at how idle
	// the CPUs were.
	idleWatchInterval = 250 * time.Millisecond

	// kernel: enum fuse_opcode
	opLookup      = 1
	opGetattr     = 3
	opSetattr     = 4
	opReadlink    = 5
	opSymlink     = 6
	opMknod       = 8
	opMkdir       = 9
	opLink        = 13
	opOpen        = 14
	opRead        = 15
	opWrite       = 16
	opStatfs      = 17
	opSetxattr    = 21
	opGetxattr    = 22
	opListxattr   = 23
	opRemovexattr = 24
	opFlush       = 25
	opOpendir     = 27
	opReleasedir  = 29
	opAccess      = 34
	opCreate      = 35
	opFallocate   = 43
	opStatx       = 52
)

// lightRequest says whether the request whose in header and first
// argument are in h (a ring entry's header), with payload bytes of
// payload, does small and bounded work.
func lightRequest(h []byte, payload int) bool {
	le := binary.LittleEndian
	arg := h[uringOpIn:uringEntInOut]
	switch le.Uint32(h[4:]) {
	case opLookup, opGetattr, opReadlink, opSymlink, opMknod, opMkdir, opLink, opOpen,
		opStatfs, opSetxattr, opGetxattr, opListxattr, opRemovexattr, opFlush,
		opOpendir, opReleasedir, opAccess, opStatx:
		return true
	case opCreate: // fuse_create_in.flags: an existing file may be truncated
		return le.Uint32(arg[0:])&unix.O_TRUNC == 0
	case opSetattr: // fuse_setattr_in.valid: a new size may free a large file
		return le.Uint32(arg[0:])&fuse.FATTR_SIZE == 0
	case opRead: // fuse_read_in.size
		return le.Uint32(arg[16:]) <= lightIO
	case opWrite:
		return payload <= lightIO
	case opFallocate: // fuse_fallocate_in.length
		return le.Uint64(arg[16:]) <= lightFallocate
	}
	return false
}

// ringPolicy switches the calling (locked) thread between SCHED_IDLE and
// the normal policy, keeping its nice value.
type ringPolicy struct {
	on           bool // the thread may take SCHED_IDLE
	isIdle       bool // it is under SCHED_IDLE
	idle, normal unix.SchedAttr
}

// start readies p for a thread under the normal policy, and puts the
// thread under SCHED_IDLE if idle.
func (p *ringPolicy) start(idle bool) {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil || a.Policy != schedNormal {
		return
	}
	p.normal = unix.SchedAttr{Policy: schedNormal, Nice: a.Nice}
	p.idle = unix.SchedAttr{Policy: schedIdle, Nice: a.Nice}
	p.on = true
	p.set(idle)
}

// set puts the thread under SCHED_IDLE (idle) or the normal policy, if it
// is not already. Failing to take SCHED_IDLE costs speed only. Failing to
// leave it (the process lost CAP_SYS_NICE, or its RLIMIT_NICE was lowered,
// since idleReversible) leaves the thread under it for good: p then stops
// trying, rather than fail a system call on every request.
func (p *ringPolicy) set(idle bool) {
	if !p.on || idle == p.isIdle {
		return
	}
	attr := &p.normal
	if idle {
		attr = &p.idle
	}
	if unix.SchedSetAttr(0, attr, 0) != nil {
		if !idle {
			p.on = false
		}
		return
	}
	p.isIdle = idle
}

// readCPUTimes returns the machine's CPU time so far, all of it and the
// idle part (idle and iowait), in clock ticks (kernel: /proc/stat, the
// "cpu" line). Tests replace it.
var readCPUTimes = func() (total, idle uint64, err error) {
	b := make([]byte, 256)
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	n, err := f.Read(b)
	f.Close()
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b[:n], []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0, 0, errors.New("fusefs: /proc/stat: no cpu line")
	}
	// user nice system idle iowait irq softirq steal (guest time is in
	// user already)
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, 0, errors.New("fusefs: /proc/stat: bad cpu line")
		}
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return total, idle, nil
}

// someCPUIdle says whether the CPUs (cpus of them) were idle for at least
// half a CPU's time between two readings of readCPUTimes; ok is false when
// the readings say nothing (no time passed, a counter went back).
func someCPUIdle(total0, idle0, total1, idle1 uint64, cpus int) (idle, ok bool) {
	if total1 <= total0 || idle1 < idle0 {
		return false, false
	}
	return (idle1-idle0)*2*uint64(max(cpus, 1)) >= total1-total0, true
}

// watchIdle keeps t.idleNow up to date until done is closed. Where the
// CPU times cannot be read it turns SCHED_IDLE off for good.
func (t *uringTransport) watchIdle(cpus int, done <-chan struct{}) {
	total0, idle0, err := readCPUTimes()
	if err != nil {
		t.idleNow.Store(false)
		return
	}
	tick := time.NewTicker(idleWatchInterval)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		total, idle, err := readCPUTimes()
		if err != nil {
			t.idleNow.Store(false)
			return
		}
		if v, ok := someCPUIdle(total0, idle0, total, idle, cpus); ok {
			t.idleNow.Store(v)
		}
		total0, idle0 = total, idle
	}
}

// idleReversible says whether a thread of this process may leave
// SCHED_IDLE for the normal policy again. It tries on a thread of its own,
// which ends with the check whatever policy it is left with.
func idleReversible() bool {
	ok := make(chan bool)
	go func() {
		// Never unlocked: the thread exits with the goroutine.
		runtime.LockOSThread()
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil || a.Policy != schedNormal {
			ok <- false
			return
		}
		idle := unix.SchedAttr{Policy: schedIdle, Nice: a.Nice}
		normal := unix.SchedAttr{Policy: schedNormal, Nice: a.Nice}
		ok <- unix.SchedSetAttr(0, &idle, 0) == nil && unix.SchedSetAttr(0, &normal, 0) == nil
	}()
	return <-ok
}
