//go:build linux

package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

// loopsOf lists the loop devices backed by image.
func loopsOf(t *testing.T, image string) string {
	t.Helper()
	r := run(findTool("losetup"), "-j", image)
	if r.exit != 0 {
		t.Fatalf("losetup -j: %s", r.describe("losetup", nil))
	}
	return strings.TrimSpace(r.stdout)
}

func isMounted(t *testing.T, mp string) bool {
	t.Helper()
	mounts, err := mountinfo.Read()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		if m.Point == mp {
			return true
		}
	}
	return false
}

// TestMountCleanup: after the test that mounted ends, however it ends
// (passing, skipped after mounting: the same Goexit path as t.Fatal), the
// image is unmounted and no loop device refers to it.
func TestMountCleanup(t *testing.T) {
	RequireMount(t)
	src := SourceDir(t)
	GenTree(t, src, TreeSpec{Preset: "small"})
	img := BuildImage(t, src, ImageOptions{})
	var mp string
	t.Run("read-only", func(t *testing.T) {
		mp = Mount(t, img, true)
		if loopsOf(t, img) == "" || !isMounted(t, mp) {
			t.Fatalf("not mounted: %q", loopsOf(t, img))
		}
		if err := os.WriteFile(filepath.Join(mp, "x"), nil, 0o644); err == nil {
			t.Error("wrote to a read-only mount")
		}
		CompareDirs(t, mp, src, MountCompareOptions())
	})
	if l := loopsOf(t, img); l != "" || isMounted(t, mp) {
		t.Fatalf("leaked after cleanup: loop %q, mounted %v", l, isMounted(t, mp))
	}
	t.Run("skipped-while-mounted", func(t *testing.T) {
		mp = Mount(t, img, false)
		if err := os.WriteFile(filepath.Join(mp, "new"), []byte("written by the kernel"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("leaving the test while mounted; cleanup must still run")
	})
	if l := loopsOf(t, img); l != "" || isMounted(t, mp) {
		t.Fatalf("leaked after skip: loop %q, mounted %v", l, isMounted(t, mp))
	}
	RequireFsckClean(t, img)
	if out := Debugfs(t, img, "cat /new"); out != "written by the kernel" {
		t.Errorf("rw mount's write: debugfs cat = %q", out)
	}
}

// TestMountBusy: a mount kept busy by an open file is lazily unmounted and
// its loop device auto-cleared once the file is closed.
func TestMountBusy(t *testing.T) {
	RequireMount(t)
	src := SourceDir(t)
	GenTree(t, src, TreeSpec{Preset: "small"})
	img := BuildImage(t, src, ImageOptions{})
	mp := filepath.Join(t.TempDir(), fmt.Sprintf("%s%d", mountMarker, os.Getpid()))
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := attachAndMount(img, mp, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.release() })
	f, err := os.Open(filepath.Join(mp, "hello.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.release(); err == nil || !strings.Contains(err.Error(), "needed -l") {
		t.Errorf("release of a busy mount: %v", err)
	}
	if isMounted(t, mp) {
		t.Error("still mounted after lazy unmount")
	}
	f.Close()
	for i := 0; i < 50 && loopsOf(t, img) != ""; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if l := loopsOf(t, img); l != "" {
		t.Errorf("loop device still attached after the last user left: %q", l)
	}
}

// TestSweepStale: a mount left by a dead test process is removed by the
// sweep, and only that one.
func TestSweepStale(t *testing.T) {
	RequireMount(t)
	src := SourceDir(t)
	GenTree(t, src, TreeSpec{Preset: "small"})
	img := BuildImage(t, src, ImageOptions{})
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := dead.Process.Pid
	if processAlive(deadPid) {
		t.Skip("pid reused already")
	}
	mp := filepath.Join(t.TempDir(), fmt.Sprintf("%s%d", mountMarker, deadPid))
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := attachAndMount(img, mp, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.release() }) // in case the sweep fails
	live := Mount(t, img, true)       // ours, alive: must survive
	sweepStale()
	if isMounted(t, mp) {
		t.Error("stale mount survived the sweep")
	}
	if !isMounted(t, live) {
		t.Error("the sweep removed a live mount")
	}
	if n := len(strings.Split(loopsOf(t, img), "\n")); n != 1 {
		t.Errorf("%d loop devices on the image, want 1 (the live one)", n)
	}
}
