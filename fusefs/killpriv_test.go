//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// killprivSteps write, truncate and chown setuid, setgid and capable
// files as root and as a stranger (user 1234).
var killprivSteps = []string{
	"touch a && chmod 6777 a && setpriv --reuid 1234 --regid 1234 --clear-groups sh -c 'echo x >> a' && stat -c %a a",
	"touch b && chmod 6767 b && setpriv --reuid 1234 --regid 1234 --clear-groups sh -c 'echo x >> b' && stat -c %a b",
	"touch c && chmod 6777 c && echo x >> c && stat -c %a c",
	"touch d && chmod 6777 d && setpriv --reuid 1234 --regid 1234 --clear-groups truncate -s 100 d && stat -c '%a %s' d",
	"touch e && chmod 6777 e && setpriv --reuid 1234 --regid 1234 --clear-groups sh -c ': > e' && stat -c %a e",
	"touch f && chmod 6755 f && chown 5 f && stat -c '%a %u' f",
	"touch g && chmod 6755 g && chown -h 0:7 g && stat -c '%a %g' g",
	"touch h && setcap cap_net_raw+ep h && echo x >> h && getcap h; getfattr -m - h",
	"touch i && setcap cap_net_raw+ep i && truncate -s 0 i && getfattr -m - i",
	"touch j && setcap cap_net_raw+ep j && chown 9 j && getfattr -m - j",
	"mkdir k && chmod 6777 k && chown 5 k && stat -c %a k",
	"mkfifo l && chmod 6755 l && chown 5:5 l && stat -c %a l",
	"mknod m c 1 3 && chmod 6755 m && chown 5 m && stat -c %a m",
	"mkfifo n && chown 1234:1234 n && chmod 6775 n && setpriv --reuid 1234 --regid 1234 --clear-groups chgrp 1234 n && stat -c %a n",
	// fallocate drops them as a write does (xfstests generic/683-685).
	"touch o && chmod 6666 o && setpriv --reuid 1234 --regid 1234 --clear-groups fallocate -l 4096 o && stat -c %a o",
	"touch p && chmod 6676 p && setpriv --reuid 1234 --regid 1234 --clear-groups fallocate -l 8192 p && stat -c %a p",
	"touch q && chmod 6666 q && truncate -s 8192 q && setpriv --reuid 1234 --regid 1234 --clear-groups fallocate -p -o 0 -l 4096 q && stat -c %a q",
	"touch r && chmod 6676 r && truncate -s 8192 r && setpriv --reuid 1234 --regid 1234 --clear-groups fallocate -z -o 0 -l 4096 r && stat -c %a r",
	"touch s && chmod 6777 s && fallocate -l 4096 s && stat -c %a s",
	"touch t && setcap cap_net_raw+ep t && fallocate -l 4096 t && getfattr -m - t",
}

// TestMountKillPriv: the server drops setuid and setgid bits and file
// capabilities where the kernel's ext4 does (FUSE_HANDLE_KILLPRIV_V2):
// each step gives the output and status it gives on the kernel's loop
// mount, the trees (modes and xattrs included) match, and the image is
// e2fsck-clean and reads back on the kernel the same.
func TestMountKillPriv(t *testing.T) {
	requirePrograms(t, "setpriv", "setcap", "getcap", "getfattr", "truncate")
	tw := newTwin(t, 32<<20, 0o777)
	tw.sameSteps(t, killprivSteps)
	opts := testutil.MountCompareOptions()
	opts.Checks &^= testutil.CheckMtime
	opts.Checks |= testutil.CheckNlink | testutil.CheckXattrs | testutil.CheckOwner | testutil.CheckSpecialBits
	tw.finish(t, opts)
}
