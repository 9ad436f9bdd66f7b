package txn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// memDev is an in-memory device that counts writes.
type memDev struct {
	mu     sync.Mutex
	data   []byte
	writes int
	fail   bool
}

func (d *memDev) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail {
		return 0, fmt.Errorf("injected write failure")
	}
	d.writes++
	return copy(d.data[off:], p), nil
}

func (d *memDev) Sync() error { return nil }

func newTest(t *testing.T, nblocks int, opts Options) (*Manager, *memDev) {
	t.Helper()
	d := &memDev{data: make([]byte, nblocks*1024)}
	return NewManager(d, 1024, uint64(nblocks), &InPlace{Dev: d, BlockSize: 1024}, opts), d
}

func TestModifyCommit(t *testing.T) {
	m, d := newTest(t, 64, Options{})
	h, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Modify(3, func(b []byte) error { copy(b, "hello"); return nil }); err != nil {
		t.Fatal(err)
	}
	// Visible to readers before commit, not yet on the device.
	got, _ := m.Read(3)
	if !bytes.HasPrefix(got, []byte("hello")) {
		t.Fatalf("read before commit = %q", got[:5])
	}
	if bytes.HasPrefix(d.data[3*1024:], []byte("hello")) {
		t.Fatal("written before commit")
	}
	h.End()
	var committed []uint64
	m.OnCommit(func(tid uint64) { committed = append(committed, tid) })
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(d.data[3*1024:], []byte("hello")) {
		t.Fatal("not written by commit")
	}
	if len(committed) != 1 || committed[0] != h.TID() {
		t.Fatalf("hooks saw %v, want [%d]", committed, h.TID())
	}
}

func TestForget(t *testing.T) {
	m, d := newTest(t, 64, Options{})
	h, _ := m.Begin()
	h.Modify(5, func(b []byte) error { b[0] = 1; return nil })
	h.Forget(5)
	h.End()
	m.Commit()
	if d.data[5*1024] != 0 || d.writes != 0 {
		t.Fatal("forgotten block was written")
	}
}

func TestCreateDoesNotRead(t *testing.T) {
	m, d := newTest(t, 8, Options{})
	d.data[2*1024] = 0xff
	h, _ := m.Begin()
	h.Create(2, func(b []byte) error {
		if b[0] != 0 {
			t.Error("Create saw old content")
		}
		return nil
	})
	h.End()
}

func TestOutOfRange(t *testing.T) {
	m, _ := newTest(t, 8, Options{})
	h, _ := m.Begin()
	defer h.End()
	if err := h.Modify(8, func([]byte) error { return nil }); err == nil {
		t.Fatal("block past the end accepted")
	}
	if _, err := m.Read(100); err == nil {
		t.Fatal("read past the end accepted")
	}
}

func TestCommitFailureAborts(t *testing.T) {
	m, d := newTest(t, 8, Options{})
	h, _ := m.Begin()
	h.Modify(1, func(b []byte) error { b[0] = 1; return nil })
	h.End()
	d.fail = true
	if err := m.Commit(); err == nil {
		t.Fatal("commit did not fail")
	}
	if _, err := m.Begin(); err == nil {
		t.Fatal("Begin after a failed commit succeeded")
	}
}

// TestConcurrent runs many goroutines incrementing counters in shared
// blocks while others commit and read; every increment must survive.
func TestConcurrent(t *testing.T) {
	const workers, rounds, blocks = 8, 400, 16
	m, d := newTest(t, blocks, Options{MaxDirty: 4, CacheBlocks: 16})
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				h, err := m.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				nr := uint64((w + i) % blocks)
				h.Modify(nr, func(b []byte) error {
					v := binary.LittleEndian.Uint64(b[8*w:])
					binary.LittleEndian.PutUint64(b[8*w:], v+1)
					return nil
				})
				if err := h.End(); err != nil {
					t.Error(err)
				}
				if i%50 == 0 {
					m.Commit()
				}
				m.Read(uint64(i % blocks))
			}
		}(w)
	}
	wg.Wait()
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	for w := 0; w < workers; w++ {
		var sum uint64
		for nr := 0; nr < blocks; nr++ {
			sum += binary.LittleEndian.Uint64(d.data[nr*1024+8*w:])
		}
		if sum != rounds {
			t.Errorf("worker %d: %d increments on disk, want %d", w, sum, rounds)
		}
	}
}

// TestEvictionKeepsDirty fills a tiny cache: dirty blocks must never be
// evicted and reads must always see the newest content.
func TestEvictionKeepsDirty(t *testing.T) {
	m, _ := newTest(t, 4096, Options{CacheBlocks: 64, MaxDirty: 1 << 20})
	h, _ := m.Begin()
	for nr := uint64(0); nr < 4096; nr++ {
		h.Modify(nr, func(b []byte) error { binary.LittleEndian.PutUint64(b, nr+1); return nil })
	}
	h.End()
	for nr := uint64(0); nr < 4096; nr++ {
		b, _ := m.Read(nr)
		if got := binary.LittleEndian.Uint64(b); got != nr+1 {
			t.Fatalf("block %d = %d before commit", nr, got)
		}
	}
	m.Commit()
	for nr := uint64(0); nr < 4096; nr += 7 {
		b, _ := m.Read(nr)
		if got := binary.LittleEndian.Uint64(b); got != nr+1 {
			t.Fatalf("block %d = %d after commit", nr, got)
		}
	}
	total := 0
	for i := range m.cache.shards {
		total += len(m.cache.shards[i].m)
	}
	if limit := 2 * m.cache.perShard * cacheShards; total > limit {
		t.Fatalf("cache holds %d blocks after commit, limit %d", total, limit)
	}
}

// gateCommitter holds each commit until release is closed.
type gateCommitter struct {
	Committer
	entered chan struct{}
	release chan struct{}
}

func (g *gateCommitter) Commit(tid uint64, blocks []Block, revokes []uint64) error {
	g.entered <- struct{}{}
	<-g.release
	return g.Committer.Commit(tid, blocks, revokes)
}

// TestFullWaitsForEndCommit: a handle that finds the next transaction full
// while an End's commit of the previous one is still writing waits for
// that commit, and is woken when it ends (it used to wait for a wake-up
// that only commitFull gave, and a journal-bounded workload hung).
func TestFullWaitsForEndCommit(t *testing.T) {
	d := &memDev{data: make([]byte, 64*1024)}
	g := &gateCommitter{Committer: &InPlace{Dev: d, BlockSize: 1024}, entered: make(chan struct{}, 8), release: make(chan struct{})}
	m := NewManager(d, 1024, 64, g, Options{})
	m.SetLimits(1, 2)
	change := func(nr uint64) error {
		h, err := m.Begin()
		if err != nil {
			return err
		}
		if err := h.Modify(nr, func(b []byte) error { b[0]++; return nil }); err != nil {
			return err
		}
		return h.End()
	}
	endDone := make(chan error, 1)
	go func() { endDone <- change(1) }() // End commits: soft limit 1
	<-g.entered
	// The next transaction fills to the hard limit while that commit
	// writes, so the next Begin must wait for a commit.
	if err := change(2); err != nil {
		t.Fatal(err)
	}
	if err := change(3); err != nil {
		t.Fatal(err)
	}
	waiterDone := make(chan error, 1)
	go func() { waiterDone <- change(4) }()
	time.Sleep(20 * time.Millisecond) // the waiter reaches commitFull's wait
	close(g.release)
	if err := <-endDone; err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waiterDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a handle waiting for a full transaction was never woken")
	}
}

// TestCommitThrough: CommitThrough commits a running transaction, returns
// without a commit for one committed already, and for one whose commit is
// in progress waits for that commit (its hooks included) without making
// another.
func TestCommitThrough(t *testing.T) {
	d := &memDev{data: make([]byte, 64*1024)}
	g := &gateCommitter{Committer: &InPlace{Dev: d, BlockSize: 1024}, entered: make(chan struct{}, 8), release: make(chan struct{}, 8)}
	m := NewManager(d, 1024, 64, g, Options{})
	var mu sync.Mutex
	var hooked []uint64
	m.OnCommit(func(tid uint64) {
		mu.Lock()
		hooked = append(hooked, tid)
		mu.Unlock()
	})
	hooks := func() []uint64 {
		mu.Lock()
		defer mu.Unlock()
		return append([]uint64(nil), hooked...)
	}
	change := func(nr uint64) uint64 {
		t.Helper()
		h, err := m.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Modify(nr, func(b []byte) error { b[0]++; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := h.End(); err != nil {
			t.Fatal(err)
		}
		return h.TID()
	}
	tid := change(1)
	g.release <- struct{}{}
	if err := m.CommitThrough(tid); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if got := hooks(); len(got) != 1 || got[0] != tid {
		t.Fatalf("hooks %v after CommitThrough(%d), want [%d]", got, tid, tid)
	}
	if err := m.CommitThrough(tid); err != nil || len(hooks()) != 1 {
		t.Fatalf("CommitThrough of a committed transaction: %v, hooks %v", err, hooks())
	}
	// A commit in progress: CommitThrough waits for it and adds none.
	tid = change(2)
	committed := make(chan error, 1)
	go func() { committed <- m.Commit() }()
	<-g.entered
	through := make(chan error, 1)
	go func() { through <- m.CommitThrough(tid) }()
	select {
	case err := <-through:
		t.Fatalf("CommitThrough(%d) returned (%v) while its commit was writing", tid, err)
	case <-time.After(20 * time.Millisecond):
	}
	g.release <- struct{}{}
	if err := <-committed; err != nil {
		t.Fatal(err)
	}
	if err := <-through; err != nil {
		t.Fatal(err)
	}
	if got := hooks(); len(got) != 2 || got[1] != tid {
		t.Fatalf("hooks %v, want the commit of %d only", got, tid)
	}
	// A tid beyond every transaction commits the running one.
	tid = change(3)
	g.release <- struct{}{}
	if err := m.CommitThrough(^uint64(0)); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if got := hooks(); len(got) != 3 || got[2] != tid {
		t.Fatalf("hooks %v, want %d committed", got, tid)
	}
}

// TestCommitOnEnd: a handle marked CommitOnEnd ends only once its
// transaction has committed, after the other handles of the transaction
// have ended; the others end without waiting.
func TestCommitOnEnd(t *testing.T) {
	m, d := newTest(t, 64, Options{})
	var hooked atomic.Int64
	m.OnCommit(func(tid uint64) { hooked.Store(int64(tid)) })
	h1, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	h2, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	h3, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range []*Handle{h1, h2, h3} {
		if err := h.Modify(uint64(i+1), func(b []byte) error { b[0] = byte(i + 1); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	h1.CommitOnEnd()
	ended := make(chan error, 1)
	go func() { ended <- h1.End() }()
	if err := h2.End(); err != nil || hooked.Load() != 0 {
		t.Fatalf("a handle without CommitOnEnd: %v, committed %d", err, hooked.Load())
	}
	select {
	case err := <-ended:
		t.Fatalf("End after CommitOnEnd returned (%v) with a handle of its transaction open", err)
	case <-time.After(20 * time.Millisecond):
	}
	if err := h3.End(); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if hooked.Load() != int64(h1.TID()) || d.data[3*1024] != 3 {
		t.Fatalf("End after CommitOnEnd returned before transaction %d committed (hooks saw %d)", h1.TID(), hooked.Load())
	}
}

// TestBeginInto: a handle kept by its owner is begun again after End, in
// whatever transaction runs then; one still open is refused, not reset (a
// reset would lose the open count a commit waits on).
func TestBeginInto(t *testing.T) {
	m, d := newTest(t, 64, Options{})
	var h Handle
	var prev uint64
	for round := range 3 {
		if err := m.BeginInto(&h, 7); err != nil {
			t.Fatal(err)
		}
		if err := m.BeginInto(&h, 7); !errors.Is(err, ErrHandleOpen) {
			t.Fatalf("round %d: BeginInto of an open handle: %v, want ErrHandleOpen", round, err)
		}
		tid := h.TID()
		if err := h.Modify(3, func(b []byte) error { b[round] = byte(round + 1); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := h.End(); err != nil {
			t.Fatal(err)
		}
		if err := m.Commit(); err != nil {
			t.Fatal(err)
		}
		if d.data[3*1024+round] != byte(round+1) {
			t.Fatalf("round %d: change not committed", round)
		}
		if tid == prev {
			t.Fatalf("round %d: the handle is still in committed transaction %d", round, tid)
		}
		prev = tid
	}
}
