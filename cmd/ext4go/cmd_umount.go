package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

func init() {
	register(&command{name: "umount", usage: "[-i IMAGE] [--timeout D] DIR",
		summary: "unmount an ext4go mount and wait until its daemon has closed the image (committed, checkpointed, clean)", run: runUmount})
	examples["umount"] = []string{"ext4go umount /mnt/disk", "ext4go umount -i disk.img /mnt/disk"}
}

// runUmount unmounts DIR and waits for the image to be closed. A FUSE
// unmount returns as soon as the kernel has let go of the mount, while the
// daemon still commits, checkpoints and marks the image clean: a program
// that reads the image right after umount(8) (e2fsck, cp, a kernel mount)
// may see it half closed. The daemon holds the image locked until it is
// done (internal/dev: flock on a file, O_EXCL on a block device), so the
// wait is for that lock.
func runUmount(e *env, args []string) error {
	s := newFlags(commands["umount"], e)
	var image string
	s.add("i", "IMAGE", "the mounted image, when the mount's source does not name it (fsname=)", "",
		func(v string) error { image = v; return nil })
	timeout := 5 * time.Minute
	s.add("timeout", "D", "how long to wait for the daemon to close the image (default 5m)", "",
		func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--timeout %q: want a positive duration such as 30s", v)
			}
			timeout = d
			return nil
		})
	if err := s.Parse(args); err != nil {
		return err
	}
	if s.NArg() != 1 {
		return usagef("want DIR")
	}
	dir, err := filepath.Abs(s.Arg(0))
	if err != nil {
		return err
	}
	source, fstype, err := mountOf(dir)
	if err != nil {
		return err
	}
	if fstype != "fuse" && fstype != "fuse.ext4go" && fstype != "fuseblk" {
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

// mountOf returns the source and type of the mount on dir (the last one:
// the mount a path reaches).
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

// waitImageClosed waits until the daemon has let go of image: a shared
// flock of a file, or an exclusive open of a block device, succeeds.
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
	f, err := os.Open(image)
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", image, err)
	}
	unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return true, nil
}
