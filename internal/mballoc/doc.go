// Package mballoc is ext4's multi-block allocator (kernel fs/ext4/mballoc.c
// as of Linux 6.17, with the 2022 fragmentation fixes and the 2025
// scalability series), written for a Go filesystem: it chooses where file
// data and metadata go, keeps per-group buddy state built from the block
// bitmaps, preallocates for streaming writers and for groups of small
// files, and defers the reuse of freed blocks until the transaction that
// freed them has committed.
//
// The filesystem plugs in through Store (bitmaps and descriptor free
// counts; the on-disk format stays its business) and Tx (the journal
// transaction of an allocation or free). MemStore is an in-memory Store for
// tests and benchmarks.
//
// # Units
//
// Internally everything is counted in clusters (blocks without bigalloc)
// relative to a group. The API speaks in blocks: requests are rounded up to
// whole clusters and extents start on cluster boundaries.
//
// # Invariants
//
// For every loaded group, under its lock:
//
//	buddy bitmap = on-disk bitmap | unused parts of the group's preallocations
//	             | extents freed by uncommitted transactions | bits past the group end
//
// except that file data a transaction allocated and frees again goes back
// to the buddy at once (FreeReuseFresh, fresh.go): no committed state
// gave it to anyone.
//
// and the buddy's orders and counters are what generating it from that
// bitmap would give. The on-disk bitmap copy equals what the Store was told.
// A cluster is handed out only if its buddy bit was clear, so no cluster is
// allocated twice, and a cluster leaves the buddy's used set only through a
// free, a preallocation discard or a commit, so none is lost.
//
// # Locking
//
// Each group has a mutex (padded with its hot fields to cache lines) that
// protects its buddy, on-disk copy, pending frees and preallocation list,
// and is held across the Store call that persists a change. Scanners at
// the cheap criteria only TryLock groups and skip busy ones; the last
// criterion blocks. The free/fragments/largest-order copies and the order
// indexes are atomics read without the group lock; a scanner re-checks a
// group once it holds the lock. Stream goals (one per inode hash slot) are
// atomics; filesystem free counters are sharded atomics. There is no global
// lock on the allocation or free path.
//
// # Progress when a lock holder is not running
//
// A kernel spinlock holder cannot be preempted; a goroutine holding a
// group lock can, and its thread with it, for milliseconds. So no path
// spins on a lock whose holder may not be running, and none rescans the
// same groups hoping it came back. The rule, for every lock an allocation
// meets:
//
//   - Where the allocation has somewhere else to go at no cost to the
//     file, it does not wait: the scanners TryLock and pass over a busy
//     group at every criterion; a locality group's preallocation, the
//     spread placement and the best extent seen are given up once the
//     lock stayed busy for a few yields and goalWait
//     (groupLock.lockSoon), and the search goes on without them; a busy
//     locality group hands the request to the next free one.
//   - The search ends with one bounded wait: when nothing was found and
//     busy groups were passed over, the last criterion goes over the
//     groups once more, blocking on each lock (flagStrict). Nothing is
//     retried in a loop: each criterion walks each group at most once.
//   - Where giving up would cut the file for good (its own continuation,
//     the goal extent, and its own inode preallocation) or there is
//     nowhere else to go (a free, a discard, a goal-only request, the
//     allocator's own locality group), it waits as the kernel does, but
//     through groupLock.Lock: a few yields, then parked, so that the
//     waiter sleeps instead of spinning while the holder is off the CPU,
//     and its processor runs other goroutines.
//
// A stream that found its goal busy moves its stream goal to where it got
// space, so the next allocation does not meet the sleeping holder again.
// TestSleepingHolder holds a group's lock across allocations and checks
// that the ones with somewhere else to go finish while it is held, that
// all finish once it is let go, and that the groups each looks at stay
// bounded.
//
// Other locks, always taken in this order, never two groups at once:
// locality group (held across a small-file allocation, and taken only
// after the file's own preallocation was tried: that may wait) -> inode
// preallocation list (briefly, never while taking a group lock) -> group ->
// inode list / locality-group list / deferred-free shard. A Store is called
// with one group lock held and must not call back.
//
// Allocations for one inode must be serialized by the caller (the kernel's
// i_data_sem): the allocator assumes a logical block it is asked for is not
// mapped yet. DiscardInodePrealloc must be called on the last close of a
// file written to and before its blocks are truncated or punched, as the
// kernel does; Free also discards inode preallocations it overlaps.
//
// # Differences from the kernel
//
// A group's bitmap is read the first time the group is needed, at any
// criterion (the kernel prefetches bitmaps and skips uninitialised groups
// at the cheap criteria); until then the group is filed in the indexes as
// if its free space were one run. Locality groups are picked by inode
// number, not by CPU. RAID stripe alignment, discard (trim), reserved-root
// and quota accounting are not done here.
//
// Three placement policies are ext4go's own, each a tunable that, off,
// gives the kernel's placement: Tunables.StreamSpread places concurrent
// streams apart (spread.go); Tunables.HoleFit serves a small-file
// (locality-group) request from the smallest hole that holds it before a
// locality-group preallocation, so that the holes removed and truncated
// small files leave are filled again instead of piling up (holefit.go);
// Tunables.RunStart places a power-of-two data request at the start of the
// free run holding the aligned chunk the power-of-two criterion found, not
// at the chunk, so that no hole is cut in front of it (scan.go). Aging a
// filesystem (ext4go bench age) shows what the last two are for: the
// kernel's placement leaves free space in small pieces.
//
// # Legacy configuration
//
// Config.Legacy makes the allocator behave like ext4 before the 2025
// series, for comparison: one stream goal (group and start) under a mutex
// that deferred frees also take, blocking group locks while scanning, and
// order indexes whose per-order locks are taken on each change and lookup
// and that are walked from group 0 rather than from the goal.
package mballoc
