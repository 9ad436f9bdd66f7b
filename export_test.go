package ext4go

import (
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/mballoc"
)

// StaleWrites is the number of changes refused because they reached a node
// that no longer owned its inode (see lifetime.go); tests require zero.
func StaleWrites() int64 { return staleWrites.Load() }

// SetFault makes fsys ask fail before every block allocation ("block"),
// inode allocation ("inode"), metadata block read ("read") and file data
// write ("write"); when it says yes
// the step fails as it would for real: no space, or an I/O error. nil
// removes the hook.
func SetFault(fsys *FS, fail func(kind string) bool) {
	if fail == nil {
		fsys.fault.Store(nil)
		return
	}
	fn := func(kind string) error {
		if !fail(kind) {
			return nil
		}
		switch kind {
		case "block":
			return &mballoc.NoSpaceError{}
		case "inode":
			return syscall.ENOSPC
		}
		return syscall.EIO
	}
	fsys.fault.Store(&fn)
}

// InodeStat is the Stat of inode ino as fsys has it, named or not (an
// orphan's, in a read-only view of an image).
func InodeStat(fsys *FS, ino uint32) (*Stat, error) {
	n, err := fsys.inode(ino)
	if err != nil {
		return nil, err
	}
	return n.stat(fsys), nil
}

// OpenDeviceForBuild is OpenForBuild on d.
func OpenDeviceForBuild(d Device) (*FS, error) {
	return newFS(d, &Options{Writable: true}, true)
}

// OpenImageDevice opens an image file as a Device, writable or not.
func OpenImageDevice(path string, writable bool) (Device, error) {
	d, err := dev.Open(path, writable)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// DirtyTimes is the number of nodes whose timestamps wait in memory
// (Options.Lazytime).
func DirtyTimes(fsys *FS) int {
	if fsys.w == nil {
		return 0
	}
	return int(fsys.w.lazyTimes.count.Load())
}

// WriteExpiredTimes runs the periodic committer's lazytime step now: the
// times dirty for longer than Options.LazytimeExpire are written.
func WriteExpiredTimes(fsys *FS) error { return fsys.writeExpiredTimes() }

// SetNeighbourWait makes the copying of neighbours' lazy times wait up to
// d for a busy neighbour instead of skipping it (0: skip, the default).
func SetNeighbourWait(fsys *FS, d time.Duration) { fsys.neighbourWait = d }

// InodeTableBlock returns the inode-table block holding inode ino.
func InodeTableBlock(fsys *FS, ino uint32) uint64 {
	blk, _, _ := fsys.inodeLocation(ino)
	return blk
}

// LockInode takes the lock of the node of the named file, as an operation
// in progress on it does, and returns its release.
func LockInode(fsys *FS, name string) (unlock func(), err error) {
	n, err := fsys.resolve("lock", name, false)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	return n.mu.Unlock, nil
}

// Commit commits the running transaction as the periodic committer does,
// without its lazytime step.
func Commit(fsys *FS) error { return fsys.tm.Commit() }

// NeighbourCounts returns how many neighbours' lazy times writes carried,
// and how many busy neighbours they left.
func NeighbourCounts(fsys *FS) (copied, skipped int64) {
	return fsys.w.neighbourCopies.Load(), fsys.w.neighbourSkips.Load()
}

// DropRecentInodes empties the inode cache's rings of recently used
// nodes, so that the next garbage collection frees every node no one
// holds (as a busy filesystem's churn would).
func DropRecentInodes(fsys *FS) {
	for i := range fsys.cache.shards {
		s := &fsys.cache.shards[i]
		s.mu.Lock()
		clear(s.recent[:])
		s.mu.Unlock()
	}
}

// SetLazyTimesLimit sets how many nodes may have dirty times before the
// periodic committer writes them all (maxLazyTimes by default).
func SetLazyTimesLimit(fsys *FS, n int) { fsys.w.lazyTimesLimit.Store(int64(n)) }

// BlockCached reports whether the metadata cache holds a buffer of blk.
func BlockCached(fsys *FS, blk uint64) bool { return fsys.tm.Cached(blk) }

// Commits is the number of transactions handed to the committer so far.
func Commits(fsys *FS) int64 { return fsys.tm.Commits() }

// FreeClusters returns the free clusters and, of them, those freed by
// transactions that have not committed yet (unusable until they do).
func FreeClusters(fsys *FS) (free, pending int64) {
	return fsys.w.balloc.FreeClusters(), fsys.w.balloc.PendingFrees()
}

// Delayed reports fsys's delayed data: the clusters reserved for it and
// its metadata, and the bytes held in memory.
func Delayed(fsys *FS) (reserved, bytes int64) {
	return fsys.w.daReserved.Load(), fsys.w.daBytes.Load()
}

// DelayedBlocks is the number of delayed blocks of the open file f.
func DelayedBlocks(f *File) int64 { return f.n.delayedBlocks() }

// AllocStreams returns how many files the block allocator counts as
// streams (files with allocator state).
func AllocStreams(fsys *FS) int64 { return fsys.w.balloc.Streams() }
