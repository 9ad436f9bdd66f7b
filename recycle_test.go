//go:build linux

package ext4go

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/testutil"
)

// Every test of the package runs with recycled inodes poisoned: a reader
// anywhere (stat, block maps, the commit's re-encode, undo, lazytime)
// that held an inode the hot paths reused would see poisonSize.
func init() { poisonRecycled = true }

// TestRecycledInodeNeverSeen tries to catch the hot paths reusing an
// inode version a reader still holds (node.in, node.publish). Writers
// run fallocate2's steps, overwrites, truncates and keep-size fallocates
// on two files; holders take the current inode the way every lock-free
// reader does, keep it for a while and check that it did not change under
// them; others stat, read and list extents, which build block maps from
// the versions they take. Every recycled inode is poisoned the moment it
// is recycled, so a holder that still had it sees the poison, and -race
// sees the writes. Meanwhile the names race too: "a" is renamed away and
// back, "b" is unlinked half way while its writer goes on with the open
// file, and scratch files come and go beside bystanders. At the end each
// file holds what its writer's model says (b read through its handle),
// e2fsck is clean, and ext4go and the kernel read a and the bystanders
// back exactly. The test also checks that recycling happened, many times,
// or it proves nothing.
func TestRecycledInodeNeverSeen(t *testing.T) {
	for _, lazy := range []bool{false, true} {
		name := "plain"
		if lazy {
			name = "lazytime"
		}
		t.Run(name, func(t *testing.T) { testRecycledInodeNeverSeen(t, lazy) })
	}
}

func testRecycledInodeNeverSeen(t *testing.T, lazy bool) {
	recycledCount.Store(0)
	var steps atomic.Uint32
	hook := func(int) {
		// Now and then a pause between the steps of node.in and
		// node.publish, so that every order of them comes up.
		if steps.Add(1)%8 == 0 {
			runtime.Gosched()
		}
	}
	recycleStepHook.Store(&hook)
	defer recycleStepHook.Store(nil)

	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 128<<20, "-t", "ext4")
	fsys, err := Open(image, &Options{Writable: true, Lazytime: lazy, CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	staleBefore := staleWrites.Load()
	bystanders := map[string][]byte{}
	for k := range 8 {
		data := make([]byte, 1000+k*5000)
		rng := rand.New(rand.NewPCG(uint64(k), 3))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		name := fmt.Sprintf("by%d", k)
		if err := fsys.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
		bystanders[name] = data
	}
	names := []string{"a", "b"}
	models := make([][]byte, len(names)) // each writer's, until wg.Wait
	files := make([]*File, len(names))
	for i, name := range names {
		if files[i], err = fsys.Create(name); err != nil {
			t.Fatal(err)
		}
	}
	duration := 1500 * time.Millisecond
	if testing.Short() {
		duration = 300 * time.Millisecond
	}
	deadline := time.Now().Add(duration)
	var wg sync.WaitGroup
	var holds, changed atomic.Int64
	fail := func(format string, args ...any) {
		changed.Add(1)
		t.Errorf(format, args...)
	}
	r := make([]*File, len(names)) // the reader's, opened before the names move
	for i, name := range names {
		if r[i], err = fsys.OpenFile(name, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range files {
		wg.Add(1)
		go func() { // the writer
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			const step, limit = 8 << 10, 1 << 20
			var off int64 // the size, always
			model := make([]byte, 0, limit)
			defer func() { models[i] = model }()
			buf := make([]byte, 4096)
			resize := func(size int64) {
				if int(size) > len(model) {
					model = append(model, make([]byte, int(size)-len(model))...)
				}
				model, off = model[:size], size
			}
			for time.Now().Before(deadline) {
				var err error
				switch k := rng.IntN(100); {
				case k < 70:
					if off >= limit {
						err = f.Truncate(0)
						resize(0)
						break
					}
					err = f.Fallocate(0, off, step)
					resize(off + step)
				case k < 80:
					if off > 0 {
						pos := rng.Int64N(off/4096) * 4096
						for j := range buf {
							buf[j] = byte(rng.Uint32())
						}
						_, err = f.WriteAt(buf, pos)
						copy(model[pos:], buf)
					}
				case k < 85:
					size := rng.Int64N(limit/step) * step
					err = f.Truncate(size)
					resize(size)
				case k < 91: // punch or zero a range inside the file, keeping the size
					if off > 0 {
						pos := rng.Int64N(off)
						n := 1 + rng.Int64N(min(off-pos, 3*4096))
						mode := FallocPunchHole | FallocKeepSize
						if k >= 88 {
							mode = FallocZeroRange | FallocKeepSize
						}
						err = f.Fallocate(mode, pos, n)
						clear(model[pos : pos+n])
					}
				case k < 95: // append
					if off+4096 <= limit {
						for j := range buf {
							buf[j] = byte(rng.Uint32())
						}
						_, err = f.WriteAt(buf, off)
						resize(off + 4096)
						copy(model[off-4096:], buf)
					}
				default:
					err = f.Fallocate(FallocKeepSize, limit, step)
				}
				if err != nil {
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		}()
		for h := range 2 {
			wg.Add(1)
			go func() { // a holder
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(i), uint64(h)))
				for time.Now().Before(deadline) && changed.Load() == 0 {
					p := f.n.in()
					was := *p
					if was.Size == poisonSize {
						fail("file %s: a reader took a recycled inode", names[i])
					}
					for range rng.IntN(64) {
						runtime.Gosched()
					}
					if p.Size != was.Size || p.Blocks != was.Blocks || p.Block != was.Block ||
						p.Mtime != was.Mtime || p.Ctime != was.Ctime || p.LinksCount != was.LinksCount {
						fail("file %s: an inode held by a reader changed: size %#x -> %#x, links %d -> %d",
							names[i], was.Size, p.Size, was.LinksCount, p.LinksCount)
					}
					holds.Add(1)
					if h == 1 && rng.IntN(4) == 0 {
						// Unwatched stretches, in which the writer
						// recycles; holder 0 hammers.
						time.Sleep(100 * time.Microsecond)
					}
				}
			}()
		}
	}
	wg.Add(1)
	go func() { // stat, read and extents: block maps built from taken versions
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 9))
		buf := make([]byte, 8192)
		for time.Now().Before(deadline) && changed.Load() == 0 {
			i := rng.IntN(len(names))
			fi, err := fsys.Stat(names[i])
			if err != nil && !errors.Is(err, fs.ErrNotExist) { // renamed or unlinked meanwhile
				t.Error(err)
				return
			}
			if err == nil && fi.Size() > 2<<20 {
				fail("stat %s: size %#x", names[i], fi.Size())
			}
			if _, err := r[i].ReadAt(buf, rng.Int64N(1<<20)); err != nil && !errors.Is(err, io.EOF) {
				t.Errorf("read %s: %v", names[i], err)
				return
			}
			if _, err := r[i].Extents(); err != nil {
				t.Errorf("extents of %s: %v", names[i], err)
				return
			}
		}
	}()
	wg.Add(1)
	go func() { // the names race: a moves away and back, b goes half way
		defer wg.Done()
		half := time.Now().Add(duration / 2)
		for k := 0; time.Now().Before(deadline); k++ {
			if err := fsys.Rename("a", "a.moved"); err != nil {
				t.Errorf("rename a: %v", err)
				return
			}
			if err := fsys.Rename("a.moved", "a"); err != nil {
				t.Errorf("rename a back: %v", err)
				return
			}
			scratch := fmt.Sprintf("scratch%d", k%4)
			if err := fsys.WriteFile(scratch, []byte(scratch), 0o644); err != nil {
				t.Errorf("scratch: %v", err)
				return
			}
			if err := fsys.Remove(scratch); err != nil {
				t.Errorf("scratch: %v", err)
				return
			}
			if !half.IsZero() && time.Now().After(half) {
				if err := fsys.Remove("b"); err != nil {
					t.Errorf("unlink b: %v", err)
					return
				}
				half = time.Time{}
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	wg.Wait()
	// b, unlinked, is read through its writer's handle before it goes.
	if got, err := io.ReadAll(io.NewSectionReader(files[1], 0, 2<<20)); err != nil || !bytes.Equal(got, models[1]) {
		t.Errorf("b (unlinked, open): %d bytes, %v; its writer's model has %d", len(got), err, len(models[1]))
	}
	for _, f := range append(files, r...) {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	// Writers, orphans and lazy neighbours all raced: no change may have
	// reached a node that no longer owned its inode.
	if n := staleWrites.Load() - staleBefore; n != 0 {
		t.Errorf("%d changes reached nodes that no longer owned their inode", n)
	}
	testutil.RequireFsckClean(t, image)
	want := map[string][]byte{"a": models[0]}
	for name, data := range bystanders {
		want[name] = data
	}
	readBack := func(who string, read func(string) ([]byte, error)) {
		for name, data := range want {
			if got, err := read(name); err != nil || !bytes.Equal(got, data) {
				t.Errorf("%s: %s: %d bytes, %v; want %d", who, name, len(got), err, len(data))
			}
		}
		if _, err := read("b"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: b, unlinked: %v", who, err)
		}
	}
	ro, err := Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	readBack("ext4go", ro.ReadFile)
	ro.Close()
	mp := testutil.Mount(t, image, true)
	readBack("kernel", func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(mp, name)) })
	t.Logf("%d inodes recycled, %d holds checked", recycledCount.Load(), holds.Load())
	if recycledCount.Load() < 100 || holds.Load() < 1000 {
		t.Errorf("too little happened to show anything: %d recycled, %d holds", recycledCount.Load(), holds.Load())
	}
}

// TestRecycleNeedsUnseen: the rules of node.publish one by one, without
// goroutines.
func TestRecycleNeedsUnseen(t *testing.T) {
	n := newNode(1, &inode.Inode{Size: 1})
	var held *inode.Inode
	for _, step := range []struct {
		size     uint64
		hot      bool
		take     bool // a reader takes the current inode first
		recycled bool // the inode replaced becomes the spare
		why      string
	}{
		{2, true, false, false, "the first inode (not from a hot change) was recycled"},
		{3, true, false, true, "an unseen hot inode was not recycled"},
		{4, true, true, false, "an inode a reader took was recycled"},
		// The mark covers the version after the one taken too (a reader
		// cannot tell them apart: see node.in).
		{5, true, false, false, "the inode after the one a reader took was recycled"},
		{6, false, false, true, "an unseen hot inode replaced by a plain change was not recycled"},
		{7, true, false, false, "an inode a plain change published was recycled"},
	} {
		prev := n.inLocked()
		if step.take {
			held = n.in()
		}
		n.publish(&inode.Inode{Size: step.size}, step.hot)
		if (n.spare == prev) != step.recycled {
			t.Fatalf("publishing inode %d: %s", step.size, step.why)
		}
		n.spare = nil
	}
	if held.Size != 3 {
		t.Fatalf("the held inode changed: size %#x", held.Size)
	}
}

// TestRecycleInterleavings runs one reader (node.in) against one writer
// (node.publish of a hot inode) in every order of their steps: the reader
// pauses once after loading, the writer after storing and after raising
// seq (recycleStepHook), so each run is a sequence of 2 reader and 3
// writer segments, 10 in all. Whatever the order, the inode the reader
// returns is not one the writer recycled (poisoned), then or after two
// more changes. The writer then publishes twice in a row (5 segments, 21
// orders), so a reader may straddle two changes: the second must not
// recycle the version the first published if the reader took it.
func TestRecycleInterleavings(t *testing.T) {
	for publishes := 1; publishes <= 2; publishes++ {
		for _, order := range recycleOrders(2, 2*publishes+1) {
			t.Run(fmt.Sprintf("%dx/%s", publishes, order), func(t *testing.T) { testRecycleOrder(t, order, publishes) })
		}
	}
}

// recycleOrders lists every interleaving of r reader and w writer segments.
func recycleOrders(r, w int) []string {
	var orders []string
	var gen func(prefix string, r, w int)
	gen = func(prefix string, r, w int) {
		if r == 0 && w == 0 {
			orders = append(orders, prefix)
			return
		}
		if r > 0 {
			gen(prefix+"R", r-1, w)
		}
		if w > 0 {
			gen(prefix+"W", r, w-1)
		}
	}
	gen("", r, w)
	return orders
}

func testRecycleOrder(t *testing.T, order string, publishes int) {
	n := newNode(1, &inode.Inode{Size: 1})
	for size := uint64(2); size <= 3; size++ {
		n.publish(&inode.Inode{Size: size}, true)
	}
	// Each side waits for its turn at the start and at each step.
	const reader, writer = 0, 1
	var resume, paused [2]chan struct{}
	var done [2]chan *inode.Inode
	for i := range 2 {
		resume[i], paused[i], done[i] = make(chan struct{}), make(chan struct{}), make(chan *inode.Inode, 1)
	}
	hook := func(step int) {
		side := writer
		if step == stepReaderLoaded {
			side = reader
		}
		paused[side] <- struct{}{}
		<-resume[side]
	}
	recycleStepHook.Store(&hook)
	defer recycleStepHook.Store(nil)
	go func() {
		<-resume[reader]
		done[reader] <- n.in()
	}()
	go func() {
		<-resume[writer]
		for i := range publishes {
			n.publish(&inode.Inode{Size: 4 + uint64(i)}, true)
		}
		done[writer] <- nil
	}()
	finished := [2]bool{}
	var got *inode.Inode
	// step lets side run to its next pause or its end.
	step := func(side int) {
		if finished[side] {
			return
		}
		resume[side] <- struct{}{}
		select {
		case <-paused[side]:
		case p := <-done[side]:
			finished[side] = true
			if side == reader {
				got = p
			}
		}
	}
	for _, c := range order {
		step(map[rune]int{'R': reader, 'W': writer}[c])
	}
	for !finished[reader] || !finished[writer] { // a reader that retries
		step(reader)
		step(writer)
	}
	recycleStepHook.Store(nil)
	check := func(when string) {
		if got.Size < 3 || got.Size > 3+uint64(publishes) {
			t.Fatalf("order %s: %s, the reader's inode has size %#x (recycled)", order, when, got.Size)
		}
	}
	check("at once")
	for size := 4 + uint64(publishes); size <= 5+uint64(publishes); size++ {
		n.publish(&inode.Inode{Size: size}, true)
		if n.spare == got {
			t.Fatalf("order %s: the reader's inode became the spare", order)
		}
		n.spare = nil
	}
	check("after two more changes")
}
