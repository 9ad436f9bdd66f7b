//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMountHelper: scripts/mount.fuse.ext4go, run as mount(8) runs it
// (an empty environment but PATH=/sbin:/bin:/usr/sbin:/usr/bin, which has
// no ext4go), finds ext4go beside itself and mounts; the mount's type is
// fuse.ext4go (findmnt -t fuse.ext4go lists it), and what was written
// through it is in the image, e2fsck-clean, after the unmount. Where no
// ext4go can be found, the helper says where it looked and how to fix it.
func TestMountHelper(t *testing.T) {
	requireFUSE(t)
	if os.Geteuid() != 0 {
		t.Skip("mount(8) helpers run as root")
	}
	bin := buildCLI(t)
	dir := t.TempDir()
	helper := filepath.Join(dir, "mount.fuse.ext4go")
	script, err := os.ReadFile("../../scripts/mount.fuse.ext4go")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(helper, script, 0o755)
	img := filepath.Join(dir, "disk.img")
	mustCLI(t, "mkfs", "-q", img, "16M")
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	mountEnv := []string{"PATH=/sbin:/bin:/usr/sbin:/usr/bin"}

	// Not beside the helper: a clear error (unless this machine has one
	// installed where the helper looks).
	cmd := exec.Command(helper, img, mnt, "-o", "rw")
	cmd.Env = mountEnv
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		exec.Command("fusermount3", "-u", mnt).Run()
		waitClosed(t, img)
		t.Logf("an ext4go is installed where mount(8) finds it: the not-found message was not tried")
	case !strings.Contains(string(out), "ext4go not found") || !strings.Contains(string(out), "/usr/local/bin"):
		t.Errorf("without ext4go the helper says: %v\n%s", err, out)
	}

	if err := os.Rename(bin, filepath.Join(dir, "ext4go")); err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command(helper, img, mnt, "-o", "rw")
	cmd.Env = mountEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mount.fuse.ext4go: %v\n%s", err, out)
	}
	unmounted := false
	defer func() {
		if !unmounted {
			exec.Command("fusermount3", "-uz", mnt).Run()
		}
	}()
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	found := false
	for _, l := range strings.Split(string(mi), "\n") {
		f := strings.Fields(l)
		if len(f) > 8 && f[4] == mnt {
			for i, x := range f {
				if x == "-" && i+1 < len(f) {
					found = f[i+1] == "fuse.ext4go"
					if !found {
						t.Errorf("the mount's type is %s, want fuse.ext4go", f[i+1])
					}
				}
			}
		}
	}
	if !found {
		t.Errorf("%s is not in mountinfo as fuse.ext4go", mnt)
	}
	if _, err := exec.LookPath("findmnt"); err == nil {
		out, _ := exec.Command("findmnt", "-n", "-t", "fuse.ext4go", "-o", "TARGET").Output()
		if !strings.Contains(string(out), mnt) {
			t.Errorf("findmnt -t fuse.ext4go does not list %s: %q", mnt, out)
		}
	}
	if err := os.WriteFile(filepath.Join(mnt, "through-helper"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v\n%s", err, out)
	}
	unmounted = true
	waitClosed(t, img)
	testutil.RequireFsckClean(t, img)
	if out := mustCLI(t, "cat", img, "/through-helper"); out != "hello" {
		t.Errorf("the file written through the helper's mount: %q", out)
	}

	// subtype= (none): the plain type fuse, as xfstests with FSTYP=fuse
	// wants it.
	cmd = exec.Command(helper, img, mnt, "-o", "rw,subtype=")
	cmd.Env = mountEnv
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mount.fuse.ext4go -o subtype=: %v\n%s", err, out)
	}
	mi, _ = os.ReadFile("/proc/self/mountinfo")
	exec.Command("fusermount3", "-u", mnt).Run()
	waitClosed(t, img)
	if !strings.Contains(string(mi), " "+mnt+" ") || !strings.Contains(string(mi), " - fuse ") {
		t.Errorf("with subtype= the mount is not of type fuse")
	}
}
