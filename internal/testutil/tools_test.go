package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
