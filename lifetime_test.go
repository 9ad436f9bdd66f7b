//go:build linux

package ext4go_test

// Regression tests for inode lifetime: an operation that found an inode by
// name must never act on it after an unlink freed it (and its number went
// to another file).

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

// TestOpenRacingUnlink: one goroutine opens, writes and closes x, one
// removes x, one creates bystander files and never touches them again.
// Every bystander must keep its contents and e2fsck must be clean.
func TestOpenRacingUnlink(t *testing.T) {
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k-ext3", []string{"-t", "ext3", "-b", "1024"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, cfg.args...)
			fsys := openRW(t, image)
			dur := 2 * time.Second
			if testing.Short() {
				dur = time.Second
			}
			var stop atomic.Bool
			var wg sync.WaitGroup
			payload := bytes.Repeat([]byte("x"), 100_000)
			var errs []string
			var mu sync.Mutex
			report := func(s string) {
				mu.Lock()
				if len(errs) < 10 {
					errs = append(errs, s)
				}
				mu.Unlock()
			}
			wg.Add(3)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					f, err := fsys.OpenFile("x", os.O_CREATE|os.O_RDWR, 0o644)
					if err != nil {
						continue
					}
					if _, err := f.WriteAt(payload, 0); err != nil {
						report(fmt.Sprintf("write x: %v", err))
					}
					if err := f.Close(); err != nil {
						report(fmt.Sprintf("close x: %v", err))
					}
				}
			}()
			go func() {
				defer wg.Done()
				for !stop.Load() {
					fsys.Remove("x")
					fsys.Symlink("target-of-y", "y")
					fsys.Remove("y")
				}
			}()
			go func() {
				defer wg.Done()
				for !stop.Load() {
					fsys.SetXattr("y", "user.k", []byte("xattr-of-y"), 0)
					fsys.Lchown("y", 7, 7)
					fsys.Lchtimes("y", time.Unix(1, 0), time.Unix(1, 0))
				}
			}()
			var bystanders int
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Capped below the image's inodes: a fast machine made
				// 16k in the test's time and ran out.
				for i := 0; !stop.Load() && i < 4000; i++ {
					name := fmt.Sprintf("v%d", i)
					if i%2 == 0 {
						if err := fsys.Symlink("target-"+name, name); err != nil {
							report(fmt.Sprintf("symlink %s: %v", name, err))
							return
						}
					} else if err := fsys.WriteFile(name, []byte("contents of "+name), 0o644); err != nil {
						report(fmt.Sprintf("write %s: %v", name, err))
						return
					}
					bystanders = i + 1
				}
			}()
			time.Sleep(dur)
			stop.Store(true)
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}
			for i := 0; i < bystanders; i++ {
				name := fmt.Sprintf("v%d", i)
				if i%2 == 0 {
					got, err := fsys.ReadLink(name)
					if err != nil || got != "target-"+name {
						t.Errorf("bystander %s: target %q, %v", name, got, err)
					}
				} else {
					got, err := fsys.ReadFile(name)
					if err != nil || string(got) != "contents of "+name {
						t.Errorf("bystander %s: %d bytes %.20q, %v", name, len(got), got, err)
					}
				}
				if v, err := fsys.GetXattr(name, "user.k"); err == nil {
					t.Errorf("bystander %s has y's xattr %q", name, v)
				}
			}
			t.Logf("%d bystanders", bystanders)
			closeChecked(t, fsys, image)
		})
	}
}

// TestUseAfterClose: every method of a closed File and of a closed FS
// fails with an error matching fs.ErrClosed and changes nothing, even when
// the closed File's inode was freed and its number reused.
func TestUseAfterClose(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
	fsys := openRW(t, image)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.Create("x")
	must(err)
	_, err = f.Write(bytes.Repeat([]byte("x"), 100_000))
	must(err)
	must(f.Close())
	must(fsys.Remove("x"))
	// y most likely gets x's inode number.
	must(fsys.WriteFile("y", []byte("y's data"), 0o644))
	d, err := fsys.OpenFile(".", os.O_RDONLY, 0)
	must(err)
	must(d.Close())
	closed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, fs.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	buf := make([]byte, 10)
	_, err = f.Write([]byte("stale"))
	closed("Write", err)
	_, err = f.WriteAt([]byte("stale"), 0)
	closed("WriteAt", err)
	_, err = f.WriteString("stale")
	closed("WriteString", err)
	_, err = f.ReadFrom(strings.NewReader("stale"))
	closed("ReadFrom", err)
	closed("Truncate", f.Truncate(1))
	closed("Fallocate", f.Fallocate(0, 0, 4096))
	closed("Sync", f.Sync())
	_, err = f.Read(buf)
	closed("Read", err)
	_, err = f.ReadAt(buf, 0)
	closed("ReadAt", err)
	_, err = f.Seek(0, io.SeekStart)
	closed("Seek", err)
	_, err = f.Stat()
	closed("Stat", err)
	_, err = f.DataRanges()
	closed("DataRanges", err)
	closed("Close", f.Close())
	_, err = d.ReadDir(-1)
	closed("ReadDir", err)
	if got, err := fsys.ReadFile("y"); err != nil || string(got) != "y's data" {
		t.Errorf("y after stale writes: %q, %v", got, err)
	}

	// RemoveAll(".") refuses before removing anything.
	if err := fsys.RemoveAll("."); err == nil {
		t.Error("RemoveAll(\".\") succeeded")
	}
	if err := fsys.RemoveAll(""); err == nil {
		t.Error("RemoveAll(\"\") succeeded")
	}
	if _, err := fsys.Stat("y"); err != nil {
		t.Errorf("y after RemoveAll(\".\"): %v", err)
	}

	open, err := fsys.OpenFile("y", os.O_RDWR, 0)
	must(err)
	closeChecked(t, fsys, image)
	before := fileHash(t, image)
	closed("FS.Close", fsys.Close())
	_, err = open.Write([]byte("late"))
	closed("Write on a File after FS.Close", err)
	_, err = open.ReadAt(buf, 0)
	closed("ReadAt on a File after FS.Close", err)
	closed("Mkdir", fsys.Mkdir("d", 0o755))
	closed("MkdirAll", fsys.MkdirAll("d/e", 0o755))
	closed("WriteFile", fsys.WriteFile("z", nil, 0o644))
	_, err = fsys.Create("z")
	closed("Create", err)
	_, err = fsys.Open("y")
	closed("Open", err)
	_, err = fsys.OpenFile("y", os.O_RDWR, 0)
	closed("OpenFile", err)
	closed("Remove", fsys.Remove("y"))
	closed("RemoveAll", fsys.RemoveAll("y"))
	closed("Rename", fsys.Rename("y", "w"))
	closed("Link", fsys.Link("y", "w"))
	closed("Symlink", fsys.Symlink("y", "w"))
	closed("Mknod", fsys.Mknod("w", 0o10644, 0))
	closed("Chmod", fsys.Chmod("y", 0o600))
	closed("Chown", fsys.Chown("y", 1, 1))
	closed("Lchown", fsys.Lchown("y", 1, 1))
	closed("Chtimes", fsys.Chtimes("y", time.Now(), time.Now()))
	closed("Lchtimes", fsys.Lchtimes("y", time.Now(), time.Now()))
	closed("SetXattr", fsys.SetXattr("y", "user.a", []byte("b"), 0))
	closed("RemoveXattr", fsys.RemoveXattr("y", "user.a"))
	closed("Sync", fsys.Sync())
	_, err = fsys.Stat("y")
	closed("Stat", err)
	_, err = fsys.Lstat("y")
	closed("Lstat", err)
	_, err = fsys.ReadFile("y")
	closed("ReadFile", err)
	_, err = fsys.ReadDir(".")
	closed("ReadDir", err)
	_, err = fsys.ReadLink("y")
	closed("ReadLink", err)
	_, err = fsys.GetXattr("y", "user.a")
	closed("GetXattr", err)
	_, err = fsys.ListXattr("y")
	closed("ListXattr", err)
	_, err = fsys.Extents("y")
	closed("Extents", err)
	closed("AddDir", fsys.AddDir(".", t.TempDir(), nil))
	closed("AddTar", fsys.AddTar(".", strings.NewReader(""), nil))
	if open.Close() != nil {
		t.Error("closing a File after its FS: want nil (the FS released it)")
	}
	if after := fileHash(t, image); after != before {
		t.Error("the image changed after FS.Close")
	}
}

// TestENOSPCGrowingDirectory: on a full disk, every change that must grow a
// full one-block directory fails with ENOSPC and leaves no trace (before,
// the block it did get stayed allocated and unreferenced).
func TestENOSPCGrowingDirectory(t *testing.T) {
	entry := func(i int) string { return fmt.Sprintf("d/e%04d", i) }
	// How many entries fill d's first block.
	trial := filepath.Join(t.TempDir(), "trial")
	testutil.Mke2fs(t, trial, 4<<20, "-t", "ext4", "-b", "1024")
	tf := openRW(t, trial)
	if err := tf.Mkdir("d", 0o755); err != nil {
		t.Fatal(err)
	}
	full := 0
	for {
		if err := tf.Symlink("t", entry(full)); err != nil {
			t.Fatal(err)
		}
		fi, err := tf.Stat("d")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1024 {
			break
		}
		full++
	}
	tf.Close()

	ops := []struct {
		name string
		free int
		op   func(*ext4go.FS) error
	}{
		{"create", 1, func(f *ext4go.FS) error { _, err := f.Create("d/z9999"); return err }},
		{"symlink", 1, func(f *ext4go.FS) error { return f.Symlink("t", "d/z9999") }},
		{"link", 1, func(f *ext4go.FS) error { return f.Link("x", "d/z9999") }},
		{"rename", 1, func(f *ext4go.FS) error { return f.Rename("x", "d/z9999") }},
		{"rename-dir", 1, func(f *ext4go.FS) error { return f.Rename("sub", "d/z9999") }},
		{"mknod", 1, func(f *ext4go.FS) error { return f.Mknod("d/z9999", syscall.S_IFIFO|0o644, 0) }},
		{"mkdir", 2, func(f *ext4go.FS) error { return f.Mkdir("d/z9999", 0o755) }},
		{"mkdir-1", 1, func(f *ext4go.FS) error { return f.Mkdir("d/z9999", 0o755) }},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 4<<20, "-t", "ext4", "-b", "1024")
			fsys := openRW(t, image)
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(fsys.Mkdir("d", 0o755))
			for i := 0; i < full; i++ {
				must(fsys.Symlink("t", entry(i)))
			}
			must(fsys.WriteFile("x", nil, 0o644))
			must(fsys.Mkdir("sub", 0o755))
			for i := 0; i < o.free; i++ {
				must(fsys.WriteFile(fmt.Sprintf("pad%d", i), make([]byte, 1024), 0o644))
			}
			big, err := fsys.Create("big")
			must(err)
			for {
				if _, err := big.Write(make([]byte, 1024)); err != nil {
					if !isENOSPC(err) {
						t.Fatal(err)
					}
					break
				}
			}
			must(big.Close())
			for i := 0; i < o.free; i++ {
				must(fsys.Remove(fmt.Sprintf("pad%d", i)))
			}
			must(fsys.Sync())
			if got := fsys.Info().FreeBlocks; got != uint64(o.free) {
				t.Logf("free blocks %d, want %d", got, o.free)
			}
			if fi, _ := fsys.Stat("d"); fi.Size() != 1024 {
				t.Fatalf("d is %d bytes, want one full block", fi.Size())
			}
			err = o.op(fsys)
			if !isENOSPC(err) {
				t.Errorf("%s: %v, want ENOSPC", o.name, err)
			}
			if _, err := fsys.Lstat("d/z9999"); err == nil {
				t.Errorf("d/new exists after a failed %s", o.name)
			}
			for _, p := range []string{"x", "sub"} {
				if _, err := fsys.Lstat(p); err != nil {
					t.Errorf("%s after a failed %s: %v", p, o.name, err)
				}
			}
			closeChecked(t, fsys, image)
		})
	}
}

// TestHugeSizeCorrupt: an i_size the kernel rejects (2^63 and up, a
// negative loff_t) is a CorruptError, not a file of 4 EiB.
func TestHugeSizeCorrupt(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 8<<20, "-t", "ext4")
	fsys := openRW(t, image)
	if err := fsys.WriteFile("f", []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	closeChecked(t, fsys, image)
	testutil.DebugfsWrite(t, image, "sif f size 0x8000000000000000")
	ro := openImage(t, image)
	for what, err := range map[string]error{
		"stat": func() error { _, err := ro.Stat("f"); return err }(),
		"read": func() error { _, err := ro.ReadFile("f"); return err }(),
	} {
		if !errors.Is(err, ext4go.ErrCorrupt) {
			t.Errorf("%s of a file with i_size 2^63: %v, want ErrCorrupt", what, err)
		}
	}
}

// TestRefusedNames: what the kernel refuses is refused here, before any
// change: NUL in a symlink target, names over 255 bytes, NUL in a name.
func TestRefusedNames(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 8<<20, "-t", "ext4")
	fsys := openRW(t, image)
	long := strings.Repeat("n", 256)
	for what, err := range map[string]error{
		"symlink target with NUL": fsys.Symlink("a\x00b", "s"),
		"name over 255 bytes":     fsys.Mkdir(long, 0o755),
		"symlink named 256 bytes": fsys.Symlink("t", long),
		"name with NUL":           fsys.Mkdir("a\x00b", 0o755),
		"rename to 256 bytes":     func() error { fsys.Mkdir("d", 0o755); return fsys.Rename("d", long) }(),
	} {
		if err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	closeChecked(t, fsys, image)
}

// TestOpenCreateSelfEntry: an O_CREATE open of an entry that names its own
// directory (a corrupt image) is a corruption error, not a self-deadlock.
func TestOpenCreateSelfEntry(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 8<<20, "-t", "ext4")
	testutil.DebugfsWrite(t, image, "mkdir d", "ln d d/self")
	fsys := openRW(t, image)
	done := make(chan error, 1)
	go func() {
		_, err := fsys.OpenFile("d/self", os.O_RDONLY|os.O_CREATE, 0o644)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ext4go.ErrCorrupt) {
			t.Errorf("open of a self entry: %v, want a corruption", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("open of a self entry hangs")
	}
	fsys.Close()
}
