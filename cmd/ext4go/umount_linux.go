//go:build amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

// mountOf returns the source and type of the mount on dir (the last one:
// the mount a path reaches), from /proc/self/mountinfo.
func mountOf(dir string) (source, fstype string, err error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return "", "", err
	}
	found := false
	for _, m := range mounts {
		if m.Point == dir {
			source, fstype, found = m.Source, m.FSType, true
		}
	}
	if !found {
		return "", "", fmt.Errorf("%s: not mounted", dir)
	}
	return source, fstype, nil
}

// isFUSE reports whether a mount of type fstype is a FUSE mount.
func isFUSE(fstype string) bool {
	return fstype == "fuse" || fstype == "fuse.ext4go" || fstype == "fuseblk"
}

// unmount detaches dir: umount(2) as root, else fusermount3 -u.
func unmount(dir string) error {
	if os.Geteuid() == 0 {
		if err := unix.Unmount(dir, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", dir, err)
		}
		return nil
	}
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("fusermount3 -u %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// deviceFree reports whether the daemon has let go of the block device
// image: an exclusive open (O_EXCL) succeeds.
func deviceFree(image string) (bool, error) {
	fd, err := unix.Open(image, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EBUSY) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", image, err)
	}
	unix.Close(fd)
	return true, nil
}
