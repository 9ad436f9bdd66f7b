package ext4go_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestBlockBitmapsBatched: a group's block bitmap changed again in a
// transaction reaches its buffer, its descriptor's free count and its
// checksums only at the commit (writeDirtyBlockBitmaps). Many allocations
// and frees in one transaction, over every group including a short last
// one whose cluster count is not a multiple of 8: meanwhile FreeExtents
// and BlockGroups see the allocator's state (no file block reads as free,
// descriptor counts equal bitmap counts); the image a commit leaves is
// clean after a journal replay, as is the closed image. Each check fails
// against a mutant: no commit-time copy, readers of the buffer alone,
// descriptor counts from the descriptor alone.
func TestBlockBitmapsBatched(t *testing.T) {
	t.Run("journal", func(t *testing.T) { testBlockBitmapsBatched(t, false) })
	// Without a journal the commit writes the blocks home in place.
	t.Run("no-journal", func(t *testing.T) { testBlockBitmapsBatched(t, true) })
}

func testBlockBitmapsBatched(t *testing.T, noJournal bool) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	// 1 KiB blocks, 8192 per group: the last of 8 groups has 4095.
	testutil.Mke2fs(t, image, 60<<20, "-t", "ext4", "-b", "1024")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, NoJournal: noJournal, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const nfiles = 12
	files := make([]*ext4go.File, nfiles)
	for i := range files {
		if files[i], err = fsys.Create(fmt.Sprintf("f%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sizes := make([]int64, nfiles)
	check := func(when string) {
		t.Helper()
		groups, err := fsys.BlockGroups()
		if err != nil {
			t.Fatal(err)
		}
		var fromGroups uint64
		for _, g := range groups {
			fromGroups += uint64(g.FreeBlocks)
			if g.FreeBlocks != g.DescFreeBlocks {
				t.Fatalf("%s: group %d: bitmap has %d free blocks, descriptor %d", when, g.Index, g.FreeBlocks, g.DescFreeBlocks)
			}
		}
		type run struct{ start, n uint64 }
		var free []run
		var total uint64
		if err := fsys.FreeExtents(func(s, n uint64) error {
			free = append(free, run{s, n})
			total += n
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if total != fromGroups {
			t.Fatalf("%s: free extents hold %d blocks, groups %d", when, total, fromGroups)
		}
		for i, f := range files {
			exts, err := f.Extents()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				for _, r := range free {
					if e.Physical < r.start+r.n && r.start < e.Physical+e.Length {
						t.Fatalf("%s: f%d's blocks %d+%d read as free (free run %d+%d)", when, i, e.Physical, e.Length, r.start, r.n)
					}
				}
			}
		}
	}
	commits := ext4go.Commits(fsys)
	for round := 0; round < 40; round++ {
		for k := 0; k < 30; k++ {
			i := rng.IntN(nfiles)
			switch op := rng.IntN(10); {
			case op < 7 && sizes[i] < 8<<20:
				n := int64(1+rng.IntN(40)) << 10
				if err := files[i].Fallocate(0, sizes[i], n); err != nil {
					t.Fatalf("round %d: fallocate f%d: %v", round, i, err)
				}
				sizes[i] += n
			case op < 9:
				sizes[i] = rng.Int64N(sizes[i] + 1)
				if err := files[i].Truncate(sizes[i]); err != nil {
					t.Fatalf("round %d: truncate f%d: %v", round, i, err)
				}
			default:
				// Punch a hole: frees in the middle of a run.
				if sizes[i] > 8<<10 {
					off := rng.Int64N(sizes[i]/1024-4) << 10
					if err := files[i].Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, off, 3<<10); err != nil {
						t.Fatalf("round %d: punch f%d: %v", round, i, err)
					}
				}
			}
		}
		check(fmt.Sprintf("round %d", round))
		if round == 20 {
			if err := ext4go.Commit(fsys); err != nil {
				t.Fatal(err)
			}
			crashed := filepath.Join(dir, "after-commit")
			copyFile(t, image, crashed)
			if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", crashed).CombinedOutput(); err != nil {
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
					t.Fatalf("e2fsck journal replay: %v\n%s", err, out)
				}
			}
			testutil.RequireFsckClean(t, crashed)
			os.Remove(crashed)
		}
	}
	// Groups used: the test is only worth its name if the last one was.
	groups, _ := fsys.BlockGroups()
	last := groups[len(groups)-1]
	if last.Blocks%8 == 0 || last.FreeBlocks == last.Blocks {
		t.Errorf("last group: %d blocks, %d free: the short group was not exercised", last.Blocks, last.FreeBlocks)
	}
	if got := ext4go.Commits(fsys) - commits; got > 3 {
		t.Logf("%d commits ran (early commits for pending frees)", got)
	}
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("the kernel's check of the bitmaps is skipped: %s", why)
		return
	}
	// The kernel reads back the sizes written, and allocates from the
	// bitmaps and checksums the commits wrote (it verifies a group's
	// bitmap checksum when it loads the group): most of the free space,
	// so most groups, the short last one too.
	mp := testutil.Mount(t, image, false)
	for i, want := range sizes {
		st, err := os.Stat(filepath.Join(mp, fmt.Sprintf("f%d", i)))
		if err != nil || st.Size() != want {
			t.Fatalf("kernel: f%d: %v, size %d, want %d", i, err, st.Size(), want)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(mp, &st); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, int64(st.Bavail)*int64(st.Bsize)*3/4)
	if err := os.WriteFile(filepath.Join(mp, "kernel"), big, 0o644); err != nil {
		t.Fatalf("kernel write over ext4go's bitmaps: %v", err)
	}
	testutil.Unmount(t, mp)
	testutil.RequireFsckClean(t, image)
}

// TestBlockBitmapsBatchedRacingCommits: writers allocating and freeing in
// shared groups race a goroutine that commits in a loop (each commit
// copies the allocator's bitmaps into their buffers while no handle is
// open) and one that reads BlockGroups and FreeExtents; afterwards the
// image is clean and every group's bitmap count equals its descriptor's.
func TestBlockBitmapsBatchedRacingCommits(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 60<<20, "-t", "ext4", "-b", "1024")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 4; w++ {
		f, err := fsys.Create(fmt.Sprintf("w%d", w))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			rng := rand.New(rand.NewPCG(uint64(w), 9))
			var size int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch op := rng.IntN(10); {
				case op < 6 && size < 4<<20:
					n := int64(1+rng.IntN(24)) << 10
					if err = f.Fallocate(0, size, n); err == nil {
						size += n
					}
				case op < 9:
					size = rng.Int64N(size + 1)
					err = f.Truncate(size)
				default:
					if size > 8<<10 {
						err = f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, rng.Int64N(size/1024-4)<<10, 2<<10)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	// A commit loop and a reader, each until stop.
	repeat := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	repeat(func() error { return ext4go.Commit(fsys) })
	repeat(func() error {
		if _, err := fsys.BlockGroups(); err != nil {
			return err
		}
		return fsys.FreeExtents(func(s, n uint64) error { return nil })
	})
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	groups, err := fsys.BlockGroups()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.FreeBlocks != g.DescFreeBlocks {
			t.Errorf("group %d: bitmap has %d free blocks, descriptor %d", g.Index, g.FreeBlocks, g.DescFreeBlocks)
		}
	}
	t.Logf("%d commits", ext4go.Commits(fsys))
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}
