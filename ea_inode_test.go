//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestEAInodeRefs: values the kernel stored in EA inodes (ea_inode), some
// shared by two files, lose a reference when a file or the xattr goes and
// are freed with the last one; e2fsck checks every count, and the kernel
// reads back what is left.
func TestEAInodeRefs(t *testing.T) {
	testutil.RequireMount(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-O", "ea_inode")
	shared := bytes.Repeat([]byte("s"), 3000)
	own := bytes.Repeat([]byte("o"), 5000)
	t.Run("kernel writes", func(t *testing.T) {
		mnt := testutil.Mount(t, image, false)
		for _, name := range []string{"a", "b", "c", "d", "e", "f", "g"} {
			if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		set := func(name, attr string, v []byte) {
			if err := unix.Setxattr(filepath.Join(mnt, name), attr, v, 0); err != nil {
				t.Fatal(err)
			}
		}
		set("a", "user.big", shared)
		set("b", "user.big", shared) // the kernel shares the EA inode of a's value
		set("c", "user.big", own)
		set("d", "user.big", own[:4000])
		set("e", "user.big", shared)
		set("e", "user.small", []byte("x"))
		// f and g: the in-inode area filled first, so the entries of the
		// big values go in the xattr block.
		for _, name := range []string{"f", "g"} {
			for _, pad := range []string{"user.p1", "user.p2", "user.p3"} {
				set(name, pad, bytes.Repeat([]byte("p"), 30))
			}
			set(name, "user.big", own[:2500])
		}
	})
	testutil.RequireFsckClean(t, image)

	fsys := openRW(t, image)
	steps := []struct {
		what string
		do   func() error
	}{
		{"remove a (shared value: one reference less)", func() error { return fsys.Remove("a") }},
		{"remove b's xattr", func() error { return fsys.RemoveXattr("b", "user.big") }},
		{"remove c (own value: freed)", func() error { return fsys.Remove("c") }},
		{"replace d's value by a small one", func() error { return fsys.SetXattr("d", "user.big", []byte("small"), 0) }},
		{"another xattr on e (its block or area is rewritten)", func() error { return fsys.SetXattr("e", "user.more", []byte("y"), 0) }},
		{"remove f's big value from its xattr block", func() error { return fsys.RemoveXattr("f", "user.big") }},
		{"remove g (its xattr block and the value's EA inode freed)", func() error { return fsys.Remove("g") }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)

	t.Run("kernel reads", func(t *testing.T) {
		mnt := testutil.Mount(t, image, true)
		want := map[string]map[string][]byte{
			"b": {},
			"d": {"user.big": []byte("small")},
			"e": {"user.big": shared, "user.small": []byte("x"), "user.more": []byte("y")},
			"f": {"user.p1": bytes.Repeat([]byte("p"), 30), "user.p2": bytes.Repeat([]byte("p"), 30), "user.p3": bytes.Repeat([]byte("p"), 30)},
		}
		for name, attrs := range want {
			got := testutil.HostXattrs(t, filepath.Join(mnt, name))
			if len(got) != len(attrs) {
				t.Errorf("%s: kernel lists %d xattrs, want %d", name, len(got), len(attrs))
			}
			for a, v := range attrs {
				if !bytes.Equal(got[a], v) {
					t.Errorf("%s: %s is %d bytes, want %d", name, a, len(got[a]), len(v))
				}
			}
		}
		for _, gone := range []string{"a", "c", "g"} {
			if _, err := os.Lstat(filepath.Join(mnt, gone)); !os.IsNotExist(err) {
				t.Errorf("%s still there: %v", gone, err)
			}
		}
	})

	// Removing the rest frees the shared value's inode too.
	removeAllChecked(t, image, "b", "d", "e", "f")
	if out := testutil.Debugfs(t, image, "ls -l /"); bytes.Contains([]byte(out), []byte(" e ")) {
		t.Fatalf("e still listed:\n%s", out)
	}
}

// TestEAInodeCreate: values too big for the inode and one block go in EA
// inodes ext4go makes (in-inode and block entries, replaced, removed, the
// file removed); e2fsck checks every count and hash, and the kernel reads
// the values back.
func TestEAInodeCreate(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-O", "ea_inode")
	big := func(c byte, n int) []byte { return bytes.Repeat([]byte{c}, n) }
	fsys := openRW(t, image)
	for _, name := range []string{"a", "b", "c", "d"} {
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte(name))
		f.Close()
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"a: one big value", func() error { return fsys.SetXattr("a", "user.big", big('a', 5000), 0) }},
		{"b: small values fill the inode, then a big one", func() error {
			for _, p := range []string{"user.p1", "user.p2", "user.p3"} {
				if err := fsys.SetXattr("b", p, big('p', 30), 0); err != nil {
					return err
				}
			}
			return fsys.SetXattr("b", "user.big", big('b', 20000), 0)
		}},
		{"c: a big value replaced by another", func() error {
			if err := fsys.SetXattr("c", "user.big", big('c', 3000), 0); err != nil {
				return err
			}
			return fsys.SetXattr("c", "user.big", big('C', 65536), 0)
		}},
		{"d: a big value set then removed", func() error {
			if err := fsys.SetXattr("d", "user.big", big('d', 4000), 0); err != nil {
				return err
			}
			return fsys.RemoveXattr("d", "user.big")
		}},
		{"a value over 64 KiB is refused", func() error {
			if err := fsys.SetXattr("d", "user.huge", big('h', 65537), 0); err == nil {
				return errors.New("accepted")
			}
			return nil
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	want := map[string]map[string][]byte{
		"a": {"user.big": big('a', 5000)},
		"b": {"user.p1": big('p', 30), "user.p2": big('p', 30), "user.p3": big('p', 30), "user.big": big('b', 20000)},
		"c": {"user.big": big('C', 65536)},
		"d": {},
	}
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, attrs := range want {
		for a, v := range attrs {
			got, err := ro.GetXattr(name, a)
			if err != nil || !bytes.Equal(got, v) {
				t.Errorf("ext4go: %s %s: %d bytes, %v", name, a, len(got), err)
			}
		}
	}
	ro.Close()
	if ok, _ := testutil.CanMount(); ok {
		t.Run("kernel reads", func(t *testing.T) {
			mnt := testutil.Mount(t, image, true)
			for name, attrs := range want {
				got := testutil.HostXattrs(t, filepath.Join(mnt, name))
				if len(got) != len(attrs) {
					t.Errorf("%s: kernel lists %d xattrs, want %d", name, len(got), len(attrs))
				}
				for a, v := range attrs {
					if !bytes.Equal(got[a], v) {
						t.Errorf("%s: kernel reads %s as %d bytes, want %d", name, a, len(got[a]), len(v))
					}
				}
			}
		})
	}
	removeAllChecked(t, image, "a", "b", "c", "d")
}

// TestEAInodeShared: the same big value set on several files is stored once,
// its EA inode counting one reference per file, as the kernel shares it.
func TestEAInodeShared(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-O", "ea_inode")
	value := bytes.Repeat([]byte("shared value "), 700)
	fsys := openRW(t, image)
	names := []string{"a", "b", "c"}
	for _, name := range names {
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := fsys.SetXattr(name, "user.big", value, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	// Three files and one EA inode beyond the 11 inodes of a new filesystem.
	if _, out := testutil.E2fsckFN(t, image); !strings.Contains(out, " 15/") {
		t.Fatalf("want 15 inodes in use (one shared EA inode):\n%s", out)
	}
	if ok, _ := testutil.CanMount(); ok {
		t.Run("kernel reads", func(t *testing.T) {
			mnt := testutil.Mount(t, image, true)
			for _, name := range names {
				if got := testutil.HostXattrs(t, filepath.Join(mnt, name))["user.big"]; !bytes.Equal(got, value) {
					t.Errorf("%s: kernel reads %d bytes", name, len(got))
				}
			}
		})
	}
	fsys = openRW(t, image)
	for i, name := range names {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := fsys.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}

// removeAllChecked removes names from image in one open, then requires
// e2fsck to find it clean.
func removeAllChecked(t *testing.T, image string, names ...string) {
	t.Helper()
	fsys := openRW(t, image)
	for _, name := range names {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}
