//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"sync"
	"sync/atomic"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// shardedMap is a map split over locked shards by key, so that requests
// on different nodes or handles do not share a lock.
type shardedMap[V any] struct {
	shards [64]struct {
		mu sync.Mutex
		m  map[uint64]V
	}
}

func (t *shardedMap[V]) init() {
	for i := range t.shards {
		t.shards[i].m = map[uint64]V{}
	}
}

// with runs fn on the shard of key, locked.
func (t *shardedMap[V]) with(key uint64, fn func(m map[uint64]V)) {
	s := &t.shards[key%uint64(len(t.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.m)
}

// drain removes every entry and passes it to fn (outside the locks).
func (t *shardedMap[V]) drain(fn func(V)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		vs := make([]V, 0, len(s.m))
		for k, v := range s.m {
			vs = append(vs, v)
			delete(s.m, k)
		}
		s.mu.Unlock()
		for _, v := range vs {
			fn(v)
		}
	}
}

// nodeTable maps node IDs to the Files holding their inodes, with the
// kernel's lookup counts.
type nodeTable struct{ shardedMap[*nodeRef] }

type nodeRef struct {
	f       *ext4go.File
	lookups uint64
}

// add counts n lookups of node id, whose inode f holds: f is kept if the
// node is new, else closed (the node has its File already).
func (t *nodeTable) add(id uint64, f *ext4go.File, n uint64) {
	known := false
	t.with(id, func(m map[uint64]*nodeRef) {
		if ref, ok := m[id]; ok {
			ref.lookups += n
			known = true
		} else {
			m[id] = &nodeRef{f: f, lookups: n}
		}
	})
	if known {
		f.Close()
	}
}

func (t *nodeTable) get(id uint64) (f *ext4go.File) {
	t.with(id, func(m map[uint64]*nodeRef) {
		if ref, ok := m[id]; ok {
			f = ref.f
		}
	})
	return f
}

func (t *nodeTable) forget(id, n uint64) {
	var f *ext4go.File
	t.with(id, func(m map[uint64]*nodeRef) {
		ref, ok := m[id]
		if !ok || id == fuse.FUSE_ROOT_ID {
			return
		}
		if ref.lookups <= n {
			delete(m, id)
			f = ref.f
		} else {
			ref.lookups -= n
		}
	})
	if f != nil {
		f.Close()
	}
}

// held is the number of nodes the kernel holds.
func (t *nodeTable) held() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (t *nodeTable) closeAll() { t.drain(func(r *nodeRef) { r.f.Close() }) }

// handleTable maps file handles to open Files.
type handleTable struct {
	next atomic.Uint64
	shardedMap[*handleRef]
}

type handleRef struct {
	f   *ext4go.File
	dir *dirStream
	// appending is an O_APPEND open: its writes go to the end of the
	// file, wherever the kernel thought that was.
	appending bool
}

func (t *handleTable) add(f *ext4go.File, appending bool) uint64 {
	fh := t.next.Add(1)
	t.with(fh, func(m map[uint64]*handleRef) { m[fh] = &handleRef{f: f, appending: appending} })
	return fh
}

func (t *handleTable) get(fh uint64) (f *ext4go.File) {
	if h := t.ref(fh); h != nil {
		return h.f
	}
	return nil
}

func (t *handleTable) ref(fh uint64) (h *handleRef) {
	t.with(fh, func(m map[uint64]*handleRef) { h = m[fh] })
	return h
}

func (t *handleTable) dir(fh uint64) (d *dirStream) {
	t.with(fh, func(m map[uint64]*handleRef) {
		h, ok := m[fh]
		if !ok {
			d = &dirStream{}
			return
		}
		if h.dir == nil {
			h.dir = &dirStream{}
		}
		d = h.dir
	})
	return d
}

func (t *handleTable) close(fh uint64) {
	var h *handleRef
	t.with(fh, func(m map[uint64]*handleRef) {
		h = m[fh]
		delete(m, fh)
	})
	if h != nil {
		h.f.Close()
	}
}

func (t *handleTable) closeAll() { t.drain(func(h *handleRef) { h.f.Close() }) }
