package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// buildCLI builds the ext4go command for tests that need it as a process
// of its own (the mount daemon re-executes itself).
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ext4go")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3 (package fuse3)")
	}
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return bytes.Contains(b, []byte(" "+dir+" "))
}

// waitClosed waits until the image can be opened for writing again: the
// daemon has closed it.
func waitClosed(t *testing.T, image string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
		if err == nil {
			fsys.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image is still held after the unmount: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMountCommand: "ext4go mount" returns once the mount is live and
// leaves a daemon serving it; fusermount3 -u ends the daemon, which
// closes the image clean; the files written through the mount are there.
// Errors before the mount is live are the command's own (exit 1, a
// message): a missing directory, an unknown option, not an image, an
// image another writer has open. In the foreground (-f), SIGTERM
// unmounts and closes.
func TestMountCommand(t *testing.T) {
	requireFUSE(t)
	bin := buildCLI(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	mustCLI(t, "mkfs", "-q", "--size", "64M", img)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("mount", "-o", "default_permissions,relatime", img, dir); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if mounted(dir) {
			exec.Command("fusermount3", "-u", dir).Run()
		}
	})
	if !mounted(dir) {
		t.Fatal("the command returned before the mount was live")
	}
	if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("through the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v\n%s", err, out)
	}
	waitClosed(t, img)
	testutil.RequireFsckClean(t, img)
	if out := mustCLI(t, "cat", img, "/hello"); out != "through the mount" {
		t.Errorf("cat /hello: %q", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", img, filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"mount", "-o", "bogus", img, dir}, `unknown mount option "bogus"`},
		{[]string{"mount", "-o", "strictatime", img, dir}, "strictatime"},
		{[]string{"mount", "/etc/hostname", dir}, "not an ext4 filesystem"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: %v, %q (want exit 1 and %q)", c.args, err, out, c.want)
		}
		if mounted(dir) {
			t.Fatalf("%v mounted", c.args)
		}
	}
	// An image open for writing elsewhere.
	holder, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run("mount", img, dir)
	holder.Close()
	if err == nil || !strings.Contains(out, "in use") || mounted(dir) {
		t.Errorf("mount of an image open elsewhere: %v, %q", err, out)
	}

	// Foreground, ended by SIGTERM.
	cmd := exec.Command(bin, "mount", "-f", img, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !mounted(dir) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the foreground mount did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "second"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("foreground mount after SIGTERM: %v", err)
	}
	if mounted(dir) {
		t.Fatal("still mounted after SIGTERM")
	}
	testutil.RequireFsckClean(t, img)
	if out := mustCLI(t, "cat", img, "/second"); out != "2" {
		t.Errorf("cat /second: %q", out)
	}
}
