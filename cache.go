package ext4go

import "sync"

// inodeCache keeps recently read inodes so path walks and directory
// listings do not re-read the inode table. It is sharded by inode number so
// concurrent readers of different files rarely share a lock, and bounded:
// a full shard is emptied (cheap, and fair enough for a read cache).
type inodeCache struct {
	shards [inodeCacheShards]inodeShard
}

const (
	inodeCacheShards   = 64
	inodeCachePerShard = 1024
)

type inodeShard struct {
	mu sync.Mutex // protects m
	m  map[uint32]*node
	_  [48]byte // keep neighbouring shards' locks on different cache lines
}

func (c *inodeCache) get(ino uint32) *node {
	s := &c.shards[ino%inodeCacheShards]
	s.mu.Lock()
	n := s.m[ino]
	s.mu.Unlock()
	return n
}

func (c *inodeCache) put(n *node) {
	s := &c.shards[n.ino%inodeCacheShards]
	s.mu.Lock()
	if s.m == nil || len(s.m) >= inodeCachePerShard {
		s.m = make(map[uint32]*node, 64)
	}
	s.m[n.ino] = n
	s.mu.Unlock()
}
