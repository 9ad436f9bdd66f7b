//go:build linux

package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

// mountMarker names every mount point Mount creates, followed by the pid of
// the test process, so that mounts left by a killed test binary can be told
// apart from live ones (sweepStale).
const mountMarker = "ext4go-mnt-"

var canMount struct {
	once   sync.Once
	ok     bool
	reason string
}

// NoMountEnv names an environment variable that, set to anything but ""
// or "0", makes CanMount say no, and so every test that mounts skip: a
// run on another platform (a 32-bit build, an emulated one) is there for
// the library's own code, the kernel's side is the native run's, and
// under emulation each mount costs a great deal of time.
const NoMountEnv = "EXT4GO_TEST_NOMOUNT"

// CanMount reports whether this process can loop-mount ext4 images, probing
// once per process: NoMountEnv not set, root, /dev/loop-control, the
// losetup/mount/umount/mke2fs tools, and a real read-only mount of a tiny
// ext4 image. reason says what is missing when ok is false.
func CanMount() (ok bool, reason string) {
	canMount.once.Do(func() {
		canMount.ok, canMount.reason = probeMount()
	})
	return canMount.ok, canMount.reason
}

// RequireMount skips the test, with the reason, unless CanMount.
func RequireMount(t testing.TB) {
	t.Helper()
	if ok, reason := CanMount(); !ok {
		t.Skipf("testutil: loop mounts unavailable: %s", reason)
	}
}

func probeMount() (bool, string) {
	if v := os.Getenv(NoMountEnv); v != "" && v != "0" {
		return false, NoMountEnv + " is set"
	}
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return false, "no /dev/loop-control: " + err.Error()
	}
	for _, tool := range []string{"losetup", "mount", "umount", "mke2fs"} {
		if findTool(tool) == "" {
			return false, tool + " is not installed"
		}
	}
	sweepStale()
	dir, err := os.MkdirTemp("", "ext4go-probe-")
	if err != nil {
		return false, err.Error()
	}
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "probe.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		return false, err.Error()
	}
	if err := os.Truncate(img, 4<<20); err != nil {
		return false, err.Error()
	}
	if r := run(findTool("mke2fs"), "-F", "-q", "-t", "ext4", img); r.exit != 0 {
		return false, r.describe("mke2fs", nil)
	}
	mp := filepath.Join(dir, fmt.Sprintf("%s%d", mountMarker, os.Getpid()))
	if err := os.Mkdir(mp, 0o755); err != nil {
		return false, err.Error()
	}
	m, err := attachAndMount(img, mp, true, nil)
	if err != nil {
		return false, "test mount failed: " + err.Error()
	}
	if err := m.release(); err != nil {
		return false, "test unmount failed: " + err.Error()
	}
	return true, ""
}

// mounted is one live loop mount.
type mounted struct {
	dev, mp string
}

// attachAndMount attaches image to a free loop device and mounts it on mp.
// On failure nothing stays attached.
func attachAndMount(image, mp string, readOnly bool, opts []string) (*mounted, error) {
	largs := []string{"--find", "--show"}
	if readOnly {
		largs = append(largs, "--read-only")
	}
	r := run(findTool("losetup"), append(largs, image)...)
	if r.exit != 0 {
		return nil, errors.New(r.describe("losetup", largs))
	}
	dev := strings.TrimSpace(r.stdout)
	if !strings.HasPrefix(dev, "/dev/loop") {
		return nil, fmt.Errorf("losetup printed %q", r.stdout)
	}
	m := &mounted{dev: dev}
	o := append([]string(nil), opts...)
	if readOnly {
		o = append([]string{"ro"}, o...)
	}
	margs := []string{"-t", "ext4"}
	if len(o) > 0 {
		margs = append(margs, "-o", strings.Join(o, ","))
	}
	margs = append(margs, dev, mp)
	if r := run(findTool("mount"), margs...); r.exit != 0 {
		derr := detach(dev)
		return nil, errors.Join(errors.New(r.describe("mount", margs)), derr)
	}
	m.mp = mp
	return m, nil
}

// release unmounts (retrying while busy, then lazily) and detaches the loop
// device. It is safe to call with the mount already gone.
func (m *mounted) release() error {
	var errs []error
	if m.mp != "" {
		var r runResult
		umounted := false
		for i := 0; i < 5; i++ {
			if r = run(findTool("umount"), m.mp); r.exit == 0 {
				umounted = true
				break
			}
			time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
		}
		if !umounted {
			// Lazy unmount always takes the mount out of the namespace;
			// the device is then freed when its last user goes, and
			// losetup -d below turns into auto-clear.
			if r2 := run(findTool("umount"), "-l", m.mp); r2.exit != 0 {
				errs = append(errs, errors.New(r2.describe("umount -l", []string{m.mp})))
			} else {
				errs = append(errs, fmt.Errorf("umount %s needed -l: %s", m.mp, r.stderr))
			}
		}
		m.mp = ""
	}
	if m.dev != "" {
		if err := detach(m.dev); err != nil {
			errs = append(errs, err)
		}
		m.dev = ""
	}
	return errors.Join(errs...)
}

// detach runs losetup -d, retrying briefly: udev may still hold the device
// right after an unmount.
func detach(dev string) error {
	sys := filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file")
	backing, _ := os.ReadFile(sys)
	var r runResult
	for i := 0; i < 5; i++ {
		if r = run(findTool("losetup"), "-d", dev); r.exit == 0 {
			return waitDetached(sys, backing)
		}
		// ENXIO: the device is no longer attached, the state wanted. A
		// detach refused while something briefly had the device open
		// (a probe after the unmount) turns into auto-clear, and the
		// device goes by itself.
		if strings.Contains(r.stderr, "No such device or address") {
			return waitDetached(sys, backing)
		}
		time.Sleep(time.Duration(i+1) * 50 * time.Millisecond)
	}
	return errors.New(r.describe("losetup", []string{"-d", dev}))
}

// waitDetached waits (up to 5 s) until loop device file sys (its
// backing_file in sysfs) no longer names backing: a detach that turned
// into auto-clear takes effect only when the last user closes the device,
// and until then the image counts as in use (a writable open of it is
// refused). Another attach of the device ends the wait too.
func waitDetached(sys string, backing []byte) error {
	for i := 0; i < 100 && len(backing) > 0; i++ {
		cur, err := os.ReadFile(sys)
		if err != nil || string(cur) != string(backing) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Mount loop-mounts image (as ext4) on a fresh directory under t.TempDir()
// and returns that directory. opts are extra mount options ("noload",
// "norecovery", ...); readOnly attaches the loop device read-only and mounts
// with "ro", so not even journal replay can write to the image. It skips
// the test unless CanMount, and fails it if the mount fails. A t.Cleanup
// unmounts and detaches the device however the test ends.
func Mount(t testing.TB, image string, readOnly bool, opts ...string) (mountpoint string) {
	t.Helper()
	RequireMount(t)
	// t.TempDir first: cleanups run last-in first-out, so the unmount
	// registered below runs before the directory is removed.
	mp := filepath.Join(t.TempDir(), fmt.Sprintf("%s%d", mountMarker, os.Getpid()))
	if err := os.Mkdir(mp, 0o755); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	m, err := attachAndMount(image, mp, readOnly, opts)
	if err != nil {
		t.Fatalf("testutil: mount %s: %v", image, err)
	}
	live.Lock()
	live.m[mp] = m
	live.Unlock()
	t.Cleanup(func() {
		live.Lock()
		delete(live.m, mp)
		live.Unlock()
		if err := m.release(); err != nil {
			t.Errorf("testutil: releasing mount of %s: %v", image, err)
		}
	})
	return mp
}

// live holds the mounts Mount made that are not yet released.
var live = struct {
	sync.Mutex
	m map[string]*mounted
}{m: map[string]*mounted{}}

// Unmount unmounts and detaches a mount made by Mount before the test
// ends (the cleanup then has nothing left to do).
func Unmount(t testing.TB, mountpoint string) {
	t.Helper()
	live.Lock()
	m := live.m[mountpoint]
	delete(live.m, mountpoint)
	live.Unlock()
	if m == nil {
		t.Fatalf("testutil: %s is not a live mount of this test", mountpoint)
	}
	if err := m.release(); err != nil {
		t.Fatalf("testutil: unmount %s: %v", mountpoint, err)
	}
}

// sweepStale unmounts and detaches mounts that Mount made in a test process
// that no longer exists (killed by a timeout, say: then no cleanup ran). It
// touches only mount points carrying mountMarker plus a dead pid, so
// concurrently running test binaries are left alone.
func sweepStale() {
	mounts, err := mountinfo.Read()
	if err != nil {
		return
	}
	type stale struct{ src, mp string }
	var found []stale
	for _, m := range mounts {
		base := filepath.Base(m.Point)
		if !strings.HasPrefix(base, mountMarker) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(base, mountMarker))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		found = append(found, stale{m.Source, m.Point})
	}
	for _, s := range found {
		run(findTool("umount"), "-l", s.mp)
		if strings.HasPrefix(s.src, "/dev/loop") {
			run(findTool("losetup"), "-d", s.src)
		}
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
