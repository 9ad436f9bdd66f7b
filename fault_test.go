//go:build linux

package ext4go_test

// Fault injection: every operation is made to fail at each step
// it takes, one at a time: the k-th block allocation, inode allocation,
// metadata read or file data write fails (no space, or an I/O error). The operation must then
// fail, and leave the filesystem exactly as it was (e2fsck -fn clean, the
// same tree), except that a write may have written a prefix of its data
// (a short write, as POSIX allows).

import (
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// faultOp is one operation; it returns the bytes a write wrote (for the
// expected short write) and its error.
type faultOp struct {
	name string
	run  func(f *ext4go.FS) (int, error)
	// wrote, for writes: the file and the data at offset that a short
	// write of n bytes leaves in it.
	file string
	off  int64
	data []byte
}

func faultBase(t *testing.T) string {
	image := filepath.Join(t.TempDir(), "base")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "1024")
	fsys := openRW(t, image)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("big", 0o755))
	for i := 0; i < 150; i++ {
		must(fsys.WriteFile(fmt.Sprintf("big/entry-with-a-longish-name-%03d", i), nil, 0o644))
	}
	frag, err := fsys.Create("frag")
	must(err)
	for i := int64(0); i < 120; i++ {
		_, err := frag.WriteAt(pattern(i, 0, 1024), 2*i*1024)
		must(err)
	}
	must(frag.Close())
	must(fsys.WriteFile("x", pattern(7, 0, 10000), 0o644))
	must(fsys.SetXattr("x", "user.big", pattern(8, 0, 500), 0))
	for _, p := range []string{"shared1", "shared2"} {
		must(fsys.WriteFile(p, []byte(p), 0o644))
		must(fsys.SetXattr(p, "user.a", pattern(9, 0, 400), 0))
	}
	must(fsys.Symlink(strings.Repeat("t", 200), "s"))
	must(fsys.Mkdir("sub", 0o755))
	must(fsys.WriteFile("sub/inner", []byte("inner"), 0o644))
	must(fsys.Mkdir("empty", 0o755))
	must(fsys.WriteFile("hl", []byte("hard"), 0o644))
	must(fsys.Link("hl", "hl2"))
	closeChecked(t, fsys, image)
	return image
}

func faultOps() []faultOp {
	long := strings.Repeat("l", 300)
	w1 := pattern(11, 0, 50000)
	w2 := pattern(12, 0, 30000)
	return []faultOp{
		{name: "create", run: func(f *ext4go.FS) (int, error) {
			fl, err := f.OpenFile("big/new", os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
			if err == nil {
				err = fl.Close()
			}
			return 0, err
		}},
		{name: "mkdir", run: func(f *ext4go.FS) (int, error) { return 0, f.Mkdir("big/newdir", 0o755) }},
		{name: "symlink", run: func(f *ext4go.FS) (int, error) { return 0, f.Symlink(long, "big/newlink") }},
		{name: "link", run: func(f *ext4go.FS) (int, error) { return 0, f.Link("x", "big/xlink") }},
		{name: "rename", run: func(f *ext4go.FS) (int, error) { return 0, f.Rename("x", "big/xmoved") }},
		{name: "rename-dir", run: func(f *ext4go.FS) (int, error) { return 0, f.Rename("sub", "big/submoved") }},
		{name: "rename-over", run: func(f *ext4go.FS) (int, error) { return 0, f.Rename("sub/inner", "hl2") }},
		{name: "remove", run: func(f *ext4go.FS) (int, error) { return 0, f.Remove("frag") }},
		{name: "remove-xattr-file", run: func(f *ext4go.FS) (int, error) { return 0, f.Remove("x") }},
		{name: "rmdir", run: func(f *ext4go.FS) (int, error) { return 0, f.Remove("empty") }},
		{name: "setxattr-shared", run: func(f *ext4go.FS) (int, error) { return 0, f.SetXattr("shared1", "user.new", []byte("v"), 0) }},
		{name: "removexattr-shared", run: func(f *ext4go.FS) (int, error) { return 0, f.RemoveXattr("shared1", "user.a") }},
		{name: "punch", run: func(f *ext4go.FS) (int, error) {
			return 0, withFile(f, "frag", func(fl *ext4go.File) error {
				return fl.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, 40*1024+100, 30*1024)
			})
		}},
		{name: "truncate", run: func(f *ext4go.FS) (int, error) {
			return 0, withFile(f, "frag", func(fl *ext4go.File) error { return fl.Truncate(100*1024 + 10) })
		}},
		{name: "fallocate", run: func(f *ext4go.FS) (int, error) {
			return 0, withFile(f, "x", func(fl *ext4go.File) error { return fl.Fallocate(ext4go.FallocKeepSize, 0, 200*1024) })
		}},
		{name: "write-holes", file: "frag", off: 3*1024 + 100, data: w1, run: func(f *ext4go.FS) (int, error) {
			var n int
			err := withFile(f, "frag", func(fl *ext4go.File) (err error) { n, err = fl.WriteAt(w1, 3*1024+100); return err })
			return n, err
		}},
		{name: "write-new", file: "x", off: 10000, data: w2, run: func(f *ext4go.FS) (int, error) {
			var n int
			err := withFile(f, "x", func(fl *ext4go.File) (err error) { n, err = fl.WriteAt(w2, 10000); return err })
			return n, err
		}},
	}
}

func withFile(f *ext4go.FS, name string, fn func(*ext4go.File) error) error {
	fl, err := f.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = fn(fl)
	if cerr := fl.Close(); err == nil {
		err = cerr
	}
	return err
}

// entryDigest is what treeDigest records of an entry: its metadata but
// times and inode number (meta), and a regular file's size and content.
type entryDigest struct {
	meta string
	size int64
	data [32]byte
}

// treeDigest describes every entry of the image.
func treeDigest(t *testing.T, image string) map[string]entryDigest {
	t.Helper()
	fsys := openImage(t, image)
	defer fsys.Close()
	out := map[string]entryDigest{}
	err := fsys.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*ext4go.Stat)
		e := entryDigest{meta: fmt.Sprintf("mode %v links %d uid %d", fi.Mode(), st.Nlink, st.UID), size: fi.Size()}
		switch {
		case fi.Mode().IsRegular():
			b, err := fsys.ReadFile(p)
			if err != nil {
				return err
			}
			e.data = sha256.Sum256(b)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := fsys.ReadLink(p)
			if err != nil {
				return err
			}
			e.meta += " -> " + target
		case fi.IsDir():
			ents, err := fsys.ReadDir(p)
			if err != nil {
				return err
			}
			e.meta += fmt.Sprintf(" entries %d", len(ents))
		}
		xs, err := st.Xattrs()
		if err != nil {
			return err
		}
		for _, k := range slices.Sorted(maps.Keys(xs)) {
			e.meta += fmt.Sprintf(" %s=%x", k, sha256.Sum256(xs[k]))
		}
		out[p] = e
		return nil
	})
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	return out
}

func copyImage(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "img")
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestFaultInjection(t *testing.T) {
	base := faultBase(t)
	before := treeDigest(t, base)
	baseFS := openImage(t, base)
	contents := map[string][]byte{}
	for _, p := range []string{"frag", "x"} {
		b, err := baseFS.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		contents[p] = b
	}
	baseFS.Close()
	for _, op := range faultOps() {
		t.Run(op.name, func(t *testing.T) {
			// A fault-free run counts the steps.
			var steps atomic.Int64
			img := copyImage(t, base)
			fsys := openRW(t, img)
			ext4go.SetFault(fsys, func(string) bool { steps.Add(1); return false })
			if _, err := op.run(fsys); err != nil {
				t.Fatalf("without faults: %v", err)
			}
			ext4go.SetFault(fsys, nil)
			closeChecked(t, fsys, img)
			total := int(steps.Load())
			stride := 1
			if limit := 40; total > limit && os.Getenv("EXT4GO_FAULT_ALL") == "" {
				stride = (total + limit - 1) / limit
			}
			failed, succeeded := 0, 0
			for k := 1; k <= total; k += stride {
				img := copyImage(t, base)
				fsys := openRW(t, img)
				var seen atomic.Int64
				var kind atomic.Value
				ext4go.SetFault(fsys, func(what string) bool {
					if seen.Add(1) == int64(k) {
						kind.Store(what)
						return true
					}
					return false
				})
				n, err := op.run(fsys)
				ext4go.SetFault(fsys, nil)
				if cerr := fsys.Close(); cerr != nil {
					t.Errorf("step %d (%v): close after the failed %s: %v", k, kind.Load(), op.name, cerr)
					continue
				}
				if code, out := testutil.E2fsckFN(t, img); code != 0 {
					t.Errorf("step %d (%v): %s returned %v; e2fsck -fn exit %d:\n%s", k, kind.Load(), op.name, err, code, out)
					continue
				}
				if err == nil {
					succeeded++ // the fault was in a step it could do without
					continue
				}
				failed++
				want := maps.Clone(before)
				if op.file != "" && n > 0 {
					// A short write: the file holds its first n bytes.
					data := append([]byte(nil), contents[op.file]...)
					if end := int(op.off) + n; end > len(data) {
						data = append(data, make([]byte, end-len(data))...)
					}
					copy(data[op.off:], op.data[:n])
					e := want[op.file]
					e.size, e.data = int64(len(data)), sha256.Sum256(data)
					want[op.file] = e
				}
				got := treeDigest(t, img)
				for p, w := range want {
					if got[p] != w {
						t.Errorf("step %d (%v): after the failed %s (%v), %s is %+v, want %+v", k, kind.Load(), op.name, err, p, got[p], w)
					}
				}
				for p := range got {
					if _, ok := want[p]; !ok {
						t.Errorf("step %d (%v): after the failed %s (%v), %s appeared: %+v", k, kind.Load(), op.name, err, p, got[p])
					}
				}
			}
			t.Logf("%d steps (every %d tried): %d failed cleanly, %d succeeded anyway", total, stride, failed, succeeded)
		})
	}
}
