//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestReplayMatchesKernel: images the kernel left with a journal to
// recover (a copy taken while mounted read-write, after a random
// workload and a syncfs: committed transactions not all checkpointed)
// read through ext4go's in-memory replay exactly as the kernel shows them
// after its own recovery of the same copy; the read leaves the image
// byte for byte as it was.
func TestReplayMatchesKernel(t *testing.T) {
	testutil.RequireMount(t)
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k", []string{"-t", "ext4", "-b", "1024"}},
		{"32bit-nocsum", []string{"-t", "ext4", "-O", "^64bit,^metadata_csum"}},
		{"ext3", []string{"-t", "ext3"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			// Under load the kernel's writeback may write the
			// metadata home before the copy is taken, which leaves
			// nothing to replay: try again on a fresh image.
			for attempt := 1; ; attempt++ {
				if replayMatchesKernel(t, cfg.args, attempt < 3) {
					return
				}
				t.Logf("attempt %d: the kernel had written the workload home before the copy; again", attempt)
			}
		})
	}
}

// replayMatchesKernel is one try of TestReplayMatchesKernel. With mayRetry
// it returns false, testing nothing, when the copy needs no replay to
// show the workload.
func replayMatchesKernel(t *testing.T, args []string, mayRetry bool) bool {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, args...)
	crashed := filepath.Join(t.TempDir(), "crashed")
	mp := testutil.Mount(t, image, false, "commit=300")
	kernelWorkload(t, mp)
	// fsync commits the running transaction (all of the workload)
	// to the journal, but leaves the home locations of the
	// metadata to the checkpoint, which has not happened: the copy
	// is an image after a crash.
	f, err := os.OpenFile(filepath.Join(mp, "moved"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("fsynced")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(crashed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if mayRetry {
		stale, err := ext4go.Open(crashed, &ext4go.Options{IgnoreJournal: true})
		if err != nil {
			t.Fatalf("the stale state does not open: %v", err)
		}
		opts := testutil.MountCompareOptions()
		opts.Meta = meta
		same := len(testutil.DiffFS(stale, mp, opts)) == 0
		stale.Close()
		if same {
			testutil.Unmount(t, mp)
			return false
		}
	}
	testutil.Unmount(t, mp)
	if !strings.Contains(testutil.Dumpe2fs(t, crashed, "-h"), "needs_recovery") {
		t.Fatal("the copy does not need recovery")
	}
	compareRecovery(t, crashed, b, true)
	return true
}

// kernelWorkload changes a mounted filesystem in the ways that log the
// most kinds of metadata: creates, appends, renames, links, xattrs,
// truncates, deletes (revokes), a directory grown to an htree.
func kernelWorkload(t *testing.T, mp string) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(s string) string { return filepath.Join(mp, s) }
	must(os.Mkdir(p("big"), 0o755))
	for i := 0; i < 300; i++ {
		must(os.WriteFile(p(fmt.Sprintf("big/entry-%04d", i)), pattern(int64(i), 0, i*37%5000), 0o644))
	}
	for i := 0; i < 300; i += 3 {
		must(os.Remove(p(fmt.Sprintf("big/entry-%04d", i))))
	}
	must(os.Mkdir(p("d"), 0o700))
	for i := 0; i < 20; i++ {
		must(os.WriteFile(p(fmt.Sprintf("d/f%d", i)), pattern(int64(i)+100, 0, 70000), 0o600))
	}
	must(os.Rename(p("d/f1"), p("moved")))
	must(os.Link(p("d/f2"), p("link")))
	must(unix.Setxattr(p("d/f3"), "user.k", pattern(5, 0, 300), 0))
	must(os.Truncate(p("d/f4"), 1234))
	must(os.Symlink(strings.Repeat("t", 200), p("slow-link")))
	must(os.RemoveAll(p("d/f5")))
	f, err := os.OpenFile(p("d/f6"), os.O_APPEND|os.O_WRONLY, 0)
	must(err)
	_, err = f.Write(pattern(9, 0, 100000))
	must(err)
	must(f.Close())
}

// compareRecovery checks ext4go's recovery of crashed (whose bytes are b)
// against the kernel's: the read-only open replays in memory without
// writing and shows the kernel's tree, which differs from the stale
// on-disk one; the writable open (replay written home, orphans
// processed) leaves an e2fsck-clean image with the kernel's tree.
func compareRecovery(t *testing.T, crashed string, b []byte, mustDiffer bool) {
	t.Helper()
	compareRecoveryStamped(t, crashed, b, mustDiffer, time.Time{})
}

// compareRecoveryStamped is compareRecovery where times from stamped on
// were set by the replays (see testutil.CompareOptions.StampedAfter).
func compareRecoveryStamped(t *testing.T, crashed string, b []byte, mustDiffer bool, stamped time.Time) {
	t.Helper()
	before := fileHash(t, crashed)
	ours, err := ext4go.Open(crashed, nil)
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	r := ours.Replay()
	if r == nil {
		t.Fatal("no replay reported")
	}
	t.Logf("replayed %d transactions, %d blocks, %d revoked copies skipped", r.Transactions, r.Blocks, r.Revoked)
	if fileHash(t, crashed) != before {
		t.Fatal("the read-only replay wrote to the image")
	}
	// The kernel's recovery of another copy.
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.WriteFile(theirs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	kmp := testutil.Mount(t, theirs, false)
	opts := testutil.MountCompareOptions()
	opts.Meta = meta
	if !stamped.IsZero() {
		// The kernel stamps with its coarse clock (a tick behind
		// time.Now) and, in 128-byte inodes, to the second.
		stamped = stamped.Add(-time.Second).Truncate(time.Second)
	}
	opts.StampedAfter = stamped
	testutil.CompareFS(t, ours, kmp, opts)
	ours.Close()
	// The test means something only if the stale on-disk state
	// differs from what the kernel recovers.
	stale, err := ext4go.Open(crashed, &ext4go.Options{IgnoreJournal: true})
	if err != nil {
		t.Fatalf("the stale state does not open: %v", err)
	}
	if len(testutil.DiffFS(stale, kmp, opts)) == 0 {
		if mustDiffer {
			t.Error("the on-disk state without the journal already equals the kernel's recovery: nothing was tested")
		} else {
			t.Log("the on-disk state without the journal equals the kernel's recovery (the replay changed no file)")
		}
	}
	stale.Close()

	// A writable open writes the replay home, resets the journal
	// and clears needs_recovery: e2fsck is then clean and the tree
	// is still the kernel's.
	w, err := ext4go.Open(crashed, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatalf("writable open of the crashed copy: %v", err)
	}
	if w.Replay() == nil {
		t.Error("the writable open reports no replay")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(testutil.Dumpe2fs(t, crashed, "-h"), "needs_recovery") {
		t.Error("needs_recovery is still set after the writable open")
	}
	testutil.RequireFsckClean(t, crashed)
	after := openImage(t, crashed)
	testutil.CompareFS(t, after, kmp, opts)
	after.Close()
	// And the kernel reads back what the writable open wrote.
	testutil.CompareDirs(t, testutil.Mount(t, crashed, true), kmp, opts)
}

// EXT4_IOC_SHUTDOWN and its flag that commits the journal first.
const (
	ext4IocShutdown   = 0x8004587D // _IOR('X', 125, __u32)
	ext4GoingLogFlush = 1
)

// shutDown stops the kernel's filesystem mounted at mp (root open on it)
// with ext4's shutdown ioctl and flag, and returns a copy of the image as
// the shutdown left it, with its bytes. The device is read before the
// unmount, which would still write the block device's dirty buffers (the
// checkpoint the crash never made) home; root and the files in also are
// closed before the unmount.
func shutDown(t *testing.T, root *os.File, mp, image string, flag int, also ...*os.File) (string, []byte) {
	t.Helper()
	if err := unix.IoctlSetPointerInt(int(root.Fd()), ext4IocShutdown, flag); err != nil {
		t.Fatalf("shutdown ioctl: %v", err)
	}
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	root.Close()
	for _, f := range also {
		f.Close()
	}
	testutil.Unmount(t, mp)
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.WriteFile(crashed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return crashed, b
}

// TestKernelShutdown: the kernel's own crash, made with ext4's shutdown
// ioctl (as xfs_io -x -c shutdown): committed transactions are left in
// the journal, needs_recovery set, and a file unlinked while open on the
// orphan list or in the orphan file. ext4go's recovery must match the
// kernel's, and its writable open must finish the orphan as the kernel
// does at mount.
func TestKernelShutdown(t *testing.T) {
	testutil.RequireMount(t)
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4"}},
		{"orphan_file", []string{"-t", "ext4", "-O", "orphan_file"}},
		{"1k-32bit", []string{"-t", "ext4", "-b", "1024", "-O", "^64bit"}},
		{"ext3", []string{"-t", "ext3"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, cfg.args...)
			mp := testutil.Mount(t, image, false)
			kernelWorkload(t, mp)
			// Open, write and unlink: an orphan the kernel frees at its
			// next mount.
			orphan, err := os.Create(filepath.Join(mp, "orphan"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := orphan.Write(pattern(77, 0, 300000)); err != nil {
				t.Fatal(err)
			}
			if err := orphan.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(orphan.Name()); err != nil {
				t.Fatal(err)
			}
			root, err := os.Open(mp)
			if err != nil {
				t.Fatal(err)
			}
			crashed, b := shutDown(t, root, mp, image, ext4GoingLogFlush, orphan)
			if !strings.Contains(testutil.Dumpe2fs(t, crashed, "-h"), "needs_recovery") {
				t.Fatal("the shut down image does not need recovery")
			}
			if cfg.name != "orphan_file" {
				// The test means something only if the replay has an
				// orphan to finish.
				ro, err := ext4go.Open(crashed, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ro.Info().FirstOrphan == 0 {
					t.Error("no orphan after the replay")
				}
				ro.Close()
			}
			compareRecovery(t, crashed, b, true)
		})
	}
}

// TestJournalLifecycle: a writable open of a journalled image marks it
// needs_recovery (state clean, as the kernel), commits go to the log
// (s_start set, the sequence moving), and Close leaves the journal empty
// with the sequence after the last transaction, needs_recovery cleared,
// e2fsck clean. With NoJournal the journal is not touched and the state
// is "not clean" while open.
func TestJournalLifecycle(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	peek := func() (*ext4go.JournalInfo, string) {
		t.Helper()
		b, err := os.ReadFile(image)
		if err != nil {
			t.Fatal(err)
		}
		ro, err := ext4go.NewFS(bytes.NewReader(b), int64(len(b)), &ext4go.Options{IgnoreJournal: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		j, err := ro.Journal()
		if err != nil || j == nil {
			t.Fatalf("journal: %v, %v", j, err)
		}
		return j, testutil.Dumpe2fs(t, image, "-h")
	}
	j0, _ := peek()
	fsys := openRW(t, image)
	j1, h1 := peek()
	if !strings.Contains(h1, "needs_recovery") || !strings.Contains(h1, "state:         clean") {
		t.Errorf("while open: want needs_recovery and a clean state:\n%s", h1)
	}
	if err := fsys.WriteFile("a", pattern(1, 0, 50000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	j2, _ := peek()
	if j2.Start == 0 || j2.Transactions == 0 {
		t.Errorf("after Sync the log holds nothing: %+v (before: %+v)", j2, j1)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	j3, h3 := peek()
	if j3.Start != 0 || !jbd2SeqAfter(j3.Sequence, j0.Sequence) || strings.Contains(h3, "needs_recovery") {
		t.Errorf("after Close: %+v (at open: %+v)\n%s", j3, j0, h3)
	}
	testutil.RequireFsckClean(t, image)

	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, NoJournal: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.WriteFile("b", pattern(2, 0, 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	j4, h4 := peek()
	if j4.Start != 0 || j4.Sequence != j3.Sequence || strings.Contains(h4, "needs_recovery") || !strings.Contains(h4, "not clean") {
		t.Errorf("NoJournal: journal %+v (before %+v)\n%s", j4, j3, h4)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

func jbd2SeqAfter(a, b uint32) bool { return int32(a-b) > 0 }

// TestKernelShutdownRandom: seeded workloads (creates, appends, truncates,
// renames, deletes, xattrs; a syncfs after each phase) on the kernel's
// mount, stopped by the shutdown ioctl in the middle of a random phase, in
// several image configurations and the journal_checksum and
// journal_async_commit mount options. Everything synced before the
// shutdown and not touched since is intact in ext4go's replay, which
// shows the kernel's tree; the writable replay is e2fsck-clean.
func TestKernelShutdownRandom(t *testing.T) {
	testutil.RequireMount(t)
	configs := []struct {
		name  string
		mkfs  []string
		mount []string
	}{
		{"4k", []string{"-t", "ext4"}, nil},
		{"1k-32bit", []string{"-t", "ext4", "-b", "1024", "-O", "^64bit"}, nil},
		{"nocsum", []string{"-t", "ext4", "-O", "^metadata_csum"}, nil},
		{"journal_checksum", []string{"-t", "ext4", "-O", "^metadata_csum"}, []string{"journal_checksum"}},
		// The kernel allows async commits only without ordered data.
		{"async_commit", []string{"-t", "ext4", "-O", "^metadata_csum"}, []string{"journal_async_commit", "data=writeback"}},
		{"ext3", []string{"-t", "ext3"}, nil},
	}
	seeds := 2
	for i, cfg := range configs {
		for s := range seeds {
			seed := uint64(100 + i*10 + s)
			t.Run(fmt.Sprintf("%s-%d", cfg.name, seed), func(t *testing.T) {
				image := filepath.Join(t.TempDir(), "img")
				testutil.Mke2fs(t, image, 64<<20, cfg.mkfs...)
				plan, states := crashPlan(seed, 6)
				rng := rand.New(rand.NewPCG(seed, 5))
				stopPhase := rng.IntN(len(plan)) // phases synced before the shutdown
				mp := testutil.Mount(t, image, false, cfg.mount...)
				root, err := os.Open(mp)
				if err != nil {
					t.Fatal(err)
				}
				defer root.Close()
				for p, ops := range plan {
					n := len(ops)
					if p == stopPhase {
						n = rng.IntN(len(ops) + 1) // cut the phase short
					}
					for _, op := range ops[:n] {
						if err := applyHostOp(mp, op); err != nil {
							t.Fatalf("phase %d: %s %s: %v", p+1, op.kind, op.name, err)
						}
					}
					if p == stopPhase {
						break
					}
					if err := unix.Syncfs(int(root.Fd())); err != nil {
						t.Fatal(err)
					}
				}
				crashed, b := shutDown(t, root, mp, image, ext4GoingLogFlush)
				ours, err := ext4go.Open(crashed, nil)
				if err != nil {
					t.Fatalf("read-only open: %v", err)
				}
				if stopPhase > 0 {
					want := states[stopPhase-1]
					for name, f := range want {
						if next, ok := states[stopPhase][name]; !ok || next.touched > stopPhase || !bytes.Equal(next.data, f.data) {
							continue // touched by the phase cut short
						}
						got, err := ours.ReadFile(name)
						if err != nil || !bytes.Equal(got, f.data) {
							t.Errorf("synced file %s: %d bytes (want %d), %v", name, len(got), len(f.data), err)
						}
					}
				}
				ours.Close()
				compareRecovery(t, crashed, b, false)
			})
		}
	}
}

// applyHostOp applies a crash-plan step with system calls under mp.
func applyHostOp(mp string, op crashOp) error {
	p := filepath.Join(mp, op.name)
	switch op.kind {
	case "mkdir":
		return os.Mkdir(p, 0o755)
	case "write":
		return os.WriteFile(p, op.data, 0o644)
	case "remove":
		return os.Remove(p)
	case "rename":
		return os.Rename(p, filepath.Join(mp, op.to))
	case "xattr":
		return unix.Setxattr(p, "user.phase", op.data, 0)
	case "truncate":
		return os.Truncate(p, int64(op.size))
	case "append":
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = f.Write(op.data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return fmt.Errorf("unknown step %q", op.kind)
}

// slowSyncDev takes delay per flush, as a slow disk.
type slowSyncDev struct {
	ext4go.Device
	delay time.Duration
}

func (d *slowSyncDev) Sync() error { time.Sleep(d.delay); return d.Device.Sync() }

// TestJournalBoundsTransactions: many goroutines changing a filesystem
// with a small journal on a slow disk never grow a transaction past what
// the journal holds (new handles wait for the commit, as the kernel's
// start_this_handle waits for log space): no abort, e2fsck clean.
func TestJournalBoundsTransactions(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-N", "60000")
	d, err := ext4go.OpenImageDevice(image, true)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.OpenDevice(&slowSyncDev{d, 200 * time.Millisecond}, &ext4go.Options{Writable: true, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := fmt.Sprintf("d%d", g)
			if err := fsys.Mkdir(dir, 0o755); err != nil {
				errs <- err
				return
			}
			for i := 0; i < 1500; i++ {
				if err := fsys.WriteFile(fmt.Sprintf("%s/f%d", dir, i), nil, 0o644); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestJournalBlocksProtected: on a corrupt image whose block bitmap marks
// the journal's blocks free, no file data is placed in the journal (the
// allocator's system zone, as the kernel's block_validity): writes fail
// as corruption or land elsewhere, and the journal is never overwritten.
func TestJournalBlocksProtected(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	first, err := strconv.ParseUint(strings.TrimSpace(testutil.Debugfs(t, image, "bmap <8> 0")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	const jlen = 1024 // at least the first 1024 journal blocks are contiguous here
	// Free in the bitmap and in the group's count, consistently, so the
	// allocator believes the blocks are free.
	g := (first - 1) / 8192
	free := 0
	for _, l := range strings.Split(testutil.Dumpe2fs(t, image), "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("Group %d:", g)) {
			free = -1
		}
		if free == -1 && strings.Contains(l, "free blocks,") {
			fmt.Sscanf(strings.TrimSpace(l), "%d", &free)
			break
		}
	}
	testutil.DebugfsWrite(t, image, fmt.Sprintf("freeb %d %d", first, jlen),
		fmt.Sprintf("set_bg %d free_blocks_count %d", g, free+jlen), fmt.Sprintf("set_bg %d checksum calc", g))
	fsys := openRW(t, image)
	buf := pattern(1, 0, 64<<10)
	corrupt := 0
	for i := 0; i < 2000; i++ {
		name := fmt.Sprintf("f%d", i)
		if err := fsys.WriteFile(name, buf, 0o644); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if !errors.Is(err, ext4go.ErrCorrupt) {
				t.Fatalf("write %s: %v", name, err)
			}
			corrupt++
			continue
		}
		exts, err := fsys.Extents(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exts {
			if e.Physical < first+jlen && first < e.Physical+e.Length {
				t.Fatalf("%s has blocks %d+%d inside the journal at %d+%d", name, e.Physical, e.Length, first, jlen)
			}
		}
	}
	t.Logf("%d writes refused as corruption", corrupt)
	fsys.Close()
}
