package host

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelTimespec is the kernel's struct __kernel_timespec: 64-bit seconds
// and nanoseconds on every platform. On 64-bit ones it is struct
// timespec; on 32-bit ones utimensat_time64 takes it, where utimensat's
// timespec has 32-bit seconds and ends in 2038 (times_linux_*.go).
type kernelTimespec struct{ sec, nsec int64 }

// SetTimes sets the access and modification times of a host file: the
// file open as fd when fd >= 0 (utimensat with a NULL path, futimens),
// else name in dirfd, not following a last symlink. ext4 keeps times up
// to the year 2446; they all go through.
func SetTimes(fd, dirfd int, name string, atime, mtime time.Time) error {
	ts := [2]kernelTimespec{{atime.Unix(), int64(atime.Nanosecond())}, {mtime.Unix(), int64(mtime.Nanosecond())}}
	tp := uintptr(unsafe.Pointer(&ts))
	var errno unix.Errno
	if fd >= 0 {
		_, _, errno = unix.Syscall6(sysUtimensat, uintptr(fd), 0, tp, 0, 0, 0)
	} else {
		p, err := unix.BytePtrFromString(name)
		if err != nil {
			return err
		}
		_, _, errno = unix.Syscall6(sysUtimensat, uintptr(dirfd), uintptr(unsafe.Pointer(p)), tp, unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	}
	if errno != 0 {
		return errno
	}
	return nil
}
