//go:build linux && !(386 || arm || mips || mipsle || ppc)

package host

import "golang.org/x/sys/unix"

// sysUtimensat: timespec has 64-bit seconds on 64-bit platforms.
const sysUtimensat = unix.SYS_UTIMENSAT
