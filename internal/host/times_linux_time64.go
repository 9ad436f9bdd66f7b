//go:build linux && (386 || arm || mips || mipsle || ppc)

package host

import "golang.org/x/sys/unix"

// sysUtimensat takes 64-bit seconds here (Linux 5.1): utimensat's
// timespec has 32.
const sysUtimensat = unix.SYS_UTIMENSAT_TIME64
