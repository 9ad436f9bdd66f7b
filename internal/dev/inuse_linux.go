package dev

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/mountinfo"
)

// InUse reports whether the kernel has the image at path: a block device
// in /proc/self/mountinfo, or an image file backing a loop device
// (/sys/block/loop*/loop/backing_file, compared by device and inode) that
// may itself be mounted. It returns nil when nothing has it.
func InUse(path string) (*Usage, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, err
	}
	u := &Usage{}
	devs := map[uint64]string{} // device number -> its /dev name
	loop := map[string]bool{}   // the /dev names that are loop devices
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		devs[st.Rdev] = path
		// A whole disk is in use when one of its partitions is mounted.
		for nr, name := range partitions(st.Rdev) {
			devs[nr] = name
		}
	case unix.S_IFREG:
		loops, err := filepath.Glob("/sys/block/loop*")
		if err != nil {
			return nil, err
		}
		for _, l := range loops {
			b, err := os.ReadFile(filepath.Join(l, "loop", "backing_file"))
			if err != nil {
				continue // not attached
			}
			backing := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
			var bst unix.Stat_t
			if unix.Stat(backing, &bst) != nil || bst.Dev != st.Dev || bst.Ino != st.Ino {
				continue
			}
			name := "/dev/" + filepath.Base(l)
			u.Loops = append(u.Loops, name)
			if nr, ok := devNumber(filepath.Join(l, "dev")); ok {
				devs[nr] = name
				loop[name] = true
			}
		}
	default:
		return nil, nil
	}
	if len(devs) > 0 {
		mounts, err := mountsOf(devs)
		if err != nil {
			return nil, err
		}
		for i := range mounts {
			mounts[i].Loop = loop[mounts[i].Device]
		}
		u.Mounts = mounts
	}
	if len(u.Mounts) == 0 && len(u.Loops) == 0 {
		return nil, nil
	}
	return u, nil
}

// partitions returns the partitions of the disk with device number nr,
// from sysfs (/sys/dev/block/MAJ:MIN/NAMEn/partition), with their /dev
// names.
func partitions(nr uint64) map[uint64]string {
	dir := fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(nr), unix.Minor(nr))
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[uint64]string{}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if _, err := os.Stat(filepath.Join(p, "partition")); err != nil {
			continue
		}
		if pnr, ok := devNumber(filepath.Join(p, "dev")); ok {
			out[pnr] = "/dev/" + e.Name()
		}
	}
	return out
}

// devNumber reads a sysfs "major:minor" file.
func devNumber(p string) (uint64, bool) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false
	}
	return parseMajorMinor(strings.TrimSpace(string(b)))
}

func parseMajorMinor(s string) (uint64, bool) {
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, false
	}
	a, err1 := strconv.ParseUint(maj, 10, 32)
	b, err2 := strconv.ParseUint(min, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return unix.Mkdev(uint32(a), uint32(b)), true
}

// mountsOf lists the mounts of the given devices.
func mountsOf(devs map[uint64]string) ([]Mount, error) {
	all, err := mountinfo.Read()
	if err != nil {
		return nil, err
	}
	var out []Mount
	for _, m := range all {
		if name, ok := devs[m.Dev]; ok {
			out = append(out, Mount{Point: m.Point, Device: name, ReadOnly: m.ReadOnly})
		}
	}
	return out, nil
}
