package dev

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// InUse reports the mounts macOS has of the image at path, from the mount
// table (getfsstat): for a disk (/dev/diskN, /dev/rdiskN, or a slice
// /dev/diskNsM), the mounts of it and of its slices; for an image file,
// the mounts whose source is that file (a FUSE mount of it). It returns
// nil when nothing has it. Disks that an APFS container synthesizes from
// a slice are not traced back to it (that takes IOKit).
func InUse(path string) (*Usage, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var match func(source string) bool
	switch {
	case fi.Mode()&os.ModeDevice != 0:
		disk := diskName(path)
		match = func(source string) bool {
			m := diskName(source)
			return m == disk || strings.HasPrefix(m, disk+"s")
		}
	case fi.Mode().IsRegular():
		match = func(source string) bool {
			sfi, err := os.Stat(source)
			return err == nil && os.SameFile(fi, sfi)
		}
	default:
		return nil, nil
	}
	n, err := unix.Getfsstat(nil, unix.MNT_NOWAIT)
	if err != nil {
		return nil, err
	}
	table := make([]unix.Statfs_t, n+8) // room for mounts made meanwhile
	n, err = unix.Getfsstat(table, unix.MNT_NOWAIT)
	if err != nil {
		return nil, err
	}
	u := &Usage{}
	for _, st := range table[:n] {
		source := unix.ByteSliceToString(st.Mntfromname[:])
		if !match(source) {
			continue
		}
		u.Mounts = append(u.Mounts, Mount{Point: unix.ByteSliceToString(st.Mntonname[:]), Device: source,
			ReadOnly: st.Flags&unix.MNT_RDONLY != 0})
	}
	if len(u.Mounts) == 0 {
		return nil, nil
	}
	return u, nil
}

// diskName is a disk's name without /dev/ and without the r of its raw
// (character) twin: /dev/rdisk2s1 and /dev/disk2s1 are both disk2s1.
func diskName(p string) string {
	name, ok := strings.CutPrefix(p, "/dev/")
	if !ok {
		return filepath.Clean(p)
	}
	if strings.HasPrefix(name, "rdisk") {
		name = name[1:]
	}
	return name
}
