//go:build darwin || freebsd

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// mountOf returns the source and type of the mount on dir (the last one:
// the mount a path reaches), from the mount table (getfsstat).
func mountOf(dir string) (source, fstype string, err error) {
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real // macOS: /tmp is /private/tmp in the table
	}
	n, err := unix.Getfsstat(nil, unix.MNT_NOWAIT)
	if err != nil {
		return "", "", err
	}
	table := make([]unix.Statfs_t, n+8)
	if n, err = unix.Getfsstat(table, unix.MNT_NOWAIT); err != nil {
		return "", "", err
	}
	found := false
	for _, st := range table[:n] {
		if unix.ByteSliceToString(st.Mntonname[:]) == dir {
			source, fstype, found = unix.ByteSliceToString(st.Mntfromname[:]), unix.ByteSliceToString(st.Fstypename[:]), true
		}
	}
	if !found {
		return "", "", fmt.Errorf("%s: not mounted", dir)
	}
	return source, fstype, nil
}

// isFUSE reports whether a mount of type fstype is a FUSE mount: macfuse
// (osxfuse before macFUSE 4) on macOS, fusefs on FreeBSD.
func isFUSE(fstype string) bool { return strings.Contains(fstype, "fuse") }

// unmount detaches dir: unmount(2) as root, else umount(8), which lets the
// user who made a FUSE mount take it down.
func unmount(dir string) error {
	if os.Geteuid() == 0 {
		if err := unix.Unmount(dir, 0); err != nil {
			return fmt.Errorf("unmounting %s: %w", dir, err)
		}
		return nil
	}
	if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("umount %s: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// deviceFree cannot see the daemon let go of a disk here (there is no
// exclusive open to try, as Linux's O_EXCL): the unmount is taken as the
// end, and the image is written by then unless the daemon is still
// checkpointing.
func deviceFree(string) (bool, error) { return true, nil }
