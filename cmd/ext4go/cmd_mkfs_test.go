//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"os"
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
	// relatime: the first read of a file moves its atime, which builds copy.
	filepath.Walk(src, func(p string, fi os.FileInfo, _ error) error {
		if fi != nil && fi.Mode().IsRegular() {
			os.ReadFile(p)
		}
		if fi != nil && fi.Mode()&os.ModeSymlink != 0 {
			os.Readlink(p) // readlink moves a symlink's atime too
		}
		return nil
	})
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	var sums [2][32]byte
	for i := range sums {
		if i > 0 {
			// Every source file read in between, and its atime moved
			// (strictatime would): times past SOURCE_DATE_EPOCH are
			// clamped to it, so the build does not change.
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
