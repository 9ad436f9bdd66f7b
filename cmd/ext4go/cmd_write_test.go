//go:build linux

package main

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// --- helpers ---

// inspect opens the image read-only, runs fn, and closes it again, so later
// commands can open it writable.
func inspect(t *testing.T, img string, fn func(fsys *ext4go.FS)) {
	t.Helper()
	fsys, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	fn(fsys)
}

func lstat(t *testing.T, fsys *ext4go.FS, name string) *ext4go.Stat {
	t.Helper()
	fi, err := fsys.Lstat(name)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*ext4go.Stat)
}

func exists(fsys *ext4go.FS, name string) bool {
	_, err := fsys.Lstat(name)
	return err == nil
}

func readFile(t *testing.T, fsys *ext4go.FS, name string) string {
	t.Helper()
	b, err := fsys.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// meta is what CompareFS compares, from our FileInfo.
func meta(fi fs.FileInfo) (testutil.Meta, bool) {
	st, ok := fi.Sys().(*ext4go.Stat)
	if !ok {
		return testutil.Meta{}, false
	}
	m := testutil.Meta{Ino: uint64(st.Ino), Nlink: uint64(st.Nlink), Uid: st.UID, Gid: st.GID,
		Major: st.Major(), Minor: st.Minor(), Mtime: st.Mtime, Atime: st.Atime}
	x, err := st.Xattrs()
	if err != nil {
		return m, false
	}
	m.Xattrs = x
	return m, true
}

// --- put ---

// TestPutTree copies a generated tree of every kind of entry into images of
// several formats and checks it against the source through ext4go and
// through the kernel.
func TestPutTree(t *testing.T) {
	for _, cfg := range []struct {
		name    string
		bs      int
		presets []string
		args    []string
	}{
		{"4k-all", 4096, []string{"all"}, nil},
		{"1k", 1024, []string{"small", "links", "xattrs", "special", "odd", "modes", "times", "sparse"}, nil},
		{"nocsum", 4096, []string{"small", "links", "xattrs", "times"}, []string{"-O", "^metadata_csum,^64bit"}},
		{"inline", 4096, []string{"small", "links", "xattrs", "odd"}, []string{"-O", "inline_data"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			if testing.Short() && cfg.name == "4k-all" {
				cfg.presets = []string{"small", "links", "xattrs", "special", "modes", "times"}
			}
			src := testutil.SourceDir(t)
			var written int64
			for _, p := range cfg.presets {
				dir := src
				if len(cfg.presets) > 1 {
					dir = filepath.Join(src, p)
				}
				m := testutil.GenTree(t, dir, testutil.TreeSpec{Preset: p, Seed: 7, BlockSize: cfg.bs})
				written += m.Written
			}
			cfg.args = append([]string{"-N", "40000", "-b", strconv.Itoa(cfg.bs)}, cfg.args...)
			img := newImage(t, max(256<<20, 3*written), cfg.args...)
			// "SRC/." merges SRC's contents into the root, so the whole image
			// compares with SRC.
			start := time.Now()
			mustCLI(t, "put", "-q", img, src+"/.", "/")
			t.Logf("put %d MiB in %v", written>>20, time.Since(start))
			testutil.RequireFsckClean(t, img)
			co := testutil.MountCompareOptions()
			co.Meta = meta
			testutil.CompareFS(t, openRO(t, img), src, co)
			mnt := testutil.Mount(t, img, true)
			testutil.CompareDirs(t, mnt, src, testutil.MountCompareOptions())
		})
	}
}

// TestPutSemantics checks cp -r naming, replacing, hard links, holes,
// exact times and -n.
func TestPutSemantics(t *testing.T) {
	host := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(host, "d/sub"), 0o755))
	must(os.WriteFile(filepath.Join(host, "d/a"), []byte("alpha"), 0o640))
	must(os.Link(filepath.Join(host, "d/a"), filepath.Join(host, "d/sub/a2")))
	must(os.Chown(filepath.Join(host, "d/a"), 1234, 5678))
	// A sparse file: 4 KiB of data at 1 MiB, size 3 MiB.
	f, err := os.Create(filepath.Join(host, "d/sparse"))
	must(err)
	_, err = f.WriteAt(bytes.Repeat([]byte{7}, 4096), 1<<20)
	must(err)
	must(f.Truncate(3 << 20))
	must(f.Close())
	atime := time.Date(1999, 12, 31, 23, 59, 58, 123456789, time.UTC)
	mtime := time.Date(2040, 1, 2, 3, 4, 5, 987654321, time.UTC)
	must(os.Chtimes(filepath.Join(host, "d/a"), atime, mtime))
	must(os.WriteFile(filepath.Join(host, "file"), []byte("new content"), 0o600))
	// A hard link between two sources of one put.
	must(os.Mkdir(filepath.Join(host, "s1"), 0o755))
	must(os.Mkdir(filepath.Join(host, "s2"), 0o755))
	must(os.WriteFile(filepath.Join(host, "s1/f"), []byte("shared"), 0o644))
	must(os.Link(filepath.Join(host, "s1/f"), filepath.Join(host, "s2/g")))

	img := newImage(t, 64<<20)
	mustCLI(t, "mkdir", img, "/existing")
	mustCLI(t, "put", img, filepath.Join(host, "d"), "/existing") // into: /existing/d
	mustCLI(t, "put", img, filepath.Join(host, "d"), "/copy")     // as: /copy
	mustCLI(t, "put", "-n", img, filepath.Join(host, "d"), "/noown")
	mustCLI(t, "put", img, filepath.Join(host, "file"), "/copy/a") // replaces a file
	failCLI(t, []string{"cannot overwrite non-directory '/copy/a' with directory"}, "put", img, filepath.Join(host, "d")+"/.", "/copy/a")
	failCLI(t, []string{"cannot stat", "nope"}, "put", img, filepath.Join(host, "nope"), "/x")
	mustCLI(t, "put", img, filepath.Join(host, "s1"), filepath.Join(host, "s2"), "/existing")
	failCLI(t, []string{"target '/copy/a' is not a directory"}, "put", img, filepath.Join(host, "s1"), filepath.Join(host, "s2"), "/copy/a")
	failCLI(t, []string{"no such file or directory"}, "put", img, filepath.Join(host, "file"), "/missing/dir/f")

	inspect(t, img, func(fsys *ext4go.FS) {
		a, a2 := lstat(t, fsys, "existing/d/a"), lstat(t, fsys, "existing/d/sub/a2")
		if a.Ino != a2.Ino || a.Nlink != 2 {
			t.Errorf("hard link: inodes %d/%d, nlink %d", a.Ino, a2.Ino, a.Nlink)
		}
		if a.UID != 1234 || a.GID != 5678 || a.Mode != 0x8000|0o640 {
			t.Errorf("owner %d:%d mode %o", a.UID, a.GID, a.Mode)
		}
		if !a.Atime.Equal(atime) || !a.Mtime.Equal(mtime) {
			t.Errorf("times %v %v, want %v %v", a.Atime, a.Mtime, atime, mtime)
		}
		if n := lstat(t, fsys, "noown/a"); n.UID != 0 || n.GID != 0 {
			t.Errorf("-n: owner %d:%d", n.UID, n.GID)
		}
		if f, g := lstat(t, fsys, "existing/s1/f"), lstat(t, fsys, "existing/s2/g"); f.Ino != g.Ino || f.Nlink != 2 {
			t.Errorf("hard link across sources: inodes %d/%d, nlink %d", f.Ino, g.Ino, f.Nlink)
		}
		sp := lstat(t, fsys, "copy/sparse")
		ext, err := fsys.Extents("copy/sparse")
		if err != nil {
			t.Fatal(err)
		}
		if sp.Size != 3<<20 || sp.Blocks > 16 || len(ext) != 1 || ext[0].Logical*uint64(fsys.BlockSize()) != 1<<20 {
			t.Errorf("sparse file: size %d, %d sectors, extents %+v", sp.Size, sp.Blocks, ext)
		}
		if got := readFile(t, fsys, "copy/a"); got != "new content" {
			t.Errorf("replaced file holds %q", got)
		}
		// Replacing /copy/a made a new inode: its old hard link keeps "alpha".
		if got := readFile(t, fsys, "copy/sub/a2"); got != "alpha" {
			t.Errorf("other link of the replaced file holds %q", got)
		}
	})
	testutil.RequireFsckClean(t, img)
}

// --- namespace commands ---

func TestMkdirRmMvLn(t *testing.T) {
	img := newImage(t, 32<<20)
	mustCLI(t, "mkdir", img, "/a", "/b")
	failCLI(t, []string{"cannot create directory '/a': file exists"}, "mkdir", img, "/a")
	failCLI(t, []string{"cannot create directory '/x/y': no such file or directory"}, "mkdir", img, "/x/y")
	mustCLI(t, "mkdir", "-p", "-m", "2750", img, "/x/y/z", "/a")
	mustCLI(t, "mkdir", "-pm700", img, "/x/y/z2")
	mustCLI(t, "touch", img, "/a/f", "/a/g", "/b/f")
	mustCLI(t, "write", img, "/a/f") // empty stdin
	code, _, errs := cli("payload", "write", img, "/a/f")
	if code != 0 {
		t.Fatal(errs)
	}
	inspect(t, img, func(fsys *ext4go.FS) {
		if m := lstat(t, fsys, "x/y/z").Mode; m != 0x4000|0o2750 {
			t.Errorf("mkdir -m: mode %o", m)
		}
		if m := lstat(t, fsys, "x/y").Mode; m != 0x4000|0o755 {
			t.Errorf("mkdir -p parent: mode %o", m)
		}
		if m := lstat(t, fsys, "x/y/z2").Mode; m != 0x4000|0o700 {
			t.Errorf("mkdir -pm700: mode %o", m)
		}
	})

	// rm
	failCLI(t, []string{"cannot remove '/a': is a directory"}, "rm", img, "/a")
	failCLI(t, []string{"cannot remove '/nope': no such file or directory"}, "rm", img, "/nope")
	mustCLI(t, "rm", "-f", img, "/nope", "/a/g")
	mustCLI(t, "rm", "-f", img)
	failCLI(t, []string{"refusing to remove the root"}, "rm", "-rf", img, "/")
	mustCLI(t, "rm", "-d", img, "/x/y/z2")
	// One missing operand does not stop the others; both failures are told.
	errs = failCLI(t, []string{"'/n1'", "'/n2'"}, "rm", img, "/n1", "/x/y/z", "/n2")
	if strings.Count(errs, "ext4go rm:") != 3 {
		t.Errorf("rm messages:\n%s", errs)
	}
	mustCLI(t, "rm", "-r", img, "/x")

	// mv: rename, into a directory, -n, --exchange
	mustCLI(t, "mv", img, "/a/f", "/b")       // into /b: replaces /b/f
	mustCLI(t, "mv", img, "/b/f", "/renamed") // rename
	mustCLI(t, "touch", img, "/t1", "/t2")    //
	mustCLI(t, "mv", img, "/t1", "/t2", "/a") // several into a directory
	failCLI(t, []string{"cannot move '/renamed' to '/a/t1': file exists"}, "mv", "-n", img, "/renamed", "/a/t1")
	failCLI(t, []string{"target '/renamed' is not a directory"}, "mv", img, "/a/t1", "/a/t2", "/renamed")
	failCLI(t, []string{"cannot stat '/ghost'"}, "mv", img, "/ghost", "/a")
	mustCLI(t, "mkdir", img, "/c")
	mustCLI(t, "mv", "--exchange", img, "/renamed", "/c") // a file and a directory swap
	mustCLI(t, "mv", "-T", img, "/b", "/renamed/b")

	// ln
	mustCLI(t, "ln", img, "/c", "/hard")          // hard link to the file now called /c
	mustCLI(t, "ln", "-s", img, "c/b", "/sym")    // symlink, target stored as given
	mustCLI(t, "ln", "-s", img, "/renamed", "/a") // into a directory: /a/renamed
	failCLI(t, []string{"cannot create hard link '/hard'", "file exists"}, "ln", img, "/c", "/hard")
	mustCLI(t, "ln", "-sf", img, "elsewhere", "/hard") // -f replaces
	failCLI(t, []string{"are the same file"}, "ln", "-f", img, "/c", "/c")
	failCLI(t, []string{"cannot access '/ghost'"}, "ln", img, "/ghost", "/g2")

	inspect(t, img, func(fsys *ext4go.FS) {
		for _, want := range []string{"a", "a/t1", "a/t2", "c", "renamed", "renamed/b", "sym", "hard", "a/renamed"} {
			if !exists(fsys, want) {
				t.Errorf("%s missing", want)
			}
		}
		for _, gone := range []string{"a/f", "a/g", "b", "x", "t1", "t2"} {
			if exists(fsys, gone) {
				t.Errorf("%s still there", gone)
			}
		}
		if got := readFile(t, fsys, "c"); got != "payload" {
			t.Errorf("/c holds %q", got)
		}
		if l, _ := fsys.ReadLink("hard"); l != "elsewhere" {
			t.Errorf("ln -sf: %q", l)
		}
		if l, _ := fsys.ReadLink("a/renamed"); l != "/renamed" {
			t.Errorf("ln -s into dir: %q", l)
		}
		if m := lstat(t, fsys, "renamed").Mode; m&0xF000 != 0x4000 {
			t.Errorf("--exchange: /renamed has mode %o, want the directory", m)
		}
	})
	testutil.RequireFsckClean(t, img)
}

// --- attribute commands ---

func TestChmodChownTouch(t *testing.T) {
	img := newImage(t, 32<<20)
	mustCLI(t, "mkdir", "-p", img, "/etc", "/d/sub")
	code, _, errs := cli("root:x:0:0::/root:/bin/sh\nwww:x:33:44::/var/www:/bin/false\n", "write", img, "/etc/passwd")
	if code != 0 {
		t.Fatal(errs)
	}
	code, _, errs = cli("root:x:0:\nstaff:x:50:\n", "write", img, "/etc/group")
	if code != 0 {
		t.Fatal(errs)
	}
	mustCLI(t, "touch", img, "/d/f", "/d/sub/g")
	mustCLI(t, "ln", "-s", img, "f", "/d/link")

	mustCLI(t, "chmod", img, "2775", "/d")
	mustCLI(t, "chmod", img, "755", "/d")    // < 5 digits: a directory keeps setgid
	mustCLI(t, "chmod", img, "4711", "/d/f") // setuid on a file
	mustCLI(t, "chmod", "-R", img, "0700", "/d/sub")
	mustCLI(t, "chown", img, "10:20", "/d/f")
	mustCLI(t, "chown", img, ":21", "/d/f")
	mustCLI(t, "chown", img, "11", "/d/f")
	mustCLI(t, "chown", "-h", img, "99:98", "/d/link")
	mustCLI(t, "chown", img, "www:", "/d/sub")              // login group from /etc/passwd
	mustCLI(t, "chown", "-R", img, "www:staff", "/d/sub/g") // names
	failCLI(t, []string{"invalid user: 'nobody'"}, "chown", img, "nobody", "/d/f")
	failCLI(t, []string{"changing ownership of '/d/nope'", "no such file or directory"}, "chown", img, "1", "/d/nope")
	failCLI(t, []string{"cannot access '/d/nope'"}, "chmod", img, "644", "/d/nope")

	when := "2021-02-03T04:05:06.123456789Z"
	mustCLI(t, "touch", "-d", when, img, "/d/sub/g", "/d/new")
	mustCLI(t, "touch", "-c", img, "/d/not-created")
	mustCLI(t, "touch", "-m", "-d", "@0", img, "/d/new")
	mustCLI(t, "touch", "-r", "/d/new", img, "/d/ref")

	inspect(t, img, func(fsys *ext4go.FS) {
		if m := lstat(t, fsys, "d").Mode; m != 0x4000|0o2755 {
			t.Errorf("chmod 755 on a setgid dir: %o", m)
		}
		if m := lstat(t, fsys, "d/f").Mode; m != 0x8000|0o4711 {
			t.Errorf("chmod 4711: %o", m)
		}
		if m := lstat(t, fsys, "d/sub/g").Mode; m != 0x8000|0o700 {
			t.Errorf("chmod -R: %o", m)
		}
		if s := lstat(t, fsys, "d/f"); s.UID != 11 || s.GID != 21 {
			t.Errorf("chown forms: %d:%d", s.UID, s.GID)
		}
		if s := lstat(t, fsys, "d/link"); s.UID != 99 || s.GID != 98 {
			t.Errorf("chown -h: %d:%d", s.UID, s.GID)
		}
		if s := lstat(t, fsys, "d/sub"); s.UID != 33 || s.GID != 44 {
			t.Errorf("chown www: %d:%d", s.UID, s.GID)
		}
		if s := lstat(t, fsys, "d/sub/g"); s.UID != 33 || s.GID != 50 {
			t.Errorf("chown -R www:staff: %d:%d", s.UID, s.GID)
		}
		want, _ := time.Parse(time.RFC3339Nano, when)
		if s := lstat(t, fsys, "d/sub/g"); !s.Mtime.Equal(want) || !s.Atime.Equal(want) {
			t.Errorf("touch -d: %v %v", s.Atime, s.Mtime)
		}
		if s := lstat(t, fsys, "d/new"); s.Mtime.Unix() != 0 || !s.Atime.Equal(want) || s.Size != 0 {
			t.Errorf("touch -m -d @0: %v %v size %d", s.Atime, s.Mtime, s.Size)
		}
		if s := lstat(t, fsys, "d/ref"); s.Mtime.Unix() != 0 || !s.Atime.Equal(want) {
			t.Errorf("touch -r: %v %v", s.Atime, s.Mtime)
		}
		if exists(fsys, "d/not-created") {
			t.Error("touch -c created a file")
		}
	})
	testutil.RequireFsckClean(t, img)
}

func TestTruncateFallocateWrite(t *testing.T) {
	img := newImage(t, 64<<20)
	size := func(name string) int64 {
		var n int64
		inspect(t, img, func(fsys *ext4go.FS) { n = lstat(t, fsys, name).Size })
		return n
	}
	for _, c := range []struct {
		args []string
		want int64
	}{
		{[]string{"-s", "10K"}, 10 << 10},
		{[]string{"-s", "+1KiB"}, 11 << 10},
		{[]string{"-s", "-512"}, 11<<10 - 512},
		{[]string{"-s", "%4K"}, 12 << 10},
		{[]string{"-s", "/5K"}, 10 << 10},
		{[]string{"-s", ">1M"}, 1 << 20},
		{[]string{"-s", "<2KB"}, 2000},
		{[]string{"--size=1G"}, 1 << 30},
		{[]string{"-s", "0"}, 0},
	} {
		mustCLI(t, append(append([]string{"truncate", img}, c.args...), "/t")...)
		if got := size("t"); got != c.want {
			t.Errorf("truncate %v: size %d, want %d", c.args, got, c.want)
		}
	}
	mustCLI(t, "truncate", "-c", "-s", "5", img, "/not-created")
	mustCLI(t, "truncate", "-r", "/t", "-s", "+7", img, "/t2")
	if got := size("t2"); got != 7 {
		t.Errorf("truncate -r -s +7: %d", got)
	}
	mustCLI(t, "mkdir", img, "/dir")
	failCLI(t, []string{"cannot truncate '/dir'"}, "truncate", "-s", "0", img, "/dir")

	// fallocate: allocate, keep size, punch, zero.
	mustCLI(t, "fallocate", img, "-l", "1M", "/fa")
	mustCLI(t, "fallocate", "-n", "-o", "1M", "-l", "1M", img, "/fa")
	inspect(t, img, func(fsys *ext4go.FS) {
		if s := lstat(t, fsys, "fa"); s.Size != 1<<20 || s.Blocks != 2<<20/512 {
			t.Errorf("fallocate -n: size %d, %d sectors", s.Size, s.Blocks)
		}
	})
	code, _, errs := cli(strings.Repeat("x", 64<<10), "write", img, "/fa") // 64 KiB of data
	if code != 0 {
		t.Fatal(errs)
	}
	mustCLI(t, "fallocate", "-p", "-o", "8K", "-l", "16K", img, "/fa")
	mustCLI(t, "fallocate", "-z", "-o", "32K", "-l", "4K", img, "/fa")
	inspect(t, img, func(fsys *ext4go.FS) {
		got := readFile(t, fsys, "fa")
		want := strings.Repeat("x", 8<<10) + strings.Repeat("\x00", 16<<10) + strings.Repeat("x", 8<<10) +
			strings.Repeat("\x00", 4<<10) + strings.Repeat("x", 28<<10)
		if got != want {
			t.Errorf("fallocate -p/-z: content differs (len %d)", len(got))
		}
	})
	// --dig-holes punches out written blocks of zeros.
	zeros := strings.Repeat("x", 4<<10) + strings.Repeat("\x00", 12<<10) + strings.Repeat("x", 4<<10)
	if code, _, errs := cli(zeros, "write", img, "/z"); code != 0 {
		t.Fatal(errs)
	}
	mustCLI(t, "fallocate", "-d", img, "/z")
	inspect(t, img, func(fsys *ext4go.FS) {
		ext, err := fsys.Extents("z")
		if err != nil {
			t.Fatal(err)
		}
		bs := uint64(fsys.BlockSize())
		if len(ext) != 2 || ext[0].Logical != 0 || ext[0].Length*bs != 4<<10 || ext[1].Logical*bs != 16<<10 {
			t.Errorf("after --dig-holes: extents %+v", ext)
		}
		if got := readFile(t, fsys, "z"); got != zeros {
			t.Error("--dig-holes changed the content")
		}
	})
	failCLI(t, []string{"cannot open '/missing'", "no such file"}, "fallocate", "-p", "-l", "4K", img, "/missing")

	// write -a appends.
	for _, s := range []struct {
		in   string
		args []string
	}{{"one\n", nil}, {"two\n", []string{"-a"}}} {
		code, _, errs := cli(s.in, append(append([]string{"write"}, s.args...), img, "/w")...)
		if code != 0 {
			t.Fatal(errs)
		}
	}
	inspect(t, img, func(fsys *ext4go.FS) {
		if got := readFile(t, fsys, "w"); got != "one\ntwo\n" {
			t.Errorf("write -a: %q", got)
		}
	})
	testutil.RequireFsckClean(t, img)
}

func TestXattrCommands(t *testing.T) {
	img := newImage(t, 32<<20)
	mustCLI(t, "touch", img, "/f")
	mustCLI(t, "ln", "-s", img, "f", "/l")
	mustCLI(t, "setfattr", img, "-n", "user.text", "-v", "hello world", "/f")
	mustCLI(t, "setfattr", img, "-n", "user.quoted", "-v", `"a \"quoted\" b\\c\012d"`, "/l") // follows /l to /f
	mustCLI(t, "setfattr", img, "-n", "user.bin", "-v", "0x00ff10", "/f")
	mustCLI(t, "setfattr", img, "-n", "user.b64", "-v", "0sAAEC", "/f")
	mustCLI(t, "setfattr", img, "-n", "user.empty", "/f")
	mustCLI(t, "setfattr", img, "-n", "trusted.t", "-v", "x", "/f")
	mustCLI(t, "setfattr", "-h", img, "-n", "trusted.onlink", "-v", "y", "/l")
	mustCLI(t, "setfattr", img, "-n", "user.gone", "-v", "1", "/f")
	mustCLI(t, "setfattr", img, "-x", "user.gone", "/f")
	failCLI(t, []string{"'/f': user.gone: no such attribute"}, "setfattr", img, "-x", "user.gone", "/f")
	failCLI(t, []string{"cannot access '/nope'"}, "setfattr", img, "-n", "user.a", "/nope")

	inspect(t, img, func(fsys *ext4go.FS) {
		for name, want := range map[string]string{"user.text": "hello world", "user.quoted": "a \"quoted\" b\\c\nd",
			"user.bin": "\x00\xff\x10", "user.b64": "\x00\x01\x02", "user.empty": "", "trusted.t": "x"} {
			if v, err := fsys.GetXattr("f", name); err != nil || string(v) != want {
				t.Errorf("%s = %q, %v; want %q", name, v, err, want)
			}
		}
		if v, err := fsys.GetXattr("l", "trusted.onlink"); err != nil || string(v) != "y" {
			t.Errorf("setfattr -h: %q %v", v, err)
		}
	})

	code, out, errs := cli("", "getfattr", "-d", img, "/f")
	want := "# file: /f\nuser.b64=0x000102\nuser.bin=0x00ff10\nuser.empty=\"\"\nuser.quoted=\"a \\\"quoted\\\" b\\\\c\\012d\"\nuser.text=\"hello world\"\n\n"
	if code != 0 || out != want {
		t.Errorf("getfattr -d: exit %d %s\n got %q\nwant %q", code, errs, out, want)
	}
	code, out, _ = cli("", "getfattr", img, "-m", "-", "/f")
	if code != 0 || out != "# file: /f\ntrusted.t\nuser.b64\nuser.bin\nuser.empty\nuser.quoted\nuser.text\n\n" {
		t.Errorf("getfattr -m -: %q", out)
	}
	code, out, _ = cli("", "getfattr", "-n", "trusted.onlink", "-h", img, "/l")
	if code != 0 || out != "# file: /l\ntrusted.onlink=\"y\"\n\n" {
		t.Errorf("getfattr -n -h: %q", out)
	}
	code, out, _ = cli("", "getfattr", "-e", "base64", "-n", "user.text", img, "/l")
	if code != 0 || out != "# file: /l\nuser.text=0saGVsbG8gd29ybGQ=\n\n" {
		t.Errorf("getfattr -e base64: %q", out)
	}
	code, out, _ = cli("", "getfattr", "--only-values", "-n", "user.bin", img, "/f")
	if code != 0 || out != "\x00\xff\x10" {
		t.Errorf("getfattr --only-values: %q", out)
	}
	failCLI(t, []string{"'/f': user.nope: no such attribute"}, "getfattr", "-n", "user.nope", img, "/f")
	testutil.RequireFsckClean(t, img)
}

// TestUsageErrors checks that bad command lines exit 1 with the usage and
// a message, before the image is touched.
func TestUsageErrors(t *testing.T) {
	img := newImage(t, 16<<20)
	before, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"mkdir"}, "missing IMAGE"},
		{[]string{"mkdir", img}, "missing operand"},
		{[]string{"mkdir", "-m", "u+q", img, "/a"}, "invalid mode: 'u+q'"},
		{[]string{"mkdir", "-m"}, "option requires an argument -- 'm'"},
		{[]string{"rm", "-x", img, "/a"}, "invalid option -- 'x'"},
		{[]string{"rm", "--bogus", img, "/a"}, "unrecognized option '--bogus'"},
		{[]string{"rm", "-force", img, "/a"}, "invalid option -- 'o' (did you mean '--force'?)"},
		{[]string{"mv", img, "/a"}, "missing operand after '/a'"},
		{[]string{"mv", "-n", "--exchange", img, "/a", "/b"}, "cannot be combined"},
		{[]string{"mv", "-T", img, "/a", "/b", "/c"}, "extra operand '/c'"},
		{[]string{"ln", img, "/a"}, "missing operand"},
		{[]string{"chmod", img, "999", "/a"}, "invalid mode"},
		{[]string{"chmod", img, "755"}, "missing operand"},
		{[]string{"chown", img, "1:2"}, "missing operand"},
		{[]string{"touch", "-d", "yesterday", img, "/a"}, "invalid date"},
		{[]string{"truncate", img, "/a"}, "-s SIZE or -r REF"},
		{[]string{"truncate", "-s", "5Q", img, "/a"}, "invalid suffix"},
		{[]string{"truncate", "-s", "%0", img, "/a"}, "division by zero"},
		{[]string{"truncate", "-s", "5", "-r", "/b", img, "/a"}, "relative"},
		{[]string{"fallocate", img, "/a"}, "no length"},
		{[]string{"fallocate", "-l", "0", img, "/a"}, "invalid length"},
		{[]string{"fallocate", "-p", "-z", "-l", "1", img, "/a"}, "mutually exclusive"},
		{[]string{"fallocate", "-l", "1", img, "/a", "/b"}, "extra operand"},
		{[]string{"setfattr", img, "/a"}, "exactly one of -n NAME and -x NAME"},
		{[]string{"setfattr", "-x", "user.a", "-v", "1", img, "/a"}, "-v cannot be used with -x"},
		{[]string{"setfattr", "-n", "user.a", "-v", "0xzz", img, "/a"}, "bad hex"},
		{[]string{"getfattr", "-e", "rot13", img, "/a"}, "invalid encoding"},
		{[]string{"getfattr", "-m", "(", img, "/a"}, "invalid regular expression"},
		{[]string{"write", img}, "missing operand"},
		{[]string{"put", img, "/src"}, "missing operand"},
		{[]string{"batch"}, "want IMAGE"},
	} {
		code, _, errs := cli("", c.args...)
		if code != 1 || !strings.Contains(errs, c.msg) || !strings.Contains(errs, "usage: ext4go "+c.args[0]) {
			t.Errorf("%q: exit %d, stderr %q; want 1, %q and the usage", c.args, code, errs, c.msg)
		}
	}
	after, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("usage errors changed the image")
	}
	// Help exits 0 and lists the options.
	if code, out, _ := cli("", "rm", "--help"); code != 0 || !strings.Contains(out, "--recursive") {
		t.Errorf("rm --help: exit %d %q", code, out)
	}
	// A missing image is a plain error naming it.
	failCLI(t, []string{"no-such-image"}, "mkdir", filepath.Join(t.TempDir(), "no-such-image"), "/a")
	testutil.RequireFsckClean(t, img)
}

// --- batch ---

func TestBatch(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "data file"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := newImage(t, 32<<20)
	script := `# set up a tree
mkdir -p /a/b   # trailing comment

mkdir '/with space' "/dq \"quoted\" \\ \$x" /a/back\ slash
put "` + host + `/data file" /a/b
touch /a/b/x \
      /a/b/y
mkdir $'/nl\nname' $'/tab\there' '/multi
line'
setfattr -n user.note -v '"it'\''s"' /a/b/x
chmod 0640 /a/b/x
ln -s 'data file' /a/link
`
	code, out, errs := cli(script, "batch", img)
	if code != 0 {
		t.Fatalf("batch: exit %d\n%s%s", code, out, errs)
	}
	inspect(t, img, func(fsys *ext4go.FS) {
		for _, p := range []string{"a/b", "with space", `dq "quoted" \ $x`, `a/back slash`, "a/b/x", "a/b/y",
			"nl\nname", "tab\there", "multi\nline", "a/link"} {
			if !exists(fsys, p) {
				t.Errorf("%q missing", p)
			}
		}
		if got := readFile(t, fsys, "a/b/data file"); got != "from the host" {
			t.Errorf("put in batch: %q", got)
		}
		if v, _ := fsys.GetXattr("a/b/x", "user.note"); string(v) != "it's" {
			t.Errorf("setfattr in batch: %q", v)
		}
		if m := lstat(t, fsys, "a/b/x").Mode; m != 0x8000|0o640 {
			t.Errorf("chmod in batch: %o", m)
		}
	})

	// -v reports each line as it is done; sync is a command.
	code, out, errs = cli("mkdir /v1\nsync\n\nmkdir /v2\n", "batch", "-v", img)
	if code != 0 || out != "done 1\ndone 2\ndone 4\n" {
		t.Fatalf("batch -v: exit %d, out %q, err %q", code, out, errs)
	}
	if code, _, errs := cli("sync now\n", "batch", img); code != 1 || !strings.Contains(errs, "sync takes no arguments") {
		t.Errorf("sync with an argument: exit %d %q", code, errs)
	}

	// A failing line stops the script: earlier lines stay applied, later
	// ones do not run, and the image is closed cleanly.
	code, _, errs = cli("mkdir /ok1\n\n# comment\nrm /a\nmkdir /never\n", "batch", img)
	if code != 1 || !strings.Contains(errs, "line 4: rm: cannot remove '/a': is a directory") {
		t.Fatalf("failing batch: exit %d %q", code, errs)
	}
	inspect(t, img, func(fsys *ext4go.FS) {
		if !exists(fsys, "ok1") || exists(fsys, "never") || !exists(fsys, "a") {
			t.Error("failing batch: wrong set of lines applied")
		}
	})
	testutil.RequireFsckClean(t, img)

	// Script errors (syntax, unknown commands, bad options, write) are
	// found before anything runs.
	for _, c := range []struct{ script, msg string }{
		{"mkdir /s1\nmkdir 'unterminated\n", "line 2: unterminated single quote"},
		{"mkdir /s1\nfrobnicate /x\n", `line 2: unknown command "frobnicate"`},
		{"mkdir /s1\n\nchmod u+q /a\n", "line 3: chmod: invalid mode"},
		{"mkdir /s1\nwrite /a/f\n", "line 2: write: not available in batch"},
		{"mkdir /s1\nmkdir \"open\n\n", "line 2: unterminated double quote"},
	} {
		code, _, errs := cli(c.script, "batch", img)
		if code != 1 || !strings.Contains(errs, c.msg) {
			t.Errorf("script %q: exit %d %q, want %q", c.script, code, errs, c.msg)
		}
	}
	// The script may come from a file; -n only checks it.
	sf := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(sf, []byte("mkdir /from-file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "batch", "-n", img, sf)
	inspect(t, img, func(fsys *ext4go.FS) {
		if exists(fsys, "s1") || exists(fsys, "from-file") {
			t.Error("a rejected or checked script was applied")
		}
	})
	mustCLI(t, "batch", img, sf)
	inspect(t, img, func(fsys *ext4go.FS) {
		if !exists(fsys, "from-file") {
			t.Error("script file not applied")
		}
	})
	testutil.RequireFsckClean(t, img)
}

// --- parsers ---

func TestParseOpts(t *testing.T) {
	defs := []optDef{{'r', "recursive", "", ""}, {'f', "force", "", ""}, {'m', "mode", "MODE", ""}, {0, "exchange", "", ""}}
	for _, c := range []struct {
		args     []string
		vals     map[string][]string
		operands []string
		err      string
	}{
		{[]string{"-rf", "a", "b"}, map[string][]string{"r": {""}, "f": {""}}, []string{"a", "b"}, ""},
		{[]string{"a", "-m755", "b", "--mode", "700"}, map[string][]string{"m": {"755", "700"}}, []string{"a", "b"}, ""},
		{[]string{"--mode=1", "--exch", "--", "-r"}, map[string][]string{"m": {"1"}, "exchange": {""}}, []string{"-r"}, ""},
		{[]string{"-", "-rm", "7"}, map[string][]string{"r": {""}, "m": {"7"}}, []string{"-"}, ""},
		{[]string{"--force=yes"}, nil, nil, "doesn't allow an argument"},
		{[]string{"--x"}, nil, nil, "unrecognized"},
		{[]string{"-m"}, nil, nil, "requires an argument"},
		{[]string{"-q"}, nil, nil, "invalid option"},
	} {
		o, err := parseOpts(defs, c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(o.vals, c.vals) || !reflect.DeepEqual(o.args, c.operands) {
			t.Errorf("%q: %v %v %v", c.args, o, err, c.operands)
		}
	}
	if _, err := parseOpts(defs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	if _, err := parseOpts([]optDef{{'h', "", "", ""}}, []string{"-h"}); err != nil {
		t.Errorf("-h defined by the command: %v", err)
	}
}

func TestParseSizes(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "17": 17, "1K": 1024, "1k": 1024, "2KiB": 2048, "3KB": 3000,
		"1M": 1 << 20, "1MB": 1e6, "1G": 1 << 30, "1T": 1 << 40, "1P": 1 << 50, "7E": 7 << 60} {
		if got, err := parseByteSize(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "K", "-1", "1X", "1KX", "8E", "99999999999999999999"} {
		if _, err := parseByteSize(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	for _, c := range []struct {
		spec      string
		cur, want int64
	}{{"+5", 10, 15}, {"-20", 10, 0}, {"<5", 10, 5}, {">5", 10, 10}, {"/4", 10, 8}, {"%4", 10, 12}, {"%4", 12, 12}, {"3", 10, 3}} {
		sp, err := parseSizeSpec(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sp.apply(c.cur); err != nil || got != c.want {
			t.Errorf("%s on %d: %d %v, want %d", c.spec, c.cur, got, err, c.want)
		}
	}
}

func TestXattrValueCodec(t *testing.T) {
	for in, want := range map[string]string{"plain": "plain", `"quoted"`: "quoted", `a\"b`: `a"b`, `\101\7x`: "A\ax",
		`back\slash`: `back\slash`, "0x41 42": "AB", "0sQUI=": "AB", "": "", `"`: `"`} {
		got, err := decodeXattrValue(in)
		if err != nil || string(got) != want {
			t.Errorf("decode %q: %q %v, want %q", in, got, err, want)
		}
	}
	for _, c := range []struct{ v, enc, want string }{
		{"text", "", `"text"`},
		{"nul-terminated\x00", "", `"nul-terminated"`},
		{"line one\nline two\\\"", "", `"line one\012line two\\\""`},
		{"a\nb", "", "0x610a62"}, // more than 1/8 unprintable
		{"\x00\x01\x02\x03", "", "0x00010203"},
		{"AB", "hex", "0x4142"},
		{"AB", "base64", "0sQUI="},
	} {
		if got := encodeXattrValue([]byte(c.v), c.enc); got != c.want {
			t.Errorf("encode %q/%s: %s, want %s", c.v, c.enc, got, c.want)
		}
		if c.enc == "" && !strings.HasSuffix(c.v, "\x00") {
			if back, err := decodeXattrValue(encodeXattrValue([]byte(c.v), c.enc)); err != nil || string(back) != c.v {
				t.Errorf("round trip %q: %q %v", c.v, back, err)
			}
		}
	}
}

func TestSplitScript(t *testing.T) {
	got, err := splitScript([]byte("a 'b c' \"d\\\"e\\n\" f\\ g # x\n\n  # only a comment\nh $'i\\tj\\x41\\101\\u00e9' k#l \\\n  m\n''\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []batchLine{
		{1, []string{"a", "b c", "d\"e\\n", "f g"}},
		{4, []string{"h", "i\tjAAé", "k#l", "m"}},
		{6, []string{""}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for in, msg := range map[string]string{"a\n'b": "line 2: unterminated single quote", "\"a\n": "line 1: unterminated double quote",
		"$'abc": "line 1: unterminated $' quote"} {
		if _, err := splitScript([]byte(in)); err == nil || err.Error() != msg {
			t.Errorf("%q: %v, want %q", in, err, msg)
		}
	}
}

// FuzzSplitScript checks the script splitter never panics and keeps line
// numbers in order and in range.
func FuzzSplitScript(f *testing.F) {
	for _, s := range []string{"mkdir -p /a\n", "a 'b\nc' \"d\\\"\" $'\\x41\\u00e9\\c' # e\n", "\\\n\\", "$'\\", "\"\\"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := splitScript(data)
		if err != nil {
			return
		}
		prev, total := 0, bytes.Count(data, []byte("\n"))+1
		for _, l := range lines {
			if l.line < prev || l.line > total || len(l.words) == 0 {
				t.Fatalf("bad line %+v (prev %d, total %d)", l, prev, total)
			}
			prev = l.line
		}
	})
}

// TestPutSpecialFiles checks devices, fifos, sockets and xattrs of
// symlinks one by one (GenTree covers them in bulk).
func TestPutSpecialFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for device nodes")
	}
	host := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(unix.Mknod(filepath.Join(host, "chr"), unix.S_IFCHR|0o620, int(unix.Mkdev(4095, 1048575))))
	must(unix.Mknod(filepath.Join(host, "blk"), unix.S_IFBLK|0o660, int(unix.Mkdev(8, 1))))
	must(unix.Mkfifo(filepath.Join(host, "fifo"), 0o1644))
	must(unix.Mknod(filepath.Join(host, "sock"), unix.S_IFSOCK|0o755, 0))
	for name, perm := range map[string]os.FileMode{"chr": 0o620, "blk": 0o660, "fifo": 0o644 | os.ModeSticky, "sock": 0o755} {
		must(os.Chmod(filepath.Join(host, name), perm)) // past the umask
	}
	must(os.Symlink("target", filepath.Join(host, "sym")))
	must(unix.Lsetxattr(filepath.Join(host, "sym"), "trusted.x", []byte("v"), 0))
	img := newImage(t, 16<<20)
	mustCLI(t, "put", img, host, "/h")
	inspect(t, img, func(fsys *ext4go.FS) {
		for name, want := range map[string]uint16{"h/chr": 0x2000 | 0o620, "h/blk": 0x6000 | 0o660, "h/fifo": 0x1000 | 0o1644, "h/sock": 0xC000 | 0o755} {
			if m := lstat(t, fsys, name).Mode; m != want {
				t.Errorf("%s: mode %o, want %o", name, m, want)
			}
		}
		if s := lstat(t, fsys, "h/chr"); s.Major() != 4095 || s.Minor() != 1048575 {
			t.Errorf("chr: %d,%d", s.Major(), s.Minor())
		}
		if v, err := fsys.GetXattr("h/sym", "trusted.x"); err != nil || string(v) != "v" {
			t.Errorf("symlink xattr: %q %v", v, err)
		}
	})
	testutil.RequireFsckClean(t, img)
}

// TestPutNoSpace fills the image: put stops at the first file that does
// not fit, names it, and leaves a consistent image.
func TestPutNoSpace(t *testing.T) {
	host := t.TempDir()
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(host, n), bytes.Repeat([]byte(n), 6<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := newImage(t, 16<<20)
	errs := failCLI(t, []string{"ext4go put: cannot write '/h/", syscall.ENOSPC.Error()}, "put", img, host, "/h")
	if strings.Count(errs, "\n") != 1 {
		t.Errorf("put went on after running out of space:\n%s", errs)
	}
	testutil.RequireFsckClean(t, img)
}

// TestPutLeavesNothingOnFailure: a put (alone or in batch) whose file
// cannot be made whole (here: its xattr does not fit the image) leaves no
// half-made file behind (it left one of mode 0600 without its xattrs).
func TestPutLeavesNothingOnFailure(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "xf")
	os.WriteFile(src, []byte("data"), 0o644)
	if err := unix.Setxattr(src, "user.big", bytes.Repeat([]byte("v"), 3000), 0); err != nil {
		t.Skipf("host xattrs: %v", err)
	}
	img := filepath.Join(dir, "p.img")
	mustCLI(t, "mkfs", "-q", "-b", "1024", "-O", "^ea_inode", img, "4M")
	failCLI(t, []string{"cannot set attribute user.big"}, "put", img, src, "/xf")
	code, _, errs := cli("put "+src+" /xf2\n", "batch", img)
	if code != 1 || !strings.Contains(errs, "user.big") {
		t.Errorf("batch: exit %d: %s", code, errs)
	}
	out := mustCLI(t, "ls", img, "/")
	if strings.Contains(out, "xf") {
		t.Errorf("a failed put left its file:\n%s", out)
	}
	testutil.RequireFsckClean(t, img)
}
