package mballoc

import (
	"github.com/ext4go/ext4go/internal/lockstat"
	"runtime"
)

// groupLock guards a group's state (kernel: ext4_lock_group, a spinlock),
// and in the legacy configuration the single stream goal (s_md_lock).
// Its critical sections are short, so Lock first retries TryLock a few
// times, yielding the processor in between, and only then blocks. That
// keeps brief contention from parking goroutines, which costs a wake-up
// each and, once a waiter has waited a millisecond, turns sync.Mutex into
// FIFO hand-off mode where every unlock waits for a sleeper to be
// scheduled.
type groupLock struct {
	mu lockstat.Mutex[lockstat.MAllocGroup]
}

const groupLockSpins = 32

func (l *groupLock) Lock() {
	for i := 0; i < groupLockSpins; i++ {
		if l.mu.TryLock() {
			return
		}
		runtime.Gosched()
	}
	l.mu.Lock()
}

func (l *groupLock) TryLock() bool { return l.mu.TryLock() }

// goalSpins is how many times lockSoon yields before it gives up.
const goalSpins = 4

// lockSoon takes the lock if it becomes free within a few yields of the
// processor, and otherwise reports false holding nothing. A holder that is
// running leaves within that time (a group's critical sections are a few
// microseconds); one that is not (preempted, or descheduled with its
// thread) may not come back for milliseconds, and waiting for it is what
// a kernel spinlock never has to do. Used where the caller has somewhere
// else to go: a goal it may give up.
func (l *groupLock) lockSoon() bool {
	for i := 0; ; i++ {
		if l.mu.TryLock() {
			return true
		}
		if i == goalSpins {
			return false
		}
		runtime.Gosched()
	}
}
func (l *groupLock) Unlock() { l.mu.Unlock() }

// legacyLock is groupLock counted as the legacy stream goal's lock.
type legacyLock struct {
	mu lockstat.Mutex[lockstat.MAllocLegacy]
}

func (l *legacyLock) Lock()   { l.mu.Lock() }
func (l *legacyLock) Unlock() { l.mu.Unlock() }
