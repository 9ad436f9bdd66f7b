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
func (l *groupLock) Unlock()       { l.mu.Unlock() }

// legacyLock is groupLock counted as the legacy stream goal's lock.
type legacyLock struct {
	mu lockstat.Mutex[lockstat.MAllocLegacy]
}

func (l *legacyLock) Lock()   { l.mu.Lock() }
func (l *legacyLock) Unlock() { l.mu.Unlock() }
