//go:build linux

package ext4go_test

// Delayed allocation (delalloc.go): layout, reads of delayed data, ENOSPC
// at the write, crashes during flushes, concurrency against a model, the
// kernel's read-back, and failed flushes.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// daImage makes a fresh image of size bytes with block size bs and opens it
// writable with opts (Writable is set).
func daImage(t *testing.T, size int64, bs int, opts ext4go.Options) (string, *ext4go.FS) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "img")
	if err := mkfs.Format(image, mkfs.Options{Size: size, BlockSize: bs}); err != nil {
		t.Fatal(err)
	}
	opts.Writable = true
	fsys, err := ext4go.Open(image, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return image, fsys
}

// daData is content that never holds a zero byte (or 0xAA, the stale
// pattern of the crash test), so that a block read back as a hole shows.
func daData(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(0x11 + (seed*31+i*7+i/4093)%97)
	}
	return b
}

// writeChunks writes data to f in chunks of size chunk, as tar does.
func writeChunks(t *testing.T, f *ext4go.File, data []byte, chunk int) {
	t.Helper()
	for off := 0; off < len(data); off += chunk {
		if _, err := f.Write(data[off:min(off+chunk, len(data))]); err != nil {
			t.Fatal(err)
		}
	}
}

// writeClosed creates name, writes data into it in tar's 10 KiB records,
// closes it and returns data.
func writeClosed(t *testing.T, fsys *ext4go.FS, name string, data []byte) []byte {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, f, data, 10<<10)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDelallocOneExtent(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			image, fsys := daImage(t, 128<<20, bs, ext4go.Options{})
			want := map[string][]byte{}
			// Files written one after the other in tar's 10 KiB records,
			// each closed before the next.
			for i, size := range []int{32 << 10, 1 << 20, 100<<10 + 123, 5000, 3 << 20} {
				name := fmt.Sprintf("seq%d", i)
				want[name] = writeClosed(t, fsys, name, daData(i, size))
			}
			// Two files written in alternation, both open at once.
			a, b := daData(10, 600<<10), daData(11, 700<<10)
			fa, err := fsys.Create("alt-a")
			if err != nil {
				t.Fatal(err)
			}
			fb, err := fsys.Create("alt-b")
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < max(len(a), len(b)); off += 4 << 10 {
				if off < len(a) {
					if _, err := fa.Write(a[off:min(off+4<<10, len(a))]); err != nil {
						t.Fatal(err)
					}
				}
				if off < len(b) {
					if _, err := fb.Write(b[off:min(off+4<<10, len(b))]); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := fa.Close(); err != nil {
				t.Fatal(err)
			}
			if err := fb.Close(); err != nil {
				t.Fatal(err)
			}
			want["alt-a"], want["alt-b"] = a, b
			for _, name := range slices.Sorted(func(yield func(string) bool) {
				for k := range want {
					if !yield(k) {
						return
					}
				}
			}) {
				ex, err := fsys.Extents(name)
				if err != nil {
					t.Fatal(err)
				}
				if len(ex) != 1 {
					t.Errorf("%s (%d bytes): %d extents, want 1: %+v", name, len(want[name]), len(ex), ex)
				}
				got, err := fsys.ReadFile(name)
				if err != nil || !bytes.Equal(got, want[name]) {
					t.Errorf("%s: read back %d bytes, %v", name, len(got), err)
				}
			}
			if r, n := ext4go.Delayed(fsys); r != 0 || n != 0 {
				t.Errorf("after every close: %d clusters reserved, %d bytes delayed", r, n)
			}
			closeChecked(t, fsys, image)
		})
	}
}

func TestDelallocReadBeforeClose(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			image, fsys := daImage(t, 64<<20, bs, ext4go.Options{CommitInterval: -1})
			f, err := fsys.Create("f")
			if err != nil {
				t.Fatal(err)
			}
			var model []byte
			write := func(off int, p []byte) {
				t.Helper()
				if _, err := f.WriteAt(p, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(p); end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], p)
			}
			check := func(when string) {
				t.Helper()
				got := make([]byte, len(model)+100)
				n, err := f.ReadAt(got, 0)
				if err != io.EOF || n != len(model) || !bytes.Equal(got[:n], model) {
					t.Fatalf("%s: read %d bytes (%v), want %d, equal %v", when, n, err, len(model), bytes.Equal(got[:min(n, len(model))], model[:min(n, len(model))]))
				}
				// Unaligned reads across delayed and hole blocks.
				for _, r := range [][2]int{{1, 3000}, {bs - 1, 2}, {4999, 15002}, {len(model) - 7, 7}} {
					buf := make([]byte, r[1])
					if _, err := f.ReadAt(buf, int64(r[0])); err != nil && err != io.EOF {
						t.Fatal(err)
					}
					if !bytes.Equal(buf, model[r[0]:r[0]+r[1]]) {
						t.Fatalf("%s: read of [%d, +%d) differs", when, r[0], r[1])
					}
				}
			}
			write(0, daData(1, 5000))
			write(20000, daData(2, 100))
			write(1<<20-10, daData(3, 3000))
			if ext4go.DelayedBlocks(f) == 0 {
				t.Fatal("nothing delayed")
			}
			fi, _ := f.Stat()
			if blocks := fi.Sys().(*ext4go.Stat).Blocks; blocks < ext4go.DelayedBlocks(f)*int64(bs/512) {
				t.Errorf("stat blocks %d, below the %d delayed blocks", blocks, ext4go.DelayedBlocks(f))
			}
			check("delayed")
			write(4000, daData(4, 2000)) // over delayed data and past it
			check("overwritten")
			// A truncate into a delayed block zeros its tail; growing
			// back reads zeros.
			if err := f.Truncate(20050); err != nil {
				t.Fatal(err)
			}
			model = model[:20050]
			check("truncated")
			if err := f.Truncate(30000); err != nil {
				t.Fatal(err)
			}
			model = append(model, make([]byte, 30000-20050)...)
			check("grown")
			write(25000, daData(5, 9000))
			// DataRanges maps the delayed blocks first.
			rs, err := f.DataRanges()
			if err != nil {
				t.Fatal(err)
			}
			if ext4go.DelayedBlocks(f) != 0 {
				t.Errorf("DataRanges left %d blocks delayed", ext4go.DelayedBlocks(f))
			}
			if len(rs) == 0 || rs[0].Off != 0 {
				t.Errorf("data ranges %+v", rs)
			}
			check("mapped")
			write(40000, daData(6, 12345))
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			write(60000, daData(7, 1))
			check("after sync")
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := fsys.ReadFile("f")
			if err != nil || !bytes.Equal(got, model) {
				t.Fatalf("after close: %d bytes, %v", len(got), err)
			}
			closeChecked(t, fsys, image)
			ro := openImage(t, image)
			defer ro.Close()
			if got, err := ro.ReadFile("f"); err != nil || !bytes.Equal(got, model) {
				t.Fatalf("reopened: %d bytes, %v", len(got), err)
			}
		})
	}
}

// TestDelallocENOSPC fills a small filesystem with delayed writes of files
// kept open: the write that does not fit fails with ENOSPC, and the
// flushes at Close never do.
func TestDelallocENOSPC(t *testing.T) {
	for _, chunk := range []int{64 << 10, 1 << 20} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			image, fsys := daImage(t, 16<<20, 1024, ext4go.Options{CommitInterval: -1, DelayedLimit: 64 << 20})
			var files []*ext4go.File
			models := map[string][]byte{}
			for i := range 4 {
				f, err := fsys.Create(fmt.Sprintf("f%d", i))
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			maxReserved := int64(0)
			full := false
			for round := 0; !full && round < 1000; round++ {
				for i, f := range files {
					name := fmt.Sprintf("f%d", i)
					data := daData(round*4+i, chunk)
					n, err := f.Write(data)
					models[name] = append(models[name], data[:n]...)
					if r, _ := ext4go.Delayed(fsys); r > maxReserved {
						maxReserved = r
					}
					if err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("write: %v", err)
						}
						full = true
						break
					}
				}
			}
			if !full {
				t.Fatal("the filesystem never filled")
			}
			if maxReserved == 0 {
				t.Error("no write was delayed")
			}
			// A new file's writes fail soon too, at the write (what the
			// metadata allowances held back may still fit).
			g, err := fsys.Create("late")
			if err != nil && !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			if err == nil {
				late := daData(99, 4<<20)
				total := 0
				for total < len(late) {
					n, err := g.Write(late[total:min(total+64<<10, len(late))])
					total += n
					if err != nil {
						if !errors.Is(err, syscall.ENOSPC) {
							t.Fatalf("late write: %v", err)
						}
						break
					}
				}
				if total == len(late) {
					t.Errorf("4 MiB more fit into a full filesystem")
				}
				models["late"] = late[:total]
				if err := g.Close(); err != nil {
					t.Errorf("close late: %v", err)
				}
			}
			for _, f := range files {
				if err := f.Close(); err != nil {
					t.Errorf("close (the flush) failed: %v", err)
				}
			}
			for name, want := range models {
				got, err := fsys.ReadFile(name)
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: %d bytes, want %d, %v", name, len(got), len(want), err)
				}
			}
			t.Logf("peak reservation %d clusters; usage %+v", maxReserved, fsys.Usage())
			closeChecked(t, fsys, image)
		})
	}
}

// TestDelallocFlushFault makes flushes fail: the file's next Sync or Close
// reports it, the data stays delayed for the next try, and a Close of the
// filesystem that cannot write it drops it, leaving a consistent image.
func TestDelallocFlushFault(t *testing.T) {
	for _, kind := range []string{"write", "block"} {
		t.Run(kind, func(t *testing.T) {
			image, fsys := daImage(t, 32<<20, 4096, ext4go.Options{CommitInterval: -1})
			data := daData(1, 70000)
			f, err := fsys.Create("f")
			if err != nil {
				t.Fatal(err)
			}
			writeChunks(t, f, data, 10<<10)
			r0, _ := ext4go.Delayed(fsys)
			free0 := fsys.Usage().FreeBlocks
			ext4go.SetFault(fsys, func(k string) bool { return k == kind })
			if err := f.Sync(); err == nil {
				t.Fatal("File.Sync with failing flushes succeeded")
			}
			if r, _ := ext4go.Delayed(fsys); r != r0 {
				t.Errorf("after the failed flush %d clusters reserved, want %d", r, r0)
			}
			// Blocks freed by a transaction are free once it commits.
			if err := ext4go.Commit(fsys); err != nil {
				t.Fatal(err)
			}
			if free := fsys.Usage().FreeBlocks; free != free0 {
				t.Errorf("after the failed flush %d blocks free, want %d (blocks not given back?)", free, free0)
			}
			// A background flush fails: the next Sync says so, once.
			if err := fsys.Sync(); err == nil {
				t.Fatal("FS.Sync with failing flushes succeeded")
			}
			ext4go.SetFault(fsys, nil)
			if err := f.Close(); err != nil {
				t.Fatalf("close after the fault went: %v", err)
			}
			if got, err := fsys.ReadFile("f"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes, %v", len(got), err)
			}
			// A second file whose data cannot be written by Close.
			g, err := fsys.Create("g")
			if err != nil {
				t.Fatal(err)
			}
			writeChunks(t, g, daData(2, 50000), 10<<10)
			ext4go.SetFault(fsys, func(k string) bool { return k == kind })
			if err := g.Close(); err == nil {
				t.Error("close of g with failing flushes succeeded")
			}
			if err := fsys.Close(); err == nil {
				t.Error("FS.Close that dropped delayed data succeeded")
			}
			if code, out := testutil.E2fsckFN(t, image); code != 0 {
				t.Fatalf("e2fsck -fn exit %d:\n%s", code, out)
			}
			ro := openImage(t, image)
			defer ro.Close()
			if got, err := ro.ReadFile("f"); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("f reopened: %d bytes, %v", len(got), err)
			}
			if got, err := ro.ReadFile("g"); err != nil || len(got) != 50000 || bytes.ContainsFunc(got, func(r rune) bool { return r != 0 }) {
				t.Errorf("g reopened: %d bytes, %v; want 50000 zeros (its size was written, its data dropped)", len(got), err)
			}
		})
	}
}

// TestDelallocCrash cuts power during workloads of delayed writes and their
// flushes: every crash image replays to an e2fsck-clean filesystem, files
// synced before the cut are whole, and no file ever shows another file's
// stale bytes (the 0xAA of files removed and committed before).
func TestDelallocCrash(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			image := filepath.Join(dir, "img")
			testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", fmt.Sprint(bs))
			// Old files fill most of the space with 0xAA and go.
			fsys := openRW(t, image)
			stale := bytes.Repeat([]byte{0xAA}, 1<<20)
			for i := range 20 {
				if err := fsys.WriteFile(fmt.Sprintf("old%d", i), stale, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			closeChecked(t, fsys, image)
			fsys = openRW(t, image)
			for i := range 20 {
				if err := fsys.Remove(fmt.Sprintf("old%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			closeChecked(t, fsys, image)
			base, err := os.ReadFile(image)
			if err != nil {
				t.Fatal(err)
			}
			fsys, rd := openRecorded(t, image)
			rng := rand.New(rand.NewPCG(uint64(bs), 7))
			final := map[string][]byte{}
			var synced []map[string][]byte // per Sync: the files then
			var marks []int
			var open []*ext4go.File
			for phase := range 4 {
				for i := range 6 {
					name := fmt.Sprintf("p%d-%d", phase, i)
					data := daData(phase*10+i, 1000+rng.IntN(300000))
					f, err := fsys.Create(name)
					if err != nil {
						t.Fatal(err)
					}
					writeChunks(t, f, data, 512+rng.IntN(16<<10))
					final[name] = data
					if i%3 == 0 {
						open = append(open, f) // flushed by the Sync
					} else if err := f.Close(); err != nil {
						t.Fatal(err)
					}
				}
				if err := fsys.Sync(); err != nil {
					t.Fatal(err)
				}
				snap := map[string][]byte{}
				for k, v := range final {
					snap[k] = v
				}
				synced = append(synced, snap)
				marks = append(marks, rd.mark())
			}
			for _, f := range open {
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			}
			closeChecked(t, fsys, image)
			log := rd.log
			var cuts []int
			for i, r := range log {
				if r.flush {
					cuts = append(cuts, i+1)
				}
			}
			for range 16 {
				cuts = append(cuts, 1+rng.IntN(len(log)))
			}
			slices.Sort(cuts)
			cuts = slices.Compact(cuts)
			for _, cut := range cuts {
				img := crashImage(t, dir, base, log[:cut], rng)
				e2 := img + ".e2fsck"
				copyFile(t, img, e2)
				if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", e2).CombinedOutput(); err != nil {
					if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
						t.Fatalf("crash at %d: e2fsck journal replay: %v\n%s", cut, err, out)
					}
				}
				if code, out := testutil.E2fsckFN(t, e2); code != 0 {
					t.Fatalf("crash at %d of %d: e2fsck -fn after the replay exits %d:\n%s", cut, len(log), code, out)
				}
				ro, err := ext4go.Open(e2, nil)
				if err != nil {
					t.Fatal(err)
				}
				var want map[string][]byte
				for p, m := range marks {
					if m <= cut {
						want = synced[p]
					}
				}
				for name, data := range final {
					got, err := ro.ReadFile(name)
					if err != nil {
						if _, ok := want[name]; ok {
							t.Errorf("crash at %d: synced %s: %v", cut, name, err)
						}
						continue
					}
					if _, ok := want[name]; ok && !bytes.Equal(got, data) {
						t.Errorf("crash at %d: synced %s: %d bytes, want %d", cut, name, len(got), len(data))
						continue
					}
					if len(got) > len(data) {
						t.Errorf("crash at %d: %s has %d bytes, more than written (%d)", cut, name, len(got), len(data))
						continue
					}
					for i, c := range got {
						if c != data[i] && c != 0 {
							t.Errorf("crash at %d: %s byte %d is %#x: neither written (%#x) nor zero", cut, name, i, c, data[i])
							break
						}
					}
				}
				ro.Close()
				os.Remove(e2)
				os.Remove(img)
				if t.Failed() {
					t.FailNow()
				}
			}
			t.Logf("%d records, %d crash points", len(log), len(cuts))
		})
	}
}

// TestDelallocConcurrent runs writers, truncaters, syncs and mapping
// queries on the same and on different files at once, with a small bound
// on delayed data so that writers flush themselves and the background
// writeback runs, against a model of every file.
func TestDelallocConcurrent(t *testing.T) {
	image, fsys := daImage(t, 256<<20, 1024, ext4go.Options{CommitInterval: 20 * time.Millisecond, DelayedLimit: 512 << 10})
	const own = 4     // goroutines with a file each
	const sharers = 3 // writers of disjoint regions of one shared file
	const region = 96 << 10
	ops := 300
	if testing.Short() {
		ops = 80
	}
	shared, err := fsys.Create("shared")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	fail := func(format string, args ...any) {
		select {
		case errs <- fmt.Errorf(format, args...):
		default:
		}
	}
	models := make([][]byte, own)
	for g := range own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			name := fmt.Sprintf("own%d", g)
			f, err := fsys.Create(name)
			if err != nil {
				fail("create: %v", err)
				return
			}
			var model []byte
			for i := range ops {
				switch op := rng.IntN(10); {
				case op < 6:
					off := rng.IntN(400 << 10)
					data := daData(g*1000+i, 1+rng.IntN(40<<10))
					if _, err := f.WriteAt(data, int64(off)); err != nil {
						fail("%s write: %v", name, err)
						return
					}
					if end := off + len(data); end > len(model) {
						model = append(model, make([]byte, end-len(model))...)
					}
					copy(model[off:], data)
				case op < 8:
					size := rng.IntN(len(model) + 1)
					if err := f.Truncate(int64(size)); err != nil {
						fail("%s truncate: %v", name, err)
						return
					}
					model = model[:size]
				case op < 9:
					if len(model) > 0 {
						off := rng.IntN(len(model))
						n := rng.IntN(len(model) - off + 1)
						if n > 0 {
							if err := f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, int64(off), int64(n)); err != nil {
								fail("%s punch: %v", name, err)
								return
							}
							clear(model[off : off+n])
						}
					}
				default:
					if rng.IntN(2) == 0 {
						if _, err := f.Extents(); err != nil {
							fail("%s extents: %v", name, err)
							return
						}
					} else if err := f.Sync(); err != nil {
						fail("%s sync: %v", name, err)
						return
					}
				}
				got := make([]byte, len(model))
				if n, err := f.ReadAt(got, 0); n != len(model) || (err != nil && err != io.EOF) || !bytes.Equal(got, model) {
					fail("%s op %d: read %d bytes (%v), want %d, equal %v", name, i, n, err, len(model), bytes.Equal(got[:n], model[:n]))
					return
				}
			}
			models[g] = model
			if err := f.Close(); err != nil {
				fail("%s close: %v", name, err)
			}
		}()
	}
	sharedModel := make([]byte, sharers*region)
	for g := range sharers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			base := g * region
			for i := range ops {
				off := rng.IntN(region - 1)
				data := daData(g*7000+i, 1+rng.IntN(min(region-off, 8<<10)))
				if _, err := shared.WriteAt(data, int64(base+off)); err != nil {
					fail("shared write: %v", err)
					return
				}
				copy(sharedModel[base+off:], data)
				got := make([]byte, region)
				if _, err := shared.ReadAt(got, int64(base)); err != nil && err != io.EOF {
					fail("shared read: %v", err)
					return
				}
				if !bytes.Equal(got, sharedModel[base:base+region]) {
					fail("shared region %d after write %d differs", g, i)
					return
				}
			}
		}()
	}
	// The truncater of the shared file's tail, above every region, and
	// a queryer of its mapping.
	var tailModel []byte
	wg.Add(2)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 3))
		tail := int64(sharers * region)
		for i := range ops {
			if rng.IntN(2) == 0 {
				data := daData(90000+i, 1+rng.IntN(20<<10))
				off := rng.IntN(64 << 10)
				if _, err := shared.WriteAt(data, tail+int64(off)); err != nil {
					fail("tail write: %v", err)
					return
				}
				if end := off + len(data); end > len(tailModel) {
					tailModel = append(tailModel, make([]byte, end-len(tailModel))...)
				}
				copy(tailModel[off:], data)
			} else {
				size := rng.IntN(len(tailModel) + 1)
				if err := shared.Truncate(tail + int64(size)); err != nil {
					fail("tail truncate: %v", err)
					return
				}
				tailModel = tailModel[:size]
			}
		}
	}()
	go func() {
		defer wg.Done()
		for range ops / 4 {
			if _, err := shared.DataRanges(); err != nil {
				fail("data ranges: %v", err)
				return
			}
			if err := fsys.Sync(); err != nil {
				fail("sync: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"shared": append(bytes.Clone(sharedModel), tailModel...)}
	if len(tailModel) == 0 {
		// The file ends where the last truncate or region write left it.
		fi, err := fsys.Stat("shared")
		if err != nil {
			t.Fatal(err)
		}
		want["shared"] = want["shared"][:min(int(fi.Size()), len(want["shared"]))]
	}
	for g, m := range models {
		want[fmt.Sprintf("own%d", g)] = m
	}
	check := func(how string, fsys *ext4go.FS) {
		for name, m := range want {
			got, err := fsys.ReadFile(name)
			if err != nil || !bytes.Equal(got, m) {
				t.Errorf("%s: %s: %d bytes, want %d, %v", how, name, len(got), len(m), err)
			}
		}
	}
	check("before close", fsys)
	if r, n := ext4go.Delayed(fsys); r != 0 || n != 0 {
		t.Errorf("every file closed: %d clusters still reserved, %d bytes delayed", r, n)
	}
	closeChecked(t, fsys, image)
	ro := openImage(t, image)
	defer ro.Close()
	check("reopened", ro)
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestDelallocKernelReadBack writes files through delayed allocation —
// small chunked writes, sparse writes, alternating writers, a truncated
// file, a file still open at FS.Close — and has the kernel read them.
func TestDelallocKernelReadBack(t *testing.T) {
	testutil.RequireMount(t)
	for _, bs := range []int{1024, 4096} {
		t.Run(fmt.Sprint(bs), func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", fmt.Sprint(bs))
			fsys := openRW(t, image)
			want := map[string][]byte{}
			for i, size := range []int{0, 1, 4095, 4096, 32 << 10, 10<<10 + 1, 1 << 20, 2<<20 + 17} {
				name := fmt.Sprintf("chunked%d", i)
				want[name] = writeClosed(t, fsys, name, daData(i, size))
			}
			// Sparse: data at scattered offsets, written backwards.
			sp, err := fsys.Create("sparse")
			if err != nil {
				t.Fatal(err)
			}
			var sparse []byte
			for _, off := range []int{3 << 20, 1<<20 + 5, 700000, 12345, 0} {
				d := daData(off, 5000)
				if _, err := sp.WriteAt(d, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(d); end > len(sparse) {
					sparse = append(sparse, make([]byte, end-len(sparse))...)
				}
				copy(sparse[off:], d)
			}
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}
			want["sparse"] = sparse
			// Truncated while delayed, then appended to.
			tr, err := fsys.Create("truncated")
			if err != nil {
				t.Fatal(err)
			}
			writeChunks(t, tr, daData(50, 200000), 7000)
			if err := tr.Truncate(77777); err != nil {
				t.Fatal(err)
			}
			writeChunks(t, tr, daData(51, 30000), 3000)
			trData := append(daData(50, 200000)[:77777], make([]byte, 200000-77777)...)
			trData = append(trData, daData(51, 30000)...)
			if err := tr.Close(); err != nil {
				t.Fatal(err)
			}
			want["truncated"] = trData
			// Still open when the filesystem closes.
			op, err := fsys.Create("open")
			if err != nil {
				t.Fatal(err)
			}
			writeChunks(t, op, daData(60, 500000), 10<<10)
			want["open"] = daData(60, 500000)
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			if code, out := testutil.E2fsckFN(t, image); code != 0 {
				t.Fatalf("e2fsck -fn exit %d:\n%s", code, out)
			}
			mp := testutil.Mount(t, image, true)
			for name, data := range want {
				got, err := os.ReadFile(filepath.Join(mp, name))
				if err != nil || !bytes.Equal(got, data) {
					t.Errorf("kernel reads %s: %d bytes, want %d, %v", name, len(got), len(data), err)
				}
			}
		})
	}
}

// TestDelallocTriggers: the background writeback flushes data delayed
// longer than the commit interval, a writer past the memory bound flushes
// its own file, and unlinking a file drops its delayed data with its
// reservation.
func TestDelallocTriggers(t *testing.T) {
	image, fsys := daImage(t, 64<<20, 4096, ext4go.Options{CommitInterval: 50 * time.Millisecond, DelayedLimit: 256 << 10})
	bg, err := fsys.Create("background")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, bg, daData(1, 100<<10), 10<<10)
	if ext4go.DelayedBlocks(bg) == 0 {
		t.Fatal("nothing delayed")
	}
	deadline := time.Now().Add(10 * time.Second)
	for ext4go.DelayedBlocks(bg) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ext4go.DelayedBlocks(bg); n != 0 {
		t.Errorf("the background writeback left %d blocks delayed", n)
	}
	if ex, err := bg.Extents(); err != nil || len(ex) != 1 {
		t.Errorf("background-flushed file: extents %+v, %v", ex, err)
	}

	big, err := fsys.Create("big")
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < 4<<20; off += 16 << 10 {
		if _, err := big.Write(daData(off, 16<<10)); err != nil {
			t.Fatal(err)
		}
		if _, n := ext4go.Delayed(fsys); n > 256<<10+16<<10 {
			t.Fatalf("%d bytes delayed past a bound of 256 KiB", n)
		}
	}

	gone, err := fsys.Create("gone")
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, gone, daData(3, 50<<10), 10<<10)
	if err := fsys.Remove("gone"); err != nil {
		t.Fatal(err)
	}
	if err := gone.Close(); err != nil {
		t.Fatal(err)
	}
	if err := bg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := big.Close(); err != nil {
		t.Fatal(err)
	}
	if r, n := ext4go.Delayed(fsys); r != 0 || n != 0 {
		t.Errorf("all closed: %d clusters reserved, %d bytes delayed", r, n)
	}
	closeChecked(t, fsys, image)
}

// TestDelallocRaceNames races writers holding open files full of delayed
// data against renames and unlinks of the same names (and truncates of
// the same files), while bystander files written with delayed data are
// never touched. Afterwards each bystander reads back exactly, the image
// is e2fsck-clean, and no block holds data of a file that no longer has
// it (the reservation and the blocks of unlinked files' delayed data went
// away with them: the free count balances, which e2fsck checks).
func TestDelallocRaceNames(t *testing.T) {
	image, fsys := daImage(t, 64<<20, 1024, ext4go.Options{DelayedLimit: 256 << 10})
	bystanders := map[string][]byte{}
	for i := range 4 {
		name := fmt.Sprintf("by%d", i)
		bystanders[name] = writeClosed(t, fsys, name, daData(100+i, 20000+i*7777))
	}
	const names, rounds = 4, 60
	var wg sync.WaitGroup
	for w := range names {
		wg.Add(1)
		go func() { // a writer: open (or create) name w, write into holes, sometimes truncate, close
			defer wg.Done()
			for r := range rounds {
				f, err := fsys.OpenFile(fmt.Sprintf("n%d", w), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					continue // renamed away between the lookup and the open: fine
				}
				data := daData(w*1000+r, 3000+r*97)
				if _, err := f.WriteAt(data, int64(r%5)*4096); err != nil {
					t.Error(err)
				}
				if r%7 == 3 {
					if err := f.Truncate(int64(r * 100)); err != nil {
						t.Error(err)
					}
				}
				if err := f.Close(); err != nil {
					t.Error(err)
				}
			}
		}()
		wg.Add(1)
		go func() { // a renamer and unlinker of the same names
			defer wg.Done()
			for r := range rounds {
				a, b := fmt.Sprintf("n%d", w), fmt.Sprintf("n%d", (w+1)%names)
				switch r % 3 {
				case 0:
					fsys.Rename(a, b)
				case 1:
					fsys.Remove(a)
				default:
					fsys.Rename(b, fmt.Sprintf("m%d", w))
				}
			}
		}()
	}
	wg.Wait()
	for name, want := range bystanders {
		if got, err := fsys.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("bystander %s: %d bytes, %v", name, len(got), err)
		}
	}
	// Every file is closed (so flushed) or unlinked (so dropped): nothing
	// may stay reserved or held in memory.
	if res, held := ext4go.Delayed(fsys); res != 0 || held != 0 {
		t.Fatalf("after the race: %d clusters reserved, %d bytes held for delayed data", res, held)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if code, out := testutil.E2fsckFN(t, image); code != 0 {
		t.Fatalf("e2fsck -fn exit %d:\n%s", code, out)
	}
	ro := openImage(t, image)
	defer ro.Close()
	for name, want := range bystanders {
		if got, err := ro.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("bystander %s reopened: %d bytes, %v", name, len(got), err)
		}
	}
}

// TestLastWriterEndsStream: a file's allocator state (its stream and
// preallocation) goes at its last writer's close, though a reader, or the
// mount's own reference to the node, keeps the file open; while it stayed,
// every file of an untar through the mount counted as a live stream, and
// the allocator spread the later ones as if they were written at once.
// With two writers the state stays until the second one closes.
func TestLastWriterEndsStream(t *testing.T) {
	for _, noDelalloc := range []bool{false, true} {
		t.Run(fmt.Sprintf("nodelalloc=%v", noDelalloc), func(t *testing.T) {
			image, fsys := daImage(t, 64<<20, 4096, ext4go.Options{NoDelalloc: noDelalloc})
			streams := func(want int64, when string) {
				t.Helper()
				if got := ext4go.AllocStreams(fsys); got != want {
					t.Fatalf("%s: %d streams, want %d", when, got, want)
				}
			}
			data := daData(1, 3<<20)
			for i := range 3 {
				name := fmt.Sprintf("f%d", i)
				w, err := fsys.Create(name)
				if err != nil {
					t.Fatal(err)
				}
				r, err := fsys.Open(name)
				if err != nil {
					t.Fatal(err)
				}
				writeChunks(t, w, data, 128<<10)
				if err := w.Sync(); err != nil {
					t.Fatal(err)
				}
				streams(1, name+" written and synced")
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				streams(0, name+"'s writer closed, a reader open")
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
			// Two writers: the first close keeps the stream.
			w1, err := fsys.OpenFile("two", os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			w2, err := fsys.OpenFile("two", os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			writeChunks(t, w1, data, 128<<10)
			if err := w1.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := w1.Close(); err != nil {
				t.Fatal(err)
			}
			streams(1, "one of two writers closed")
			if _, err := w2.WriteAt(data[:4096], int64(len(data))); err != nil {
				t.Fatal(err)
			}
			if err := w2.Close(); err != nil {
				t.Fatal(err)
			}
			streams(0, "both writers closed")
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			if code, out := testutil.E2fsckFN(t, image); code != 0 {
				t.Fatalf("e2fsck -fn: exit %d\n%s", code, out)
			}
		})
	}
}
