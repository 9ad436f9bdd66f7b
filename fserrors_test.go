//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// errorsImage makes an image holding "three" (three one-block extents)
// whose i_blocks is smaller than what it maps, which a remove or truncate
// of it finds before changing anything, and "keep", a sound file. It
// returns the image and three's inode.
func errorsImage(t *testing.T) (string, uint32) {
	t.Helper()
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck", "dumpe2fs")
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "three"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.WriteAt(pattern(int64(i), 0, 1024), int64(i)*8192)
	}
	f.Close()
	os.WriteFile(filepath.Join(src, "keep"), pattern(9, 0, 3000), 0o644)
	image := filepath.Join(t.TempDir(), "base.img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "1024", "-d", src)
	testutil.RequireFsckClean(t, image)
	testutil.DebugfsWrite(t, image, "sif three blocks 2")
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	three, err := fsys.Open("three")
	if err != nil {
		t.Fatal(err)
	}
	defer three.Close()
	return image, three.(*ext4go.File).Ino()
}

// dumpe2fsHeader is dumpe2fs -h of image (times in UTC), key → value.
func dumpe2fsHeader(t *testing.T, image string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for line := range strings.Lines(testutil.Run(t, "dumpe2fs", "-h", image)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// e2fsckPreen runs e2fsck -p (what the boot runs) and returns its exit
// status and output.
func e2fsckPreen(t *testing.T, image string) (int, string) {
	t.Helper()
	out, err := exec.Command("e2fsck", "-p", image).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("e2fsck -p: %v", err)
	return 0, ""
}

// TestChangeErrorRecorded: a change that finds the filesystem corrupt
// fails whole with ErrCorrupt and records the error in the superblock as
// the kernel's ext4_error does: state "with errors", an error count, the
// first and last error (function, inode, time, EFSCORRUPTED), which
// dumpe2fs shows, so that e2fsck -p checks the filesystem (the same image
// without the record is "clean" to it, and skipped). Then, by the errors=
// mode (the option, or the superblock's s_errors): continue lets later
// changes go on and records a second error as the last; remount-ro
// refuses them with an *ErrorsReadOnlyError (ErrReadOnly, not
// ErrCorrupt); panic does that and Close returns the error too.
func TestChangeErrorRecorded(t *testing.T) {
	base, threeIno := errorsImage(t)
	fsckExit, fsckOut := testutil.E2fsckFN(t, base)
	if fsckExit == 0 {
		t.Fatalf("e2fsck -fn finds the corruption clean:\n%s", fsckOut)
	}
	// Without a record, the boot's preen skips the corrupt filesystem.
	if _, out := e2fsckPreen(t, copyImage(t, base)); !strings.Contains(out, "clean,") {
		t.Fatalf("e2fsck -p of the image without a record:\n%s\nwant it skipped as clean", out)
	}
	for _, c := range []struct {
		name     string
		mode     ext4go.ErrorsMode
		sErrors  int // s_errors set with debugfs; 0: mke2fs's (continue)
		readOnly bool
	}{
		{name: "default continue", mode: ext4go.ErrorsDefault},
		{name: "default remount-ro", mode: ext4go.ErrorsDefault, sErrors: 2, readOnly: true},
		{name: "default panic", mode: ext4go.ErrorsDefault, sErrors: 3, readOnly: true},
		{name: "continue", mode: ext4go.ErrorsContinue, sErrors: 2},
		{name: "remount-ro", mode: ext4go.ErrorsRemountRO, readOnly: true},
		{name: "panic", mode: ext4go.ErrorsPanic, readOnly: true},
	} {
		for _, noJournal := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/NoJournal=%v", c.name, noJournal), func(t *testing.T) {
				work := copyImage(t, base)
				if c.sErrors != 0 {
					testutil.DebugfsWrite(t, work, fmt.Sprintf("ssv errors %d", c.sErrors))
				}
				panicMode := c.mode == ext4go.ErrorsPanic || c.sErrors == 3 && c.mode == ext4go.ErrorsDefault
				var events []*ext4go.FSError
				fsys, err := ext4go.Open(work, &ext4go.Options{Writable: true, NoJournal: noJournal, Errors: c.mode,
					OnError: func(e *ext4go.FSError) { events = append(events, e) }})
				if err != nil {
					t.Fatal(err)
				}
				defer func() {
					if fsys != nil {
						fsys.Close()
					}
				}()
				keep, err := fsys.OpenFile("keep", os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer keep.Close()

				err = fsys.Remove("three")
				if !errors.Is(err, ext4go.ErrCorrupt) || errors.Is(err, ext4go.ErrErrorsReadOnly) {
					t.Fatalf("remove three: %v, want ErrCorrupt", err)
				}
				if _, err := fsys.Stat("three"); err != nil {
					t.Errorf("three after the failed remove: %v", err)
				}
				in := fsys.Info()
				if in.ErrorCount != 1 || !strings.Contains(in.State, "with errors") || in.FirstError == nil || in.LastError == nil {
					t.Fatalf("Info after the error: state %q, count %d, first %+v", in.State, in.ErrorCount, in.FirstError)
				}
				if r := in.FirstError; r.Function != "FS.Remove" || r.Ino != threeIno || r.Err != "EFSCORRUPTED" || r.Time.IsZero() {
					t.Errorf("first error %+v", r)
				}
				if len(events) != 1 {
					t.Fatalf("OnError called %d times, want 1", len(events))
				}
				line := events[0].KernelStyle("img", "ext4go")
				if !regexp.MustCompile(fmt.Sprintf(`^EXT4-fs error \(device img\): FS\.Remove:0: inode #%d: (block \d+: )?comm ext4go: .*corrupt`, threeIno)).MatchString(line) {
					t.Errorf("kernel-style line %q", line)
				}
				if events[0].ReadOnly != c.readOnly {
					t.Errorf("FSError.ReadOnly %v, want %v", events[0].ReadOnly, c.readOnly)
				}
				t.Log(line)
				// The image as a crash now would leave it: the record is
				// on disk already (in the journal, when there is one,
				// which e2fsck replays).
				crashed := copyImage(t, work)

				// Later changes.
				changes := map[string]func() error{
					"write file": func() error { return fsys.WriteFile("new", []byte("new\n"), 0o644) },
					"mkdir":      func() error { return fsys.Mkdir("newdir", 0o755) },
					"write to a file opened before": func() error {
						_, err := keep.WriteAt([]byte("x"), 0)
						return err
					},
					"chmod":   func() error { return fsys.Chmod("keep", 0o600) },
					"rename":  func() error { return fsys.Rename("keep", "kept") },
					"setxatr": func() error { return fsys.SetXattr("kept", "user.a", []byte("b"), 0) },
				}
				for _, what := range []string{"write file", "mkdir", "write to a file opened before", "chmod", "rename", "setxatr"} {
					err := changes[what]()
					switch {
					case c.readOnly && (!errors.Is(err, ext4go.ErrErrorsReadOnly) || !errors.Is(err, ext4go.ErrReadOnly) || errors.Is(err, ext4go.ErrCorrupt)):
						t.Errorf("%s after the error: %v, want an *ErrorsReadOnlyError", what, err)
					case c.readOnly:
						var ro *ext4go.ErrorsReadOnlyError
						if !errors.As(err, &ro) || !errors.Is(ro.Cause, ext4go.ErrCorrupt) {
							t.Errorf("%s: %v: no *ErrorsReadOnlyError with the corruption as cause", what, err)
						}
					case err != nil:
						t.Errorf("%s after the error (continue): %v", what, err)
					}
				}
				// A second corruption found.
				wantCount, wantLast := uint32(1), "FS.Remove"
				err = func() error {
					f, err := fsys.OpenFile("three", os.O_RDWR, 0)
					if err != nil {
						return err
					}
					defer f.Close()
					return f.Truncate(0)
				}()
				if c.readOnly {
					if !errors.Is(err, ext4go.ErrErrorsReadOnly) {
						t.Errorf("truncate three, read-only after an error: %v", err)
					}
				} else {
					if !errors.Is(err, ext4go.ErrCorrupt) {
						t.Errorf("truncate three: %v, want ErrCorrupt", err)
					}
					wantCount, wantLast = 2, "File.Truncate"
				}
				keep.Close()
				err = fsys.Close()
				fsys = nil
				switch {
				case panicMode && !errors.Is(err, ext4go.ErrErrorsReadOnly):
					t.Errorf("close under errors=panic: %v, want the *ErrorsReadOnlyError", err)
				case !panicMode && err != nil:
					t.Errorf("close: %v", err)
				}

				h := dumpe2fsHeader(t, work)
				for k, v := range map[string]string{
					"Filesystem state":     "clean with errors",
					"FS Error count":       fmt.Sprint(wantCount),
					"First error function": "FS.Remove",
					"First error inode #":  fmt.Sprint(threeIno),
					"First error err":      "EFSCORRUPTED",
					"Last error function":  wantLast,
					"Last error inode #":   fmt.Sprint(threeIno),
					"Last error err":       "EFSCORRUPTED",
				} {
					if h[k] != v {
						t.Errorf("dumpe2fs -h %q: %q, want %q", k, h[k], v)
					}
				}
				if h["First error time"] == "" {
					t.Error("dumpe2fs -h shows no first error time")
				}
				// The failed changes changed nothing e2fsck sees.
				if exit, out := testutil.E2fsckFN(t, work); exit != fsckExit || fsckProblems(out, work) != fsckProblems(fsckOut, base) {
					t.Errorf("e2fsck -fn changed its verdict: exit %d, was %d\n%s\nwas:\n%s", exit, fsckExit, out, fsckOut)
				}
				// A read-only open works and shows the record; three is whole.
				ro, err := ext4go.Open(work, nil)
				if err != nil {
					t.Fatalf("read-only open of the filesystem with errors: %v", err)
				}
				data, err := ro.ReadFile("three")
				if err != nil || len(data) != 2*8192+1024 || !bytes.Equal(data[8192:9216], pattern(1, 0, 1024)) {
					t.Errorf("three after the failed changes: %d bytes, %v", len(data), err)
				}
				if in := ro.Info(); in.ErrorCount != wantCount || in.LastError == nil || in.LastError.Function != wantLast {
					t.Errorf("Info of the closed image: %+v", in)
				}
				ro.Close()
				// The boot's preen checks (and here fixes) it.
				exit, out := e2fsckPreen(t, work)
				if strings.Contains(out, "clean,") || exit&^1 != 0 {
					t.Errorf("e2fsck -p: exit %d\n%s\nwant a check that fixes it", exit, out)
				}
				t.Logf("e2fsck -p: exit %d: %s", exit, out)
				testutil.RequireFsckClean(t, work)
				if exit, out := e2fsckPreen(t, crashed); strings.Contains(out, "clean,") || exit&^1 != 0 {
					t.Errorf("e2fsck -p of the image as of the error: exit %d\n%s\nwant a check that fixes it", exit, out)
				}
			})
		}
	}
}

// TestChangeChecksumErrorRecorded: a change that meets a bad inode
// checksum records EFSBADCRC with the inode and the inode table block,
// as dumpe2fs -h shows them.
func TestChangeChecksumErrorRecorded(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck", "dumpe2fs")
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "keep"), []byte("keep\n"), 0o644)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-O", "metadata_csum", "-d", src)
	m := regexp.MustCompile(`located at block (\d+)`).FindStringSubmatch(testutil.Debugfs(t, image, "imap keep"))
	ino := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(testutil.Debugfs(t, image, "stat keep"))
	if m == nil || ino == nil {
		t.Fatal("debugfs: no inode location of keep")
	}
	testutil.DebugfsWrite(t, image, "sif keep checksum 0x1234")
	fsckExit, fsckOut := testutil.E2fsckFN(t, image)
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, Errors: ext4go.ErrorsContinue})
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Chmod("keep", 0o600); !errors.Is(err, ext4go.ErrChecksum) {
		t.Errorf("chmod keep: %v, want ErrChecksum", err)
	}
	if err := fsys.WriteFile("other", []byte("o"), 0o644); err != nil {
		t.Errorf("a change after the error (continue): %v", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	h := dumpe2fsHeader(t, image)
	for k, v := range map[string]string{
		"Filesystem state":     "clean with errors",
		"FS Error count":       "1",
		"First error function": "FS.chmod",
		"First error inode #":  ino[1],
		"First error block #":  m[1],
		"First error err":      "EFSBADCRC",
	} {
		if h[k] != v {
			t.Errorf("dumpe2fs -h %q: %q, want %q", k, h[k], v)
		}
	}
	if exit, out := testutil.E2fsckFN(t, image); exit != fsckExit || fsckProblems(out, image) != fsckProblems(fsckOut, image) {
		t.Errorf("e2fsck -fn changed its verdict: exit %d, was %d\n%s\nwas:\n%s", exit, fsckExit, out, fsckOut)
	}
}
