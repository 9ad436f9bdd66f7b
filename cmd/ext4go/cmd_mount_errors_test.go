//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

func TestParseMountOptionErrors(t *testing.T) {
	for opt, want := range map[string]ext4go.ErrorsMode{
		"rw": ext4go.ErrorsDefault, "errors=continue": ext4go.ErrorsContinue,
		"errors=remount-ro": ext4go.ErrorsRemountRO, "errors=panic": ext4go.ErrorsPanic,
	} {
		c, err := parseMountOptions([]string{opt})
		if err != nil || c.fs.Errors != want {
			t.Errorf("-o %s: %v; want %v", opt, err, want)
		}
	}
	for _, opt := range []string{"errors=bogus", "errors"} {
		if _, err := parseMountOptions([]string{opt}); err == nil || !strings.Contains(err.Error(), "errors") {
			t.Errorf("-o %s: %v, want an error", opt, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a process's stderr and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestMountErrors: through a mount with -o errors=remount-ro, an unlink
// that finds corruption fails with EUCLEAN (the kernel's EFSCORRUPTED),
// the daemon logs it as the kernel does ("EXT4-fs error (device ...):
// ...: inode #N: comm ext4go: ...", then "Remounting filesystem
// read-only"), later changes fail with EROFS, and after the unmount the
// superblock holds the error, so that e2fsck -p checks the image.
func TestMountErrors(t *testing.T) {
	requireFUSE(t)
	img, ino := corruptImage(t)
	bin := buildCLI(t)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd := exec.Command(bin, "mount", "-f", "-o", "errors=remount-ro", img, dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mounted(dir) {
			exec.Command("fusermount3", "-u", dir).Run()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for !mounted(dir) {
		if time.Now().After(deadline) {
			t.Fatalf("the mount did not come up:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.Remove(filepath.Join(dir, "three")); !errors.Is(err, syscall.EUCLEAN) {
		t.Errorf("rm three: %v, want EUCLEAN", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "three")); err != nil {
		t.Errorf("three after the failed rm: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "new"), []byte("n"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("create after the error: %v, want EROFS", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); !errors.Is(err, syscall.EROFS) {
		t.Errorf("mkdir after the error: %v, want EROFS", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "keep")); err != nil || string(b) != "keep\n" {
		t.Errorf("read after the error: %q, %v", b, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("mount after SIGTERM: %v\n%s", err, stderr.String())
	}
	abs, _ := filepath.Abs(img)
	log := stderr.String()
	t.Logf("daemon stderr:\n%s", log)
	re := fmt.Sprintf(`(?m)^EXT4-fs error \(device %s\): [A-Za-z.]+:0: inode #%d: (block \d+: )?comm ext4go: .*corrupt`, regexp.QuoteMeta(abs), ino)
	if !regexp.MustCompile(re).MatchString(log) {
		t.Errorf("no kernel-style error line (%s) in the daemon's stderr", re)
	}
	if !strings.Contains(log, "EXT4-fs ("+abs+"): Remounting filesystem read-only") {
		t.Error("no \"Remounting filesystem read-only\" line in the daemon's stderr")
	}
	if strings.Count(log, "EXT4-fs error") != 1 {
		t.Errorf("%d error lines, want 1", strings.Count(log, "EXT4-fs error"))
	}
	h := errorLines(testutil.Run(t, "dumpe2fs", "-h", img))
	if h["Filesystem state"] != "clean with errors" || h["FS Error count"] != "1" || h["First error inode #"] != fmt.Sprint(ino) {
		t.Errorf("dumpe2fs -h after the unmount: %v", h)
	}
	// Mounted again (read-only: a writable open of a filesystem with
	// errors wants e2fsck first), it comes up with the kernel's warning.
	var again lockedBuffer
	ro := exec.Command(bin, "mount", "-f", "-o", "ro", img, dir)
	ro.Stderr = &again
	if err := ro.Start(); err != nil {
		t.Fatal(err)
	}
	for !mounted(dir) {
		if time.Now().After(deadline.Add(20 * time.Second)) {
			ro.Process.Kill()
			t.Fatalf("the read-only mount did not come up:\n%s", again.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	ro.Process.Signal(syscall.SIGTERM)
	ro.Wait()
	if w := "EXT4-fs (" + abs + "): warning: mounting fs with errors, running e2fsck is recommended"; !strings.Contains(again.String(), w) {
		t.Errorf("read-only mount of the filesystem with errors: stderr %q, want %q", again.String(), w)
	}
	out, _ := exec.Command("e2fsck", "-p", img).CombinedOutput()
	if strings.Contains(string(out), "clean,") {
		t.Errorf("e2fsck -p skips the image:\n%s", out)
	}
	testutil.RequireFsckClean(t, img)
}
