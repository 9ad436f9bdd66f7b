package main

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
