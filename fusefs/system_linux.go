//go:build amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le

package fusefs

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// What the Linux kernel's FUSE offers beyond the other systems'.

// capHandleKillprivV2 asks the kernel to leave the dropping of setuid bits
// and file capabilities on write, truncate and chown to the server.
const capHandleKillprivV2 = fuse.CAP_HANDLE_KILLPRIV_V2

// errCorrupted is the kernel's ext4's EFSCORRUPTED.
const errCorrupted = syscall.EUCLEAN

// setReadahead sets the readahead of the FUSE mount on dir to ra bytes.
// Its requests are still at most MaxWrite long: 1 MiB of readahead is one
// READ of 1 MiB instead of eight of 128 KiB (sequential 1 MiB reads 30%
// faster here).
func setReadahead(dir string, ra int) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return err
	}
	path := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev))
	return os.WriteFile(path, []byte(strconv.Itoa((ra+1023)/1024)), 0)
}

// detachMount unmounts dir lazily (MNT_DETACH), for a mount something
// still holds.
func detachMount(dir string) { unix.Unmount(dir, unix.MNT_DETACH) }
