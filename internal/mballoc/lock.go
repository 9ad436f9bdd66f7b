package mballoc

import (
	"github.com/ext4go/ext4go/internal/lockstat"
	"runtime"
	"time"
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

// goalSpins and goalWait bound how long lockSoon tries: at least
// goalSpins yields and goalWait. A holder that is running leaves within
// that (a group's critical sections take microseconds, tens under the race
// detector); one whose thread the kernel took away, or whose goroutine
// waits behind others for a processor, is gone for a scheduler tick or
// more, which is what no kernel spinlock holder ever is.
const (
	goalSpins = 4
	goalWait  = 200 * time.Microsecond
)

// lockSoon takes the lock if it becomes free soon (goalSpins, goalWait),
// and otherwise reports false holding nothing. Used where the caller has
// somewhere else to go: a goal it may give up.
func (l *groupLock) lockSoon() bool {
	var start time.Time
	for i := 0; ; i++ {
		if l.mu.TryLock() {
			return true
		}
		switch {
		case i == goalSpins:
			start = time.Now()
		case i > goalSpins && time.Since(start) > goalWait:
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
