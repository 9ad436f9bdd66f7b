package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestWalksStopAtLoops: an entry naming a directory above it (made with
// debugfs, as only a corrupt image has one) ends every recursive command
// with an error about the loop, quickly and with bounded output, and rm -r
// removes nothing outside the tree it was given.
func TestWalksStopAtLoops(t *testing.T) {
	img := filepath.Join(t.TempDir(), "cyc.img")
	testutil.Mke2fs(t, img, 8<<20, "-t", "ext4")
	testutil.DebugfsWrite(t, img, "mkdir sub", "mkdir sub/deeper", "write /dev/null keep", "ln <2> /sub/deeper/loop")
	for _, args := range [][]string{
		{"ls", "-R", img},
		{"ls", "-l", "-R", img, "/sub"},
		{"frag", img},
		{"getfattr", "-R", img, "/"},
		{"get", img, "/sub", filepath.Join(t.TempDir(), "out")},
		{"chmod", "-R", img, "755", "/sub"},
		{"chown", "-R", img, "1:1", "/sub"},
		{"rm", "-r", img, "/sub"},
	} {
		start := time.Now()
		code, out, errs := cli("", args...)
		if code != 1 {
			t.Errorf("ext4go %q: exit %d, want 1; stderr:\n%.500s", args, code, errs)
		}
		if !strings.Contains(errs, "loop") && !strings.Contains(errs, "two names") {
			t.Errorf("ext4go %q: stderr does not name the loop:\n%.500s", args, errs)
		}
		if len(out)+len(errs) > 1<<20 {
			t.Errorf("ext4go %q: %d bytes of output", args, len(out)+len(errs))
		}
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("ext4go %q took %v", args, d)
		}
	}
	out := mustCLI(t, "ls", img)
	for _, want := range []string{"keep", "lost+found", "sub"} {
		if !bytes.Contains([]byte(out), []byte(want+"\n")) {
			t.Errorf("after the commands, / lacks %s:\n%s", want, out)
		}
	}
}
