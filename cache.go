package ext4go

import (
	"runtime"
	"weak"

	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/pad"
	"github.com/ext4go/ext4go/internal/shard"
)

// inodeCache maps inode numbers to nodes. It holds nodes weakly, so a node
// lives exactly as long as someone uses it (an open File, a path walk, a
// change in progress) plus a short while in a small per-shard ring of
// recently used nodes that keeps hot inodes from being re-read. While a
// node is alive every lookup of its inode returns it, which is what makes
// in-memory inode changes safe: there is never a second, stale copy.
//
// Sharded by inode number so concurrent users of different inodes rarely
// share a lock. A shard's lock is held while an inode is loaded, so two
// loads of one inode cannot race (and a load cannot miss a change made
// through a node that died in between: changes reach the inode table
// buffer before the node can die).
type inodeCache struct {
	_      [pad.Line * pad.On]byte // keeps shard 0 off the fields before
	shards [inodeCacheShards]inodeShard
}

const (
	inodeCacheShards = 64
	inodeRecent      = 64 // strongly held recent nodes per shard
)

type inodeShard struct {
	mu     lockstat.Mutex[lockstat.MFSInodeCache] // protects m, recent, next
	m      map[uint32]weak.Pointer[node]
	recent [inodeRecent]*node
	next   int
	_      [(pad.Line - 8) * pad.On]byte // neighbours a line apart (pad.Apart)
}

func (c *inodeCache) shard(ino uint32) *inodeShard {
	return &c.shards[shard.Index(uint64(ino), inodeCacheShards)]
}

// getOrLoad returns the node of ino, calling load (with the shard locked)
// if there is none alive.
func (c *inodeCache) getOrLoad(ino uint32, load func() (*node, error)) (*node, error) {
	s := c.shard(ino)
	s.mu.Lock()
	defer s.mu.Unlock()
	if wp, ok := s.m[ino]; ok {
		if n := wp.Value(); n != nil {
			if n.in() == nil {
				// Being created (newInode): whoever asks holds a stale
				// reference (an entry read before the old inode of this
				// number was freed), as if the name had just gone.
				return nil, errBeingCreated
			}
			s.touch(n)
			return n, nil
		}
	}
	n, err := load()
	if err != nil {
		return nil, err
	}
	s.insert(n)
	return n, nil
}

// put registers a node made for a newly allocated inode.
func (c *inodeCache) put(n *node) {
	s := c.shard(n.ino)
	s.mu.Lock()
	s.insert(n)
	s.mu.Unlock()
}

// insert adds n; s.mu must be held.
func (s *inodeShard) insert(n *node) {
	if s.m == nil {
		s.m = map[uint32]weak.Pointer[node]{}
	}
	wp := weak.Make(n)
	s.m[n.ino] = wp
	s.touch(n)
	// The cleanup must not reach n, or n is never collected (see
	// runtime.AddCleanup); the shard reaches it through recent and the FS,
	// so it is held weakly here. A strong reference kept every node, and
	// so every FS with all it caches, alive forever.
	ws := weak.Make(s)
	runtime.AddCleanup(n, func(ino uint32) {
		s := ws.Value()
		if s == nil {
			return // the FS is gone
		}
		s.mu.Lock()
		if cur, ok := s.m[ino]; ok && cur.Value() == nil {
			delete(s.m, ino)
		}
		s.mu.Unlock()
	}, n.ino)
}

// touch keeps n alive for a while; s.mu must be held.
func (s *inodeShard) touch(n *node) {
	if s.recent[(s.next+inodeRecent-1)%inodeRecent] == n {
		return
	}
	s.recent[s.next] = n
	s.next = (s.next + 1) % inodeRecent
}

// forget drops node old of a freed inode. Only old itself goes: once the
// inode is free its number may already belong to a new node, which must
// stay the only one of its inode.
func (c *inodeCache) forget(old *node) {
	s := c.shard(old.ino)
	s.mu.Lock()
	if wp, ok := s.m[old.ino]; ok && wp.Value() == old {
		delete(s.m, old.ino)
	}
	for i, n := range s.recent {
		if n == old {
			s.recent[i] = nil
		}
	}
	s.mu.Unlock()
}
