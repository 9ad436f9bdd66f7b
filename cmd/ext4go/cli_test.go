package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// The command-line harness, on every system.

// newImage makes an empty ext4 image of size bytes in t.TempDir().
func newImage(t *testing.T, size int64, args ...string) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, img, size, append([]string{"-t", "ext4"}, args...)...)
	return img
}

// cli runs ext4go in-process with stdin and returns its exit status and
// output.
func cli(stdin string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(&env{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb}, args)
	return code, out.String(), errb.String()
}

// mustCLI runs ext4go and fails the test unless it exits 0.
func mustCLI(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := cli("", args...)
	if code != 0 {
		t.Fatalf("ext4go %q: exit %d\n%s", args, code, errs)
	}
	return out
}

// failCLI runs ext4go, expects exit 1 and a message holding every want.
func failCLI(t *testing.T, want []string, args ...string) string {
	t.Helper()
	code, _, errs := cli("", args...)
	if code != 1 {
		t.Fatalf("ext4go %q: exit %d, want 1\n%s", args, code, errs)
	}
	for _, w := range want {
		if !strings.Contains(errs, w) {
			t.Fatalf("ext4go %q: message %q lacks %q", args, errs, w)
		}
	}
	return errs
}

// openRO opens the image read-only for checks, closed at the test's end.
func openRO(t *testing.T, img string) *ext4go.FS {
	t.Helper()
	fsys, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}
