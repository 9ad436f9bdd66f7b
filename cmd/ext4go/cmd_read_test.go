//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// TestReadCommandOptions: the read commands parse GNU-style command lines
// (bundled short options, options after operands, "--") and reject
// unknown options with exit status 1, a message and the usage.
func TestReadCommandOptions(t *testing.T) {
	src := testutil.SourceDir(t)
	if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A name that reads as an option unless it follows "--".
	if err := os.WriteFile(filepath.Join(src, "-dash"), []byte("dash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "d", "f"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := testutil.BuildImage(t, src, testutil.ImageOptions{})

	for _, c := range []struct {
		args []string
		want string // in the output
	}{
		{[]string{"ls", img, "-lR", "/d"}, " f\n"},
		{[]string{"ls", "--", img, "-dash"}, "-dash\n"},
		{[]string{"cat", img, "/d/f", "--force"}, "f\n"},
		{[]string{"cat", "--", img, "-dash", "/d/f"}, "dash\nf\n"},
		{[]string{"stat", img, "/d", "--forc"}, "File: /d\n"},
		{[]string{"stat", "--force", "--", img, "-dash"}, "File: /-dash\n"},
		{[]string{"info", img, "--force"}, "Block count:"},
		{[]string{"info", "--", img}, "Inode count:"},
		{[]string{"frag", img, "/d/f", "-v"}, "ext:"},
		{[]string{"frag", "-v", "--", img, "-dash"}, "/-dash: 1 extent found"},
	} {
		if out := mustCLI(t, c.args...); !strings.Contains(out, c.want) {
			t.Errorf("%q: output lacks %q:\n%s", c.args, c.want, out)
		}
	}

	// get: bundled options after the operands, and "--" before a dash name.
	dest := t.TempDir()
	if code, _, errs := cli("", "get", img, "/d", dest, "-nq"); code != 0 || errs != "" {
		t.Fatalf("get ... -nq: exit %d %q", code, errs)
	}
	mustCLI(t, "get", "-q", "--", img, "-dash", dest)
	for name, want := range map[string]string{"d/f": "f\n", "-dash": "dash\n"} {
		if b, err := os.ReadFile(filepath.Join(dest, name)); err != nil || string(b) != want {
			t.Errorf("get: %s = %q, %v; want %q", name, b, err, want)
		}
	}

	for _, name := range []string{"ls", "cat", "stat", "info", "frag", "get"} {
		usage := "usage: ext4go " + name + " "
		failCLI(t, []string{"invalid option -- 'x'", usage}, name, "-x", img, "/d")
		failCLI(t, []string{"unrecognized option '--bogus'", usage}, name, img, "--bogus")
		// Go's flag package took "-force"; say how it is spelt now.
		failCLI(t, []string{"did you mean '--force'?", usage}, name, "-force", img)
		// Without "--" a dash name is an option.
		failCLI(t, []string{"invalid option -- 'd'", usage}, name, img, "-dash", dest)
		code, out, errs := cli("", name, "--help")
		if code != 0 || errs != "" || !strings.Contains(out, usage) || !strings.Contains(out, "  --force ") {
			t.Errorf("%s --help: exit %d, stdout %q, stderr %q", name, code, out, errs)
		}
		if code, out, _ := cli("", name, "-h"); code != 0 || !strings.Contains(out, usage) {
			t.Errorf("%s -h: exit %d %q", name, code, out)
		}
	}
	failCLI(t, []string{"missing operand after '/d': want IMAGE PATH DEST"}, "get", img, "/d")
	failCLI(t, []string{"extra operand '/d': want IMAGE"}, "info", img, "/d")
	failCLI(t, []string{"extra operand '/x': want IMAGE [PATH]"}, "frag", img, "/d", "/x")
	failCLI(t, []string{"missing operand after '" + img + "': want IMAGE PATH..."}, "cat", img)
}

// TestLsSkipsBadEntries: ls lists a directory holding entries whose inodes
// cannot be read: the other entries on stdout, a warning per entry left
// out naming the directory, the entry and its inode on stderr, exit 1 (as
// ls for an entry it cannot stat); with -l the typed entry whose inode was
// cleared is reported too; -R goes on into the directories after it.
func TestLsSkipsBadEntries(t *testing.T) {
	fx := testutil.BadEntriesImage(t)
	for _, args := range [][]string{{"ls", fx.Image, "/d"}, {"ls", "-l", fx.Image, "/d"}, {"ls", "-R", fx.Image, "/"}} {
		code, out, errs := cli("", args...)
		if code != 1 {
			t.Errorf("%q: exit %d, want 1\n%s", args, code, errs)
		}
		for _, n := range fx.Good["d"] {
			if !strings.Contains(out, n+"\n") {
				t.Errorf("%q: %s not listed:\n%s", args, n, out)
			}
		}
		for _, b := range fx.Bad {
			if b.Dir != "d" && !slices.Contains(args, "-R") {
				continue
			}
			warning := "/" + b.Dir + ": entry \"" + b.Name + "\" (inode " + strconv.Itoa(int(b.Ino)) + ") left out"
			long := slices.Contains(args, "-l")
			switch {
			case !b.Listed && !strings.Contains(errs, warning):
				t.Errorf("%q: no warning %q:\n%s", args, warning, errs)
			case b.Listed && long && !strings.Contains(errs, b.Dir+"/"+b.Name+": corrupt inode (inode "+strconv.Itoa(int(b.Ino))):
				t.Errorf("%q: no report of %s/%s:\n%s", args, b.Dir, b.Name, errs)
			case b.Listed && !long && !strings.Contains(out, b.Name+"\n"):
				t.Errorf("%q: %s not listed:\n%s", args, b.Name, out)
			}
		}
		if slices.Contains(args, "-R") && !strings.Contains(out, "file-299\n") {
			t.Errorf("%q: h not listed:\n%s", args, out)
		}
	}
}

// TestLsNames: ls -l and stat name owners and groups by the image's own
// /etc/passwd and /etc/group (numbers where they have none, and with -n).
func TestLsNames(t *testing.T) {
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "etc"), 0o755)
	os.WriteFile(filepath.Join(src, "etc/passwd"), []byte("root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(src, "etc/group"), []byte("root:x:0:\nstaff:x:1000:\n"), 0o644)
	for name, id := range map[string]int{"mine": 1000, "nobody-here": 4242} {
		p := filepath.Join(src, name)
		os.WriteFile(p, []byte(name), 0o644)
		if err := os.Lchown(p, id, id); err != nil {
			t.Skipf("chown: %v (needs root)", err)
		}
	}
	img := filepath.Join(t.TempDir(), "n.img")
	mustCLI(t, "mkfs", "-q", "-d", src, img)
	out := mustCLI(t, "ls", "-l", img, "/")
	for _, want := range []string{" alice    staff ", " 4242     4242 ", " root     root "} {
		if !strings.Contains(out, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, out)
		}
	}
	if out := mustCLI(t, "ls", "-n", img, "/"); !strings.Contains(out, " 1000     1000 ") || strings.Contains(out, "alice") {
		t.Errorf("ls -n:\n%s", out)
	}
	if out := mustCLI(t, "stat", img, "/mine"); !strings.Contains(out, "Uid: ( 1000/   alice)  Gid: ( 1000/   staff)") {
		t.Errorf("stat:\n%s", out)
	}
}

// TestJSONKeysSnakeCase: every key of every JSON ext4go prints (frag,
// frag -v, freefrag) is snake_case.
func TestJSONKeysSnakeCase(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "f"), bytes.Repeat([]byte("x"), 100000), 0o644)
	img := filepath.Join(t.TempDir(), "j.img")
	mustCLI(t, "mkfs", "-q", "-d", src, img)
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) {
					t.Errorf("%s: key %q is not snake_case", where, k)
				}
				walk(where, x)
			}
		case []any:
			for _, x := range v {
				walk(where, x)
			}
		}
	}
	for _, args := range [][]string{{"frag", "--json", img}, {"frag", "-v", "--json", img}, {"freefrag", "--json", img}} {
		out := mustCLI(t, args...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
		walk(strings.Join(args[:len(args)-1], " "), v)
	}
}
