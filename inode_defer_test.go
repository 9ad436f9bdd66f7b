//go:build linux

package ext4go_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// The hot paths leave all but a file's first inode write of a transaction
// to the commit (inode_defer.go). These tests try to catch the inode table
// behind the in-memory inode: a node dropped from the cache before the
// commit, a freed inode's number reused within the transaction, and
// commits racing writers, creators and removers of one inode-table block.

func deferImage(t *testing.T) (string, *ext4go.FS) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-N", "16384")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	return image, fsys
}

func statSize(t *testing.T, fsys *ext4go.FS, name string) int64 {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func inoOf(t *testing.T, fsys *ext4go.FS, name string) uint32 {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*ext4go.Stat).Ino
}

// TestDeferredInodeOutlivesCache: a file changed many times in one
// transaction and then left alone is not re-read from its (older)
// inode-table slot, however hard the cache is churned before the commit;
// after the commit the disk has the last change.
func TestDeferredInodeOutlivesCache(t *testing.T) {
	image, fsys := deferImage(t)
	f, err := fsys.Create("hot")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 50; i++ {
		if err := f.Fallocate(0, 0, int64(i)*8192); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(123457); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("tail"), 200000); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := int64(200004)
	// More nodes than the cache keeps strongly, and collections, so that
	// an unreferenced node would be dropped and its inode read again.
	for i := 0; i < 5000; i++ {
		if err := fsys.WriteFile(fmt.Sprintf("c%d", i), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	if got := statSize(t, fsys, "hot"); got != want {
		t.Fatalf("size before the commit %d, want %d (the node was read again from an older slot)", got, want)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	out := testutil.Debugfs(t, image, "stat hot")
	if !strings.Contains(out, fmt.Sprintf("Size: %d", want)) {
		t.Fatalf("debugfs does not see the last size %d:\n%s", want, out)
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestDeferredInodeFreedAndReused: a file whose inode waits for the commit
// is removed and its number taken by a new file in the same transaction:
// the commit writes the new file's inode, not the freed one over it.
func TestDeferredInodeFreedAndReused(t *testing.T) {
	image, fsys := deferImage(t)
	reused := 0
	for round := 0; round < 20; round++ {
		old := fmt.Sprintf("old%d", round)
		f, err := fsys.Create(old)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 8; i++ {
			if err := f.Fallocate(0, 0, int64(i)*4096); err != nil {
				t.Fatal(err)
			}
		}
		ino := inoOf(t, fsys, old)
		f.Close()
		if err := fsys.Remove(old); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("new%d", round)
		g, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if inoOf(t, fsys, name) == ino {
			reused++
		}
		if _, err := g.Write([]byte(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := g.Write([]byte("+more")); err != nil {
			t.Fatal(err)
		}
		g.Close()
		if round%5 == 4 {
			if err := ext4go.Commit(fsys); err != nil {
				t.Fatal(err)
			}
		}
	}
	if reused == 0 {
		t.Log("no inode number was reused within a transaction; the test shows less")
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	fsys = openImage(t, image)
	for round := 0; round < 20; round++ {
		name := fmt.Sprintf("new%d", round)
		b, err := fsys.ReadFile(name)
		if err != nil || string(b) != name+"+more" {
			t.Fatalf("%s reads %q, %v", name, b, err)
		}
		if _, err := fsys.Stat(fmt.Sprintf("old%d", round)); !os.IsNotExist(err) {
			t.Fatalf("old%d: %v", round, err)
		}
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
	t.Logf("%d of 20 numbers reused within their transaction", reused)
}

// TestDeferredInodesRacingCommits: writers of files that share
// inode-table blocks change their sizes while others create and remove
// files of the same blocks and a goroutine commits without pause, so that
// first writes, deferred ones and commits interleave every way. At the end
// e2fsck is clean, no write was refused as stale, and the reopened sizes
// are the writers' last.
func TestDeferredInodesRacingCommits(t *testing.T) {
	image, fsys := deferImage(t)
	const writers = 6
	files := make([]*ext4go.File, writers)
	for i := range files {
		f, err := fsys.Create(fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = f
	}
	var final [writers]atomic.Int64
	var stop atomic.Bool
	var wg, neighbours sync.WaitGroup
	errs := make(chan error, writers+4)
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for k := 0; k < 3000; k++ {
				var err error
				size := int64(rng.IntN(64)) * 4096
				switch rng.IntN(3) {
				case 0:
					err = f.Fallocate(0, 0, size+4096)
					if err == nil && size+4096 > final[i].Load() {
						final[i].Store(size + 4096)
					}
				case 1:
					err = f.Truncate(size)
					final[i].Store(size)
				case 2:
					_, err = f.WriteAt([]byte{byte(k)}, size)
					if err == nil && size+1 > final[i].Load() {
						final[i].Store(size + 1)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", i, err)
					return
				}
			}
		}()
	}
	// Neighbours come and go in the same inode-table blocks.
	for c := 0; c < 2; c++ {
		neighbours.Add(1)
		go func() {
			defer neighbours.Done()
			for k := 0; !stop.Load(); k++ {
				name := fmt.Sprintf("n%d-%d", c, k%8)
				if k%2 == 0 {
					if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
						errs <- err
						return
					}
				} else if err := fsys.Remove(fmt.Sprintf("n%d-%d", c, (k-1)%8)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	commits := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			if err := ext4go.Commit(fsys); err != nil {
				errs <- err
				return
			}
			commits++
		}
	}()
	// The writers end first; then the neighbours and the committer.
	wg.Wait()
	stop.Store(true)
	neighbours.Wait()
	<-done
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	fsys = openImage(t, image)
	for i := range final {
		if got, want := statSize(t, fsys, fmt.Sprintf("w%d", i)), final[i].Load(); got != want {
			t.Errorf("w%d: size %d on disk, the writer left %d", i, got, want)
		}
	}
	// The kernel reads the same sizes from the inode table.
	if ok, reason := testutil.CanMount(); !ok {
		t.Logf("no kernel read-back: %s", reason)
	} else {
		mp := testutil.Mount(t, image, true)
		for i := range final {
			fi, err := os.Stat(filepath.Join(mp, fmt.Sprintf("w%d", i)))
			if err != nil || fi.Size() != final[i].Load() {
				t.Errorf("kernel: w%d: %v, size %d, want %d", i, err, fi.Size(), final[i].Load())
			}
		}
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
	t.Logf("%d commits raced the writers", commits)
}

// TestPendingFreesKickCommit: freeing a large share of the free space,
// which stays unusable until its transaction commits, commits early
// rather than at the next periodic commit (kickIfPending), and a workload
// of truncates and refills keeps its files in one extent.
func TestPendingFreesKickCommit(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 256<<20, "-t", "ext4", "-b", "4096")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Fallocate(0, 0, 128<<20); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	before := ext4go.Commits(fsys)
	if err := f.Truncate(0); err != nil { // frees 128 MiB of about 240
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for ext4go.Commits(fsys) == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ext4go.Commits(fsys) == before {
		t.Fatal("freeing 128 of 240 MiB did not commit before the hourly commit")
	}
	// Truncate and refill, two files side by side: with the frees made
	// usable early, each fill stays one extent nearly always.
	var wg sync.WaitGroup
	multi := make([]int, 2)
	for i := range multi {
		g, err := fsys.Create(fmt.Sprintf("fill%d", i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer g.Close()
			for round := 0; round < 200; round++ {
				for off := int64(0); off < 4<<20; off += 64 << 10 {
					if err := g.Fallocate(0, off, 64<<10); err != nil {
						t.Error(err)
						return
					}
				}
				if exts, _ := g.Extents(); len(exts) > 4 {
					multi[i]++
				}
				if err := g.Truncate(0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range multi {
		if n > 20 {
			t.Errorf("fill%d: %d of 200 fills in more than 4 extents", i, n)
		}
	}
	f.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestPendingFreesCommitAtHalf: with no periodic committer, a truncate
// that leaves half of the free space or more waiting for its transaction's
// commit returns only once that commit has made it usable (the freeing
// handle commits as it ends); one that leaves less does not commit.
func TestPendingFreesCommitAtHalf(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	bs := int64(fsys.BlockSize())
	small, err := fsys.Create("small")
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Fallocate(0, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	before := ext4go.Commits(fsys)
	if err := small.Truncate(0); err != nil {
		t.Fatal(err)
	}
	free, pending := ext4go.FreeClusters(fsys)
	if pending != (1<<20)/bs || ext4go.Commits(fsys) != before {
		t.Fatalf("freeing 1 MiB with %d clusters free: %d clusters pending, %d commits; want %d pending, none",
			free, pending, ext4go.Commits(fsys)-before, (1<<20)/bs)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	big, err := fsys.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	free, _ = ext4go.FreeClusters(fsys)
	if err := big.Fallocate(0, 0, free*3/4*bs); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	before = ext4go.Commits(fsys)
	if err := big.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if free, pending := ext4go.FreeClusters(fsys); pending != 0 || ext4go.Commits(fsys) == before {
		t.Fatalf("a truncate leaving %d of %d free clusters waiting returned before a commit released them", pending, free)
	}
	small.Close()
	big.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestAllocRetriesAfterCommits: an allocation that runs out of space while
// frees wait for their commit commits and tries again, up to three times
// (kernel: ext4_should_retry_alloc): here every failed try sees another
// file's blocks freed into the running transaction, as a concurrent
// truncate would free them, and the third retry succeeds.
func TestAllocRetriesAfterCommits(t *testing.T) {
	image, fsys := deferImage(t)
	var others []*ext4go.File
	for i := 0; i < 3; i++ {
		o, err := fsys.Create(fmt.Sprintf("other%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := o.Fallocate(0, 0, 256<<10); err != nil {
			t.Fatal(err)
		}
		others = append(others, o)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	fails := 0
	ext4go.SetFault(fsys, func(kind string) bool {
		if kind != "block" || fails == len(others) {
			return false
		}
		// Blocks freed in the running transaction, and no space now.
		if err := others[fails].Truncate(0); err != nil {
			t.Error(err)
		}
		fails++
		return true
	})
	err = f.Fallocate(0, 0, 64<<10)
	ext4go.SetFault(fsys, nil)
	if err != nil {
		t.Fatalf("fallocate after %d failed tries: %v", fails, err)
	}
	if fails != 3 {
		t.Fatalf("%d failed tries, want 3", fails)
	}
	for _, o := range append(others, f) {
		o.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestDeferredInodesRacingUnlink: writers keep changing open files whose
// names another goroutine removes and creates again, so that orphans with
// inodes waiting for the commit, their frees at close and new inodes of the
// same inode-table blocks (often the same numbers) meet in one
// transaction. The files the remover made last hold its content, e2fsck is
// clean and no write was refused as stale.
func TestDeferredInodesRacingUnlink(t *testing.T) {
	image, fsys := deferImage(t)
	const names = 4
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			for !stop.Load() {
				f, err := fsys.OpenFile(fmt.Sprintf("n%d", rng.IntN(names)), os.O_RDWR, 0)
				if err != nil {
					continue // removed just now
				}
				for k := 0; k < 20; k++ {
					// Never below the first block, which holds the
					// remover's content.
					size := int64(1+rng.IntN(32)) * 4096
					if k%2 == 0 {
						err = f.Fallocate(0, 0, size)
					} else {
						err = f.Truncate(size)
					}
					if err != nil {
						errs <- err
						f.Close()
						return
					}
				}
				f.Close()
			}
		}()
	}
	last := make([]string, names)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := 0; k < 600; k++ {
			i := k % names
			name := fmt.Sprintf("n%d", i)
			fsys.Remove(name)
			content := fmt.Sprintf("made %d", k)
			if err := fsys.WriteFile(name, []byte(content), 0o644); err != nil {
				errs <- err
				return
			}
			last[i] = content
			if k%50 == 0 {
				if err := ext4go.Commit(fsys); err != nil {
					errs <- err
					return
				}
			}
		}
		stop.Store(true)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	fsys = openImage(t, image)
	for i, want := range last {
		b, err := fsys.ReadFile(fmt.Sprintf("n%d", i))
		if err != nil {
			t.Fatal(err)
		}
		// A writer may have opened the last file and changed its size,
		// never below its first block: the remover's content is there.
		if len(b) < len(want) || string(b[:len(want)]) != want {
			t.Errorf("n%d begins %q, want %q", i, b[:min(len(b), len(want))], want)
		}
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}
