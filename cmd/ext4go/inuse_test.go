//go:build linux

package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/testutil"
)

func imageSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// writeCommandLines are one use of every command that writes an image.
func writeCommandLines(img, host string) [][]string {
	return [][]string{
		{"put", "-q", img, host, "/put"},
		{"mkdir", img, "/newdir"},
		{"rm", img, "/rmme"},
		{"mv", img, "/mvme", "/moved"},
		{"ln", "-s", img, "target", "/link"},
		{"chmod", img, "600", "/file"},
		{"chown", img, "1:1", "/file"},
		{"touch", img, "/touched"},
		{"truncate", "-s", "10", img, "/file"},
		{"fallocate", "-l", "4096", img, "/file"},
		{"setfattr", "-n", "user.a", "-v", "b", img, "/file"},
		{"write", img, "/written"},
		{"batch", img},
		{"mkfs", "-F", img},
	}
}

// TestRefuseMounted: while the kernel has the image mounted read-write
// (through a loop device), every write command and mkfs refuses it, names
// the mount point, and leaves it unchanged byte for byte; read commands
// work, with a warning; read-only mounts refuse writes too and read
// without a warning; after the unmount the same commands work.
func TestRefuseMounted(t *testing.T) {
	testutil.RequireMount(t)
	img := filepath.Join(t.TempDir(), "img")
	// No lazy init and a long commit interval: the kernel leaves the
	// image alone while the commands run.
	testutil.Mke2fs(t, img, 16<<20, "-t", "ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0")
	host := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(host, []byte("host data"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/file", "/rmme", "/mvme"} {
		mustCLI(t, "put", "-q", img, host, p)
	}
	for _, ro := range []bool{false, true} {
		mp := testutil.Mount(t, img, ro, "commit=300")
		before := imageSum(t, img)
		for _, args := range writeCommandLines(img, host) {
			code, _, errs := cli("touch /x\n", args...)
			if code != 1 {
				t.Errorf("ro=%v: ext4go %q on a mounted image: exit %d, want 1", ro, args, code)
			}
			if !strings.Contains(errs, mp) || !strings.Contains(errs, "/dev/loop") {
				t.Errorf("ro=%v: ext4go %q: message does not name the mount point %s and loop device:\n%s", ro, args, mp, errs)
			}
		}
		// The loop device, a mounted block device, is refused the same way.
		u, err := dev.InUse(img)
		if err != nil || u == nil || len(u.Mounts) == 0 {
			t.Fatalf("InUse: %+v, %v", u, err)
		}
		for _, args := range [][]string{{"mkdir", u.Mounts[0].Device, "/x"}, {"mkfs", "-F", u.Mounts[0].Device}} {
			if code, _, errs := cli("", args...); code != 1 || !strings.Contains(errs, mp) {
				t.Errorf("ro=%v: ext4go %q: exit %d, want 1 naming %s:\n%s", ro, args, code, mp, errs)
			}
		}
		if after := imageSum(t, img); after != before {
			t.Errorf("ro=%v: the refused commands changed the mounted image", ro)
		}
		code, out, errs := cli("", "cat", img, "/file")
		if code != 0 || out != "host data" {
			t.Errorf("ro=%v: cat of a mounted image: exit %d, %q, %s", ro, code, out, errs)
		}
		if warned := strings.Contains(errs, "stale"); warned == ro {
			t.Errorf("ro=%v: cat warned %v about a stale read:\n%s", ro, warned, errs)
		}
		testutil.Unmount(t, mp)
	}
	for _, args := range writeCommandLines(img, host) {
		if args[0] == "mkfs" {
			continue
		}
		if code, _, errs := cli("touch /x\n", args...); code != 0 {
			t.Errorf("after unmount: ext4go %q: exit %d\n%s", args, code, errs)
		}
	}
	testutil.RequireFsckClean(t, img)
	mustCLI(t, "mkfs", "-F", "-q", img)
	testutil.RequireFsckClean(t, img)
}
