package dev

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// lockBacking locks the image file behind a loop device, as Open locks an
// image file: then a writer through the loop device and one through the
// file (or through another loop device of the same file) see each other.
// The kernel's exclusive open (O_EXCL) is per block device and flock is
// per file, and neither sees the other: without this, ext4go put on
// /dev/loopN went on while ext4go mount served the file it is backed by,
// and two loop devices of one file both opened writable.
//
// It returns the backing file, open and locked (the caller keeps it until
// Close), or nil when dev is no loop device or its backing file cannot be
// opened here (deleted, or in another mount namespace): then only the
// device's own claim holds.
func lockBacking(dev *os.File, writable bool) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dev.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return nil, nil
	}
	// kernel: loop_attr_backing_file_show (drivers/block/loop.c).
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/loop/backing_file", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
	if err != nil {
		return nil, nil // no loop device, or not attached
	}
	path := strings.TrimSuffix(string(b), "\n")
	if strings.HasSuffix(path, " (deleted)") {
		return nil, nil
	}
	back, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil
	}
	var bst unix.Stat_t
	if unix.Fstat(int(back.Fd()), &bst) != nil || bst.Mode&unix.S_IFMT != unix.S_IFREG {
		back.Close()
		return nil, nil
	}
	if err := LockImage(back, writable); err != nil {
		back.Close()
		if errors.Is(err, ErrBusy) {
			return nil, fmt.Errorf("%s: %w (its backing file %s is locked by another writer)", dev.Name(), ErrBusy, path)
		}
		return nil, fmt.Errorf("%s: backing file %s: %w", dev.Name(), path, err)
	}
	return back, nil
}
