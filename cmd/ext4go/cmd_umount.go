//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ext4go/ext4go/internal/dev"
)

// umount unmounts dir and waits for the image to be closed. A FUSE
// unmount returns as soon as the kernel has let go of the mount, while the
// daemon still commits, checkpoints and marks the image clean: a program
// that reads the image right after umount(8) (e2fsck, cp, a kernel mount)
// may see it half closed. The daemon holds the image locked until it is
// done (internal/dev: a lock on a file, O_EXCL on a Linux block device),
// so the wait is for that lock. The mount table and the unmount are the
// system's: umount_linux.go, umount_bsd.go. image is found from the
// mount's source when empty; the wait lasts at most timeout.
func umount(e *env, dir, image string, timeout time.Duration) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	source, fstype, err := mountOf(dir)
	if err != nil {
		return err
	}
	if !isFUSE(fstype) {
		return fmt.Errorf("%s: a %s mount, not ext4go's (FUSE)", dir, fstype)
	}
	if image == "" {
		image = source
	}
	fi, err := os.Stat(image)
	if err != nil || !(fi.Mode().IsRegular() || fi.Mode()&os.ModeDevice != 0) {
		return fmt.Errorf("%s: the mount's source %q is not an image (mounted with fsname=?): name it with -i IMAGE", dir, image)
	}
	if err := unmount(dir); err != nil {
		return err
	}
	return waitImageClosed(e, image, fi.Mode().IsRegular(), timeout)
}

// waitImageClosed waits until the daemon has let go of image: a shared
// lock of a file, or (deviceFree) an exclusive open of a block device,
// succeeds.
func waitImageClosed(e *env, image string, regular bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	told := false
	for {
		free, err := imageFree(image, regular)
		if err != nil {
			return err
		}
		if free {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: still held %v after the unmount (is another program using it?)", image, timeout)
		}
		if !told && time.Until(deadline) < timeout-time.Second {
			fmt.Fprintf(e.stderr, "ext4go umount: waiting for the daemon to close %s\n", image)
			told = true
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func imageFree(image string, regular bool) (bool, error) {
	if !regular {
		return deviceFree(image)
	}
	f, err := os.Open(image)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = dev.LockImage(f, false)
	if errors.Is(err, dev.ErrBusy) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", image, err)
	}
	dev.UnlockImage(f)
	return true, nil
}
