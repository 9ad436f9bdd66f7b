package main

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMistakeMessages: the mistakes people make get a message that says
// what happened in their words, and exit 1.
func TestMistakeMessages(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "img")
	mustCLI(t, "mkfs", "-q", "--size", "4M", img)
	host := filepath.Join(dir, "hostfile")
	if err := os.WriteFile(host, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "put", "-q", img, host, "/f")
	random := filepath.Join(dir, "random.bin")
	junk := make([]byte, 8192)
	rand.Read(junk)
	if err := os.WriteFile(random, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	unclean := filepath.Join(dir, "unclean")
	testutil.Mke2fs(t, unclean, 4<<20, "-t", "ext4", "-O", "^has_journal")
	testutil.DebugfsWrite(t, unclean, "ssv state 0")

	for _, c := range []struct {
		name string
		args []string
		want []string // in stderr
		out  string   // stdout, if it matters
	}{
		{"not ext4", []string{"ls", random}, []string{random, "not an ext4 filesystem: no superblock magic at offset 1024"}, ""},
		{"too small", []string{"ls", host}, []string{"not an ext4 filesystem", "too small"}, ""},
		{"arguments swapped", []string{"put", host, img, "/x"}, []string{`"` + host + `" was taken as the image`, "usage: ext4go put"}, ""},
		{"missing image", []string{"cat", filepath.Join(dir, "nope.img"), "/f"}, []string{"no such file", "was taken as the image"}, ""},
		{"path as written", []string{"cat", img, "/nope"}, []string{"ext4go cat: /nope: file does not exist"}, ""},
		{"goes on past a bad operand", []string{"cat", img, "/nope", "/f"}, []string{"/nope: file does not exist"}, "hello\n"},
		{"directory", []string{"cat", img, "/lost+found"}, []string{"/lost+found: is a directory"}, ""},
		{"stat goes on", []string{"stat", img, "/nope", "/f"}, []string{"/nope: file does not exist"}, ""},
		{"ls of a missing path", []string{"ls", img, "/nope/deeper"}, []string{"ls: /nope/deeper: file does not exist"}, ""},
		{"host source missing", []string{"put", img, filepath.Join(dir, "no-such"), "/x"}, []string{"host file", filepath.Join(dir, "no-such"), "no such file"}, ""},
		{"get over a host file", []string{"get", img, "/f", existing}, []string{"host file", "exists; use -f"}, ""},
		{"put runs out of space", []string{"put", "-q", img, big, "/big"}, []string{"/big", "no space left"}, ""},
		{"unclean", []string{"mkdir", unclean, "/d"}, []string{"not cleanly unmounted", "e2fsck -f", ""}, ""},
		{"batch --atomic", []string{"batch", "--atomic", img}, []string{"--atomic (the whole script in one transaction) is not implemented"}, ""},
		{"mkfs without a size", []string{"mkfs", filepath.Join(dir, "new.img")}, []string{"does not exist and no size was specified"}, ""},
		{"mkfs over a filesystem", []string{"mkfs", "-q", img}, []string{"contains an ext4 filesystem", "-F"}, ""},
		{"unknown command", []string{"lsx", img}, []string{`unknown command "lsx"`}, ""},
		{"unknown option", []string{"ls", "--colour", img}, []string{"unrecognized option '--colour'", "usage: ext4go ls"}, ""},
		{"one-dash long option", []string{"ls", "-force", img}, []string{"did you mean '--force'"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := cli("", c.args...)
			if code != 1 {
				t.Errorf("ext4go %q: exit %d, want 1\n%s", c.args, code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("ext4go %q: message lacks %q:\n%s", c.args, w, errs)
				}
			}
			if c.out != "" && out != c.out {
				t.Errorf("ext4go %q: stdout %q, want %q", c.args, out, c.out)
			}
		})
	}
	// Nothing was left half made, and the files refused stayed as they were.
	if out := mustCLI(t, "ls", img); strings.Contains(out, "big") {
		t.Errorf("a put that ran out of space left a partial file:\n%s", out)
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Errorf("get overwrote a host file without -f: %q", b)
	}
	testutil.RequireFsckClean(t, img)
	mustCLI(t, "get", "-f", img, "/f", existing)
	if b, _ := os.ReadFile(existing); string(b) != "hello\n" {
		t.Errorf("get -f did not overwrite: %q", b)
	}
}
