//go:build linux

package dev

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestInUse: an image file loop-mounted by the kernel, read-write or
// read-only, is reported with its mount point and loop device; after the
// unmount, it is free again.
func TestInUse(t *testing.T) {
	testutil.RequireMount(t)
	img := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, img, 8<<20, "-t", "ext4")
	if u, err := InUse(img); err != nil || u != nil {
		t.Fatalf("unmounted image: %v, %v", u, err)
	}
	for _, ro := range []bool{false, true} {
		func() {
			mp := testutil.Mount(t, img, ro)
			defer testutil.Unmount(t, mp)
			u, err := InUse(img)
			if err != nil || u == nil || len(u.Mounts) != 1 {
				t.Fatalf("mounted (ro %v): %+v, %v", ro, u, err)
			}
			m := u.Mounts[0]
			if m.Point != mp || !m.Loop || !strings.HasPrefix(m.Device, "/dev/loop") || m.ReadOnly != ro || u.Writable() == ro {
				t.Errorf("mounted (ro %v) on %s: %+v", ro, mp, u)
			}
			if s := u.String(); !strings.Contains(s, mp) || !strings.Contains(s, "/dev/loop") {
				t.Errorf("message %q names neither mount point nor device", s)
			}
			// The loop device itself is a mounted block device.
			if u2, err := InUse(m.Device); err != nil || u2 == nil || len(u2.Mounts) != 1 || u2.Mounts[0].Point != mp {
				t.Errorf("InUse(%s): %+v, %v", m.Device, u2, err)
			}
		}()
	}
	if u, err := InUse(img); err != nil || u != nil {
		t.Errorf("after unmount: %+v, %v", u, err)
	}
}

// TestInUsePartition: a whole disk (a partitioned loop device) is in use
// when one of its partitions is mounted.
func TestInUsePartition(t *testing.T) {
	testutil.RequireMount(t)
	if _, err := exec.LookPath("sfdisk"); err != nil {
		t.Skip("sfdisk (fdisk) is not installed")
	}
	img := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	sf := exec.Command("sfdisk", "-q", img)
	sf.Stdin = strings.NewReader("2048,,L\n")
	if out, err := sf.CombinedOutput(); err != nil {
		t.Skipf("sfdisk: %v\n%s", err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", "--partscan", img).Output()
	if err != nil {
		t.Skipf("losetup --partscan: %v", err)
	}
	disk := strings.TrimSpace(string(out))
	defer exec.Command("losetup", "-d", disk).Run()
	// Without udev no /dev node appears for the partition: make one from
	// sysfs.
	name := filepath.Base(disk) + "p1"
	if _, err := os.Stat("/sys/class/block/" + name); err != nil {
		exec.Command("partx", "-a", disk).Run() // when losetup's scan did not add it
	}
	var nr uint64
	for i := 0; i < 100; i++ {
		var ok bool
		if nr, ok = devNumber("/sys/class/block/" + name + "/dev"); ok {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if nr == 0 {
		t.Skip("the kernel made no partition device")
	}
	part := "/dev/" + name
	if _, err := os.Stat(part); err != nil {
		part = filepath.Join(t.TempDir(), name)
		if err := unix.Mknod(part, unix.S_IFBLK|0o600, int(nr)); err != nil {
			t.Skipf("mknod: %v", err)
		}
	}
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", part).CombinedOutput(); err != nil {
		t.Skipf("mke2fs %s: %v\n%s", part, err, out)
	}
	mp := t.TempDir()
	if out, err := exec.Command("mount", part, mp).CombinedOutput(); err != nil {
		t.Skipf("mount %s: %v\n%s", part, err, out)
	}
	defer exec.Command("umount", mp).Run()
	u, err := InUse(disk)
	if err != nil || u == nil || len(u.Mounts) != 1 || u.Mounts[0].Point != mp || u.Mounts[0].Device != "/dev/"+name {
		t.Errorf("InUse(%s) with %s mounted on %s: %+v, %v", disk, part, mp, u, err)
	}
}
