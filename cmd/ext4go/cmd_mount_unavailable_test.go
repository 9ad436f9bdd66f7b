//go:build !((linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd)

package main

import (
	"runtime"
	"strings"
	"testing"
)

// TestMountUnavailable: where FUSE mounts cannot be built, mount and
// umount exist and say why.
func TestMountUnavailable(t *testing.T) {
	want := "FUSE mounts need Linux, macOS (macFUSE) or FreeBSD"
	if runtime.GOOS == "linux" {
		want = "the FUSE library (go-fuse v2.12.1) does not build for 32-bit Linux"
	}
	for _, args := range [][]string{{"mount", "disk.img", "dir"}, {"umount", "dir"}} {
		code, _, errs := cli("", args...)
		if code != 1 || !strings.Contains(errs, "ext4go "+args[0]+": not available on ") || !strings.Contains(errs, want) {
			t.Errorf("ext4go %s: exit %d, %q", strings.Join(args, " "), code, errs)
		}
	}
}
