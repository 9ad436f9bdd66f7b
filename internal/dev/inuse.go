package dev

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mount is one kernel mount of an image.
type Mount struct {
	Point    string // the mount point
	Device   string // the block device mounted (a loop device for an image file)
	ReadOnly bool
	// Loop is set when the image is a file mounted through a loop device.
	Loop bool
}

// Usage is what else has an image: the kernel's mounts of it, and the loop
// devices backed by it (attached whether mounted or not).
type Usage struct {
	Mounts []Mount
	Loops  []string // loop devices whose backing file is the image
}

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

// mountsOf lists the mounts of the given devices from /proc/self/mountinfo
// (kernel: Documentation/filesystems/proc.rst, 3.5).
func mountsOf(devs map[uint64]string) ([]Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Mount
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		nr, ok := parseMajorMinor(fields[2])
		if !ok {
			continue
		}
		name, ok := devs[nr]
		if !ok {
			continue
		}
		ro := false
		for _, o := range strings.Split(fields[5], ",") {
			ro = ro || o == "ro"
		}
		out = append(out, Mount{Point: unescapeMountinfo(fields[4]), Device: name, ReadOnly: ro})
	}
	return out, sc.Err()
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Writable reports whether any mount may write the image.
func (u *Usage) Writable() bool {
	for _, m := range u.Mounts {
		if !m.ReadOnly {
			return true
		}
	}
	return false
}

// String says who has the image, for messages ("mounted on /mnt/x
// (through /dev/loop3)").
func (u *Usage) String() string {
	var parts []string
	for _, m := range u.Mounts {
		s := "mounted on " + m.Point
		if m.ReadOnly {
			s = "mounted read-only on " + m.Point
		}
		if m.Loop {
			s += " (through " + m.Device + ")"
		}
		parts = append(parts, s)
	}
	if len(u.Mounts) == 0 {
		for _, l := range u.Loops {
			parts = append(parts, fmt.Sprintf("attached to %s", l))
		}
	}
	return strings.Join(parts, ", ")
}
