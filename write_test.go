//go:build linux

package ext4go_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/testutil"
)

func openRW(t testing.TB, image string) *ext4go.FS {
	t.Helper()
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatalf("open %s writable: %v", image, err)
	}
	return fsys
}

// formatRW makes a fresh image of size bytes with ext4go's own mkfs in
// the test's temporary directory and opens it writable.
func formatRW(t testing.TB, size int64) (image string, fsys *ext4go.FS) {
	t.Helper()
	image = filepath.Join(t.TempDir(), "img")
	if err := mkfs.Format(image, mkfs.Options{Size: size}); err != nil {
		t.Fatal(err)
	}
	return image, openRW(t, image)
}

// TestWriteBasic creates files, directories and links on a fresh mke2fs
// image and checks e2fsck and the kernel agree with what we wrote.
func TestWriteBasic(t *testing.T) {
	for _, cfg := range []struct {
		name string
		args []string
	}{
		{"4k", []string{"-t", "ext4", "-b", "4096"}},
		{"1k", []string{"-t", "ext4", "-b", "1024"}},
		{"nocsum", []string{"-t", "ext4", "-O", "^metadata_csum,^64bit"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, cfg.args...)
			fsys := openRW(t, image)
			want := t.TempDir()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(fsys.Mkdir("dir", 0o755))
			must(os.Mkdir(filepath.Join(want, "dir"), 0o755))
			data := bytes.Repeat([]byte("ext4go!"), 100000)
			for i, name := range []string{"a.txt", "dir/b.bin", "dir/empty"} {
				f, err := fsys.Create(name)
				must(err)
				content := data[:len(data)/(i+1)]
				if name == "dir/empty" {
					content = nil
				}
				_, err = f.Write(content)
				must(err)
				must(f.Close())
				must(os.WriteFile(filepath.Join(want, name), content, 0o666))
			}
			must(fsys.Symlink("a.txt", "link"))
			must(os.Symlink("a.txt", filepath.Join(want, "link")))
			long := string(bytes.Repeat([]byte("x"), 200))
			must(fsys.Symlink(long, "dir/longlink"))
			must(os.Symlink(long, filepath.Join(want, "dir/longlink")))
			must(fsys.Link("a.txt", "dir/hard"))
			must(os.Link(filepath.Join(want, "a.txt"), filepath.Join(want, "dir/hard")))
			must(fsys.Close())
			testutil.RequireFsckClean(t, image)
			ro := openImage(t, image)
			testutil.CompareFS(t, ro, want, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
			if ok, _ := testutil.CanMount(); ok {
				mnt := testutil.Mount(t, image, true)
				testutil.CompareDirs(t, mnt, want, testutil.CompareOptions{SkipPaths: []string{"lost+found"}})
			}
			_ = fs.ErrExist
		})
	}
}

// TestNewInodeOwner: Options.UID/GID own what OpenFile, Mkdir, Symlink and
// Mknod make; a setgid directory gives its group (and, to directories, the
// bit), as the kernel does.
func TestNewInodeOwner(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, UID: 1000, GID: 100})
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("file")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("dir", 0o755))
	must(fsys.Symlink("file", "link"))
	must(fsys.Mknod("fifo", 0x1000|0o644, 0))
	must(fsys.Mkdir("sg", 0o755))
	must(fsys.Chown("sg", 1000, 555))
	must(fsys.Chmod("sg", fs.ModeDir|fs.ModeSetgid|0o775))
	must(fsys.Mkdir("sg/sub", 0o755))
	sf, err := fsys.Create("sg/f")
	must(err)
	sf.Close()
	must(fsys.Close())
	testutil.RequireFsckClean(t, image)

	want := map[string][2]uint32{"file": {1000, 100}, "dir": {1000, 100}, "link": {1000, 100}, "fifo": {1000, 100},
		"sg/sub": {1000, 555}, "sg/f": {1000, 555}}
	ro := openImage(t, image)
	for name, w := range want {
		fi, err := ro.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*ext4go.Stat)
		if st.UID != w[0] || st.GID != w[1] {
			t.Errorf("%s: owner %d:%d, want %d:%d", name, st.UID, st.GID, w[0], w[1])
		}
	}
	if fi, _ := ro.Lstat("sg/sub"); fi.Mode()&fs.ModeSetgid == 0 {
		t.Error("sg/sub did not inherit the setgid bit")
	}
	if ok, _ := testutil.CanMount(); ok {
		mnt := testutil.Mount(t, image, true)
		for name, w := range want {
			var st syscall.Stat_t
			if err := syscall.Lstat(filepath.Join(mnt, name), &st); err != nil {
				t.Fatal(err)
			}
			if st.Uid != w[0] || st.Gid != w[1] {
				t.Errorf("kernel: %s owned by %d:%d, want %d:%d", name, st.Uid, st.Gid, w[0], w[1])
			}
		}
	}
}

// TestWriteIgnoringChecksums: Options.IgnoreChecksums only skips
// verification; what ext4go writes still carries every checksum, and
// indexed directories are still used through their htree.
func TestWriteIgnoringChecksums(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024")
	fsys := openRW(t, image)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.Mkdir("big", 0o755))
	for i := 0; i < 2000; i++ {
		f, err := fsys.Create(fmt.Sprintf("big/file-%04d", i))
		must(err)
		must(f.Close())
	}
	must(fsys.Close())
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, IgnoreChecksums: true})
	must(err)
	for i := 2000; i < 2300; i++ {
		f, err := fsys.Create(fmt.Sprintf("big/file-%04d", i))
		must(err)
		must(f.Close())
	}
	must(fsys.Mkdir("big/sub", 0o755))
	must(fsys.Remove("big/file-0007"))
	must(fsys.Close())
	testutil.RequireFsckClean(t, image)
}

// TestChownHighIDs: owners of 1<<31 and more reach the inode through
// Chown, Lchown and File.Chown although, on 32-bit platforms, the int they
// come in is negative; only -1 keeps a value.
func TestChownHighIDs(t *testing.T) {
	image, fsys := formatRW(t, 16<<20)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fsys.WriteFile("f", nil, 0o644))
	must(fsys.Symlink("f", "l"))
	must(fsys.WriteFile("g", nil, 0o644))
	high := []uint32{1 << 31, 3000000000, 1<<32 - 2}
	// int(v) of a variable wraps where int has 32 bits, as a caller's
	// conversion of a uid_t would.
	must(fsys.Chown("f", int(high[0]), int(high[1])))
	must(fsys.Lchown("l", int(high[2]), -1))
	g, err := fsys.OpenFile("g", os.O_RDWR, 0)
	must(err)
	must(g.Chown(-1, int(high[2])))
	must(g.Close())
	check := func(name string, uid, gid uint32) {
		t.Helper()
		fi, err := fsys.Lstat(name)
		must(err)
		if st := fi.Sys().(*ext4go.Stat); st.UID != uid || st.GID != gid {
			t.Errorf("%s: owner %d:%d, want %d:%d", name, st.UID, st.GID, uid, gid)
		}
	}
	check("f", high[0], high[1])
	check("l", high[2], 0)
	check("g", 0, high[2])
	must(fsys.Chown("f", -1, -1))
	check("f", high[0], high[1])
	must(fsys.Close())
	testutil.RequireFsckClean(t, image)
}
