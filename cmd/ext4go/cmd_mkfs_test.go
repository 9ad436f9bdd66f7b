//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

func TestMkfsEmpty(t *testing.T) {
	img := filepath.Join(t.TempDir(), "empty.img")
	mustCLI(t, "mkfs", "-size", "64M", "-L", "hello", img)
	testutil.RequireFsckClean(t, img)
	out := mustCLI(t, "info", img)
	if !strings.Contains(out, "hello") || !strings.Contains(out, "metadata_csum") || !strings.Contains(out, "empty (nothing to replay)") {
		t.Fatalf("info:\n%s", out)
	}
}

func TestMkfsFromDirSized(t *testing.T) {
	src := testutil.SourceDir(t)
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "large", Seed: 3})
	img := filepath.Join(t.TempDir(), "sized.img")
	mustCLI(t, "mkfs", "-q", "-d", src, img)
	testutil.RequireFsckClean(t, img)
	co := testutil.MountCompareOptions()
	co.Meta = meta
	testutil.CompareFS(t, openRO(t, img), src, co)
	// Sized to the content: the image is not much bigger than what it holds.
	var total int64
	filepath.Walk(src, func(_ string, fi os.FileInfo, _ error) error {
		if fi != nil && fi.Mode().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	st, _ := os.Stat(img)
	if st.Size() > 2*total+64<<20 {
		t.Fatalf("image of %d bytes for %d bytes of content", st.Size(), total)
	}
}

func TestMkfsReproducible(t *testing.T) {
	src := testutil.SourceDir(t)
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "links", Seed: 4})
	// Access times before SOURCE_DATE_EPOCH, as in a checkout not read
	// since: the reads between the builds move them past it.
	old := time.Unix(1600000000, 0)
	filepath.Walk(src, func(p string, fi os.FileInfo, _ error) error {
		if fi != nil && fi.Mode().IsRegular() {
			os.Chtimes(p, old, time.Time{})
		}
		return nil
	})
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var sums [2][32]byte
	for i := range sums {
		if i > 0 {
			// Every source file read in between, and its atime moved
			// (strictatime would) from before SOURCE_DATE_EPOCH to after:
			// access times are not kept, so the build does not change.
			filepath.Walk(src, func(p string, fi os.FileInfo, _ error) error {
				if fi != nil && fi.Mode().IsRegular() {
					os.ReadFile(p)
					os.Chtimes(p, time.Now(), time.Time{})
				}
				return nil
			})
		}
		img := filepath.Join(t.TempDir(), "r.img")
		mustCLI(t, "mkfs", "-q", "-size", "32M", "-b", "4096", "-U", "0b3c6a8e-3f60-4d0e-9a55-5c1b2e7d9f10", "-d", src, img)
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		sums[i] = sha256.Sum256(b)
	}
	if sums[0] != sums[1] {
		t.Fatal("two builds with SOURCE_DATE_EPOCH differ")
	}
}

func TestMkfsTarStdin(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "dir/", Typeflag: tar.TypeDir, Mode: 0o750, Uid: 7, Gid: 8})
	tw.WriteHeader(&tar.Header{Name: "dir/f", Typeflag: tar.TypeReg, Mode: 0o640, Size: 5})
	tw.Write([]byte("hello"))
	tw.WriteHeader(&tar.Header{Name: "dir/.wh.gone", Typeflag: tar.TypeReg, Mode: 0o600})
	tw.Close()
	img := filepath.Join(t.TempDir(), "tar.img")
	code, _, errs := cli(buf.String(), "mkfs", "-q", "-whiteouts", "-tar", "-", img)
	if code != 0 {
		t.Fatalf("mkfs -tar -: %s", errs)
	}
	testutil.RequireFsckClean(t, img)
	inspect(t, img, func(fsys *ext4go.FS) {
		if got := readFile(t, fsys, "dir/f"); got != "hello" {
			t.Fatalf("dir/f = %q", got)
		}
		st := lstat(t, fsys, "dir")
		if st.UID != 7 || st.GID != 8 || st.Mode&0o777 != 0o750 {
			t.Fatalf("dir: uid %d gid %d mode %o", st.UID, st.GID, st.Mode)
		}
		if wh := lstat(t, fsys, "dir/gone"); wh.Mode&0xF000 != 0x2000 || wh.Rdev != 0 {
			t.Fatalf("whiteout: mode %o rdev %d", wh.Mode, wh.Rdev)
		}
	})
}

func TestMkfsBadOptions(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "bad.img")
	failCLI(t, []string{"block"}, "mkfs", "-size", "64M", "-b", "3000", img)
	failCLI(t, []string{"feature"}, "mkfs", "-size", "64M", "-O", "nosuchfeature", img)
	failCLI(t, []string{"exclude"}, "mkfs", "-d", dir, "-tar", "-", img)
	if st, err := os.Stat(img); err == nil && st.Size() > 0 {
		b, _ := os.ReadFile(img)
		if !bytes.Equal(b, make([]byte, len(b))) {
			t.Fatal("a refused mkfs wrote to the image")
		}
	}
}

// TestMkfsMke2fsOptions: -T, -J size=, and the -E options give the layout
// mke2fs gives for the same command line (dumpe2fs compared, times aside).
func TestMkfsMke2fsOptions(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "dumpe2fs")
	dir := t.TempDir()
	args := []string{"-T", "largefile", "-J", "size=8", "-E", "orphan_file_size=4,resize=200000", "-O", "orphan_file",
		"-U", "01234567-89ab-cdef-0123-456789abcdef"}
	ours, theirs := filepath.Join(dir, "ours.img"), filepath.Join(dir, "theirs.img")
	mustCLI(t, append(append([]string{"mkfs", "-q", "-size", "300M"}, args...), ours)...)
	if f, err := os.Create(theirs); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if err := os.Truncate(theirs, 300<<20); err != nil {
		t.Fatal(err)
	}
	testutil.Run(t, "mke2fs", append(append([]string{"-q", "-F", "-t", "ext4"}, args...), theirs)...)
	testutil.RequireFsckClean(t, ours)
	dump := func(img string) string {
		var keep []string
		for _, l := range strings.Split(testutil.Run(t, "dumpe2fs", img), "\n") {
			if !strings.Contains(l, "time") && !strings.Contains(l, "created") && !strings.Contains(l, "checked") &&
				!strings.Contains(l, "csum") && !strings.Contains(l, "Checksum") && !strings.Contains(l, "Hash Seed") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if a, b := dump(ours), dump(theirs); a != b {
		t.Fatalf("dumpe2fs differs:\n--- ext4go\n%s\n--- mke2fs\n%s", a, b)
	}
	if code, _, stderr := cli("", "mkfs", "-q", "-size", "10M", "-T", "tiny", filepath.Join(dir, "x.img")); code != 1 || !strings.Contains(stderr, "unknown usage type") {
		t.Fatalf("-T tiny: exit %d, %s", code, stderr)
	}
}

// TestMkfsConventions: errors name the command's options (-t, not
// FsType); sizes as mke2fs and coreutils take them (1.5G, 1GiB, a size
// after IMAGE, a bare number in KiB or in -b blocks); -U random, time and
// clear; a new image that cannot be filled is removed.
func TestMkfsConventions(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "c.img")
	errs := failCLI(t, []string{"-t: unknown filesystem type"}, "mkfs", "-t", "xfs", "--size", "8M", img)
	if strings.Contains(errs, "FsType") {
		t.Errorf("the error names the library's field: %s", errs)
	}
	failCLI(t, []string{"-I:"}, "mkfs", "-I", "100", "--size", "8M", img)
	failCLI(t, []string{"--size: size '0' is zero"}, "mkfs", "--size", "0", img)
	failCLI(t, []string{"invalid suffix in size '3X'"}, "mkfs", img, "3X")
	blocks := func() (count, size string) {
		t.Helper()
		out, err := exec.Command("dumpe2fs", "-h", img).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			k, v, _ := strings.Cut(l, ":")
			switch k {
			case "Block count":
				count = strings.TrimSpace(v)
			case "Block size":
				size = strings.TrimSpace(v)
			}
		}
		return
	}
	for _, c := range []struct {
		args        []string
		count, size string
	}{
		{[]string{"--size", "1.5G"}, "393216", "4096"},
		{[]string{"--size", "1GiB"}, "262144", "4096"},
		{[]string{"IMAGE", "64M"}, "65536", "1024"},
		{[]string{"IMAGE", "20000"}, "20000", "1024"}, // KiB
		{[]string{"-b", "4096", "IMAGE", "5000"}, "5000", "4096"},
		{[]string{"--size", "1000MB"}, "244140", "4096"},
	} {
		os.Remove(img)
		args := []string{"mkfs", "-q"}
		hasImage := false
		for _, a := range c.args {
			if a == "IMAGE" {
				a, hasImage = img, true
			}
			args = append(args, a)
		}
		if !hasImage {
			args = append(args, img)
		}
		mustCLI(t, args...)
		if count, size := blocks(); count != c.count || size != c.size {
			t.Errorf("mkfs %q: %s blocks of %s, want %s of %s", c.args, count, size, c.count, c.size)
		}
		testutil.RequireFsckClean(t, img)
	}
	uuid := func() string {
		out, _ := exec.Command("dumpe2fs", "-h", img).Output()
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, _ := strings.Cut(l, ":"); k == "Filesystem UUID" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	mustCLI(t, "mkfs", "-q", "-F", "-U", "clear", img, "8M")
	if u := uuid(); u != "<none>" {
		t.Errorf("-U clear: UUID %s", u)
	}
	mustCLI(t, "mkfs", "-q", "-F", "-U", "time", img, "8M")
	if u := uuid(); len(u) != 36 || u[14] != '1' {
		t.Errorf("-U time: UUID %s is not a version 1 UUID", u)
	}
	mustCLI(t, "mkfs", "-q", "-F", "-U", "random", img, "8M")
	if u := uuid(); len(u) != 36 || u[14] != '4' {
		t.Errorf("-U random: UUID %s is not a version 4 UUID", u)
	}
	testutil.RequireFsckClean(t, img)

	// A new image that cannot be filled is removed.
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte("x"), 4<<20), 0o644)
	os.Remove(img)
	failCLI(t, []string{"does not fit in --size 2M", "removed"}, "mkfs", "--size", "2M", "-d", src, img)
	if _, err := os.Stat(img); err == nil {
		t.Error("a failed mkfs -d left its image")
	}
	failCLI(t, []string{"encrypt", "removed"}, "mkfs", "-O", "encrypt", "-d", src, img)
	if _, err := os.Stat(img); err == nil {
		t.Error("a failed mkfs -O encrypt -d left its image")
	}
}

// TestMkfsSparseTar: GNU tar -S archives, in GNU tar's default format (old
// GNU sparse entries, type 'S', refused before) and in PAX format, give an
// image sized by the file's data (it was sized by its length: 1.4 GB for
// 100 KB of a 1 GiB file) whose file reads back the same, with holes. (A
// 128 MiB file here: the old sizing gives 160 MiB, and the race detector
// makes every byte of holes read slow.)
func TestMkfsSparseTar(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("no tar")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	big := filepath.Join(src, "big")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(128 << 20)
	f.WriteAt([]byte("hello"), 50_000_000)
	f.WriteAt(bytes.Repeat([]byte("data"), 25_000), 100_000_000)
	f.Close()
	want, _ := os.ReadFile(big)
	for _, format := range []string{"gnu", "pax"} {
		tarball := filepath.Join(dir, format+".tar")
		if out, err := exec.Command("tar", "--format="+format, "-S", "-cf", tarball, "-C", src, "big").CombinedOutput(); err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
		img := filepath.Join(dir, format+".img")
		mustCLI(t, "mkfs", "-q", "--tar", tarball, img)
		if st, err := os.Stat(img); err != nil || st.Size() > 32<<20 {
			t.Errorf("%s: image of %d bytes for 100 KB of data", format, st.Size())
		}
		testutil.RequireFsckClean(t, img)
		fsys, err := ext4go.Open(img, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fsys.ReadFile("big")
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the file reads back otherwise (%v)", format, err)
		}
		st, _ := fsys.Stat("big")
		if blocks := st.Sys().(*ext4go.Stat).Blocks; blocks*512 > 1<<20 {
			t.Errorf("%s: %d blocks of 512 bytes: the holes were written", format, blocks)
		}
		fsys.Close()
	}
}
