package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMke2fsDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.img"), filepath.Join(dir, "b.img")
	args := append([]string{"-t", "ext4"}, DeterministicArgs()...)
	Mke2fs(t, a, 8<<20, args...)
	Mke2fs(t, b, 8<<20, args...)
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Error("two deterministic mke2fs runs made different images")
	}
	h := Dumpe2fs(t, a, "-h")
	for _, want := range []string{FixedUUID, FixedHashSeed, "metadata_csum"} {
		if !strings.Contains(h, want) {
			t.Errorf("dumpe2fs -h lacks %q:\n%s", want, h)
		}
	}
	RequireFsckClean(t, a)
	if exit, out := E2fsckFN(t, a); exit != 0 || !strings.Contains(out, "Pass 5") {
		t.Errorf("e2fsck -fn: %d %s", exit, out)
	}
	if out := Debugfs(t, a, "stat /"); !strings.Contains(out, "Inode: 2 ") {
		t.Errorf("debugfs stat /:\n%s", out)
	}
}

func TestDebugfsWriteAndQuote(t *testing.T) {
	img := filepath.Join(t.TempDir(), "q.img")
	Mke2fs(t, img, 8<<20, "-t", "ext4")
	name := `we"ird name`
	q, ok := DebugfsQuote("/" + name)
	if !ok {
		t.Fatal("quote failed")
	}
	DebugfsWrite(t, img, "mkdir "+q)
	if out := Debugfs(t, img, "ls -p /"); !strings.Contains(out, "/"+name+"/") {
		t.Errorf("mkdir %s: ls:\n%s", q, out)
	}
	if _, ok := DebugfsQuote("a\nb"); ok {
		t.Error("quoted a newline")
	}
	RequireFsckClean(t, img)
}

func TestFixupTimes(t *testing.T) {
	src := SourceDir(t)
	GenTree(t, src, TreeSpec{Preset: "times"})
	img := BuildImage(t, src, ImageOptions{})
	RequireFsckClean(t, img)
	// debugfs shows the raw fields: y2100 = 4102444800.123456789 has low
	// word 0xf4865700 and extra 123456789<<2 | 1.
	out := Debugfs(t, img, "stat /y2100")
	if !strings.Contains(out, "mtime: 0xf4865700:1d6f3455") {
		t.Errorf("y2100 mtime not fixed up:\n%s", out)
	}
	if ok, _ := CanMount(); ok {
		mp := Mount(t, img, true)
		fi, err := os.Lstat(filepath.Join(mp, "pre1970-ns"))
		if err != nil || !fi.ModTime().Equal(time.Unix(-123456790, 12345679)) {
			t.Errorf("pre1970-ns: %v %v", fi.ModTime(), err)
		}
	}
}

func TestExtraTime(t *testing.T) {
	tests := []struct {
		sec, nsec int64
		want      uint32
	}{
		{0, 0, 0},
		{-1, 0, 0},
		{-1 << 31, 1, 4},
		{1<<31 - 1, 0, 0},
		{1 << 31, 0, 1},
		{4102444800, 123456789, 123456789<<2 | 1},
		{1<<32 + 1<<31 - 1, 0, 1},
		{1<<32 + 1<<31, 0, 2},
		{1<<34 - 1<<31 - 1, 999999999, 999999999<<2 | 3},
	}
	for _, tt := range tests {
		if got := extraTime(tt.sec, tt.nsec); got != tt.want {
			t.Errorf("extraTime(%d, %d) = %#x, want %#x", tt.sec, tt.nsec, got, tt.want)
		}
	}
}
