// Package mkfs makes a new, empty ext2, ext3 or ext4 filesystem laid out
// exactly as mke2fs 1.47.0 lays it out with the /etc/mke2fs.conf that
// e2fsprogs 1.47 ships on Debian (see Options for the defaults).
//
// Making a filesystem has two steps. The plan (plan.go) resolves the options
// the way mke2fs's PRS and ext2fs_initialize do: block size and inode ratio
// from the usage type ("floppy" below 3 MiB, "small" below 512 MiB), the
// feature set, blocks and inodes per group, reserved GDT blocks, journal size.
// It does no I/O, so every bad option is reported before anything is written.
// The build (build.go) then replays mke2fs's allocations in the same order on
// an in-memory block bitmap — group tables (ext2fs_allocate_tables, with the
// flex_bg packing), the root directory, lost+found and its expansion, the
// resize inode, the journal near the middle of the filesystem, the orphan
// file — so every block lands where mke2fs puts it. Finally write.go writes
// only metadata: superblocks and descriptor tables with their backups, the
// bitmaps that are not BLOCK_UNINIT/INODE_UNINIT, the few inode table blocks
// holding the reserved inodes, and the blocks of the files mke2fs creates.
//
// Invariants:
//   - Same Options (UUID, hash seed, time given) give byte-identical images.
//   - Nothing is written unless the whole plan is valid.
//   - With lazy init (the default) on a device that reads back zeros (an image
//     file, which Format or a Zeroer device punches first), inode tables and
//     the journal body are not written, so a 100 GiB image costs a few MiB of
//     writes and stays sparse; otherwise the blocks mke2fs zeroes are zeroed.
//
// The package holds no global state and no locks; a build is single-threaded.
package mkfs
