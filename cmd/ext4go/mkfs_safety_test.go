//go:build linux

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMkfsRefusesToOverwrite: mkfs over an existing filesystem or a
// partition table is refused and changes nothing; -F overwrites; -n
// writes nothing; a missing file without a size is refused as mke2fs
// refuses it.
func TestMkfsRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	mustCLI(t, "mkfs", "-q", "-size", "16M", "-L", "old", img)
	before := imageSum(t, img)
	failCLI(t, []string{"contains an ext4 filesystem", `"old"`, "-F"}, "mkfs", "-q", "-size", "16M", img)
	failCLI(t, []string{"contains an ext4 filesystem"}, "mkfs", "-q", "-d", t.TempDir(), img)
	if imageSum(t, img) != before {
		t.Fatal("a refused mkfs changed the image")
	}
	out := mustCLI(t, "mkfs", "-n", img)
	if !strings.Contains(out, "nothing written") || !strings.Contains(out, "16384 1k blocks") {
		t.Errorf("mkfs -n:\n%s", out)
	}
	if imageSum(t, img) != before {
		t.Fatal("mkfs -n changed the image")
	}
	mustCLI(t, "mkfs", "-q", "-F", "-L", "new", img)
	if out := mustCLI(t, "info", img); !strings.Contains(out, "new") {
		t.Errorf("after mkfs -F the label is not the new one:\n%s", out)
	}
	testutil.RequireFsckClean(t, img)

	// A DOS partition table.
	part := filepath.Join(dir, "part")
	b := make([]byte, 8<<20)
	b[446+4] = 0x83 // a Linux partition entry
	b[510], b[511] = 0x55, 0xAA
	if err := os.WriteFile(part, b, 0o644); err != nil {
		t.Fatal(err)
	}
	failCLI(t, []string{"partition table", "-F"}, "mkfs", "-q", part)

	failCLI(t, []string{"does not exist and no size was specified"}, "mkfs", filepath.Join(dir, "missing"))
	if _, err := os.Stat(filepath.Join(dir, "missing")); err == nil {
		t.Error("a refused mkfs created the file")
	}
}

// TestMkfsKeepsFileSize: on an existing file, with or without -d, mkfs
// uses the whole file as mke2fs does (it used to size a -d build to the
// content and leave the rest of the file unused).
func TestMkfsKeepsFileSize(t *testing.T) {
	dir := t.TempDir()
	src := testutil.SourceDir(t)
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("content"), 0o644); err != nil {
		t.Fatal(err)
	}
	blockCount := regexp.MustCompile(`(?m)^Block count:\s+(\d+)`)
	for _, withDir := range []bool{false, true} {
		ours, theirs := filepath.Join(dir, "ours"), filepath.Join(dir, "theirs")
		for _, p := range []string{ours, theirs} {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, 96<<20); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"mkfs", "-q", ours}
		if withDir {
			args = []string{"mkfs", "-q", "-d", src, ours}
		}
		mustCLI(t, args...)
		testutil.Run(t, "mke2fs", "-q", "-F", "-t", "ext4", theirs)
		got := blockCount.FindStringSubmatch(testutil.Dumpe2fs(t, ours, "-h"))
		want := blockCount.FindStringSubmatch(testutil.Dumpe2fs(t, theirs, "-h"))
		if got == nil || want == nil || got[1] != want[1] {
			t.Errorf("-d %v: block count %v, mke2fs %v", withDir, got, want)
		}
		testutil.RequireFsckClean(t, ours)
		if withDir {
			if out := mustCLI(t, "cat", ours, "/f"); out != "content" {
				t.Errorf("cat /f: %q", out)
			}
		}
		os.Remove(ours)
		os.Remove(theirs)
	}
}
