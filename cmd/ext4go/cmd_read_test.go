package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// readImage builds an image of a generated tree with mke2fs -d.
func readImage(t *testing.T) (img, src string) {
	t.Helper()
	src = testutil.SourceDir(t)
	for _, p := range []string{"small", "links", "xattrs", "modes", "special", "sparse"} {
		testutil.GenTree(t, filepath.Join(src, p), testutil.TreeSpec{Preset: p, Seed: 21})
	}
	img = testutil.BuildImage(t, src, testutil.ImageOptions{})
	testutil.RequireFsckClean(t, img)
	return img, src
}

func TestReadCommands(t *testing.T) {
	img, src := readImage(t)
	out := mustCLI(t, "ls", img)
	for _, want := range []string{"small", "links", "lost+found"} {
		if !strings.Contains(out, want+"\n") {
			t.Fatalf("ls lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "ls", "-l", "-R", img, "/links")
	if !strings.Contains(out, " -> ") {
		t.Fatalf("ls -l -R shows no symlink target:\n%s", out)
	}
	// cat equals the source.
	var file string
	filepath.Walk(filepath.Join(src, "small"), func(p string, fi os.FileInfo, _ error) error {
		if file == "" && fi != nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			file = p
		}
		return nil
	})
	rel, _ := filepath.Rel(src, file)
	want, _ := os.ReadFile(file)
	if got := mustCLI(t, "cat", img, "/"+rel); got != string(want) {
		t.Fatalf("cat %s: %d bytes, want %d", rel, len(got), len(want))
	}
	out = mustCLI(t, "stat", img, "/"+rel)
	for _, w := range []string{"Inode:", "Modify:", "Birth:"} {
		if !strings.Contains(out, w) {
			t.Fatalf("stat lacks %q:\n%s", w, out)
		}
	}
	out = mustCLI(t, "frag", img, "/"+rel)
	if !strings.Contains(out, "extent") {
		t.Fatalf("frag:\n%s", out)
	}
	out = mustCLI(t, "frag", img)
	if !strings.Contains(out, "non-contiguous") {
		t.Fatalf("frag of the whole image:\n%s", out)
	}
	failCLI(t, []string{"want IMAGE"}, "ls")
	failCLI(t, []string{"does not exist"}, "cat", img, "/does/not/exist")
	failCLI(t, []string{"no such file"}, "ls", filepath.Join(t.TempDir(), "missing.img"))
}

// TestGetCopiesOut copies the whole image out and compares it with the
// source, metadata included.
func TestGetCopiesOut(t *testing.T) {
	img, src := readImage(t)
	dest := t.TempDir()
	mustCLI(t, "get", img, "/", dest)
	co := testutil.CompareOptions{
		Checks:    testutil.CheckAll,
		SkipPaths: []string{"lost+found"},
	}
	testutil.CompareDirs(t, dest, src, co)
}

// TestGetStaysInsideDest: a symbolic link already in DEST must not lead
// get outside DEST, whatever the image holds.
func TestGetStaysInsideDest(t *testing.T) {
	src := testutil.SourceDir(t)
	if err := os.MkdirAll(filepath.Join(src, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "x", "f"), []byte("payload"), 0o644)
	os.Symlink("/", filepath.Join(src, "abs"))
	os.Symlink("../../../../..", filepath.Join(src, "up"))
	img := testutil.BuildImage(t, src, testutil.ImageOptions{})
	outside := t.TempDir()
	dest := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(dest, "x")); err != nil {
		t.Fatal(err)
	}
	code, _, _ := cli("", "get", img, "/", dest)
	if code == 0 {
		t.Fatal("get wrote through a symlink in DEST without complaint")
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 0 {
		t.Fatalf("get wrote outside DEST: %v", ents)
	}
	// The image's own symlinks are recreated as links, not followed.
	if target, err := os.Readlink(filepath.Join(dest, "up")); err != nil || target != "../../../../.." {
		t.Fatalf("up: %q, %v", target, err)
	}
}
