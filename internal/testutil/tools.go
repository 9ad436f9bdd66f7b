package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Fixed identifiers for reproducible images: pass DeterministicArgs() to
// Mke2fs (or set ImageOptions.Deterministic). With them and the fixed clock
// Mke2fs always uses, mke2fs makes byte-identical empty images run to run.
const (
	FixedUUID     = "e4e4e4e4-0123-4567-89ab-cdef01234567"
	FixedHashSeed = "5eed5eed-7654-3210-fedc-ba9876543210"
	// FixedTime is the clock (Unix seconds, 2023-11-14) Mke2fs gives mke2fs
	// through E2FSPROGS_FAKE_TIME, so superblock times and the times of
	// lost+found and the root are fixed. Other tools see the real clock
	// (e2fsck judges "time in the future" by it).
	FixedTime = 1700000000
)

// DeterministicArgs returns mke2fs arguments fixing the filesystem UUID and
// the directory hash seed. mke2fs keeps only the last -E option, so a test
// that needs other extended options must merge them into one -E itself.
func DeterministicArgs() []string {
	return []string{"-U", FixedUUID, "-E", "hash_seed=" + FixedHashSeed}
}

// toolDirs are searched after $PATH: e2fsprogs lives in sbin, which a
// non-login $PATH may lack.
var toolDirs = []string{"/usr/sbin", "/sbin", "/usr/bin", "/bin"}

// findTool returns the path of an executable, or "" if it is not installed.
func findTool(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range toolDirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// requireTool returns the tool's path or skips the test.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p := findTool(name)
	if p == "" {
		t.Skipf("testutil: %s is not installed (e2fsprogs/util-linux needed for this test)", name)
	}
	return p
}

// runResult is what a tool run produced.
type runResult struct {
	exit           int // -1 if the process could not be run or was killed
	stdout, stderr string
	err            error // set when the process could not be run at all
}

// run runs a tool and returns its exit status and output. It does not fail
// the test; callers decide what is acceptable.
func run(path string, args ...string) runResult {
	return runEnv(path, nil, args...)
}

// runEnv is run with extra environment variables.
func runEnv(path string, env []string, args ...string) runResult {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := runResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	default:
		r.exit, r.err = -1, err
	}
	return r
}

func (r runResult) describe(name string, args []string) string {
	return fmt.Sprintf("%s %s: exit %d (err %v)\nstdout:\n%s\nstderr:\n%s",
		name, strings.Join(args, " "), r.exit, r.err, r.stdout, r.stderr)
}

// mustRun runs a tool (skipping if it is missing) and fails the test unless
// it exits 0.
func mustRun(t testing.TB, name string, args ...string) runResult {
	t.Helper()
	r := run(requireTool(t, name), args...)
	if r.exit != 0 {
		t.Fatalf("testutil: %s", r.describe(name, args))
	}
	return r
}

// Mke2fs creates image as a sparse file of sizeBytes (replacing any old
// file) and runs "mke2fs -F -q args... image" on it, e.g. args
// "-t", "ext4", "-b", "1024", "-O", "^metadata_csum", "-d", dir.
// It fails the test if mke2fs does not exit 0.
func Mke2fs(t testing.TB, image string, sizeBytes int64, args ...string) {
	t.Helper()
	tool := requireTool(t, "mke2fs")
	if err := os.Remove(image); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("testutil: remove old image: %v", err)
	}
	f, err := os.Create(image)
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	err = f.Truncate(sizeBytes)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("testutil: size image: %v", err)
	}
	full := append(append([]string{"-F", "-q"}, args...), image)
	env := []string{fmt.Sprintf("E2FSPROGS_FAKE_TIME=%d", FixedTime)}
	if r := runEnv(tool, env, full...); r.exit != 0 {
		t.Fatalf("testutil: %s", r.describe("mke2fs", full))
	}
}

// E2fsckFN runs "e2fsck -fn image" (force a full check, change nothing) and
// returns its exit status and combined output. Exit 0 means clean, 4 means
// errors were left uncorrected, 8 and up an operational error.
func E2fsckFN(t testing.TB, image string) (exit int, output string) {
	t.Helper()
	r := run(requireTool(t, "e2fsck"), "-fn", image)
	if r.err != nil {
		t.Fatalf("testutil: e2fsck: %v", r.err)
	}
	return r.exit, r.stdout + r.stderr
}

// RequireFsckClean fails the test, printing e2fsck's output, unless
// "e2fsck -fn image" exits 0.
func RequireFsckClean(t testing.TB, image string) {
	t.Helper()
	if exit, out := E2fsckFN(t, image); exit != 0 {
		t.Fatalf("testutil: e2fsck -fn %s: exit %d\n%s", image, exit, out)
	}
}

// E2fsckFyD runs "e2fsck -fyD image", which repairs what it finds and
// rebuilds (indexes) every directory, e.g. to turn the linear directories
// mke2fs -d writes into htrees. Exit 0 (clean), 1 (fixed) and 2 (fixed,
// reboot advised) are accepted; anything else fails the test.
func E2fsckFyD(t testing.TB, image string) (output string) {
	t.Helper()
	r := run(requireTool(t, "e2fsck"), "-fyD", image)
	if r.exit < 0 || r.exit > 2 {
		t.Fatalf("testutil: %s", r.describe("e2fsck", []string{"-fyD", image}))
	}
	return r.stdout + r.stderr
}

// Debugfs runs one read-only debugfs request ("debugfs -R request image")
// and returns its standard output. debugfs exits 0 even when the request
// fails; its messages (stderr, minus the version banner) are logged.
func Debugfs(t testing.TB, image, request string) string {
	t.Helper()
	r := mustRun(t, "debugfs", "-R", request, image)
	logDebugfsStderr(t, r.stderr)
	return r.stdout
}

// DebugfsWrite runs requests, one per line, with "debugfs -w -f FILE image"
// and returns the output. A request cannot contain a newline; quote paths
// holding spaces with double quotes.
func DebugfsWrite(t testing.TB, image string, requests ...string) string {
	t.Helper()
	for _, r := range requests {
		if strings.ContainsAny(r, "\n\r") {
			t.Fatalf("testutil: debugfs request holds a newline: %q", r)
		}
	}
	cmdFile := filepath.Join(t.TempDir(), "debugfs.cmd")
	if err := os.WriteFile(cmdFile, []byte(strings.Join(requests, "\n")+"\n"), 0o600); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	r := mustRun(t, "debugfs", "-w", "-f", cmdFile, image)
	logDebugfsStderr(t, r.stderr)
	return r.stdout
}

// DebugfsQuote quotes s as one debugfs argument (debugfs's parser knows
// only double quotes, with "" standing for a literal quote). It reports
// false if s holds a newline or NUL, which no request can carry.
func DebugfsQuote(s string) (string, bool) {
	if strings.ContainsAny(s, "\n\r\x00") {
		return "", false
	}
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`, true
}

func logDebugfsStderr(t testing.TB, stderr string) {
	t.Helper()
	var rest []string
	for _, l := range strings.Split(stderr, "\n") {
		if l != "" && !strings.HasPrefix(l, "debugfs ") {
			rest = append(rest, l)
		}
	}
	if len(rest) > 0 {
		t.Logf("debugfs: %s", strings.Join(rest, "\n"))
	}
}

// DebugfsRdump copies fsPath from image into the existing directory destDir
// with "debugfs -R 'rdump fsPath destDir'". For fsPath "/" the root's
// entries land directly in destDir; for any other path rdump creates
// destDir/<base name of fsPath>. See the package doc for what rdump drops
// (RdumpCompareOptions). It fails the test if rdump reports an error.
func DebugfsRdump(t testing.TB, image, fsPath, destDir string) {
	t.Helper()
	qp, ok1 := DebugfsQuote(fsPath)
	qd, ok2 := DebugfsQuote(destDir)
	if !ok1 || !ok2 {
		t.Fatalf("testutil: rdump paths cannot be quoted for debugfs: %q %q", fsPath, destDir)
	}
	req := "rdump " + qp + " " + qd
	r := mustRun(t, "debugfs", "-R", req, image)
	for _, l := range strings.Split(r.stderr, "\n") {
		if l != "" && !strings.HasPrefix(l, "debugfs ") {
			t.Fatalf("testutil: debugfs %s: %s", req, r.stderr)
		}
	}
}

// Dumpe2fs runs "dumpe2fs args... image" and returns its standard output,
// e.g. Dumpe2fs(t, img, "-h") for the superblock only.
func Dumpe2fs(t testing.TB, image string, args ...string) string {
	t.Helper()
	return mustRun(t, "dumpe2fs", append(args, image)...).stdout
}

// RequireTools skips the test unless every named program is installed.
func RequireTools(t testing.TB, names ...string) {
	t.Helper()
	for _, tool := range names {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
}

// Run runs a program with TZ=UTC (so tools print times alike everywhere)
// and returns its combined output, failing the test if it fails.
func Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// DebugfsBatch runs cmds in one debugfs session on image (read-only) and
// returns each command's output, keyed by the command.
func DebugfsBatch(t testing.TB, image string, cmds []string) map[string]string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cmds")
	if err := os.WriteFile(f, []byte(strings.Join(cmds, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("debugfs", "-f", f, image)
	cmd.Env = append(os.Environ(), "TZ=UTC") // times printed the same on every machine
	out, err := cmd.Output()                 // stderr has the banner
	if err != nil {
		t.Fatalf("debugfs: %v", err)
	}
	res := map[string]string{}
	var cur string
	for _, line := range strings.SplitAfter(string(out), "\n") {
		if c, ok := strings.CutPrefix(line, "debugfs: "); ok {
			cur = strings.TrimSpace(c)
			continue
		}
		res[cur] += line
	}
	return res
}
