// Package mkfs makes a new, empty ext2, ext3 or ext4 filesystem laid out
// exactly as mke2fs 1.47.0 lays it out with the /etc/mke2fs.conf that
// e2fsprogs 1.47 ships on Debian (see Options for the defaults).
//
// Making a filesystem has three steps. The plan (plan.go) resolves the
// options the way mke2fs's PRS and ext2fs_initialize do: block size and inode
// ratio from the usage type ("floppy" below 3 MiB, "small" below 512 MiB,
// "big" from 4 TiB, "huge" from 16 TiB), the feature set, blocks and inodes
// per group, the dropped short last group, reserved GDT blocks, the journal
// size. It does no I/O, so every bad option is reported before anything is
// written. The build (build.go, files.go, journal.go) then replays mke2fs's
// allocations, in mke2fs's order, on an in-memory block bitmap: the group
// tables (ext2fs_allocate_tables with the flex_bg packing), the root
// directory, lost+found and its expansion, the reserved and bad-block inodes,
// the resize inode, the journal near the middle of the filesystem, the orphan
// file — so that every block lands where mke2fs puts it. Finally write.go
// writes only metadata: superblocks and descriptor tables with their backups,
// the bitmaps of groups that are not BLOCK_UNINIT/INODE_UNINIT (padding bits
// set, checksums), the inode table blocks holding the inodes mke2fs writes,
// and the blocks of the files it creates.
//
// The result is byte-identical to mke2fs's image for the same size, options,
// UUID, hash seed and time (the tests compare whole images and dumpe2fs
// output over a matrix of sizes, block sizes and features, plus random
// option combinations), with these differences:
//
//   - s_kbytes_written ("Lifetime writes"): mke2fs counts the bytes its I/O
//     layer wrote before the final flush, which leaves out the blocks still
//     dirty in its 8-block write cache; mkfs applies the same formula to
//     what it writes. They differ by a few KiB (up to 32).
//   - Times outside 1970..2038: mkfs stores them as the kernel does, with
//     the epoch bits of the inode extra fields and the superblock's _hi
//     bytes; mke2fs 1.47.0 truncates them to 32 bits.
//
// How the device is zeroed follows mke2fs too. A device that can make ranges
// read back zeros (Zeroer; Format provides it for image files by punching
// holes) is treated like mke2fs's discard that zeroes: inode tables and the
// journal body are not written, every group is ITABLE_ZEROED, and a 100 GiB
// image costs a few MiB of writes and stays sparse. On any other device
// mkfs zeroes exactly what mke2fs -E nodiscard zeroes: the boot sectors, the
// end of the device, the used part of the inode tables and the whole journal.
//
// Not supported (refused with an *fserr.UnsupportedError): quota and
// project (quota inodes), bigalloc, mmp, casefold, fast_commit, verity and
// external journal devices. Options of mke2fs without an Options field keep
// their defaults: num_backup_sb=2, no RAID stride, no packed_meta_blocks, no
// hugefiles, creator OS Linux, errors=continue, 8*blocksize blocks per group.
//
// The package holds no global state and no locks; a build is
// single-threaded and keeps everything it writes in memory until the end.
package mkfs
