//go:build linux && !(amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package ext4go_test

import "testing"

// The hostile-image harness's mount phase needs fusefs, which 32-bit
// Linux builds do not have (go-fuse does not build there).

func hostileMountEnabled() (bool, string) { return false, "no FUSE mount on 32-bit Linux" }

func hostileMount(*testing.T, string, string, int, func(class, format string, args ...any)) string {
	return "not tried"
}
