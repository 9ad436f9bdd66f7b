//go:build linux

package ext4go_test

// Many goroutines change one filesystem at once, each in its own
// directories plus a directory they all share, while readers walk the
// tree. Afterwards e2fsck must be clean and the tree must hold exactly
// what every writer recorded. Run it with -race.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// wfile is a file as one writer recorded it; hard links share it.
type wfile struct {
	data   []byte
	xattrs map[string][]byte
	perm   os.FileMode
}

// worker is one writing goroutine and its record of its part of the tree.
type worker struct {
	id      int
	fs      *ext4go.FS
	rng     *rand.Rand
	root    string            // its own directory
	dirs    []string          // its directories (root first)
	files   map[string]*wfile // path -> file
	links   map[string]string // symlink path -> target
	shared  map[string]*wfile // its entries in the shared directory
	n       int
	errs    []string
	opCount int
	// tolerant accepts ENOSPC (a small image): the failed change must
	// then have left no trace, which the final comparison checks.
	tolerant bool
	enospc   int
}

// failErr reports err from the change described, unless it is an ENOSPC
// the worker tolerates.
func (w *worker) failErr(err error, format string, args ...any) {
	if w.tolerant && errors.Is(err, syscall.ENOSPC) {
		w.enospc++
		return
	}
	w.fail(format+": %v", append(args, err)...)
}

// apply records a write of p at off (a short write's written part).
func (f *wfile) apply(off int, p []byte) {
	if len(p) == 0 {
		return
	}
	if end := off + len(p); end > len(f.data) {
		f.data = append(f.data, make([]byte, end-len(f.data))...)
	}
	copy(f.data[off:], p)
}

func (w *worker) fail(format string, args ...any) {
	if len(w.errs) < 10 {
		w.errs = append(w.errs, fmt.Sprintf("worker %d op %d: ", w.id, w.opCount)+fmt.Sprintf(format, args...))
	}
}

func (w *worker) name() string {
	w.n++
	return fmt.Sprintf("w%d-%d%s", w.id, w.n, strings.Repeat("x", w.rng.IntN(30)))
}

func (w *worker) data(n int) []byte {
	p := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := w.rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			p[i+j] = byte(v >> (8 * j))
		}
	}
	return p
}

// pick returns a random key of m in a deterministic order.
func pickKey[V any](rng *rand.Rand, m map[string]V) (string, bool) {
	if len(m) == 0 {
		return "", false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[rng.IntN(len(keys))], true
}

func (w *worker) writeFile(p string, f *wfile) {
	fl, err := w.fs.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		w.failErr(err, "open %s", p)
		return
	}
	defer fl.Close()
	op := "?"
	defer func() {
		// After a tolerated failure the file must hold what the model
		// says: the failed change left no trace (a short write its part).
		if w.tolerant && op != "" {
			w.readBack(fl, p, f, "after a failed "+op)
		}
	}()
	switch w.rng.IntN(4) {
	case 0: // append
		op = "append"
		d := w.data(1 + w.rng.IntN(20000))
		if m, err := fl.WriteAt(d, int64(len(f.data))); err != nil {
			f.apply(len(f.data), d[:m])
			w.failErr(err, "append %s", p)
			return
		}
		f.data = append(f.data, d...)
	case 1: // truncate
		op = "truncate"
		size := w.rng.IntN(len(f.data) + 10000)
		if err := fl.Truncate(int64(size)); err != nil {
			w.failErr(err, "truncate %s", p)
			return
		}
		if size <= len(f.data) {
			f.data = f.data[:size]
		} else {
			f.data = append(f.data, make([]byte, size-len(f.data))...)
		}
	case 2: // punch
		if len(f.data) == 0 {
			return
		}
		op = "punch"
		off := w.rng.IntN(len(f.data))
		n := 1 + w.rng.IntN(len(f.data)-off)
		if err := fl.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, int64(off), int64(n)); err != nil {
			w.failErr(err, "punch %s", p)
			return
		}
		clear(f.data[off : off+n])
	default: // overwrite somewhere, maybe past the end
		op = "write"
		off := w.rng.IntN(len(f.data) + 30000)
		d := w.data(1 + w.rng.IntN(70000))
		if m, err := fl.WriteAt(d, int64(off)); err != nil {
			f.apply(off, d[:m])
			w.failErr(err, "write %s", p)
			return
		}
		if end := off + len(d); end > len(f.data) {
			f.data = append(f.data, make([]byte, end-len(f.data))...)
		}
		copy(f.data[off:], d)
	}
	// Read it back through the same handle.
	w.readBack(fl, p, f, "after "+op)
	op = ""
}

// readBack compares the file open as fl with its record.
func (w *worker) readBack(fl *ext4go.File, p string, f *wfile, when string) {
	fi, err := fl.Stat()
	if err != nil {
		w.fail("stat %s %s: %v", p, when, err)
		return
	}
	got := make([]byte, len(f.data))
	if n, err := fl.ReadAt(got, 0); n != len(got) || (err != nil && err != io.EOF) {
		w.fail("read back %s %s: %d bytes, %v", p, when, n, err)
	} else if !bytes.Equal(got, f.data) || fi.Size() != int64(len(f.data)) {
		i := 0
		for i < len(got) && got[i] == f.data[i] {
			i++
		}
		w.fail("read back %s %s: size %d, want %d; first difference at %d", p, when, fi.Size(), len(f.data), i)
	}
}

// step makes one random change in the worker's part of the tree.
func (w *worker) step(sharedDir string) {
	w.opCount++
	dir := w.dirs[w.rng.IntN(len(w.dirs))]
	switch x := w.rng.IntN(100); {
	case x < 20: // create
		p := path.Join(dir, w.name())
		f := &wfile{data: w.data(w.rng.IntN(50000)), xattrs: map[string][]byte{}, perm: 0o640}
		fl, err := w.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			w.failErr(err, "create %s", p)
			return
		}
		if m, err := fl.Write(f.data); err != nil {
			f.data = f.data[:m]
			w.failErr(err, "write %s", p)
		}
		if err := fl.Close(); err != nil {
			w.failErr(err, "close %s", p)
		}
		w.files[p] = f
	case x < 40: // change content
		if p, ok := pickKey(w.rng, w.files); ok {
			w.writeFile(p, w.files[p])
		}
	case x < 48: // rename within its tree, sometimes over another file
		p, ok := pickKey(w.rng, w.files)
		if !ok {
			return
		}
		np := path.Join(w.dirs[w.rng.IntN(len(w.dirs))], w.name())
		if q, ok := pickKey(w.rng, w.files); ok && w.rng.IntN(3) == 0 && q != p && w.files[q] != w.files[p] {
			np = q
		}
		if err := w.fs.Rename(p, np); err != nil {
			w.failErr(err, "rename %s %s", p, np)
			return
		}
		w.files[np] = w.files[p]
		delete(w.files, p)
	case x < 56: // unlink, sometimes while open (orphan)
		p, ok := pickKey(w.rng, w.files)
		if !ok {
			return
		}
		var fl *ext4go.File
		if w.rng.IntN(3) == 0 {
			var err error
			if fl, err = w.fs.OpenFile(p, os.O_RDWR, 0); err != nil {
				w.failErr(err, "open %s", p)
				return
			}
		}
		if err := w.fs.Remove(p); err != nil {
			w.failErr(err, "remove %s", p)
			if fl != nil {
				fl.Close()
			}
			return
		}
		f := w.files[p]
		delete(w.files, p)
		if fl != nil {
			// Still readable and writable while open.
			wrote := true
			if _, err := fl.WriteAt([]byte("orphan"), 100); err != nil {
				wrote = false
				w.failErr(err, "write to unlinked %s", p)
			}
			buf := make([]byte, 6)
			if _, err := fl.ReadAt(buf, 100); wrote && (err != nil || string(buf) != "orphan") {
				w.fail("read unlinked %s: %q %v", p, buf, err)
			}
			if err := fl.Close(); err != nil {
				w.failErr(err, "close unlinked %s", p)
			}
			// Other links see the change.
			stillLinked := false
			for _, g := range w.files {
				stillLinked = stillLinked || g == f
			}
			if stillLinked && wrote {
				if end := 106; end > len(f.data) {
					f.data = append(f.data, make([]byte, end-len(f.data))...)
				}
				copy(f.data[100:], "orphan")
			}
		}
	case x < 62: // hard link
		p, ok := pickKey(w.rng, w.files)
		if !ok {
			return
		}
		np := path.Join(w.dirs[w.rng.IntN(len(w.dirs))], w.name())
		if err := w.fs.Link(p, np); err != nil {
			w.failErr(err, "link %s %s", p, np)
			return
		}
		w.files[np] = w.files[p]
	case x < 68: // symlink
		p := path.Join(dir, w.name())
		t := strings.Repeat("s", w.rng.IntN(200))
		if err := w.fs.Symlink(t+"target", p); err != nil {
			w.failErr(err, "symlink %s", p)
			return
		}
		w.links[p] = t + "target"
	case x < 72: // mkdir
		if len(w.dirs) > 12 {
			return
		}
		p := path.Join(dir, w.name())
		if err := w.fs.Mkdir(p, 0o755); err != nil {
			w.failErr(err, "mkdir %s", p)
			return
		}
		w.dirs = append(w.dirs, p)
	case x < 82: // xattrs, sometimes the same large set on several files
		p, ok := pickKey(w.rng, w.files)
		if !ok {
			return
		}
		f := w.files[p]
		name := fmt.Sprintf("user.a%d", w.rng.IntN(4))
		if _, ok := f.xattrs[name]; ok && w.rng.IntN(3) == 0 {
			if err := w.fs.RemoveXattr(p, name); err != nil {
				w.failErr(err, "removexattr %s %s", p, name)
				return
			}
			delete(f.xattrs, name)
			return
		}
		v := w.data(w.rng.IntN(100)) // all of them fit one 1 KiB block
		if w.rng.IntN(3) == 0 {
			name, v = "user.common", bytes.Repeat([]byte("shared value "), 20)
		}
		if err := w.fs.SetXattr(p, name, v, 0); err != nil {
			w.failErr(err, "setxattr %s %s", p, name)
			return
		}
		f.xattrs[name] = v
	case x < 94: // the shared directory: create, remove, move in and out
		switch y := w.rng.IntN(4); {
		case y < 2 || len(w.shared) == 0:
			p := path.Join(sharedDir, w.name())
			f := &wfile{data: w.data(w.rng.IntN(3000)), xattrs: map[string][]byte{}, perm: 0o600}
			fl, err := w.fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				w.failErr(err, "create %s", p)
				return
			}
			if m, err := fl.Write(f.data); err != nil {
				f.data = f.data[:m]
				w.failErr(err, "write %s", p)
			}
			fl.Close()
			w.shared[p] = f
		case y == 2:
			p, _ := pickKey(w.rng, w.shared)
			if err := w.fs.Remove(p); err != nil {
				w.failErr(err, "remove %s", p)
				return
			}
			delete(w.shared, p)
		default: // move a file out of the shared directory (cross-directory rename)
			p, _ := pickKey(w.rng, w.shared)
			np := path.Join(dir, w.name())
			if err := w.fs.Rename(p, np); err != nil {
				w.failErr(err, "rename %s %s", p, np)
				return
			}
			w.files[np] = w.shared[p]
			delete(w.shared, p)
		}
	default: // remove an empty directory of its own, or make sure a full one refuses
		if len(w.dirs) < 2 {
			return
		}
		i := 1 + w.rng.IntN(len(w.dirs)-1)
		d := w.dirs[i]
		empty := true
		for p := range w.files {
			empty = empty && !strings.HasPrefix(p, d+"/")
		}
		for p := range w.links {
			empty = empty && !strings.HasPrefix(p, d+"/")
		}
		for _, e := range w.dirs {
			empty = empty && !strings.HasPrefix(e, d+"/")
		}
		err := w.fs.Remove(d)
		switch {
		case empty && err != nil:
			w.failErr(err, "rmdir %s", d)
		case !empty && !errors.Is(err, syscall.ENOTEMPTY):
			w.fail("rmdir of non-empty %s: %v, want ENOTEMPTY", d, err)
		case empty:
			w.dirs = append(w.dirs[:i], w.dirs[i+1:]...)
		}
	}
}

// reader walks the whole tree until stop, reading everything it finds.
// Entries may vanish under it; nothing else may go wrong.
func reader(fsys *ext4go.FS, stop *atomic.Bool, out chan<- string, walks *atomic.Int64) {
	errs := make(chan string)
	go func() {
		for e := range errs {
			select {
			case out <- e:
			default: // enough reported
			}
		}
	}()
	defer close(errs)
	gone := func(err error) bool {
		// What a walk meets when entries change under it (a name that
		// became a directory, or a symlink, since it was listed).
		return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) ||
			errors.Is(err, syscall.ELOOP)
	}
	for !stop.Load() {
		fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if stop.Load() {
				return fs.SkipAll
			}
			if err != nil {
				if !gone(err) {
					errs <- fmt.Sprintf("reader: walk %s: %v", p, err)
				}
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				if !gone(err) {
					errs <- fmt.Sprintf("reader: info %s: %v", p, err)
				}
				return nil
			}
			if st, ok := fi.Sys().(*ext4go.Stat); ok {
				if _, err := st.Xattrs(); err != nil && !gone(err) {
					errs <- fmt.Sprintf("reader: xattrs %s: %v", p, err)
				}
			}
			switch {
			case fi.Mode().IsRegular():
				b, err := fsys.ReadFile(p)
				if err != nil && !gone(err) {
					errs <- fmt.Sprintf("reader: read %s: %v", p, err)
				}
				_ = b
			case fi.Mode()&fs.ModeSymlink != 0:
				if _, err := fsys.ReadLink(p); err != nil && !gone(err) && !errors.Is(err, syscall.EINVAL) {
					errs <- fmt.Sprintf("reader: readlink %s: %v", p, err)
				}
			}
			return nil
		})
		walks.Add(1)
	}
}

// TestConcurrentWriters runs writers and readers at once, then checks the
// result with e2fsck, ext4go and the kernel.
func TestConcurrentWriters(t *testing.T) {
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k-nocsum", []string{"-t", "ext4", "-b", "1024", "-O", "^metadata_csum"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			testConcurrent(t, cfg.args)
		})
	}
}

func testConcurrent(t *testing.T, args []string) {
	nWriters, nReaders, steps := 12, 3, 250
	if testing.Short() {
		nWriters, steps = 8, 80
	}
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 256<<20, args...)
	fsys := openRW(t, image)
	const shared = "shared"
	if err := fsys.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	workers := make([]*worker, nWriters)
	for i := range workers {
		w := &worker{id: i, fs: fsys, rng: rand.New(rand.NewPCG(uint64(i), 99)), root: fmt.Sprintf("w%d", i),
			files: map[string]*wfile{}, links: map[string]string{}, shared: map[string]*wfile{}}
		w.dirs = []string{w.root}
		workers[i] = w
	}
	// Each worker makes its own root concurrently with the others.
	var stop atomic.Bool
	errs := make(chan string, 1000)
	var walks atomic.Int64
	var readers sync.WaitGroup
	for i := 0; i < nReaders; i++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			reader(fsys, &stop, errs, &walks)
		}()
	}
	var syncs atomic.Int64
	readers.Add(1)
	go func() {
		defer readers.Done()
		for !stop.Load() {
			if err := fsys.Sync(); err != nil {
				select {
				case errs <- fmt.Sprintf("sync: %v", err):
				default:
				}
				return
			}
			syncs.Add(1)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fsys.Mkdir(w.root, 0o755); err != nil {
				w.failErr(err, "mkdir %s", w.root)
				return
			}
			for i := 0; i < steps && len(w.errs) == 0; i++ {
				w.step(shared)
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	readers.Wait()
	close(errs)
	failed := false
	for e := range errs {
		t.Error(e)
		failed = true
	}
	for _, w := range workers {
		for _, e := range w.errs {
			t.Error(e)
			failed = true
		}
	}
	t.Logf("%d readers walked the tree %d times, %d syncs", nReaders, walks.Load(), syncs.Load())
	if err := fsys.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if failed {
		return
	}
	testutil.RequireFsckClean(t, image)
	compareWorkers(t, image, workers, nil)
}

// TestConcurrentXattrReaders: readers of xattrs race writers that keep
// giving files an xattr block and taking it away again, while other files
// grow into the freed blocks and commits make them reusable. A reader must
// never see a block that is no longer (or not yet) the file's.
func TestConcurrentXattrReaders(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024")
	fsys := openRW(t, image)
	const files = 4
	big := map[bool][]byte{false: bytes.Repeat([]byte("a"), 700), true: bytes.Repeat([]byte("b"), 600)}
	for i := 0; i < files; i++ {
		f, err := fsys.Create(fmt.Sprintf("x%d", i))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var stop atomic.Bool
	errs := make(chan string, 100)
	report := func(format string, args ...any) {
		select {
		case errs <- fmt.Sprintf(format, args...):
		default: // enough reported
		}
	}
	var wg, bg sync.WaitGroup
	iters := 300
	if testing.Short() {
		iters = 100
	}
	for i := 0; i < files; i++ {
		wg.Add(1)
		go func() { // give and take an xattr block
			defer wg.Done()
			name := fmt.Sprintf("x%d", i)
			for k := 0; k < iters; k++ {
				if err := fsys.SetXattr(name, "user.big", big[k%2 == 0], 0); err != nil {
					report("setxattr: %v", err)
					return
				}
				if k%3 == 0 {
					if err := fsys.RemoveXattr(name, "user.big"); err != nil {
						report("removexattr: %v", err)
						return
					}
				}
			}
		}()
	}
	bg.Add(3)
	go func() { // reuse freed blocks
		defer bg.Done()
		f, err := fsys.Create("grow")
		if err != nil {
			report("%v", err)
			return
		}
		defer f.Close()
		for off := int64(0); !stop.Load(); off += 1024 {
			if _, err := f.WriteAt(bytes.Repeat([]byte{0}, 1024), off); err != nil {
				report("grow: %v", err)
				return
			}
		}
	}()
	go func() { // make freed blocks reusable
		defer bg.Done()
		for !stop.Load() {
			if err := fsys.Sync(); err != nil {
				report("sync: %v", err)
				return
			}
		}
	}()
	go func() {
		defer bg.Done()
		for !stop.Load() {
			for i := 0; i < files; i++ {
				v, err := fsys.GetXattr(fmt.Sprintf("x%d", i), "user.big")
				if err != nil && !errors.Is(err, syscall.ENODATA) {
					report("getxattr: %v", err)
					continue
				}
				if err == nil && !bytes.Equal(v, big[false]) && !bytes.Equal(v, big[true]) {
					report("getxattr: a value of %d bytes that was never set", len(v))
				}
			}
		}
	}()
	wg.Wait()
	stopBackground(t, &stop, &bg, errs)
	closeChecked(t, fsys, image)
}

// TestConcurrentOrphans: files unlinked while open (orphans) and closed
// again by many goroutines at once, while commits run all the time.
func TestConcurrentOrphans(t *testing.T) {
	for _, c := range []struct{ name, features string }{
		{"list", "^orphan_file"},
		{"orphan_file", "orphan_file"},
	} {
		t.Run(c.name, func(t *testing.T) { concurrentOrphans(t, c.features) })
	}
}

func concurrentOrphans(t *testing.T, features string) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "4096", "-O", features)
	fsys := openRW(t, image)
	const workers = 8
	iters := 150
	if testing.Short() {
		iters = 50
	}
	var stop atomic.Bool
	errs := make(chan string, workers+1)
	var wg, bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for !stop.Load() {
			if err := fsys.Sync(); err != nil {
				errs <- fmt.Sprintf("sync: %v", err)
				return
			}
		}
	}()
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < iters; k++ {
				name := fmt.Sprintf("o%d-%d", i, k)
				f, err := fsys.Create(name)
				if err == nil {
					_, err = f.Write(bytes.Repeat([]byte{byte(k)}, 5000))
				}
				if err == nil {
					err = fsys.Remove(name)
				}
				if err == nil {
					_, err = f.WriteAt([]byte("still here"), 10000)
				}
				if f != nil {
					if cerr := f.Close(); err == nil {
						err = cerr
					}
				}
				if err != nil {
					errs <- fmt.Sprintf("worker %d: %s: %v", i, name, err)
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("orphan workers stuck (deadlock?):\n%s", buf[:runtime.Stack(buf, true)])
	}
	stopBackground(t, &stop, &bg, errs)
	closeChecked(t, fsys, image)
}

// stopBackground stops the background goroutines of a concurrency test and
// reports the errors the workers sent.
func stopBackground(t *testing.T, stop *atomic.Bool, bg *sync.WaitGroup, errs chan string) {
	t.Helper()
	stop.Store(true)
	bg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// closeChecked closes fsys and requires e2fsck to find image clean.
func closeChecked(t *testing.T, fsys *ext4go.FS, image string) {
	t.Helper()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d changes reached nodes that no longer owned their inode", n)
	}
	testutil.RequireFsckClean(t, image)
}
