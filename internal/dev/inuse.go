package dev

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInUseUnknown is InUse's error on a system where it cannot tell who
// has an image (inuse_other.go); the callers then go on as if nothing did.
var ErrInUseUnknown = errors.New("cannot tell whether the image is mounted")

// Mount is one kernel mount of an image.
type Mount struct {
	Point    string // the mount point
	Device   string // the block device mounted (a loop device for an image file)
	ReadOnly bool
	// Loop is set when the image is a file mounted through a loop device.
	Loop bool
}

// Usage is what else has an image: the kernel's mounts of it, and the loop
// devices backed by it (attached whether mounted or not). How InUse finds
// them depends on the system: inuse_linux.go (mountinfo, loop devices),
// inuse_darwin.go (getfsstat), inuse_other.go (not known).
type Usage struct {
	Mounts []Mount
	Loops  []string // loop devices whose backing file is the image
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
