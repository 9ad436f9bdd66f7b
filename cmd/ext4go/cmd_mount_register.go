package main

import (
	"fmt"
	"strings"
	"time"
)

// mount and umount exist on every system; where FUSE mounts cannot be
// built they say why (cmd_mount_unavailable.go).
func init() {
	register(&command{name: "mount", usage: "[-f] [-o OPTIONS] IMAGE DIR",
		summary: "mount the image on DIR through FUSE (journalled, many requests at once)", run: runMount})
	examples["mount"] = []string{"ext4go mount disk.img /mnt/disk", "ext4go mount -o ro,allow_other disk.img /mnt/disk", "ext4go umount /mnt/disk   # or fusermount3 -u, which returns before the image is closed"}
	register(&command{name: "umount", usage: "[-i IMAGE] [--timeout D] DIR",
		summary: "unmount an ext4go mount and wait until its daemon has closed the image (committed, checkpointed, clean)", run: runUmount})
	examples["umount"] = []string{"ext4go umount /mnt/disk", "ext4go umount -i disk.img /mnt/disk"}
}

// runMount parses mount's command line, on every system, so that its help
// is there too; mount does the rest (cmd_mount.go, or
// cmd_mount_unavailable.go where FUSE cannot be built).
func runMount(e *env, args []string) error {
	s := newFlags(commands["mount"], e)
	fg := s.Bool("f", false, "stay in the foreground (else the command returns once the mount is live, leaving a daemon)")
	var olist []string
	s.add("o", "OPTIONS", "comma-separated mount options: ro, rw, allow_other, default_permissions, uid=N, gid=N (owner of new files), "+
		"noatime, relatime (default), strictatime, lazytime, nolazytime (default), delalloc (default), nodelalloc, commit=SECONDS, errors=continue|remount-ro|panic (default: the superblock's), fsname=NAME, subtype= (the type is then fuse, not fuse.ext4go), writeback_cache, no_readdirplus, max_readahead=BYTES, cached_write_only, uring, uring_idle, debug, "+
		"suid, dev, exec (and their no- forms)", "",
		func(v string) error { olist = append(olist, strings.Split(v, ",")...); return nil })
	if err := s.Parse(args); err != nil {
		return err
	}
	if s.NArg() != 2 {
		return usagef("want IMAGE DIR")
	}
	image, dir := s.Arg(0), s.Arg(1)
	return mount(e, args, image, dir, *fg, olist)
}

// runUmount parses umount's command line, on every system; umount does
// the rest.
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
	return umount(e, s.Arg(0), image, timeout)
}
