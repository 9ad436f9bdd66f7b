//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestTwoWritersEveryPairing: one image file with two loop devices over
// it; while one writer holds it (the library through the file or a loop
// device, or an ext4go mount of either), every other way of writing it (the
// library through the file, with and without AllowInUse, or through either
// loop device; ext4go put through the file or a loop device; a second
// ext4go mount) is refused as busy, and nothing it tried reaches the
// image: after the holder lets go, e2fsck -fn finds it clean and only the
// holder's file is there. Before the loop devices' backing files were
// locked, a put through /dev/loopN exited 0 while a mount served the
// file, and its file was lost at unmount.
func TestTwoWritersEveryPairing(t *testing.T) {
	if ok, why := testutil.CanMount(); !ok {
		t.Skipf("no loop devices: %s", why)
	}
	requireFUSE(t)
	bin := buildCLI(t)
	tmp := t.TempDir()
	img := filepath.Join(tmp, "disk.img")
	mustCLI(t, "mkfs", "-q", "--size", "32M", img)
	src := filepath.Join(tmp, "src")
	if err := os.WriteFile(src, []byte("the contender's file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The loop devices of a subtest: attached before a holder that
	// writes through one, after one that writes through the file (which
	// a writable open refuses while any is attached).
	var loopA, loopB string
	type holder struct {
		name    string
		viaLoop bool
		// hold starts holding the image writable, writes file name
		// through it, and returns the function that lets go.
		hold func(t *testing.T, name string) (release func())
	}
	libHolder := func(path *string) func(t *testing.T, name string) func() {
		return func(t *testing.T, name string) func() {
			path := *path
			fsys, err := ext4go.Open(path, &ext4go.Options{Writable: true})
			if err != nil {
				t.Fatalf("holder: open %s: %v", path, err)
			}
			if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
			return func() {
				if err := fsys.Close(); err != nil {
					t.Errorf("holder: close: %v", err)
				}
			}
		}
	}
	mountHolder := func(path *string) func(t *testing.T, name string) func() {
		return func(t *testing.T, name string) func() {
			path := *path
			dir := t.TempDir()
			if out, err := exec.Command(bin, "mount", path, dir).CombinedOutput(); err != nil {
				t.Fatalf("holder: ext4go mount %s: %v\n%s", path, err, out)
			}
			if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
				t.Error(err)
			}
			return func() {
				if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
					t.Errorf("fusermount3 -u: %v\n%s", err, out)
					exec.Command("fusermount3", "-uz", dir).Run()
				}
				waitImageFree(t, img)
			}
		}
	}
	imgPath := img
	holders := []holder{
		{"library-file", false, libHolder(&imgPath)},
		{"library-loopA", true, libHolder(&loopA)},
		{"mount-file", false, mountHolder(&imgPath)},
		{"mount-loopA", true, mountHolder(&loopA)},
	}

	type contender struct {
		name string
		try  func(t *testing.T) error // nil: it got in
	}
	libTry := func(path *string, allowInUse bool) func(t *testing.T) error {
		return func(t *testing.T) error {
			path := *path
			fsys, err := ext4go.Open(path, &ext4go.Options{Writable: true, AllowInUse: allowInUse})
			if err != nil {
				if !errors.Is(err, ext4go.ErrBusy) {
					t.Errorf("open %s: %v: not ErrBusy", path, err)
				}
				return err
			}
			fsys.WriteFile("intruder", nil, 0o644)
			fsys.Close()
			return nil
		}
	}
	cliTry := func(cmd string, path *string, rest ...string) func(t *testing.T) error {
		return func(t *testing.T) error {
			args := append([]string{cmd, *path}, rest...)
			out, err := exec.Command(bin, args...).CombinedOutput()
			if err == nil {
				return nil
			}
			if !strings.Contains(string(out), "in use") && !strings.Contains(string(out), "busy") &&
				!strings.Contains(string(out), "attached to") && !strings.Contains(string(out), "mounted on") {
				t.Errorf("ext4go %q: the refusal does not say the image is in use:\n%s", args, out)
			}
			return errors.New(strings.TrimSpace(string(out)))
		}
	}
	contenders := []contender{
		{"library-file", libTry(&imgPath, false)},
		{"library-file-allow-in-use", libTry(&imgPath, true)},
		{"library-loopA", libTry(&loopA, false)},
		{"library-loopB", libTry(&loopB, false)},
		{"put-file", cliTry("put", &imgPath, src, "/intruder")},
		{"put-loopA", cliTry("put", &loopA, src, "/intruder")},
		{"put-loopB", cliTry("put", &loopB, src, "/intruder")},
		{"mount-loopB", func(t *testing.T) error {
			dir := t.TempDir()
			out, err := exec.Command(bin, "mount", loopB, dir).CombinedOutput()
			if err == nil {
				exec.Command("fusermount3", "-u", dir).Run()
				waitImageFree(t, img)
				return nil
			}
			return errors.New(strings.TrimSpace(string(out)))
		}},
	}

	tried := 0
	for _, h := range holders {
		t.Run(h.name, func(t *testing.T) {
			var detach []func()
			attach := func() {
				var d1, d2 func()
				loopA, d1 = attachLoop(t, img)
				loopB, d2 = attachLoop(t, img)
				detach = []func(){d1, d2}
			}
			if h.viaLoop {
				attach()
			}
			release := h.hold(t, "held-by-"+h.name)
			if !h.viaLoop {
				attach()
			}
			for _, c := range contenders {
				tried++
				if err := c.try(t); err == nil {
					t.Errorf("%s got in while %s held the image", c.name, h.name)
				} else {
					t.Logf("%s refused: %.200v", c.name, err)
				}
			}
			release()
			for _, d := range detach {
				d()
			}
			testutil.RequireFsckClean(t, img)
			fsys, err := ext4go.Open(img, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer fsys.Close()
			if _, err := fsys.Stat("held-by-" + h.name); err != nil {
				t.Errorf("the holder's file: %v", err)
			}
			if _, err := fsys.Stat("intruder"); err == nil {
				t.Errorf("a contender's file is in the image")
			}
		})
	}
	t.Logf("%d pairings tried", tried)
	// Alone, a loop device opens writable: the refusals above were the
	// holders'.
	var detach func()
	loopB, detach = attachLoop(t, img)
	defer detach()
	if err := libTry(&loopB, false)(t); err != nil {
		t.Errorf("loopB alone: %v", err)
	}
}

// attachLoop attaches image to a new loop device; detach detaches it
// (once; it also runs when the test ends).
func attachLoop(t *testing.T, image string) (dev string, detach func()) {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", image).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v\n%s", err, out)
	}
	dev = strings.TrimSpace(string(out))
	var once sync.Once
	detach = func() {
		once.Do(func() {
			for range 50 {
				if exec.Command("losetup", "-d", dev).Run() == nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Errorf("losetup -d %s failed", dev)
		})
	}
	t.Cleanup(detach)
	return dev, detach
}

// waitImageFree waits until the mount daemon has closed the image: a
// shared lock on the file can be taken again.
func waitImageFree(t *testing.T, image string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, AllowInUse: true})
		if err == nil {
			fsys.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image is still held: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
