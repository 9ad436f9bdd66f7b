//go:build linux

package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
