//go:build linux

package ext4go_test

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// lazyImage makes a fresh image with mke2fs args (default a 4 KiB-block
// ext4 with 256-byte inodes: 16 to an inode-table block) and returns its
// path.
func lazyImage(t *testing.T, args ...string) string {
	t.Helper()
	if len(args) == 0 {
		args = []string{"-t", "ext4", "-b", "4096", "-I", "256"}
	}
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, args...)
	return image
}

func openLazy(t *testing.T, image string, o ext4go.Options) *ext4go.FS {
	t.Helper()
	o.Writable, o.Lazytime = true, true
	if o.Atime == 0 {
		o.Atime = ext4go.AtimeStrict
	}
	fsys, err := ext4go.Open(image, &o)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}

// memStat is the Stat of name as the open filesystem shows it.
func memStat(t *testing.T, fsys *ext4go.FS, name string) *ext4go.Stat {
	t.Helper()
	fi, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*ext4go.Stat)
}

// diskStat is the Stat of name as the image holds it now: a read-only
// open replays what the journal committed, in memory, beside the writer.
func diskStat(t *testing.T, image, name string) *ext4go.Stat {
	t.Helper()
	r, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.NewFS(r, fi.Size(), nil)
	if err != nil {
		t.Fatalf("read-only view of %s: %v", image, err)
	}
	defer fsys.Close()
	st, err := fsys.Stat(name)
	if err != nil {
		t.Fatalf("read-only view of %s: %v", image, err)
	}
	return st.Sys().(*ext4go.Stat)
}

// diskInodeStat is diskStat of inode ino, named or not.
func diskInodeStat(t *testing.T, image string, ino uint32) *ext4go.Stat {
	t.Helper()
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.NewFS(bytes.NewReader(b), int64(len(b)), nil)
	if err != nil {
		t.Fatalf("read-only view of %s: %v", image, err)
	}
	defer fsys.Close()
	st, err := ext4go.InodeStat(fsys, ino)
	if err != nil {
		t.Fatalf("inode %d of %s: %v", ino, image, err)
	}
	return st
}

func sameTimes(a, b *ext4go.Stat) bool {
	return a.Atime.Equal(b.Atime) && a.Mtime.Equal(b.Mtime) && a.Ctime.Equal(b.Ctime)
}

func fmtTimes(s *ext4go.Stat) string {
	return fmt.Sprintf("atime %s mtime %s ctime %s", s.Atime.Format(time.RFC3339Nano), s.Mtime.Format(time.RFC3339Nano), s.Ctime.Format(time.RFC3339Nano))
}

func openFileRW(t *testing.T, fsys *ext4go.FS, name string) *ext4go.File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func overwrite(t *testing.T, f *ext4go.File, off int64, data []byte) {
	t.Helper()
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
}

// readAll reads name through a File, which updates its access time
// (FS.ReadFile does not).
func readAll(t *testing.T, fsys *ext4go.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tick makes sure the next timestamp differs from the last one.
func tick() { time.Sleep(2 * time.Millisecond) }

// TestLazytime: with Options.Lazytime, an overwrite's mtime/ctime and a
// read's atime show at once through Stat but stay off the disk until
// Sync, File.Sync or Close; a write that changes the size is not
// time-only and goes at once (with its commit); reopening shows every
// time Stat showed; e2fsck stays clean.
func TestLazytime(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer func() {
		if fsys != nil {
			fsys.Close()
		}
	}()
	data := bytes.Repeat([]byte("lazytime"), 4096) // 32 KiB, 8 blocks
	if err := fsys.WriteFile("f", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := memStat(t, fsys, "f")
	if d := diskStat(t, image, "f"); !sameTimes(d, synced) {
		t.Fatalf("after Sync, the disk has %s, Stat %s", fmtTimes(d), fmtTimes(synced))
	}
	f := openFileRW(t, fsys, "f")
	defer f.Close()

	// A pure overwrite: time-only.
	tick()
	overwrite(t, f, 4096, []byte("overwritten"))
	mem := memStat(t, fsys, "f")
	if !mem.Mtime.After(synced.Mtime) || !mem.Ctime.After(synced.Ctime) {
		t.Fatalf("Stat after an overwrite: %s, before %s: mtime and ctime must move", fmtTimes(mem), fmtTimes(synced))
	}
	if got := ext4go.DirtyTimes(fsys); got != 1 {
		t.Errorf("%d nodes with dirty times after one overwrite, want 1", got)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, "f"); !sameTimes(d, synced) {
		t.Errorf("a commit wrote lazy times: disk %s, want still %s", fmtTimes(d), fmtTimes(synced))
	}
	// A read: atime, time-only.
	tick()
	readAll(t, fsys, "f")
	mem2 := memStat(t, fsys, "f")
	if !mem2.Atime.After(mem.Atime) {
		t.Errorf("strictatime read did not move the atime in memory: %s", fmtTimes(mem2))
	}
	if d := diskStat(t, image, "f"); !sameTimes(d, synced) {
		t.Errorf("a read wrote its atime: disk %s", fmtTimes(d))
	}
	// FS.Sync writes them.
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, "f"); !sameTimes(d, mem2) {
		t.Errorf("after Sync: disk %s, Stat %s", fmtTimes(d), fmtTimes(mem2))
	}
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("%d nodes with dirty times after Sync", got)
	}

	// File.Sync (fsync) writes the file's.
	tick()
	overwrite(t, f, 0, []byte("again"))
	mem3 := memStat(t, fsys, "f")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, "f"); !sameTimes(d, mem3) {
		t.Errorf("after File.Sync: disk %s, Stat %s", fmtTimes(d), fmtTimes(mem3))
	}

	// Growing the file is not time-only: its commit carries the times.
	tick()
	overwrite(t, f, int64(len(data)), []byte("grown"))
	mem4 := memStat(t, fsys, "f")
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("an appending write left %d nodes with dirty times", got)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, "f"); !sameTimes(d, mem4) || d.Size != mem4.Size {
		t.Errorf("after an appending write's commit: disk %s size %d, Stat %s size %d", fmtTimes(d), d.Size, fmtTimes(mem4), mem4.Size)
	}
	// Writing into a hole maps blocks: not time-only either. With
	// delayed allocation the blocks are mapped when the data goes to
	// disk (here Extents makes it go), and the inode written then carries
	// the times, as the kernel's writeback does.
	if err := f.Truncate(1 << 20); err != nil {
		t.Fatal(err)
	}
	tick()
	overwrite(t, f, 512<<10, []byte("into a hole"))
	if _, err := f.Extents(); err != nil {
		t.Fatal(err)
	}
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("a write into a hole left %d nodes with dirty times", got)
	}

	// Close writes what is left; the reopened image shows what Stat did.
	tick()
	overwrite(t, f, 8, []byte("last"))
	readAll(t, fsys, "f")
	last := memStat(t, fsys, "f")
	lastData := readAll(t, fsys, "f")
	last = memStat(t, fsys, "f") // the read moved the atime again
	f.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	fsys = nil
	testutil.RequireFsckClean(t, image)
	if d := diskStat(t, image, "f"); !sameTimes(d, last) {
		t.Errorf("reopened after Close: %s, Stat showed %s", fmtTimes(d), fmtTimes(last))
	}
	ro := openImage(t, image)
	if got, _ := ro.ReadFile("f"); !bytes.Equal(got, lastData) {
		t.Error("the content changed across Close")
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestLazytimeExpire: times dirty for longer than LazytimeExpire are
// written by the periodic commit, and WriteExpiredTimes (the same step)
// writes only those.
func TestLazytimeExpire(t *testing.T) {
	t.Run("periodic", func(t *testing.T) {
		image := lazyImage(t)
		fsys := openLazy(t, image, ext4go.Options{CommitInterval: 20 * time.Millisecond, LazytimeExpire: 50 * time.Millisecond})
		defer fsys.Close()
		if err := fsys.WriteFile("f", make([]byte, 8192), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Sync(); err != nil {
			t.Fatal(err)
		}
		f := openFileRW(t, fsys, "f")
		defer f.Close()
		tick()
		overwrite(t, f, 100, []byte("x"))
		mem := memStat(t, fsys, "f")
		deadline := time.Now().Add(10 * time.Second)
		for !sameTimes(diskStat(t, image, "f"), mem) {
			if time.Now().After(deadline) {
				t.Fatalf("10 s on, the disk still has %s, Stat %s (%d dirty)", fmtTimes(diskStat(t, image, "f")), fmtTimes(mem), ext4go.DirtyTimes(fsys))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := ext4go.DirtyTimes(fsys); got != 0 {
			t.Errorf("%d nodes still dirty after their times reached the disk", got)
		}
		f.Close()
		if err := fsys.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.RequireFsckClean(t, image)
	})
	t.Run("hook", func(t *testing.T) {
		image := lazyImage(t)
		fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1, LazytimeExpire: 300 * time.Millisecond})
		defer fsys.Close()
		// In different inode-table blocks: the write of one would
		// carry the other's times.
		oldName, _, newName := neighbourFiles(t, fsys)
		old, nw := openFileRW(t, fsys, oldName), openFileRW(t, fsys, newName)
		defer old.Close()
		defer nw.Close()
		overwrite(t, old, 0, []byte("o"))
		time.Sleep(400 * time.Millisecond) // old's times expire
		overwrite(t, nw, 0, []byte("n"))
		if err := ext4go.WriteExpiredTimes(fsys); err != nil {
			t.Fatal(err)
		}
		if got := ext4go.DirtyTimes(fsys); got != 1 {
			t.Errorf("%d nodes dirty after the expiry step, want 1 (the recent one)", got)
		}
		if err := ext4go.Commit(fsys); err != nil {
			t.Fatal(err)
		}
		if d, m := diskStat(t, image, oldName), memStat(t, fsys, oldName); !sameTimes(d, m) {
			t.Errorf("expired times not written: disk %s, Stat %s", fmtTimes(d), fmtTimes(m))
		}
		if d, m := diskStat(t, image, newName), memStat(t, fsys, newName); sameTimes(d, m) {
			t.Errorf("times younger than LazytimeExpire were written")
		}
		old.Close()
		nw.Close()
		if err := fsys.Close(); err != nil {
			t.Fatal(err)
		}
		testutil.RequireFsckClean(t, image)
	})
}

// neighbourFiles creates files until two share an inode-table block and
// one is in another, each 64 KiB of written data, and syncs.
func neighbourFiles(t *testing.T, fsys *ext4go.FS) (a, b, other string) {
	t.Helper()
	blocks := map[uint64][]string{}
	var pair uint64
	for i := 0; other == "" || a == ""; i++ {
		name := fmt.Sprintf("f%02d", i)
		if err := fsys.WriteFile(name, bytes.Repeat([]byte{byte(i)}, 64<<10), 0o644); err != nil {
			t.Fatal(err)
		}
		blk := ext4go.InodeTableBlock(fsys, memStat(t, fsys, name).Ino)
		blocks[blk] = append(blocks[blk], name)
		if a == "" && len(blocks[blk]) == 2 {
			a, b, pair = blocks[blk][0], blocks[blk][1], blk
		}
		if a != "" && blk != pair && other == "" {
			other = name
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	return a, b, other
}

// TestLazytimeNeighbours: a real write of an inode writes the lazy times
// of the other inodes of its inode-table block in the same transaction
// (kernel: ext4_update_other_inodes_time), not those of other blocks; a
// neighbour whose lock is held is skipped without waiting, and goes with
// a later write once free.
func TestLazytimeNeighbours(t *testing.T) {
	for _, c := range []struct {
		name string
		mkfs []string
	}{
		{"ext4", nil},
		{"1k-nocsum", []string{"-t", "ext4", "-b", "1024", "-O", "^metadata_csum"}},
		{"ext3", []string{"-t", "ext3"}},
	} {
		t.Run(c.name, func(t *testing.T) { lazytimeNeighbours(t, c.mkfs) })
	}
}

func lazytimeNeighbours(t *testing.T, mkfs []string) {
	image := lazyImage(t, mkfs...)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	a, b, other := neighbourFiles(t, fsys)
	t.Logf("neighbours %s and %s, %s in another block", a, b, other)
	fa, fb, fo := openFileRW(t, fsys, a), openFileRW(t, fsys, b), openFileRW(t, fsys, other)
	defer fa.Close()
	defer fb.Close()
	defer fo.Close()
	before := map[string]*ext4go.Stat{a: memStat(t, fsys, a), b: memStat(t, fsys, b), other: memStat(t, fsys, other)}

	tick()
	overwrite(t, fa, 10, []byte("dirty a"))
	overwrite(t, fo, 10, []byte("dirty other"))
	readAll(t, fsys, other)
	if got := ext4go.DirtyTimes(fsys); got != 2 {
		t.Fatalf("%d dirty, want 2", got)
	}
	// A real write of b: its size changes.
	if err := fb.Truncate(70 << 10); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d, m := diskStat(t, image, a), memStat(t, fsys, a); !sameTimes(d, m) {
		t.Errorf("neighbour %s: disk %s, Stat %s: the write of %s did not carry its times", a, fmtTimes(d), fmtTimes(m), b)
	}
	if d := diskStat(t, image, other); !sameTimes(d, before[other]) {
		t.Errorf("%s, in another inode-table block, was written: %s", other, fmtTimes(d))
	}
	if got := ext4go.DirtyTimes(fsys); got != 1 {
		t.Errorf("%d dirty after the neighbour's write, want 1 (%s)", got, other)
	}

	// a's lock held (an operation in progress on it): b's writes go on
	// without a, and without waiting.
	tick()
	overwrite(t, fa, 20, []byte("dirty a again"))
	aTimes := memStat(t, fsys, a)
	aDisk := diskStat(t, image, a)
	unlock, err := ext4go.LockInode(fsys, a)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := 0; i < 20; i++ {
			if err := fb.Truncate(int64(71+i) << 10); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		unlock()
		t.Fatal("a write of an inode waited for its neighbour's lock")
	}
	if err := ext4go.Commit(fsys); err != nil {
		unlock()
		t.Fatal(err)
	}
	if d := diskStat(t, image, a); !sameTimes(d, aDisk) {
		t.Errorf("the times of a locked neighbour were written: %s", fmtTimes(d))
	}
	unlock()
	if err := fb.Truncate(100 << 10); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, a); !sameTimes(d, aTimes) {
		t.Errorf("after the lock's release a write of %s did not carry %s's times: disk %s, Stat %s", b, a, fmtTimes(d), fmtTimes(aTimes))
	}
	// A reader (shared lock) also makes the neighbour busy; the writer
	// skips it all the same.
	fa.Close()
	fb.Close()
	fo.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestLazytimeNeighbourWait: the benchmark's knob makes the neighbour
// copy wait for a busy neighbour (bounded), which the default never does.
func TestLazytimeNeighbourWait(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	a, b, _ := neighbourFiles(t, fsys)
	fa, fb := openFileRW(t, fsys, a), openFileRW(t, fsys, b)
	defer fa.Close()
	defer fb.Close()
	overwrite(t, fa, 0, []byte("dirty"))
	unlock, err := ext4go.LockInode(fsys, a)
	if err != nil {
		t.Fatal(err)
	}
	timeTruncate := func(size int64) time.Duration {
		start := time.Now()
		if err := fb.Truncate(size); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if d := timeTruncate(65 << 10); d > 100*time.Millisecond {
		t.Errorf("a write took %v with its neighbour locked (it must not wait)", d)
	}
	ext4go.SetNeighbourWait(fsys, 150*time.Millisecond)
	// A new transaction: only a file's first change in one writes its
	// inode-table block, and the neighbours' times with it (the others
	// leave it to the commit, inode_defer.go).
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d := timeTruncate(66 << 10); d < 150*time.Millisecond {
		t.Errorf("with the wait knob a write took %v, want at least the 150 ms bound", d)
	}
	ext4go.SetNeighbourWait(fsys, 0)
	unlock()
	fa.Close()
	fb.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestLazytimeCrash: a crash (the filesystem dropped without Close, its
// device as it is, or with the writes since the last flush lost or torn)
// loses at most times. Files are written and synced, then only
// time-only changes follow (overwrites with the bytes already there,
// reads), then a real change of one file, committed: after the crash
// every name, size and byte is the model's, the real change's inode and
// its inode-table neighbours have their new times, every other file has
// its times as of the last sync, and e2fsck -fn is clean.
func TestLazytimeCrash(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { lazytimeCrash(t, seed) })
	}
}

func lazytimeCrash(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096", "-I", "256")
	base, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	fsys, rd := openRecordedWith(t, image, &ext4go.Options{Writable: true, CommitInterval: -1, Lazytime: true, Atime: ext4go.AtimeStrict})
	const files = 40 // three inode-table blocks
	model := map[string][]byte{}
	names := make([]string, files)
	for i := range names {
		names[i] = fmt.Sprintf("f%02d", i)
		data := make([]byte, (1+rng.IntN(6))*4096)
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		model[names[i]] = data
		if err := fsys.WriteFile(names[i], data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := map[string]*ext4go.Stat{}
	for _, n := range names {
		synced[n] = memStat(t, fsys, n)
	}
	// Time-only changes.
	tick()
	for _, n := range names {
		if rng.IntN(3) == 0 {
			continue
		}
		f := openFileRW(t, fsys, n)
		off := rng.IntN(len(model[n]) - 100)
		overwrite(t, f, int64(off), model[n][off:off+100])
		f.Close()
		if rng.IntN(2) == 0 {
			readAll(t, fsys, n)
		}
	}
	dirty := ext4go.DirtyTimes(fsys)
	if dirty == 0 {
		t.Fatal("no time-only change stayed in memory")
	}
	// One real change, committed: it carries its block's dirty times.
	grown := names[rng.IntN(files)]
	gf := openFileRW(t, fsys, grown)
	extra := []byte("a real change")
	overwrite(t, gf, int64(len(model[grown])), extra)
	gf.Close()
	model[grown] = append(model[grown], extra...)
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	grownBlk := ext4go.InodeTableBlock(fsys, synced[grown].Ino)
	mem := map[string]*ext4go.Stat{}
	for _, n := range names {
		mem[n] = memStat(t, fsys, n)
	}
	stillDirty := ext4go.DirtyTimes(fsys)
	t.Logf("%d nodes dirty before the real change, %d after it; %s grew (inode-table block %d)", dirty, stillDirty, grown, grownBlk)
	// The crash: the FS is dropped, never closed. Its device is released
	// so that the image can be read (the test process holds no lock on
	// it otherwise).
	log := append([]devRec(nil), rd.log...)
	rd.Device.Close()

	check := func(how, img string) {
		t.Helper()
		w := img + ".ext4go"
		copyFile(t, img, w)
		defer os.Remove(w)
		// e2fsck's own replay must be clean too.
		e2 := img + ".e2fsck"
		copyFile(t, img, e2)
		testutil.Run(t, "sh", "-c", "e2fsck -E journal_only -y "+e2+" >/dev/null 2>&1; true")
		if code, out := testutil.E2fsckFN(t, e2); code != 0 {
			t.Errorf("%s: e2fsck -fn after e2fsck's replay exits %d:\n%s", how, code, out)
		}
		os.Remove(e2)
		after, err := ext4go.Open(w, &ext4go.Options{Writable: true})
		if err != nil {
			t.Fatalf("%s: writable open: %v", how, err)
		}
		for _, n := range names {
			fi, err := after.Stat(n)
			if err != nil {
				t.Errorf("%s: %s: %v", how, n, err)
				continue
			}
			st := fi.Sys().(*ext4go.Stat)
			got, err := after.ReadFile(n)
			if err != nil || !bytes.Equal(got, model[n]) {
				t.Errorf("%s: %s: %d bytes, want %d (%v)", how, n, len(got), len(model[n]), err)
			}
			inGrownBlock := ext4go.InodeTableBlock(after, st.Ino) == grownBlk
			switch {
			case n == grown || inGrownBlock:
				// Written in the committed transaction.
				if !sameTimes(st, mem[n]) {
					t.Errorf("%s: %s (committed with %s): %s, want %s", how, n, grown, fmtTimes(st), fmtTimes(mem[n]))
				}
			case !sameTimes(st, synced[n]):
				t.Errorf("%s: %s: %s, want its synced %s", how, n, fmtTimes(st), fmtTimes(synced[n]))
			}
		}
		if err := after.Close(); err != nil {
			t.Errorf("%s: close: %v", how, err)
		}
		if code, out := testutil.E2fsckFN(t, w); code != 0 {
			t.Errorf("%s: e2fsck -fn after ext4go's replay exits %d:\n%s", how, code, out)
		}
	}
	check("dropped", image)
	for i := range 3 {
		img := crashImage(t, t.TempDir(), base, log, rng)
		check(fmt.Sprintf("power cut %d", i), img)
	}
	// The neighbour copy never touched other blocks' inodes; the
	// in-memory view of the grown file's block is on disk.
	if stillDirty >= dirty {
		t.Errorf("the real change carried no neighbour's times (%d dirty before, %d after)", dirty, stillDirty)
	}
}

// TestLazytimeRace: writers (overwrites, appends, truncates, fsyncs) and
// readers (atime) on many files sharing inode-table blocks, with the
// periodic expiry running, under -race. After Close the image is
// e2fsck-clean and every file's content and times are those Stat showed
// at the end; each file's mtime is the one its writer saw after its last
// write.
func TestLazytimeRace(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: 10 * time.Millisecond, LazytimeExpire: 5 * time.Millisecond})
	defer func() {
		if fsys != nil {
			fsys.Close()
		}
	}()
	const writers, readers = 24, 4
	iters := 150
	if testing.Short() {
		iters = 50
	}
	names := make([]string, writers)
	for i := range names {
		names[i] = fmt.Sprintf("w%02d", i)
		if err := fsys.WriteFile(names[i], make([]byte, 32<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		data  []byte
		mtime time.Time
	}
	results := make([]result, writers)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, writers+readers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			data := make([]byte, 32<<10)
			f, err := fsys.OpenFile(names[i], os.O_RDWR, 0)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for it := 0; it < iters; it++ {
				switch r := rng.IntN(20); {
				case r == 0: // a real change: grow
					chunk := bytes.Repeat([]byte{byte(it)}, 1+rng.IntN(3000))
					if _, err := f.WriteAt(chunk, int64(len(data))); err != nil {
						errs <- err
						return
					}
					data = append(data, chunk...)
				case r == 1 && len(data) > 40<<10: // a real change: shrink
					data = data[:len(data)-rng.IntN(len(data)-32<<10)]
					if err := f.Truncate(int64(len(data))); err != nil {
						errs <- err
						return
					}
				case r == 2:
					if err := f.Sync(); err != nil {
						errs <- err
						return
					}
				default: // time-only: overwrite within the first 32 KiB
					off := rng.IntN(32<<10 - 4096)
					chunk := make([]byte, 1+rng.IntN(4096))
					for k := range chunk {
						chunk[k] = byte(rng.Uint32())
					}
					if _, err := f.WriteAt(chunk, int64(off)); err != nil {
						errs <- err
						return
					}
					copy(data[off:], chunk)
				}
			}
			fi, err := f.Stat()
			if err != nil {
				errs <- err
				return
			}
			results[i] = result{data: data, mtime: fi.Sys().(*ext4go.Stat).Mtime}
		}()
	}
	var rwg sync.WaitGroup
	for i := range readers {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			buf := make([]byte, 4096)
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				f, err := fsys.Open(names[rng.IntN(writers)])
				if err != nil {
					errs <- err
					return
				}
				if _, err := f.(io.ReaderAt).ReadAt(buf, int64(rng.IntN(28<<10))); err != nil && err != io.EOF {
					errs <- err
				}
				f.Close()
				if k%50 == 0 {
					if err := fsys.Sync(); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	copied, skipped := ext4go.NeighbourCounts(fsys)
	t.Logf("writes carried %d neighbours' times and left %d busy ones", copied, skipped)
	if copied == 0 {
		t.Error("no write carried a neighbour's times: the test no longer covers them")
	}
	final := map[string]*ext4go.Stat{}
	for i, n := range names {
		st := memStat(t, fsys, n)
		final[n] = st
		if !st.Mtime.Equal(results[i].mtime) {
			t.Errorf("%s: mtime %s at the end, its writer saw %s after its last write", n, st.Mtime, results[i].mtime)
		}
		if st.Size != int64(len(results[i].data)) {
			t.Errorf("%s: size %d, want %d", n, st.Size, len(results[i].data))
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	fsys = nil
	testutil.RequireFsckClean(t, image)
	ro := openImage(t, image)
	for i, n := range names {
		fi, err := ro.Stat(n)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*ext4go.Stat); !sameTimes(st, final[n]) {
			t.Errorf("%s reopened: %s, Stat showed %s", n, fmtTimes(st), fmtTimes(final[n]))
		}
		if got, _ := ro.ReadFile(n); !bytes.Equal(got, results[i].data) {
			t.Errorf("%s reopened: content differs from the model", n)
		}
	}
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestLazytimeKernel: the kernel reads the times lazytime wrote, after
// Close and after a crash its journal replay recovers (the times synced
// before it).
func TestLazytimeKernel(t *testing.T) {
	testutil.RequireMount(t)
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	if err := fsys.WriteFile("f", make([]byte, 16<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f := openFileRW(t, fsys, "f")
	tick()
	overwrite(t, f, 100, []byte("x"))
	readAll(t, fsys, "f")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := memStat(t, fsys, "f")
	// A crash copy: the journal holds the fsync's commit.
	crash := filepath.Join(t.TempDir(), "crash.img")
	copyFile(t, image, crash)
	tick()
	overwrite(t, f, 200, []byte("y"))
	readAll(t, fsys, "f")
	final := memStat(t, fsys, "f")
	f.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	for _, c := range []struct {
		how, image string
		want       *ext4go.Stat
	}{{"closed", image, final}, {"crashed", crash, synced}} {
		mp := testutil.Mount(t, c.image, false)
		var st unixStat
		if err := statTimes(filepath.Join(mp, "f"), &st); err != nil {
			t.Fatal(err)
		}
		if !st.atime.Equal(c.want.Atime) || !st.mtime.Equal(c.want.Mtime) || !st.ctime.Equal(c.want.Ctime) {
			t.Errorf("%s: the kernel reads atime %s mtime %s ctime %s, want %s", c.how, st.atime, st.mtime, st.ctime, fmtTimes(c.want))
		}
		testutil.Unmount(t, mp)
		testutil.RequireFsckClean(t, c.image)
	}
}

type unixStat struct{ atime, mtime, ctime time.Time }

// statTimes reads a host file's times with nanoseconds.
func statTimes(path string, st *unixStat) error {
	var s unix.Stat_t
	if err := unix.Stat(path, &s); err != nil {
		return err
	}
	st.atime = time.Unix(s.Atim.Unix())
	st.mtime = time.Unix(s.Mtim.Unix())
	st.ctime = time.Unix(s.Ctim.Unix())
	return nil
}

// TestLazytimeKeepsNodes: a node whose times wait in memory is not let go
// by the inode cache (it would be reloaded from the inode table with
// older times): after its File is closed and the cache's recent nodes
// dropped, garbage collections later Stat still shows its times, and
// Close writes them.
func TestLazytimeKeepsNodes(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	if err := fsys.WriteFile("f", make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	f := openFileRW(t, fsys, "f")
	tick()
	overwrite(t, f, 0, []byte("x"))
	want := memStat(t, fsys, "f")
	f.Close()
	// The Stat holds the node: keep a copy of its times only.
	wantTimes := ext4go.Stat{Atime: want.Atime, Mtime: want.Mtime, Ctime: want.Ctime}
	want = nil
	for range 3 {
		ext4go.DropRecentInodes(fsys)
		runtime.GC()
	}
	if got := memStat(t, fsys, "f"); !sameTimes(got, &wantTimes) {
		t.Fatalf("after the cache let go: %s, Stat showed %s", fmtTimes(got), fmtTimes(&wantTimes))
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if got := diskStat(t, image, "f"); !sameTimes(got, &wantTimes) {
		t.Errorf("after Close: %s, want %s", fmtTimes(got), fmtTimes(&wantTimes))
	}
	testutil.RequireFsckClean(t, image)
}

// TestLazytimeUnlink: a node with dirty times that is unlinked and freed
// (closed after the unlink, or never opened) leaves the dirty set, and
// its inode number's next owner never gets its times: the neighbour copy
// and the final writes reach only live inodes.
func TestLazytimeUnlink(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	a, b, _ := neighbourFiles(t, fsys)
	// a: dirty, unlinked while open, written again as an orphan, closed.
	fa := openFileRW(t, fsys, a)
	overwrite(t, fa, 0, []byte("dirty"))
	if err := fsys.Remove(a); err != nil {
		t.Fatal(err)
	}
	overwrite(t, fa, 10, []byte("orphan"))
	if err := fa.Close(); err != nil {
		t.Fatal(err)
	}
	// b: dirty, closed, then unlinked.
	fb := openFileRW(t, fsys, b)
	overwrite(t, fb, 0, []byte("dirty"))
	fb.Close()
	readAll(t, fsys, b)
	if err := fsys.Remove(b); err != nil {
		t.Fatal(err)
	}
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("%d nodes dirty after their inodes were freed", got)
	}
	// New files take the numbers back; their writes and the final
	// Close must leave them e2fsck-clean.
	for i := range 4 {
		name := fmt.Sprintf("new%d", i)
		if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		readAll(t, fsys, name)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	if n := ext4go.StaleWrites(); n != 0 {
		t.Errorf("%d stale writes", n)
	}
}

// TestLazytimeOrphanNeighbour: an orphan (unlinked, still open) with
// lazy times is a neighbour like any other: a write of another inode of
// its inode-table block carries its times. Its slot has no links, which
// the neighbour copy once took for another inode's slot and counted as a
// stale write (TestRecycledInodeNeverSeen's orphans found it).
func TestLazytimeOrphanNeighbour(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	staleBefore := ext4go.StaleWrites()
	a, b, _ := neighbourFiles(t, fsys)
	fa := openFileRW(t, fsys, a)
	ino := memStat(t, fsys, a).Ino
	if err := fsys.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	tick()
	overwrite(t, fa, 10, []byte("orphan, dirty"))
	if got := ext4go.DirtyTimes(fsys); got != 1 {
		t.Fatalf("%d dirty, want 1 (the orphan)", got)
	}
	fi, err := fa.Stat()
	if err != nil {
		t.Fatal(err)
	}
	mem := fi.Sys().(*ext4go.Stat)
	if d := diskInodeStat(t, image, ino); sameTimes(d, mem) {
		t.Fatalf("the orphan's new times are on the disk before any write: %s", fmtTimes(d))
	}
	fb := openFileRW(t, fsys, b)
	if err := fb.Truncate(70 << 10); err != nil {
		t.Fatal(err)
	}
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("%d dirty after the neighbour's write, want 0: the orphan's times did not go with it", got)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	if d := diskInodeStat(t, image, ino); !sameTimes(d, mem) {
		t.Errorf("the orphan on the disk: %s; in memory %s", fmtTimes(d), fmtTimes(mem))
	}
	if n := ext4go.StaleWrites() - staleBefore; n != 0 {
		t.Errorf("%d stale writes counted for an orphan neighbour", n)
	}
	fb.Close()
	if err := fa.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestLazytimeLimit: when more nodes have dirty times than the limit, the
// periodic committer writes those waiting without waiting for their
// expiry, until at most the limit are left.
func TestLazytimeLimit(t *testing.T) {
	image := lazyImage(t)
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: 20 * time.Millisecond})
	defer fsys.Close()
	const files, limit = 20, 8
	ext4go.SetLazyTimesLimit(fsys, limit)
	for i := range files {
		if err := fsys.WriteFile(fmt.Sprintf("f%02d", i), make([]byte, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	tick()
	want := map[string]*ext4go.Stat{}
	for i := range files {
		name := fmt.Sprintf("f%02d", i)
		readAll(t, fsys, name)
		want[name] = memStat(t, fsys, name)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ext4go.DirtyTimes(fsys) > limit {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes still dirty 10 s after passing the limit of %d", ext4go.DirtyTimes(fsys), limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ext4go.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	written := 0
	for name, st := range want {
		if sameTimes(diskStat(t, image, name), st) {
			written++
		}
	}
	if written < files-limit {
		t.Errorf("%d of %d files have their times on disk, want at least %d", written, files, files-limit)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// TestLazytimeSmallInodes: with 128-byte inodes (no extra time fields)
// lazy times are whole seconds in memory too, so Stat does not change
// when they reach the disk.
func TestLazytimeSmallInodes(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-I", "128")
	fsys := openLazy(t, image, ext4go.Options{CommitInterval: -1})
	defer fsys.Close()
	a, b, _ := neighbourFiles(t, fsys)
	fa, fb := openFileRW(t, fsys, a), openFileRW(t, fsys, b)
	defer fa.Close()
	defer fb.Close()
	overwrite(t, fa, 0, []byte("x"))
	readAll(t, fsys, a)
	mem := memStat(t, fsys, a)
	for _, ts := range []time.Time{mem.Atime, mem.Mtime, mem.Ctime} {
		if ts.Nanosecond() != 0 {
			t.Errorf("a lazy time with nanoseconds in a 128-byte inode: %s", fmtTimes(mem))
		}
	}
	if err := fb.Truncate(1); err != nil { // a neighbour's write carries a's times
		t.Fatal(err)
	}
	if got := ext4go.DirtyTimes(fsys); got != 0 {
		t.Errorf("%d dirty after the neighbour's write", got)
	}
	fa.Close()
	fb.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	if d := diskStat(t, image, a); !sameTimes(d, mem) {
		t.Errorf("reopened: %s, Stat showed %s", fmtTimes(d), fmtTimes(mem))
	}
	testutil.RequireFsckClean(t, image)
}
