// Package lint holds the tests that keep the layering of the packages as
// doc.go describes it (as pebble's internal/lint does): the on-disk codecs
// decode and encode bytes and do no I/O; the allocators decide and do no
// I/O; nothing under internal/ imports the root package (but test helpers);
// the root package reaches the device only through internal/dev and
// internal/txn. Imports are read from the source (every file, whatever
// its build tags, tests left out), so the rules hold on every platform.
package lint

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ext4go/ext4go"

// Pure packages: on-disk formats and the arithmetic on them.
var codecs = []string{"blockmap", "csum", "devnum", "dir", "extent", "freefrag", "fserr", "fsmap", "inode",
	"jbd2", "orphan", "super", "syszone", "xattr"}

// Allocators and in-memory structures: no I/O of their own either.
var allocators = []string{"ialloc", "mballoc", "shard", "pad", "lockstat"}

// I/O a pure package must not do: files, devices, processes, the
// network, system calls beyond error numbers.
var ioImports = []string{"os", "os/exec", "net", "net/http", "io/ioutil", "golang.org/x/sys/unix",
	module + "/internal/dev", module + "/internal/txn", module + "/internal/journal", module + "/internal/mkfs",
	module + "/internal/host", module + "/internal/mountinfo"}

// imports returns the packages the non-test files of dir import.
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			seen[p] = true
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func root(t *testing.T) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Skip("no source path")
	}
	r := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Skipf("the source tree is not here: %v", err)
	}
	return r
}

// TestPurePackagesDoNoIO: codecs and allocators import nothing that does
// I/O.
func TestPurePackagesDoNoIO(t *testing.T) {
	r := root(t)
	for _, pkg := range append(slices.Clone(codecs), allocators...) {
		for _, im := range imports(t, filepath.Join(r, "internal", pkg)) {
			if slices.Contains(ioImports, im) {
				t.Errorf("internal/%s imports %s: a pure package does no I/O", pkg, im)
			}
		}
	}
}

// TestCodecsImportOnlyCodecs: a codec builds on other codecs (checksums,
// errors) only, never on an allocator or the transaction layer.
func TestCodecsImportOnlyCodecs(t *testing.T) {
	r := root(t)
	for _, pkg := range codecs {
		for _, im := range imports(t, filepath.Join(r, "internal", pkg)) {
			rest, ok := strings.CutPrefix(im, module+"/internal/")
			if ok && !slices.Contains(codecs, rest) {
				t.Errorf("internal/%s imports internal/%s, which is no codec", pkg, rest)
			}
		}
	}
}

// TestInternalDoesNotImportRoot: no package under internal/ but the
// tests' helpers imports the root package (it would be a cycle in all
// but name: the root builds on them).
func TestInternalDoesNotImportRoot(t *testing.T) {
	r := root(t)
	err := filepath.WalkDir(filepath.Join(r, "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(r, p)
		if strings.HasPrefix(filepath.ToSlash(rel), "internal/testutil") {
			return nil
		}
		for _, im := range imports(t, p) {
			if im == module {
				t.Errorf("%s imports the root package", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRootReachesDeviceThroughDev: the root package does no file I/O of
// its own but through internal/dev (and host trees through internal/host):
// only its files that read host trees for image builds use os and x/sys.
func TestRootReachesDeviceThroughDev(t *testing.T) {
	r := root(t)
	files, _ := filepath.Glob(filepath.Join(r, "*.go"))
	fset := token.NewFileSet()
	for _, f := range files {
		base := filepath.Base(f)
		if strings.HasSuffix(base, "_test.go") || strings.HasPrefix(base, "build") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			if p, _ := strconv.Unquote(im.Path.Value); p == "golang.org/x/sys/unix" || p == "os/exec" {
				t.Errorf("%s imports %s: the root package reaches the system through internal/dev and internal/host", base, p)
			}
		}
	}
}
