//go:build linux || darwin || freebsd

package host

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFromUnix: stat(2) converted agrees with os.Lstat, and a hard link
// has the same identity.
func TestFromUnix(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	when := time.Date(2001, 2, 3, 4, 5, 6, 789000000, time.UTC)
	if err := os.Chtimes(p, when.Add(time.Hour), when); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(p, filepath.Join(dir, "g")); err != nil {
		t.Fatal(err)
	}
	var a, b unix.Stat_t
	if err := unix.Lstat(p, &a); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(filepath.Join(dir, "g"), &b); err != nil {
		t.Fatal(err)
	}
	st, st2 := FromUnix(&a), FromUnix(&b)
	if st.Mode != IFREG|0o640 || st.Size != 5 || st.Nlink != 2 || !st.HasID || st.UID != uint32(os.Getuid()) {
		t.Errorf("file: %+v", st)
	}
	if !st.Mtime.Equal(when) || !st.Atime.Equal(when.Add(time.Hour)) {
		t.Errorf("times %v %v, want %v %v", st.Atime, st.Mtime, when.Add(time.Hour), when)
	}
	if st.Dev != st2.Dev || st.Ino != st2.Ino {
		t.Errorf("hard links: %d:%d and %d:%d", st.Dev, st.Ino, st2.Dev, st2.Ino)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lstat(filepath.Join(dir, "l"), &a); err != nil {
		t.Fatal(err)
	}
	if st := FromUnix(&a); st.Type() != IFLNK || st.Size != 1 {
		t.Errorf("symlink: %+v", st)
	}
}

// TestXattrs: attributes set on a host file come back by descriptor and
// by path, sorted, named as ext4 names them.
func TestXattrs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := SetLinkXattr(p, "user.b", []byte("2")); err != nil {
		t.Skipf("the temporary directory keeps no user attributes: %v", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := SetFdXattr(int(f.Fd()), "user.a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	for what, get := range map[string]func() ([]Xattr, error){
		"path": func() ([]Xattr, error) { return LinkXattrs(p) },
		"fd":   func() ([]Xattr, error) { return FdXattrs(int(f.Fd())) },
	} {
		xs, err := get()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var user []Xattr
		for _, x := range xs {
			if x.Name == "user.a" || x.Name == "user.b" {
				user = append(user, x)
			}
		}
		if len(user) != 2 || user[0].Name != "user.a" || string(user[0].Value) != "1" || user[1].Name != "user.b" || string(user[1].Value) != "2" {
			t.Errorf("%s: %+v", what, xs)
		}
	}
	if XattrListSize(p) == 0 {
		t.Error("XattrListSize: 0")
	}
}
