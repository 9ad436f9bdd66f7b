package ext4go_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

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
	fsys = openRW(t, image)
	for _, name := range []string{"b", "d", "e", "f"} {
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	if out := testutil.Debugfs(t, image, "ls -l /"); bytes.Contains([]byte(out), []byte(" e ")) {
		t.Fatalf("e still listed:\n%s", out)
	}
}
