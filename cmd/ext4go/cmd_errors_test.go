//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// corruptImage makes an image with "keep" and "three", a file of three
// blocks whose i_blocks says one (a remove of it fails with ErrCorrupt
// before changing anything), and returns it with three's inode.
func corruptImage(t *testing.T) (string, uint32) {
	t.Helper()
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck", "dumpe2fs")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "three"), []byte(strings.Repeat("x", 3*1024)), 0o644)
	os.WriteFile(filepath.Join(src, "keep"), []byte("keep\n"), 0o644)
	img := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, img, 16<<20, "-t", "ext4", "-b", "1024", "-d", src)
	testutil.DebugfsWrite(t, img, "sif three blocks 2")
	fsys, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	fi, err := fsys.Stat("three")
	if err != nil {
		t.Fatal(err)
	}
	return img, uint32(fi.Sys().(*ext4go.Stat).Ino)
}

// errorLines returns the error lines of dumpe2fs -h or ext4go info,
// key → value.
func errorLines(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(line, ":")
		if ok && (strings.Contains(k, "error") || strings.Contains(k, "Error") || k == "Filesystem state") {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// TestInfoShowsErrors: ext4go info prints the error count and the first
// and last error records as dumpe2fs -h does, line for line, for an error
// ext4go recorded.
func TestInfoShowsErrors(t *testing.T) {
	img, ino := corruptImage(t)
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove("three"); !errors.Is(err, ext4go.ErrCorrupt) {
		t.Fatalf("remove three: %v, want ErrCorrupt", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	got := errorLines(mustCLI(t, "info", img))
	want := errorLines(testutil.Run(t, "dumpe2fs", "-h", img))
	if len(want) < 8 || want["First error inode #"] != strconv.FormatUint(uint64(ino), 10) {
		t.Fatalf("dumpe2fs -h error lines: %v", want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("info %q: %q, dumpe2fs -h says %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("info prints %q: %q, which dumpe2fs -h does not", k, got[k])
		}
	}
}
