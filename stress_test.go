//go:build linux

package ext4go_test

// The adversarial stress test: many goroutines change one
// filesystem at once. Workers own private trees checked against their
// records (the model); chaos goroutines race opens, writes, truncates,
// xattr and attribute changes, links, renames and unlinks on a few shared
// names; readers walk everything. Bystander files, written first and never
// touched, must come through unchanged. After Close: no change reached a
// stale node, e2fsck -fn is clean, every private tree equals its model,
// through ext4go and through the kernel.
//
// Short in CI; EXT4GO_STRESS=SECONDS runs each configuration that long.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

type stressConfig struct {
	name    string
	size    int64
	args    []string
	small   bool // ENOSPC (blocks or inodes) is expected and tolerated
	workers int
}

func TestStress(t *testing.T) {
	configs := []stressConfig{
		{"4k", 2 << 30, []string{"-t", "ext4", "-b", "4096"}, false, 32},
		{"1k", 1 << 30, []string{"-t", "ext4", "-b", "1024"}, false, 32},
		{"no-flex_bg", 1 << 30, []string{"-t", "ext4", "-O", "^flex_bg"}, false, 32},
		{"ext3", 1 << 30, []string{"-t", "ext3"}, false, 32},
		{"inline_data", 1 << 30, []string{"-t", "ext4", "-O", "inline_data"}, false, 32},
		{"orphan_file", 1 << 30, []string{"-t", "ext4", "-O", "orphan_file"}, false, 32},
		{"small-blocks", 12 << 20, []string{"-t", "ext4", "-b", "1024"}, true, 32},
		{"small-inodes", 64 << 20, []string{"-t", "ext4", "-N", "600"}, true, 32},
	}
	dur := 3 * time.Second
	if testing.Short() {
		dur = time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("EXT4GO_STRESS")); err == nil && v > 0 {
		dur = time.Duration(v) * time.Second
	}
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) { stress(t, cfg, dur) })
	}
}

// chaosNames are the names the chaos goroutines fight over.
var chaosNames = []string{"c0", "c1", "c2", "c3", "c4", "d0", "d1"}

func stress(t *testing.T, cfg stressConfig, dur time.Duration) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, cfg.size, cfg.args...)
	fsys := openRW(t, image)
	staleBefore := ext4go.StaleWrites()
	for _, d := range []string{"shared", "chaos", "bystanders"} {
		if err := fsys.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	// Bystanders: written once, never touched again.
	bystanders := map[string][]byte{}
	for i := 0; i < 40; i++ {
		p := fmt.Sprintf("bystanders/b%d", i)
		data := pattern(int64(i)+1000, 0, 1+i*2500)
		if err := fsys.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		bystanders[p] = data
	}
	if err := fsys.Symlink("bystanders/b1", "bystanders/link"); err != nil {
		t.Fatal(err)
	}

	// Worker roots exist before the chaos starts: on the small-inodes image
	// the chaos can take every free inode before a worker's first step.
	for i := 0; i < cfg.workers; i++ {
		if err := fsys.Mkdir(fmt.Sprintf("w%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	var stop atomic.Bool
	errs := make(chan string, 1000)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default:
		}
	}
	var bg sync.WaitGroup
	var walks, chaosOps atomic.Int64
	for i := 0; i < 2; i++ {
		bg.Add(1)
		go func() {
			defer bg.Done()
			reader(fsys, &stop, errs, &walks)
		}()
	}
	for i := 0; i < 4; i++ {
		bg.Add(1)
		go func() {
			defer bg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for !stop.Load() {
				chaosStep(fsys, rng, cfg.small, report)
				chaosOps.Add(1)
			}
		}()
	}

	workers := make([]*worker, cfg.workers)
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	for i := range workers {
		w := &worker{id: i, fs: fsys, rng: rand.New(rand.NewPCG(uint64(i), 11)), root: fmt.Sprintf("w%d", i),
			files: map[string]*wfile{}, links: map[string]string{}, shared: map[string]*wfile{}, tolerant: cfg.small}
		w.dirs = []string{w.root}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) && len(w.errs) == 0 {
				w.step("shared")
			}
		}()
	}
	wg.Wait()
	stopBackground(t, &stop, &bg, errs)
	steps, enospc := 0, 0
	for _, w := range workers {
		steps += w.opCount
		enospc += w.enospc
		for _, e := range w.errs {
			t.Error(e)
		}
	}
	t.Logf("%d workers made %d changes (%d ENOSPC), chaos %d ops, readers %d walks", len(workers), steps, enospc, chaosOps.Load(), walks.Load())
	for p, want := range bystanders {
		if got, err := fsys.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Errorf("bystander %s: %d bytes (want %d), %v", p, len(got), len(want), err)
		}
	}
	if got, err := fsys.ReadLink("bystanders/link"); err != nil || got != "bystanders/b1" {
		t.Errorf("bystander symlink: %q, %v", got, err)
	}
	if t.Failed() {
		fsys.Close()
		return
	}
	if err := fsys.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if n := ext4go.StaleWrites() - staleBefore; n != 0 {
		t.Errorf("%d changes reached nodes that no longer owned their inode", n)
	}
	testutil.RequireFsckClean(t, image)
	compareWorkers(t, image, workers, bystanders)
}

// compareWorkers builds the tree the workers (and bystanders, if any)
// recorded in a host directory and compares the image with it, through
// ext4go and the kernel (chaos is skipped: its end state is whatever the
// race left).
func compareWorkers(t *testing.T, image string, workers []*worker, bystanders map[string][]byte) {
	want := testutil.SourceDir(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	dirs := []string{"shared"}
	if bystanders != nil {
		dirs = append(dirs, "bystanders")
	}
	for _, d := range dirs {
		must(os.Mkdir(filepath.Join(want, d), 0o777))
		must(os.Chmod(filepath.Join(want, d), 0o777))
	}
	for p, data := range bystanders {
		must(os.WriteFile(filepath.Join(want, p), data, 0o644))
		must(os.Chmod(filepath.Join(want, p), 0o644))
	}
	if bystanders != nil {
		must(os.Symlink("bystanders/b1", filepath.Join(want, "bystanders/link")))
	}
	made := map[*wfile]string{}
	writeWant := func(p string, f *wfile) {
		hp := filepath.Join(want, p)
		if first, ok := made[f]; ok {
			must(os.Link(filepath.Join(want, first), hp))
			return
		}
		made[f] = p
		must(os.WriteFile(hp, f.data, f.perm))
		must(os.Chmod(hp, f.perm))
		for k, v := range f.xattrs {
			must(syscall.Setxattr(hp, k, v, 0))
		}
	}
	for _, w := range workers {
		dirs := slices.Sorted(slices.Values(w.dirs))
		for _, d := range dirs {
			must(os.MkdirAll(filepath.Join(want, d), 0o755))
			must(os.Chmod(filepath.Join(want, d), 0o755))
		}
		for _, p := range slices.Sorted(maps.Keys(w.files)) {
			writeWant(p, w.files[p])
		}
		for _, p := range slices.Sorted(maps.Keys(w.shared)) {
			writeWant(p, w.shared[p])
		}
		for p, target := range w.links {
			must(os.Symlink(target, filepath.Join(want, p)))
		}
	}
	opts := testutil.CompareOptions{
		Checks:    testutil.CheckPerm | testutil.CheckNlink | testutil.CheckXattrs,
		Meta:      meta,
		SkipPaths: []string{"lost+found", "chaos"},
	}
	ro := openImage(t, image)
	testutil.CompareFS(t, ro, want, opts)
	if ok, _ := testutil.CanMount(); ok {
		mnt := testutil.Mount(t, image, true)
		opts.Meta = nil
		testutil.CompareDirs(t, mnt, want, opts)
	}
}

// chaosStep races one change on the shared chaos names. Whatever the
// interleaving, only the errors a POSIX filesystem gives for such races
// may come back.
func chaosStep(fsys *ext4go.FS, rng *rand.Rand, small bool, report func(string, ...any)) {
	pick := func() string { return path.Join("chaos", chaosNames[rng.IntN(len(chaosNames))]) }
	a, b := pick(), pick()
	expected := func(err error) bool {
		if err == nil {
			return true
		}
		for _, e := range []error{fs.ErrNotExist, fs.ErrExist, syscall.ENOTEMPTY, syscall.EISDIR, syscall.ENOTDIR,
			syscall.EINVAL, syscall.EPERM, syscall.ENODATA, syscall.ELOOP} {
			if errors.Is(err, e) {
				return true
			}
		}
		return small && errors.Is(err, syscall.ENOSPC)
	}
	check := func(what string, err error) {
		if !expected(err) {
			report("chaos %s: %v", what, err)
		}
	}
	switch rng.IntN(14) {
	case 0, 1: // open (maybe create), write, maybe truncate, close
		f, err := fsys.OpenFile(a, os.O_RDWR|os.O_CREATE, 0o644)
		check("open "+a, err)
		if err != nil {
			return
		}
		_, err = f.WriteAt(pattern(rng.Int64N(1000), 0, rng.IntN(40000)), rng.Int64N(8192))
		check("write "+a, err)
		if rng.IntN(3) == 0 {
			check("truncate "+a, f.Truncate(rng.Int64N(20000)))
		}
		buf := make([]byte, 4096)
		if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
			check("read "+a, err)
		}
		check("close "+a, f.Close())
	case 2, 3:
		check("remove "+a, fsys.Remove(a))
	case 4:
		check("rename "+a+" "+b, fsys.Rename(a, b))
	case 5:
		check("link "+a+" "+b, fsys.Link(a, b))
	case 6:
		check("symlink "+a, fsys.Symlink(chaosNames[rng.IntN(len(chaosNames))], a))
	case 7:
		check("mkdir "+a, fsys.Mkdir(a, 0o755))
	case 8:
		check("setxattr "+a, fsys.SetXattr(a, "user.chaos", pattern(rng.Int64N(9), 0, rng.IntN(300)), 0))
	case 9:
		check("removexattr "+a, fsys.RemoveXattr(a, "user.chaos"))
	case 10:
		check("lchown "+a, fsys.Lchown(a, rng.IntN(5), rng.IntN(5)))
		check("chmod "+a, fsys.Chmod(a, 0o600))
	case 11:
		check("lchtimes "+a, fsys.Lchtimes(a, time.Unix(rng.Int64N(1e9), 0), time.Unix(rng.Int64N(1e9), 0)))
	case 12:
		_, err := fsys.ReadFile(a)
		check("readfile "+a, err)
		_, err = fsys.ReadLink(a)
		check("readlink "+a, err)
	case 13: // unlink while open, then use the open file
		f, err := fsys.OpenFile(a, os.O_RDWR, 0)
		if err != nil {
			check("open "+a, err)
			return
		}
		check("remove "+a, fsys.Remove(a))
		if _, err := f.WriteAt([]byte("after unlink"), 10); err != nil {
			check("write unlinked "+a, err)
		}
		check("close "+a, f.Close())
	}
}
