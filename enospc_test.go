//go:build linux

package ext4go_test

// Running out of space and refusing to write what ext4go must not change:
// a full disk (blocks and inodes) fails with ENOSPC and leaves a
// filesystem e2fsck finds clean, with everything written before intact; an
// image whose journal needs recovery, one with an unknown ro_compat feature
// and one another writer holds are refused for writing and left untouched.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// pattern returns n bytes that differ per file and offset.
func pattern(seed, off int64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		x := uint64(seed)*0x9e3779b97f4a7c15 + uint64(off+int64(i))/8
		x ^= x >> 29
		p[i] = byte(x >> (8 * ((off + int64(i)) % 8)))
	}
	return p
}

func isENOSPC(err error) bool { return errors.Is(err, syscall.ENOSPC) }

// expectation is what a file must hold after the test.
type expectation struct {
	size int64
	data map[int64][]byte // written pieces
}

type enospcState struct {
	t     *testing.T
	fs    *ext4go.FS
	image string
	files map[string]*expectation
	dirs  map[string][]string // directory -> entries created in it
}

func (s *enospcState) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatal(err)
	}
}

// fill writes name in chunks until ENOSPC and returns the bytes written.
func (s *enospcState) fill(name string, seed int64, chunk int) int64 {
	s.t.Helper()
	f, err := s.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if isENOSPC(err) {
		return -1
	}
	s.must(err)
	defer f.Close()
	exp := &expectation{data: map[int64][]byte{}}
	s.files[name] = exp
	var off int64
	for {
		p := pattern(seed, off, chunk)
		n, err := f.WriteAt(p, off)
		if n > 0 {
			exp.data[off] = p[:n]
			off += int64(n)
			exp.size = off
		}
		if err != nil {
			if !isENOSPC(err) {
				s.t.Fatalf("write %s at %d: %v, want ENOSPC", name, off, err)
			}
			if n == len(p) {
				s.t.Fatalf("write %s: ENOSPC after writing everything", name)
			}
			break
		}
	}
	fi, err := f.Stat()
	s.must(err)
	if fi.Size() != off {
		s.t.Fatalf("%s: size %d after the writes that succeeded reached %d", name, fi.Size(), off)
	}
	return off
}

// verify checks every recorded file and directory through fsys.
func (s *enospcState) verify(fsys *ext4go.FS) {
	s.t.Helper()
	for name, exp := range s.files {
		fi, err := fsys.Stat(name)
		if err != nil {
			s.t.Errorf("%s: %v", name, err)
			continue
		}
		if fi.Size() != exp.size {
			s.t.Errorf("%s: size %d, want %d", name, fi.Size(), exp.size)
		}
		f, err := fsys.Open(name)
		s.must(err)
		for off, p := range exp.data {
			got := make([]byte, len(p))
			if _, err := f.(io.ReaderAt).ReadAt(got, off); err != nil && err != io.EOF {
				s.t.Errorf("%s: read at %d: %v", name, off, err)
			} else if !bytes.Equal(got, p) {
				s.t.Errorf("%s: %d bytes at %d differ from what was written", name, len(p), off)
			}
		}
		f.Close()
	}
	for dir, names := range s.dirs {
		ents, err := fsys.ReadDir(dir)
		if err != nil {
			s.t.Errorf("%s: %v", dir, err)
			continue
		}
		have := map[string]bool{}
		for _, e := range ents {
			have[e.Name()] = true
		}
		for _, n := range names {
			if !have[n] {
				s.t.Errorf("%s: entry %s lost", dir, n)
			}
		}
		if len(ents) != len(names) {
			s.t.Errorf("%s: %d entries, want %d", dir, len(ents), len(names))
		}
	}
}

// closeAndCheck closes the writable FS, requires e2fsck -fn to be clean
// and verifies everything through a read-only reopen.
func (s *enospcState) closeAndCheck() {
	s.t.Helper()
	s.must(s.fs.Close())
	s.fs = nil
	testutil.RequireFsckClean(s.t, s.image)
	ro, err := ext4go.Open(s.image, nil)
	s.must(err)
	s.verify(ro)
	ro.Close()
}

// TestENOSPCBlocks fills small images until no block is left, then checks
// that every kind of change needing a block fails with ENOSPC, that the
// ones needing none still work, that e2fsck is clean and the data written
// before is intact, and that space freed by removing files (in the same
// session, before any commit) can be used again.
func TestENOSPCBlocks(t *testing.T) {
	for _, cfg := range []struct {
		name string
		size int64
		args []string
	}{
		{"4k", 8 << 20, []string{"-t", "ext4", "-b", "4096"}},
		{"1k-nojournal", 6 << 20, []string{"-t", "ext4", "-b", "1024", "-O", "^has_journal"}},
		{"4k-nocsum", 8 << 20, []string{"-t", "ext4", "-b", "4096", "-O", "^metadata_csum,^64bit"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, cfg.size, cfg.args...)
			s := &enospcState{t: t, image: image, files: map[string]*expectation{}, dirs: map[string][]string{}}
			s.fs = openRW(t, image)
			defer func() {
				if s.fs != nil {
					s.fs.Close()
				}
			}()
			bs := int64(s.fs.BlockSize())
			s.must(s.fs.Mkdir("d", 0o755))
			s.dirs["d"] = nil
			s.dirs["."] = []string{"lost+found", "d"}
			// Small files to free later, one block each, and a file with
			// four separate extents (a full in-inode extent root).
			for i := 0; i < 8; i++ {
				name := fmt.Sprintf("small%d", i)
				p := pattern(int64(100+i), 0, int(bs))
				f, err := s.fs.Create(name)
				s.must(err)
				_, err = f.Write(p)
				s.must(err)
				s.must(f.Close())
				s.files[name] = &expectation{size: bs, data: map[int64][]byte{0: p}}
				s.dirs["."] = append(s.dirs["."], name)
			}
			sp := &expectation{data: map[int64][]byte{}}
			f, err := s.fs.Create("sparse")
			s.must(err)
			for i := int64(0); i < 4; i++ {
				off := i * 10 * bs
				p := pattern(7, off, int(bs))
				_, err := f.WriteAt(p, off)
				s.must(err)
				sp.data[off] = p
				sp.size = off + bs
			}
			s.must(f.Close())
			s.files["sparse"] = sp
			s.dirs["."] = append(s.dirs["."], "sparse")

			// Fill the disk: large writes, then smaller ones into the
			// last few blocks.
			for i, chunk := range []int{1 << 20, 64 << 10, int(bs), 1} {
				name := fmt.Sprintf("fill%d", i)
				if n := s.fill(name, int64(i), chunk); n >= 0 {
					s.dirs["."] = append(s.dirs["."], name)
				}
			}

			// Everything needing a block now fails with ENOSPC.
			fails := func(what string, err error) {
				t.Helper()
				if !isENOSPC(err) {
					t.Errorf("%s on a full disk: %v, want ENOSPC", what, err)
				}
			}
			f, err = s.fs.OpenFile("sparse", os.O_RDWR, 0)
			s.must(err)
			_, err = f.WriteAt([]byte("x"), 100*bs)
			fails("write into a hole", err)
			fails("fallocate", f.Fallocate(0, 200*bs, 4*bs))
			fails("fallocate keep size", f.Fallocate(ext4go.FallocKeepSize, 300*bs, bs))
			s.must(f.Close())
			fails("mkdir", s.fs.Mkdir("newdir", 0o755))
			fails("slow symlink", s.fs.Symlink(strings.Repeat("t", 100), "slowlink"))
			fails("xattr needing a block", s.fs.SetXattr("sparse", "user.big", make([]byte, bs/2), 0))

			// What needs no block still works.
			s.must(s.fs.Symlink("fast", "fastlink"))
			s.dirs["."] = append(s.dirs["."], "fastlink")
			s.must(s.fs.SetXattr("sparse", "user.small", []byte("in the inode"), 0))
			f, err = s.fs.Create("empty")
			s.must(err)
			s.must(f.Close())
			s.files["empty"] = &expectation{data: map[int64][]byte{}}
			s.dirs["."] = append(s.dirs["."], "empty")

			// Fill directory d until its block is full and it would have
			// to grow: then creating fails with ENOSPC, mkdir too.
			var refused string
			for i := 0; ; i++ {
				name := fmt.Sprintf("entry-%04d-%s", i, strings.Repeat("n", i%40))
				f, err := s.fs.OpenFile("d/"+name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					fails("create in a full directory", err)
					refused = name
					break
				}
				s.must(f.Close())
				s.dirs["d"] = append(s.dirs["d"], name)
				if i > 100000 {
					t.Fatal("directory never filled up")
				}
			}
			fails("mkdir in a full directory", s.fs.Mkdir("d/sub", 0o755))
			s.verify(s.fs)
			s.closeAndCheck()
			if t.Failed() {
				return
			}

			// Reopened, the disk is still full; freeing space makes the
			// same changes work, also before anything is committed.
			s.fs = openRW(t, image)
			fails("create in the full directory after reopening", func() error {
				_, err := s.fs.Create("d/" + refused)
				return err
			}())
			for i := 0; i < 8; i += 2 {
				name := fmt.Sprintf("small%d", i)
				s.must(s.fs.Remove(name))
				delete(s.files, name)
				s.dirs["."] = remove(s.dirs["."], name)
			}
			s.must(s.fs.Remove("fill0"))
			delete(s.files, "fill0")
			s.dirs["."] = remove(s.dirs["."], "fill0")
			f, err = s.fs.OpenFile("sparse", os.O_RDWR, 0)
			s.must(err)
			p := pattern(9, 100*bs, 100)
			_, err = f.WriteAt(p, 100*bs)
			s.must(err)
			sp.data[100*bs] = p
			sp.size = 100*bs + 100
			s.must(f.Close())
			s.must(s.fs.Mkdir("d/sub", 0o755))
			s.dirs["d"] = append(s.dirs["d"], "sub")
			s.dirs["d/sub"] = nil
			s.must(s.fs.SetXattr("sparse", "user.big", make([]byte, bs/2), 0))
			if n := s.fill("refill", 42, 256<<10); n <= 0 {
				t.Fatalf("refill wrote %d bytes after freeing space", n)
			}
			s.dirs["."] = append(s.dirs["."], "refill")
			s.verify(s.fs)
			s.closeAndCheck()
		})
	}
}

func remove(list []string, name string) []string {
	out := list[:0]
	for _, n := range list {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// TestENOSPCInodes creates files until the inodes run out.
func TestENOSPCInodes(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "4096", "-N", "64")
	s := &enospcState{t: t, image: image, files: map[string]*expectation{}, dirs: map[string][]string{}}
	s.fs = openRW(t, image)
	defer func() {
		if s.fs != nil {
			s.fs.Close()
		}
	}()
	s.dirs["."] = []string{"lost+found"}
	for i := 0; ; i++ {
		name := fmt.Sprintf("f%03d", i)
		var err error
		switch i % 3 {
		case 0:
			var f *ext4go.File
			if f, err = s.fs.Create(name); err == nil {
				p := pattern(int64(i), 0, 1000)
				_, err = f.Write(p)
				s.must(err)
				s.must(f.Close())
				s.files[name] = &expectation{size: 1000, data: map[int64][]byte{0: p}}
			}
		case 1:
			if err = s.fs.Mkdir(name, 0o700); err == nil {
				s.dirs[name] = nil
			}
		case 2:
			err = s.fs.Symlink("target-"+name, name)
		}
		if err != nil {
			if !isENOSPC(err) {
				t.Fatalf("create %s: %v, want ENOSPC", name, err)
			}
			break
		}
		s.dirs["."] = append(s.dirs["."], name)
		if i > 1000 {
			t.Fatal("inodes never ran out")
		}
	}
	for _, op := range []func() error{
		func() error { return s.fs.Mkdir("nodir", 0o755) },
		func() error { return s.fs.Symlink("x", "nolink") },
		func() error { return s.fs.Mknod("nofifo", 0x1000|0o644, 0) },
		func() error { _, err := s.fs.Create("nofile"); return err },
	} {
		if err := op(); !isENOSPC(err) {
			t.Errorf("create without free inodes: %v, want ENOSPC", err)
		}
	}
	// Links need no inode.
	s.must(s.fs.Link("f000", "f000-link"))
	s.dirs["."] = append(s.dirs["."], "f000-link")
	s.closeAndCheck()
	if t.Failed() {
		return
	}
	s.fs = openRW(t, image)
	s.must(s.fs.Remove("f003"))
	delete(s.files, "f003")
	s.dirs["."] = remove(s.dirs["."], "f003")
	s.must(s.fs.Mkdir("again", 0o755))
	s.dirs["again"] = nil
	s.dirs["."] = append(s.dirs["."], "again")
	if err := s.fs.Mkdir("and-again", 0o755); !isENOSPC(err) {
		t.Errorf("second mkdir after freeing one inode: %v, want ENOSPC", err)
	}
	s.closeAndCheck()
}

// requireRefused opens image writable with opts, which must fail with
// want, and checks that the image did not change by a single byte.
func requireRefused(t *testing.T, image string, opts ext4go.Options, want error) {
	t.Helper()
	before := fileHash(t, image)
	opts.Writable = true
	fsys, err := ext4go.Open(image, &opts)
	if err == nil {
		fsys.Close()
		t.Fatalf("writable open with %+v succeeded", opts)
	}
	if !errors.Is(err, want) {
		t.Errorf("writable open with %+v: %v, want %v", opts, err, want)
	}
	if fileHash(t, image) != before {
		t.Errorf("refused writable open with %+v changed the image", opts)
	}
}

// TestRefuseJournalRecovery: an image whose journal needs recovery is
// refused for writing (also with IgnoreJournal) and left byte-identical.
func TestJournalRecoveryOpens(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096")
	if ok, _ := testutil.CanMount(); ok {
		// A copy of the image taken while the kernel has it mounted
		// read-write: needs_recovery set, committed transactions in
		// the journal, as after a crash.
		crashed := filepath.Join(t.TempDir(), "crashed")
		t.Run("kernel", func(t *testing.T) {
			mp := testutil.Mount(t, image, false)
			for i := 0; i < 20; i++ {
				if err := os.WriteFile(filepath.Join(mp, fmt.Sprintf("f%d", i)), pattern(int64(i), 0, 5000), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Mkdir(filepath.Join(mp, "dir"), 0o755); err != nil {
				t.Fatal(err)
			}
			syscall.Sync()
			b, err := os.ReadFile(image)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(crashed, b, 0o644); err != nil {
				t.Fatal(err)
			}
		})
		if t.Failed() {
			return
		}
		image = crashed
	} else {
		testutil.DebugfsWrite(t, image, "feature needs_recovery")
	}
	if out := testutil.Dumpe2fs(t, image, "-h"); !strings.Contains(out, "needs_recovery") {
		t.Fatalf("the image does not need recovery:\n%s", out)
	}
	// Writing the stale state under a journal to replay is refused.
	requireRefused(t, image, ext4go.Options{IgnoreJournal: true}, ext4go.ErrUnsupported)
	// Reading replays the journal in memory (TestReplayMatchesKernel
	// checks what it shows); IgnoreJournal reads the stale state.
	before := fileHash(t, image)
	replayed, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("read-only open of an image needing recovery: %v", err)
	}
	replayed.Close()
	if fileHash(t, image) != before {
		t.Error("the read-only replay changed the image")
	}
	ro, err := ext4go.Open(image, &ext4go.Options{IgnoreJournal: true})
	if err != nil {
		t.Fatalf("read-only open with IgnoreJournal: %v", err)
	}
	ro.Close()
	// A writable open replays it for good (TestReplayMatchesKernel checks
	// what it then holds).
	closeChecked(t, openRW(t, image), image)
	if strings.Contains(testutil.Dumpe2fs(t, image, "-h"), "needs_recovery") {
		t.Error("needs_recovery is still set after a writable open")
	}
}

// TestRefuseUnknownROCompat: an unknown ro_compat feature allows reading
// only.
func TestRefuseUnknownROCompat(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "4096")
	// Mark bit 30 of s_feature_ro_compat, which no ext4 version defines.
	testutil.DebugfsWrite(t, image, "ssv feature_ro_compat 0x40000000")
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("read-only open of an image with an unknown ro_compat feature: %v", err)
	}
	if _, err := ro.ReadDir("."); err != nil {
		t.Errorf("reading it: %v", err)
	}
	ro.Close()
	requireRefused(t, image, ext4go.Options{}, ext4go.ErrUnsupported)
}

// TestSecondWriterRefused: while one FS has an image open for writing,
// another writable (or read-only) Open of it fails with ErrBusy; after
// Close it succeeds.
func TestSecondWriterRefused(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "4096")
	first := openRW(t, image)
	f, err := first.Create("x")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ext4go.Open(image, &ext4go.Options{Writable: true}); !errors.Is(err, ext4go.ErrBusy) {
		t.Errorf("second writable open: %v, want ErrBusy", err)
	}
	if _, err := ext4go.Open(image, nil); !errors.Is(err, ext4go.ErrBusy) {
		t.Errorf("read-only open while a writer holds the image: %v, want ErrBusy", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Readers share the image; a writer then waits for them.
	r1, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if _, err := ext4go.Open(image, &ext4go.Options{Writable: true}); !errors.Is(err, ext4go.ErrBusy) {
		t.Errorf("writable open while readers hold the image: %v, want ErrBusy", err)
	}
	r1.Close()
	r2.Close()
	second := openRW(t, image)
	if _, err := second.Stat("x"); err != nil {
		t.Errorf("file written by the first writer: %v", err)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// churnFile fills f to size in fallocates of step bytes and truncates it
// to zero, rounds times, and returns the first error with the free
// clusters and those waiting for a commit at that moment.
func churnFile(fsys *ext4go.FS, f *ext4go.File, size, step int64, rounds int) error {
	for round := 0; round < rounds; round++ {
		for off := int64(0); off < size; off += step {
			if err := f.Fallocate(0, off, step); err != nil {
				free, pending := ext4go.FreeClusters(fsys)
				return fmt.Errorf("round %d: %w (%d clusters free, %d of them waiting for a commit)", round, err, free, pending)
			}
		}
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
	}
	return nil
}

// TestChurnNoENOSPC: two writers, each filling a 4 MiB file with 64 KiB
// fallocates and truncating it, 300 times, never get ENOSPC on a
// filesystem with room for both files and a quarter more. Blocks a
// truncate frees are unusable until its transaction commits. A writer
// that refilled as fast as commits released them kept all the free space
// waiting for a commit, and the other writer's fallocate failed after all
// its retries: the commit each retry made came after the one that
// released the space, which the refilling writer had taken again, or the
// retry gave up as a commit had just released everything (10 of 10 runs
// under -race failed). Now a retry waits for the commit of the oldest
// transaction holding frees, and tries again when a commit released them
// since the failure. No periodic commits and a slow flush (2 ms) leave
// only those commits to release the space. e2fsck is clean after.
func TestChurnNoENOSPC(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 12<<20, "-t", "ext4", "-b", "1024") // 10 MiB free
	d, err := ext4go.OpenImageDevice(image, true)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.OpenDevice(&slowSyncDev{d, 2 * time.Millisecond}, &ext4go.Options{Writable: true, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fsys != nil {
			fsys.Close()
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		f, err := fsys.Create(fmt.Sprintf("churn%d", i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			if err := churnFile(fsys, f, 4<<20, 64<<10, 300); err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	err = fsys.Close()
	fsys = nil
	if err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestENOSPCFullWithChurn: on a full filesystem where two writers keep
// truncating and refilling their files, so that frees always wait for a
// commit, a fallocate that cannot fit still fails with ENOSPC (a
// *fs.PathError) and promptly: the retries that wait for commits are
// bounded. The writers may lose space to it for a while (ENOSPC for them
// too), until it gives back what it got.
// e2fsck is clean after.
func TestENOSPCFullWithChurn(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 12<<20, "-t", "ext4", "-b", "1024")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fsys != nil {
			fsys.Close()
		}
	}()
	const churnSize, step = 1 << 20, 64 << 10
	var churners []*ext4go.File
	for i := 0; i < 2; i++ {
		f, err := fsys.Create(fmt.Sprintf("churn%d", i))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Fallocate(0, 0, churnSize); err != nil {
			t.Fatal(err)
		}
		churners = append(churners, f)
	}
	full, err := fsys.Create("full")
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	var size int64
	for ; ; size += step {
		if err := full.Fallocate(0, size, step); err != nil {
			if !isENOSPC(err) {
				t.Fatalf("filling: %v", err)
			}
			break
		}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var rounds, lost atomic.Int64
	for i, f := range churners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := churnFile(fsys, f, churnSize, step, 1)
				switch {
				case err == nil:
					rounds.Add(1)
				case isENOSPC(err):
					lost.Add(1) // taken by the probes below
					if err := f.Truncate(0); err != nil {
						t.Errorf("churner %d: %v", i, err)
						return
					}
				default:
					t.Errorf("churner %d: %v", i, err)
					return
				}
			}
		}()
	}
	// Each probe asks for more than the churners hold and gives back
	// what it got.
	probe, err := fsys.Create("probe")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	for i := 0; i < 50; i++ {
		if err := probe.Truncate(8 << 20); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- probe.Fallocate(ext4go.FallocKeepSize, 0, 4<<20) }()
		select {
		case err = <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("probe %d: fallocate on a full filesystem still running after 20 s", i)
		}
		var pe *fs.PathError
		if !isENOSPC(err) || !errors.As(err, &pe) {
			t.Fatalf("probe %d: fallocate on a full filesystem: %v, want a *fs.PathError with ENOSPC", i, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("probe %d: ENOSPC after %v", i, d)
		}
		if err := probe.Truncate(0); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("churners: %d rounds, %d lost to ENOSPC", rounds.Load(), lost.Load())
	for _, f := range append(churners, full, probe) {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	}
	err = fsys.Close()
	fsys = nil
	if err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}
