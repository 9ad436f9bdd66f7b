//go:build linux

package ext4go_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// ext4's shutdown without a journal flush: committed fast commits and
// transactions stay in the log unreplayed.
const ext4GoingNoLogFlush = 2

// TestKernelFastCommits: images the kernel left with fast commits to
// replay (fast_commit, a full commit, then creates, writes, appends,
// truncates, links, renames, unlinks and mkdirs each made durable by an
// fsync, which the kernel logs as a fast commit, then a shutdown that
// flushes nothing more). ext4go's read-only open replays the fast commits
// in memory and shows the kernel's tree after the kernel's own replay of
// a copy; its writable open writes the replay home and leaves an
// e2fsck-clean image with that tree.
func TestKernelFastCommits(t *testing.T) {
	testutil.RequireMount(t)
	configs := []struct {
		name string
		mkfs []string
	}{
		{"4k", []string{"-t", "ext4", "-O", "fast_commit"}},
		{"1k", []string{"-t", "ext4", "-b", "1024", "-O", "fast_commit"}},
		{"32bit", []string{"-t", "ext4", "-O", "fast_commit,^64bit"}},
		{"nocsum", []string{"-t", "ext4", "-O", "fast_commit,^metadata_csum"}},
	}
	seeds := 3
	if testing.Short() {
		seeds = 1
	}
	if v := os.Getenv("EXT4GO_FC_SEEDS"); v != "" {
		// A longer soak: EXT4GO_FC_SEEDS=30 tries 30 seeds a configuration.
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("EXT4GO_FC_SEEDS=%q: want a count", v)
		}
		seeds = n
	}
	for i, cfg := range configs {
		for s := range seeds {
			seed := uint64(300 + i*1000 + s)
			t.Run(fmt.Sprintf("%s-%d", cfg.name, seed), func(t *testing.T) {
				image := filepath.Join(t.TempDir(), "img")
				testutil.Mke2fs(t, image, 64<<20, cfg.mkfs...)
				mp := testutil.Mount(t, image, false, "commit=300")
				root, err := os.Open(mp)
				if err != nil {
					t.Fatal(err)
				}
				defer root.Close()
				fastCommitWorkload(t, mp, root, seed)
				shutdown := time.Now()
				crashed, b := shutDown(t, root, mp, image, ext4GoingNoLogFlush)
				if !strings.Contains(testutil.Dumpe2fs(t, crashed, "-h"), "needs_recovery") {
					t.Fatal("the shut down image does not need recovery")
				}
				ro, err := ext4go.Open(crashed, nil)
				if err != nil {
					t.Fatalf("read-only open: %v", err)
				}
				r := ro.Replay()
				ro.Close()
				if r == nil || r.FastCommits == 0 {
					t.Fatalf("no fast commits replayed (%+v): nothing was tested", r)
				}
				t.Logf("%d fast-commit records: %s", r.FastCommits, fastCommitTags(t, crashed))
				// A directory an entry record changes gets the time of
				// the replay (kernel: __ext4_link, __ext4_unlink).
				compareRecoveryStamped(t, crashed, b, true, shutdown)
			})
		}
	}
}

// fastCommitTags counts the fast-commit records of an image by kind, as
// debugfs's logdump lists them.
func fastCommitTags(t *testing.T, image string) string {
	out, err := exec.Command("debugfs", "-R", "logdump", image).Output()
	if err != nil {
		t.Fatalf("debugfs logdump: %v", err)
	}
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^tag (\S+),`).FindAllStringSubmatch(string(out), -1) {
		counts[m[1]]++
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// fastCommitWorkload makes a base of files durable with a full commit,
// then changes them with fsyncs (fast commits).
func fastCommitWorkload(t *testing.T, mp string, root *os.File, seed uint64) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	p := func(s string) string { return filepath.Join(mp, s) }
	rng := rand.New(rand.NewPCG(seed, 11))
	must(os.Mkdir(p("d"), 0o755))
	var files []string
	for i := range 20 {
		name := fmt.Sprintf("d/base%d", i)
		must(os.WriteFile(p(name), pattern(int64(i), 0, rng.IntN(200000)), 0o644))
		files = append(files, name)
	}
	must(unix.Syncfs(int(root.Fd())))
	fsync := func(name string) {
		f, err := os.OpenFile(p(name), os.O_RDONLY, 0)
		must(err)
		must(f.Sync())
		must(f.Close())
	}
	for op := range 40 {
		switch k := rng.IntN(8); {
		case k == 0 || len(files) < 3: // create and write
			name := fmt.Sprintf("d/new%d", op)
			if rng.IntN(3) == 0 {
				name = fmt.Sprintf("new%d", op)
			}
			must(os.WriteFile(p(name), pattern(int64(op)+1000, 0, rng.IntN(100000)+1), 0o644))
			fsync(name)
			files = append(files, name)
		case k == 1: // append
			name := files[rng.IntN(len(files))]
			f, err := os.OpenFile(p(name), os.O_WRONLY|os.O_APPEND, 0)
			must(err)
			_, err = f.Write(pattern(int64(op), 0, rng.IntN(50000)+1))
			must(err)
			must(f.Sync())
			must(f.Close())
		case k == 2: // overwrite in the middle
			name := files[rng.IntN(len(files))]
			f, err := os.OpenFile(p(name), os.O_WRONLY, 0)
			must(err)
			_, err = f.WriteAt(pattern(int64(op)+7, 0, 5000), int64(rng.IntN(100000)))
			must(err)
			must(f.Sync())
			must(f.Close())
		case k == 3: // truncate
			name := files[rng.IntN(len(files))]
			must(os.Truncate(p(name), int64(rng.IntN(30000))))
			fsync(name)
		case k == 4: // unlink
			i := rng.IntN(len(files))
			must(os.Remove(p(files[i])))
			fsync(filepath.Dir(files[i]))
			files = append(files[:i], files[i+1:]...)
		case k == 5: // hard link
			name := files[rng.IntN(len(files))]
			link := fmt.Sprintf("d/link%d", op)
			must(os.Link(p(name), p(link)))
			fsync(link)
			files = append(files, link)
		case k == 6: // rename
			i := rng.IntN(len(files))
			to := fmt.Sprintf("d/renamed%d", op)
			must(os.Rename(p(files[i]), p(to)))
			fsync(to)
			files[i] = to
		case k == 7: // mkdir with a file in it
			dir := fmt.Sprintf("d/sub%d", op)
			must(os.Mkdir(p(dir), 0o755))
			name := dir + "/f"
			must(os.WriteFile(p(name), pattern(int64(op)+2000, 0, rng.IntN(9000)+1), 0o644))
			fsync(name)
			fsync(dir)
			files = append(files, name)
		}
	}
	// An op whose fsync may not be fast (the kernel falls back to a full
	// commit for some) may have committed everything: end with one that
	// is.
	must(os.WriteFile(p("d/last"), pattern(99, 0, 12345), 0o644))
	fsync("d/last")
}

// TestFastCommitsMatchE2fsck: e2fsprogs' j_recover_fast_commit image (a
// full transaction, then fast commits that create a file, rename another
// and grow it to 16 extents): ext4go's read-only replay leaves the image
// as it was and shows the tree of e2fsck's replay (e2fsck -E
// journal_only) and of the kernel's (a mount of a copy); the writable
// open leaves an e2fsck-clean image with that tree.
func TestFastCommitsMatchE2fsck(t *testing.T) {
	start := time.Now()
	b := fastCommitImage(t)
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.WriteFile(crashed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	theirs := filepath.Join(t.TempDir(), "e2fsck")
	if err := os.WriteFile(theirs, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", theirs).CombinedOutput(); err != nil {
		t.Fatalf("e2fsck -E journal_only: %v\n%s", err, out)
	}
	ours, err := ext4go.Open(crashed, nil)
	if err != nil {
		t.Fatalf("read-only open: %v", err)
	}
	if r := ours.Replay(); r == nil || r.FastCommits != 13 {
		t.Fatalf("replay %+v: want the 13 fast-commit records", r)
	}
	if got, want := fileHash(t, crashed), sha256.Sum256(b); got != want {
		t.Fatal("the read-only replay wrote to the image")
	}
	// e2fsck's replay leaves the times of a directory an entry record
	// changes alone, where the kernel's sets them to the time of the
	// replay (as ext4go's does, compared with the kernel's below).
	opts := testutil.MountCompareOptions()
	opts.Meta = meta
	opts.Checks &^= testutil.CheckMtime
	testutil.CompareFS(t, ours, testutil.Mount(t, theirs, true), opts)
	ours.Close()
	compareRecoveryStamped(t, crashed, b, true, start)
}

// TestFastCommitReplayCrash: a power cut at every point of the writable
// open that replays j_recover_fast_commit's journal and fast commits home
// (unflushed writes lost, kept or torn) leaves an image whose next
// writable open gives the same files, e2fsck-clean; e2fsck's own replay
// of it is clean too, and so is the kernel's, with the same files.
func TestFastCommitReplayCrash(t *testing.T) {
	base := fastCommitImage(t)
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	if err := os.WriteFile(image, base, 0o644); err != nil {
		t.Fatal(err)
	}
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := treeContents(t, ro)
	ro.Close()
	fsys, rd := openRecorded(t, image)
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	staleHeads := 0
	for cut := 0; cut <= len(rd.log); cut++ {
		for try := range 3 {
			crashed := crashImage(t, t.TempDir(), base, rd.log[:cut], rng)
			e2 := crashed + ".e2fsck"
			copyFile(t, crashed, e2)
			out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", e2).CombinedOutput()
			switch {
			case bytes.Contains(out, []byte("Invalid argument while recovering journal")):
				// Cut between the commit of the replay's transaction
				// and the clearing of the fast-commit area: e2fsck
				// 1.47 refuses the stale HEAD (exiting 0) that the
				// kernel (below) and ext4go skip.
				staleHeads++
				err = errors.New("stale fast-commit HEAD")
			case err == nil:
				testutil.RequireFsckClean(t, e2)
			default:
				t.Fatalf("cut %d (%d): e2fsck journal replay: %v\n%s", cut, try, err, out)
			}
			if ok, _ := testutil.CanMount(); ok && (try == 0 || err != nil) {
				k := crashed + ".kernel"
				copyFile(t, crashed, k)
				mp := testutil.Mount(t, k, false)
				opts := testutil.MountCompareOptions()
				opts.Meta = meta
				opts.Checks &^= testutil.CheckMtime
				ro, err := ext4go.Open(crashed, nil)
				if err != nil {
					t.Fatalf("cut %d: read-only open: %v", cut, err)
				}
				testutil.CompareFS(t, ro, mp, opts)
				ro.Close()
				testutil.Unmount(t, mp)
			}
			w, err := ext4go.Open(crashed, &ext4go.Options{Writable: true})
			if err != nil {
				t.Fatalf("cut %d/%d (%d): writable open: %v", cut, len(rd.log), try, err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("cut %d (%d): close: %v", cut, try, err)
			}
			testutil.RequireFsckClean(t, crashed)
			after := openImage(t, crashed)
			got := treeContents(t, after)
			after.Close()
			for name, data := range want {
				if got[name] != data {
					t.Errorf("cut %d (%d): %s differs after the replay", cut, try, name)
				}
			}
			if len(got) != len(want) {
				t.Errorf("cut %d (%d): %d names, want %d", cut, try, len(got), len(want))
			}
		}
	}
	t.Logf("%d crash points (writes and flushes of the replay), %d images with a stale fast-commit HEAD that e2fsck refuses", len(rd.log)+1, staleHeads)
}

// treeContents maps every name of fsys to its type and content (or
// target).
func treeContents(t *testing.T, fsys *ext4go.FS) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.Type().IsRegular():
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			m[p] = "file:" + string(b)
		default:
			m[p] = d.Type().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// fastCommitImage returns the bytes of e2fsprogs' j_recover_fast_commit
// image (skipping the test without it).
func fastCommitImage(t testing.TB) []byte {
	t.Helper()
	for _, im := range testutil.SharedImages(t) {
		if im.Name == "j_recover_fast_commit" {
			b, err := os.ReadFile(im.Decompress(t))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Skip("j_recover_fast_commit is not in the shared images")
	return nil
}
