package main

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/mkfs"
)

func init() {
	benchKinds["fallocate2"] = benchKind{
		usage:   "fallocate2 [-p 1,2,4,8] [--dir MOUNTPOINT] [--no-journal] [--duration D] [--size BYTES] [--dirs] [--breakdown] [--locks] [--json]",
		summary: "will-it-scale fallocate2 through the filesystem: each of P goroutines fallocates 8 KiB at the end of its own file until 1 MiB, then truncates it to 0; through ext4go on a fresh image, or with -dir through system calls on a mounted directory",
		run:     benchFallocate2,
	}
	benchKinds["read"] = benchKind{
		usage:   "read [-p N] [--compare] [--no-cold] [--json] IMAGE",
		summary: "read every file of IMAGE through ext4go; with -compare also with debugfs rdump and through the kernel on a read-only loop mount (root), and report the ratios",
		run:     benchRead,
	}
}

// parseList parses "1,2,4,8".
func parseList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q in list", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// fallocator is one file of the fallocate2 loop.
type fallocator interface {
	fallocate(off, n int64) error
	truncate() error
	close() error
}

type ourFile struct{ f *ext4go.File }

func (o ourFile) fallocate(off, n int64) error { return o.f.Fallocate(0, off, n) }
func (o ourFile) truncate() error              { return o.f.Truncate(0) }
func (o ourFile) close() error                 { return o.f.Close() }

type osFile struct{ f *os.File }

func (o osFile) fallocate(off, n int64) error { return hostFallocate(o.f, off, n) }
func (o osFile) truncate() error              { return o.f.Truncate(0) }
func (o osFile) close() error                 { return o.f.Close() }

func benchFallocate2(e *env, c *command, args []string) error {
	fl := newFlags(c, e)
	plist := fl.String("p", "1,2,4,8", "goroutine counts")
	dirFlag := fl.String("dir", "", "run with system calls in this directory (a mounted filesystem) instead of through ext4go")
	dur := fl.Duration("duration", 3*time.Second, "time per goroutine count")
	sizeFlag := fl.String("size", "1G", "size of the fresh image (without -dir)")
	asJSON := fl.Bool("json", false, "one JSON object per line")
	noJournal := fl.Bool("no-journal", false, "write the image in place, without its journal (without -dir)")
	locks := fl.Bool("locks", false, "count the shared locks and counters each operation takes (an ext4go built with -tags lockstat)")
	dirs := fl.Bool("dirs", false, "give each goroutine's file a directory of its own (top-level directories are spread over the flex groups, so on an image of more than one flex group (16 groups of 128 MiB by default: over 2 GiB) the files share no inode table block or bitmap)")
	breakdown := fl.Bool("breakdown", false, "print where the CPU time goes, in ns per operation by layer (allocator, extent tree, inode, bitmaps, journal, checksums)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *dirFlag == "" {
		// The library runs as ext4go's own commands do (see collectLess):
		// at GOGC=100 its small live heap is collected hundreds of times
		// a second, and on two cores the collector's share comes out of
		// the second worker. GOGC in the environment wins.
		defer collectLess()()
	}
	if *locks && !lockstat.Enabled {
		return fmt.Errorf("--locks: this ext4go was built without lock counting; build it with 'go build -tags lockstat ./cmd/ext4go'")
	}
	if *locks && *dirFlag != "" {
		return usagef("--locks counts ext4go's locks: not with --dir")
	}
	ps, err := parseList(*plist)
	if err != nil {
		return usagef("%v", err)
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usagef("bad -size: %v", err)
	}
	config := "ext4go"
	switch {
	case *dirFlag != "":
		config = "kernel"
	case *noJournal:
		config = "ext4go-nojournal"
	}
	for _, p := range ps {
		r, err := fallocate2Run(p, *dur, *dirFlag, int64(size), *noJournal, *breakdown, *dirs)
		if err != nil {
			return err
		}
		ops := r.opsPerSec
		if *asJSON {
			out := map[string]any{"bench": "fallocate2", "config": config, "p": p, "ops_per_sec": ops}
			if *locks {
				per := map[string]float64{}
				for _, s := range lockstat.Sites() {
					per[s.Name()] = float64(r.locks[s]) / float64(max(r.ops, 1))
				}
				out["locks_per_op"] = per
			}
			if *breakdown {
				per := map[string]float64{}
				for l, ns := range r.layers {
					per[l] = float64(ns) / float64(max(r.ops, 1))
				}
				out["ns_per_op_by_layer"] = per
			}
			json.NewEncoder(e.stdout).Encode(out)
			continue
		}
		fmt.Fprintf(e.stdout, "fallocate2 %-7s p=%-3d %12.0f ops/s\n", config, p, ops)
		if *locks {
			printLocks(e.stdout, r.locks, r.ops)
		}
		if *breakdown {
			printBreakdown(e.stdout, r.layers, r.ops)
		}
	}
	return nil
}

// printLocks prints the per-operation acquisitions of every site taken,
// global sites first.
func printLocks(w io.Writer, c lockstat.Counts, ops int64) {
	fmt.Fprintf(w, "  %-44s %-10s %12s %10s\n", "site", "scope", "taken", "per op")
	for _, scope := range []lockstat.Scope{lockstat.Global, lockstat.Sharded, lockstat.PerObject} {
		for _, s := range lockstat.Sites() {
			if s.Scope() != scope || c[s] == 0 {
				continue
			}
			fmt.Fprintf(w, "  %-44s %-10s %12d %10.4f\n", s.Name(), scope, c[s], float64(c[s])/float64(max(ops, 1)))
		}
	}
	var global uint64
	for _, s := range lockstat.Sites() {
		if s.Scope() == lockstat.Global {
			global += c[s]
		}
	}
	fmt.Fprintf(w, "  global sites: %d acquisitions in %d operations (%.4f per op)\n", global, ops, float64(global)/float64(max(ops, 1)))
}

// fallocate2Result is one run of the loop.
type fallocate2Result struct {
	opsPerSec float64
	ops       int64            // fallocate calls
	locks     lockstat.Counts  // shared sites taken while the loop ran (with -tags lockstat)
	layers    map[string]int64 // CPU ns by layer (with breakdown)
}

// fallocate2Run runs the loop with p goroutines for d and returns
// operations (fallocate calls) per second.
// fallocate2Run runs p workers for d. With dirs, each worker's file is in
// a directory of its own, which the Orlov allocator places in a flex group
// of its own where it can: the files then share no inode-table block, no
// bitmap and no group, which shows how far the path scales when only the
// filesystem-wide structures are shared.
func fallocate2Run(p int, d time.Duration, dir string, size int64, noJournal, breakdown, dirs bool) (fallocate2Result, error) {
	var files []fallocator
	var cleanup func() error
	if dir != "" {
		for i := 0; i < p; i++ {
			name := filepath.Join(dir, fmt.Sprintf("fallocate2-%d", i))
			if dirs {
				d := filepath.Join(dir, fmt.Sprintf("fallocate2-dir-%d", i))
				if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
					return fallocate2Result{}, err
				}
				name = filepath.Join(d, fmt.Sprintf("fallocate2-%d", i))
			}
			f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return fallocate2Result{}, err
			}
			os.Remove(f.Name()) // will-it-scale uses unlinked files
			files = append(files, osFile{f})
		}
		cleanup = func() error { return nil }
	} else {
		tmp, err := os.MkdirTemp("", "ext4go-bench-")
		if err != nil {
			return fallocate2Result{}, err
		}
		img := filepath.Join(tmp, "bench.img")
		if err := mkfs.Format(img, mkfs.Options{Size: size}); err != nil {
			os.RemoveAll(tmp)
			return fallocate2Result{}, err
		}
		fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true, NoJournal: noJournal})
		if err != nil {
			os.RemoveAll(tmp)
			return fallocate2Result{}, err
		}
		for i := 0; i < p; i++ {
			name := fmt.Sprintf("fallocate2-%d", i)
			if dirs {
				d := fmt.Sprintf("fallocate2-dir-%d", i)
				if err := fsys.Mkdir(d, 0o755); err != nil {
					return fallocate2Result{}, err
				}
				name = d + "/" + name
			}
			f, err := fsys.Create(name)
			if err != nil {
				return fallocate2Result{}, err
			}
			fsys.Remove(name)
			files = append(files, ourFile{f})
		}
		cleanup = func() error {
			err := fsys.Close()
			os.RemoveAll(tmp)
			return err
		}
	}
	const step, limit = 8 << 10, 1 << 20
	var total atomic.Int64
	var firstErr atomic.Pointer[error]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		go func(f fallocator) {
			defer wg.Done()
			var off int64
			var n int64
			for {
				select {
				case <-stop:
					total.Add(n)
					return
				default:
				}
				if err := f.fallocate(off, step); err != nil {
					// A copy: taking err's own address would move it to
					// the heap on every operation.
					e := err
					firstErr.CompareAndSwap(nil, &e)
					total.Add(n)
					return
				}
				n++
				off += step
				if off >= limit {
					if err := f.truncate(); err != nil {
						e := err
						firstErr.CompareAndSwap(nil, &e)
						total.Add(n)
						return
					}
					off = 0
				}
			}
		}(f)
	}
	var sampler *cpuSampler
	if breakdown {
		sampler = &cpuSampler{}
		if err := sampler.start(); err != nil {
			close(stop)
			wg.Wait()
			cleanup()
			return fallocate2Result{}, err
		}
	}
	start := time.Now()
	before := lockstat.Snapshot()
	time.Sleep(d)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	locks := lockstat.Snapshot().Sub(before)
	var layers map[string]int64
	if sampler != nil {
		var err error
		if layers, err = sampler.stop(); err != nil {
			cleanup()
			return fallocate2Result{}, err
		}
	}
	for _, f := range files {
		f.close()
	}
	cerr := cleanup()
	if ep := firstErr.Load(); ep != nil {
		return fallocate2Result{}, *ep
	}
	if cerr != nil {
		return fallocate2Result{}, cerr
	}
	return fallocate2Result{opsPerSec: float64(total.Load()) / elapsed.Seconds(), ops: total.Load(), locks: locks, layers: layers}, nil
}

func benchRead(e *env, c *command, args []string) error {
	fl := newFlags(c, e)
	par := fl.Int("p", runtime.GOMAXPROCS(0), "goroutines reading files")
	compare := fl.Bool("compare", false, "also time debugfs rdump and the kernel (read-only loop mount, needs root)")
	asJSON := fl.Bool("json", false, "one JSON object per line")
	cold := fl.Bool("cold", true, "drop the page cache before each reader (needs root), so none reads what another cached")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		return usagef("want IMAGE")
	}
	image := fl.Arg(0)
	prepare := func() {
		if !*cold {
			return
		}
		if err := dropCaches(); err != nil {
			fmt.Fprintf(e.stderr, "bench read: page cache not dropped (%v): readers after the first may read cached data\n", err)
			*cold = false
		}
	}
	report := func(config string, files int, bytes int64, d time.Duration) {
		if *asJSON {
			json.NewEncoder(e.stdout).Encode(map[string]any{"bench": "read", "config": config, "files": files, "bytes": bytes, "seconds": d.Seconds()})
			return
		}
		fmt.Fprintf(e.stdout, "read %-8s %7d files %10.1f MiB %8.3f s %8.1f MiB/s\n", config, files, float64(bytes)/(1<<20), d.Seconds(), float64(bytes)/(1<<20)/d.Seconds())
	}
	// ext4go
	prepare()
	start := time.Now()
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		return err
	}
	files, bytes, err := readAll(fsys, *par)
	fsys.Close()
	if err != nil {
		return err
	}
	ours := time.Since(start)
	report("ext4go", files, bytes, ours)
	if !*compare {
		return nil
	}
	// debugfs rdump
	tmp, err := os.MkdirTemp("", "ext4go-bench-read-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prepare()
	start = time.Now()
	cmd := exec.Command("debugfs", "-R", "rdump / "+tmp, image)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("debugfs rdump: %v: %s", err, out)
	}
	rd := time.Since(start)
	report("debugfs", files, bytes, rd)
	// kernel
	mnt := filepath.Join(tmp, "mnt")
	os.Mkdir(mnt, 0o700)
	var kd time.Duration
	if out, err := exec.Command("mount", "-o", "loop,ro", image, mnt).CombinedOutput(); err != nil {
		fmt.Fprintf(e.stderr, "kernel: skipped: mount: %v: %s\n", err, strings.TrimSpace(string(out)))
	} else {
		prepare()
		start = time.Now()
		kfiles, kbytes, err := readAll(os.DirFS(mnt), *par)
		kd = time.Since(start)
		exec.Command("umount", mnt).Run()
		if err != nil {
			return err
		}
		report("kernel", kfiles, kbytes, kd)
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "ratio ext4go/debugfs = %.2f (below 1: ext4go faster)\n", ours.Seconds()/rd.Seconds())
		if kd > 0 {
			fmt.Fprintf(e.stdout, "ratio ext4go/kernel  = %.2f\n", ours.Seconds()/kd.Seconds())
		}
	}
	return nil
}

// readAll reads every regular file of fsys with par goroutines.
func readAll(fsys fs.FS, par int) (int, int64, error) {
	var names []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			names = append(names, p)
		}
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	var bytes atomic.Int64
	var firstErr atomic.Pointer[error]
	ch := make(chan string)
	var wg sync.WaitGroup
	for i := 0; i < max(par, 1); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for name := range ch {
				f, err := fsys.Open(name)
				if err == nil {
					var n int64
					n, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
					bytes.Add(n)
					f.Close()
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		}()
	}
	for _, n := range names {
		ch <- n
	}
	close(ch)
	wg.Wait()
	if ep := firstErr.Load(); ep != nil {
		return 0, 0, *ep
	}
	return len(names), bytes.Load(), nil
}
