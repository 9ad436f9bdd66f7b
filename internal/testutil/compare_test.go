package testutil

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"golang.org/x/sys/unix"
)

// TestCompareFindsEveryDifference mutates one of two identical trees in
// every way the comparison must notice and checks that each is reported,
// with its path, and nothing else is.
func TestCompareFindsEveryDifference(t *testing.T) {
	t.Parallel()
	want, got := SourceDir(t), SourceDir(t)
	presets := []string{"small", "links", "xattrs", "special", "sparse", "modes"}
	genPresets(t, want, 4096, presets...)
	genPresets(t, got, 4096, presets...)
	if d := DiffDirs(got, want, CompareOptions{Checks: CheckAll}); len(d) > 0 {
		t.Fatalf("identical trees differ:\n%s", strings.Join(d, "\n"))
	}
	p := func(rel string) string { return filepath.Join(got, rel) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	keepTimes := func(rel string, f func()) { // mutate without touching mtimes
		t.Helper()
		dir := filepath.Dir(p(rel))
		dfi, err := os.Lstat(dir)
		must(err)
		fi, ferr := os.Lstat(p(rel))
		f()
		if ferr == nil {
			if _, err := os.Lstat(p(rel)); err == nil {
				setMtime(t, p(rel), fi.ModTime())
			}
		}
		setMtime(t, dir, dfi.ModTime())
	}
	overwrite := func(rel string, off int64, b []byte) {
		f, err := os.OpenFile(p(rel), os.O_WRONLY, 0)
		must(err)
		_, err = f.WriteAt(b, off)
		must(err)
		must(f.Close())
	}

	expect := map[string]string{} // path -> substring of its diff
	keepTimes("small/hello.txt", func() { overwrite("small/hello.txt", 7, []byte("W")) })
	expect["small/hello.txt"] = "content differs at offset 7"
	keepTimes("small/empty", func() { must(os.Remove(p("small/empty"))) })
	expect["small/empty"] = "missing in got"
	keepTimes("small/extra", func() { must(os.WriteFile(p("small/extra"), nil, 0o644)) })
	expect["small/extra"] = "unexpected in got"
	must(os.Chmod(p("small/exec.sh"), 0o700))
	expect["small/exec.sh"] = "perm: got -rwx------, want -rwxr-xr-x"
	must(os.Lchown(p("small/dir1/a.txt"), 5, 6))
	expect["small/dir1/a.txt"] = "owner: got 5:6, want 0:0"
	fi, err := os.Stat(p("small/block"))
	must(err)
	must(os.Chtimes(p("small/block"), fi.ModTime(), fi.ModTime().Add(time.Nanosecond)))
	expect["small/block"] = "mtime: got 2021-06-01T12:00:04.000000001Z"
	keepTimes("small/link", func() {
		must(os.Remove(p("small/link")))
		must(os.Symlink("hello.txX", p("small/link")))
	})
	expect["small/link"] = `symlink target: got "hello.txX", want "hello.txt"`
	keepTimes("small/dir2", func() {
		must(os.Remove(p("small/dir2")))
		must(os.WriteFile(p("small/dir2"), nil, 0o755))
	})
	expect["small/dir2"] = "type: got ----------, want d---------"
	keepTimes("links/hard2", func() { // break a hard link, same content
		b, err := os.ReadFile(p("links/hard2"))
		must(err)
		must(os.Remove(p("links/hard2")))
		must(os.WriteFile(p("links/hard2"), b, 0o644))
	})
	expect["links/hard2"] = "hard link"
	must(unix.Lsetxattr(p("xattrs/user-small"), "user.a", []byte("2"), 0))
	must(unix.Lremovexattr(p("xattrs/user-small"), "user.empty"))
	expect["xattrs/user-small"] = `xattr "user.a": got 1 bytes 32, want 1 bytes 31`
	keepTimes("special/chr-1-3", func() {
		must(os.Remove(p("special/chr-1-3")))
		must(unix.Mknod(p("special/chr-1-3"), unix.S_IFCHR|0o640, int(unix.Mkdev(1, 4))))
	})
	expect["special/chr-1-3"] = "device: got 1:4, want 1:3"
	// A byte in the middle of the 5 GiB file's hole: found without reading
	// the 5 GiB, because holes on both sides are skipped.
	keepTimes("sparse/big", func() { overwrite("sparse/big", 3<<30+5, []byte{1}) })
	expect["sparse/big"] = fmt.Sprintf("content differs at offset %d: got 01", int64(3<<30+5))
	must(unix.Fchmodat(unix.AT_FDCWD, p("modes/suid"), 0o755, 0))
	expect["modes/suid"] = "setuid/setgid/sticky: got ----------, want u---------"
	// Holes versus written zeros are equal content: rewrite a sparse file
	// densely.
	keepTimes("sparse/middle", func() {
		b, err := os.ReadFile(p("sparse/middle"))
		must(err)
		must(os.WriteFile(p("sparse/middle")+".tmp", b, 0o644))
		must(os.Rename(p("sparse/middle")+".tmp", p("sparse/middle")))
	})

	start := time.Now()
	diffs := DiffDirs(got, want, CompareOptions{Checks: CheckAll})
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("comparison took %v: holes are being read", el)
	}
	for rel, sub := range expect {
		found := false
		for _, d := range diffs {
			found = found || strings.HasPrefix(d, fmt.Sprintf("%q: ", rel)) && strings.Contains(d, sub)
		}
		if !found {
			t.Errorf("no difference %q for %s", sub, rel)
		}
	}
	for _, d := range diffs {
		ok := false
		for rel := range expect {
			ok = ok || strings.HasPrefix(d, fmt.Sprintf("%q: ", rel))
		}
		// Breaking a link changes the other names' link counts; dir2
		// becoming a file drops a link of its parent.
		ok = ok || strings.Contains(d, "links/") && strings.Contains(d, "nlink") ||
			strings.HasPrefix(d, `"small": nlink: got 3, want 4`)
		if !ok {
			t.Errorf("unexpected difference: %s", d)
		}
	}
	if t.Failed() {
		t.Logf("all differences:\n%s", strings.Join(diffs, "\n"))
	}

	// The cap.
	capped := DiffDirs(got, want, CompareOptions{Checks: CheckAll, MaxDiffs: 3})
	if len(capped) != 4 || !strings.HasPrefix(capped[3], fmt.Sprintf("... and %d more", len(diffs)-3)) {
		t.Errorf("capped diffs: %q", capped)
	}
	// SkipPaths and IgnoreMissing silence what they cover.
	opts := CompareOptions{SkipPaths: []string{"small", "links", "xattrs", "special", "sparse", "modes"}}
	if d := DiffDirs(got, want, opts); len(d) != 0 {
		t.Errorf("skipped everything but got %q", d)
	}
}

// TestCompareFSMeta covers CompareFS over a non-host fs.FS: an fstest.MapFS
// (no SEEK_DATA, no ReadAt beyond what it offers) and the Meta extractor.
func TestCompareFSMeta(t *testing.T) {
	want := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(want, "a"), []byte("hello"), 0o644))
	must(os.Mkdir(filepath.Join(want, "d"), 0o755))
	must(os.Symlink("a", filepath.Join(want, "d", "l")))
	mt := time.Unix(1600000000, 5)
	for _, n := range []string{"a", "d/l", "d"} {
		setMtime(t, filepath.Join(want, n), mt)
	}
	type sys struct{ uid uint32 }
	got := fstest.MapFS{
		"a":   {Data: []byte("hello"), Mode: 0o644, ModTime: mt, Sys: sys{0}},
		"d":   {Mode: fs.ModeDir | 0o755, ModTime: mt, Sys: sys{0}},
		"d/l": {Data: []byte("a"), Mode: fs.ModeSymlink | 0o777, ModTime: mt, Sys: sys{7}},
	}
	opts := CompareOptions{
		Checks: CheckPerm | CheckOwner | CheckMtime,
		Meta: func(fi fs.FileInfo) (Meta, bool) {
			s, ok := fi.Sys().(sys)
			return Meta{Uid: s.uid, Mtime: fi.ModTime()}, ok
		},
	}
	d := DiffFS(got, want, opts)
	if len(d) != 1 || d[0] != `"d/l": owner: got 7:0, want 0:0` {
		t.Errorf("diffs: %q", d)
	}
	got["a"].Data = []byte("hellO")
	got["d/l"].Sys = sys{0}
	d = DiffFS(got, want, opts)
	if len(d) != 1 || !strings.Contains(d[0], "content differs at offset 4") {
		t.Errorf("diffs: %q", d)
	}
	// Metadata checks without an extractor are a reported misuse.
	opts.Meta = nil
	if d := DiffFS(got, want, opts); !strings.Contains(strings.Join(d, "\n"), "Meta is nil") {
		t.Errorf("diffs: %q", d)
	}
}

// setMtime sets mtime and atime of path, not following a final symlink.
func setMtime(t *testing.T, path string, mt time.Time) {
	t.Helper()
	ts := unix.NsecToTimespec(mt.UnixNano())
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		t.Fatal(err)
	}
}

func TestUnionRanges(t *testing.T) {
	tests := []struct {
		a, b, want [][2]int64
	}{
		{nil, nil, nil},
		{[][2]int64{{0, 10}}, nil, [][2]int64{{0, 10}}},
		{[][2]int64{{0, 10}, {20, 30}}, [][2]int64{{5, 25}}, [][2]int64{{0, 30}}},
		{[][2]int64{{0, 10}}, [][2]int64{{10, 20}, {40, 50}}, [][2]int64{{0, 20}, {40, 50}}},
		{[][2]int64{{30, 40}}, [][2]int64{{0, 5}}, [][2]int64{{0, 5}, {30, 40}}},
	}
	for _, tt := range tests {
		if got := unionRanges(tt.a, tt.b); !slices.Equal(got, tt.want) {
			t.Errorf("unionRanges(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDataRanges(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteAt([]byte("x"), 1<<20)
	f.WriteAt([]byte("y"), 8<<20)
	f.Truncate(16 << 20)
	got := dataRanges(f, 16<<20)
	// Block granularity: each piece is one 4 KiB block on the host.
	if len(got) != 2 || got[0][0] > 1<<20 || got[0][1] <= 1<<20 || got[1][0] > 8<<20 || got[1][1] <= 8<<20 {
		t.Errorf("dataRanges = %v", got)
	}
	// No Seek: the whole file.
	if got := dataRanges(struct{ fs.File }{f}, 100); !slices.Equal(got, [][2]int64{{0, 100}}) {
		t.Errorf("dataRanges without Seek = %v", got)
	}
	var _ io.Seeker = f
}

func TestHostFS(t *testing.T) {
	dir := t.TempDir()
	name := "bad-\xff"
	if err := os.WriteFile(filepath.Join(dir, name), []byte("z"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(hostFS(dir), name)
	if err != nil || string(b) != "z" {
		t.Errorf("ReadFile(%q) = %q, %v", name, b, err)
	}
	for _, bad := range []string{"", "..", "a/../b", "/abs", "a//b", "nul\x00"} {
		if _, err := hostFS(dir).Open(bad); err == nil {
			t.Errorf("Open(%q) succeeded", bad)
		}
	}
}

func TestHostMeta(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(p, "user.k", []byte("v"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	m, err := HostMeta(p)
	if err != nil || string(m.Xattrs["user.k"]) != "v" || m.Nlink != 1 || m.Ino == 0 {
		t.Errorf("HostMeta = %+v, %v", m, err)
	}
}
