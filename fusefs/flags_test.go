//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// flagSteps set and clear inode flags with chattr and try every kind of
// change the immutable and append-only flags forbid.
var flagSteps = []string{
	"touch f && chattr +i f && lsattr -d f",
	"echo x > f", "echo x >> f", "rm f", "mv f g", "ln f h", "chmod 600 f", "chown 5 f",
	"touch f", "touch -d 2020-01-01 f", "setfattr -n user.a -v 1 f", "truncate -s 0 f",
	"fallocate -l 1M f",
	"chattr -i f && lsattr -d f && rm f",
	"touch a && chattr +a a && echo x >> a && cat a",
	"echo y > a", "truncate -s 0 a", "rm a", "ln a b", "chmod 600 a",
	"fallocate -l 1M a && stat -c %s a", "fallocate -p -o 0 -l 4096 a",
	"setfattr -n user.a -v 1 a",
	"touch a && touch -a a && touch -m a", "touch -d 2020-01-01 a",
	"chattr -a a && echo z > a && cat a",
	"mkdir d && touch d/x d/w && chattr +a d && lsattr -d d",
	"touch d/y && ls d", "rm d/x", "mv d/y d/z", "touch moved && mv moved d/moved && ls d",
	"mv d/w d/x", "rmdir d",
	"chattr -a d && rm d/x && ls d",
	"mkdir i && chattr +i i && touch i/x", "mkdir i/sub", "chattr -i i && touch i/x && ls i",
	"touch g && chattr +d +A +S +s +u g && lsattr -d g",
	"chattr +T +D g && lsattr -d g",
	"mkdir t && chattr +T +D t && lsattr -d t",
	"mkfifo p && chattr +d +A p; lsattr -d p",
	"chattr -d -A -S -s -u g && lsattr -d g",
	"mkdir x && chattr +x x && touch x/f && mkdir x/d && mknod x/p p && lsattr -d x x/f x/d x/p",
	"chattr -x x/f && lsattr -d x/f && chattr -x x && touch x/g && lsattr -d x/g",
}

// TestMountFlags: chattr and lsattr on an ext4go mount behave as on the
// kernel's ext4 (FS_IOC_GETFLAGS and FS_IOC_SETFLAGS served): each step
// of flagSteps gives the output and status it gives on the kernel's loop
// mount, the trees match, and the image is e2fsck-clean and reads back
// on the kernel with the same flags.
func TestMountFlags(t *testing.T) {
	requirePrograms(t, "chattr", "lsattr", "setfattr", "fallocate", "truncate")
	tw := newTwin(t, 32<<20, 0)
	tw.sameSteps(t, flagSteps)
	opts := testutil.MountCompareOptions()
	opts.Checks &^= testutil.CheckMtime
	opts.Checks |= testutil.CheckNlink | testutil.CheckXattrs | testutil.CheckOwner
	mp := tw.finish(t, opts)
	if got, want := runSteps(t, mp, []string{"lsattr -R ."}), runSteps(t, tw.kmp, []string{"lsattr -R ."}); got[0] != want[0] {
		t.Errorf("lsattr -R after the unmount:\n%s\nkernel:\n%s", got[0], want[0])
	}
}
