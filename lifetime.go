package ext4go

import (
	"fmt"
	"io/fs"
	"sync/atomic"
)

// An inode's lifetime, and the rules every operation follows so that no
// race can make it act on an inode that is no longer the one it found.
//
// References. A node is held by whoever found it: an open File, a path
// walk, an operation in progress. The inode cache holds nodes weakly, so
// while a node is held every lookup of its number returns it.
//
// Finding by name. A node is taken from a directory entry only while the
// directory's mu is held (shared suffices: lookups in resolve, exclusive in
// the changes), so the node is the entry's: an unlink, which holds the
// directory's mu exclusively, happens wholly before or wholly after.
//
// Finding by number (OpenInode, for file handles). There is no directory
// lock to hold, so the node's own mu and checks do the work: the node is
// taken from the cache or the inode table, then, under its mu, it must
// still be named and of the generation asked for. A new inode's node is in
// the cache before the inode table marks the inode in use (newInode), so a
// load by number never makes a second node of a live inode; while the node
// has no inode yet the cache answers that it is not there
// (fs.ErrNotExist: whoever asks holds a stale entry, as after an unlink).
//
// Freeing. An inode is freed only under its node's mu held exclusively,
// with no links and no open Files (dropLink, the last release of an
// orphan): freeInodeIn sets node.freed and drops the node from the cache
// before the number goes back to the inode allocator. From then on the
// node is stale: its number may belong to a new node of another file. An
// orphan is taken off its list and freed in one transaction handle, so a
// crash finds it either listed (the next writable open frees it, as the
// kernel's mount does: cleanupOrphans) or free, never both unlinked and
// unlisted.
//
// Acting. Every operation that changes an inode, or reads what it points
// at, takes the node's mu and then checks it (named for operations by
// path: not freed and still linked; alive for operations on an open File:
// not freed). An unlink that happened in between is seen there, and the
// operation fails with ENOENT (by path) or ErrClosed (a closed File) before
// it changes anything.
//
// Opening. A File counts as an open of its node (node.opens) from the
// moment it exists; opens is raised only under the node's mu after a
// named check, so an unlink either sees the open (and the inode becomes an
// orphan, freed by the last Close) or happened first (the open fails with
// ENOENT, or O_CREATE makes a new file).
//
// Lock order: directory before its entries' inodes (parents before
// children; two parents, or two children, in inode number order under
// writer.renameMu), inode locks before a transaction handle, the handle
// before the allocators' and the cache's locks.
//
// Delayed data (delalloc.go) belongs to its node's mu: written and
// flushed under it held exclusively, read under it shared. A flush holds
// the node's mu and then its own handle, as a write does, and takes no
// other inode's lock: writeback of one inode never waits for another's.
// The set of nodes holding delayed data is a leaf lock (per shard), never
// held while an inode lock is taken; flushing all of them (Sync, Close,
// the background writeback) locks one node at a time with nothing else
// held. The set holds its nodes strongly, and freeing an inode drops its
// delayed data (under its mu, as freeInodeIn runs) before the number can
// be reused.
//
// Lazy timestamps (Options.Lazytime, lazytime.go). A node whose times
// changed in memory only (timesDirty, set and cleared under its mu held
// exclusively) is held strongly by the writer's dirty set until its times
// reach the inode table, so it cannot die and be reloaded with older
// times. A write of an inode (setInode: the writer holds that node's mu
// exclusively, an open handle, and then the inode-table block's buffer
// lock) also copies into that block the times of the other dirty nodes
// of the block. For each such neighbour it only tries the neighbour's mu
// (TryLock); while it holds it, the neighbour cannot be changed, created
// or freed, and it writes the neighbour's current inode only if the
// neighbour is still dirty, has an inode (not being created), is not
// freed and its slot still holds its generation. A neighbour whose mu is
// taken (by anyone, shared or exclusive) is skipped: it is never waited
// for, because the writer already holds a handle and an inode lock, and
// waiting would be the lock-order inversion above (inode lock after a
// handle, or two inode locks out of order). Its times stay dirty and go
// with its own next write, a later neighbour's, Sync, File.Sync, Close or
// the periodic expiry, each of which takes its mu the ordinary way, before
// a handle.
//
// As a last line, setInode refuses to write through a freed node, or over
// an inode table slot whose generation is no longer the node's (a new
// owner wrote it): such a write would be the bug these rules exist to
// prevent, so it is counted (staleWrites, asserted zero by the tests) and
// reported as an error instead of corrupting a bystander.

// staleWrites counts refused writes through stale nodes (see above).
var staleWrites atomic.Int64

// errStale is an internal error: a change reached a node that no longer
// owns its inode number.
type errStale struct {
	ino  uint32
	what string
}

func (e *errStale) Error() string {
	return fmt.Sprintf("ext4go internal error: inode %d: %s (change refused)", e.ino, e.what)
}

func staleWrite(ino uint32, what string) error {
	staleWrites.Add(1)
	return &errStale{ino: ino, what: what}
}

// named reports whether n may still be acted on by name: not freed and
// still linked (inodes below s_first_ino keep their own counts). n.mu must
// be held, shared or exclusively.
func (f *FS) named(n *node) error {
	if n.freed.Load() {
		return fs.ErrNotExist
	}
	if in := n.in(); in.LinksCount == 0 && n.ino >= f.sb.FirstInode() {
		return fs.ErrNotExist
	}
	return nil
}

// openRef counts a new open File of n, if n is still named (see above).
func (f *FS) openRef(n *node) error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if err := f.named(n); err != nil {
		return err
	}
	n.opens.Add(1)
	return nil
}

// checkOpen refuses a closed filesystem.
func (f *FS) checkClosed(op, name string) error {
	if f.closed.Load() {
		return &fs.PathError{Op: op, Path: name, Err: fs.ErrClosed}
	}
	return nil
}
