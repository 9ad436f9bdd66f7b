// Package testutil is the test harness shared by all ext4go tests. It is
// imported only from _test.go files.
//
// It wraps the real e2fsprogs tools (mke2fs, e2fsck, debugfs, dumpe2fs) and
// the real kernel (loop mounts) as oracles, generates deterministic source
// trees that exercise every on-disk feature mke2fs -d can reproduce
// (GenTree into a SourceDir), builds images from them (BuildImage), compares
// what a reader
// returns against a host directory with all metadata (CompareFS,
// CompareDirs), and hands out the shared e2fsprogs regression images
// (SharedImages).
//
// Invariants:
//   - Every wrapper skips the calling test (t.Skipf, with the reason) when a
//     tool or the privilege it needs is missing; it never fails for that.
//   - Everything a helper creates lives under t.TempDir() or a SourceDir and
//     is removed by the test's cleanup; loop devices and mounts made by Mount are always
//     unmounted and detached in a t.Cleanup, also when the test fails, is
//     skipped or panics. Mounts and SourceDirs left by a test binary that was
//     killed are swept by the next process's first use (they carry its pid).
//   - The harness never imports the ext4go root package: ext4 details of a
//     reader reach CompareFS only through CompareOptions.Meta.
//
// Tool behaviour this package relies on (e2fsprogs 1.47.0, Linux 6.18),
// found by experiment and checked by the self-tests:
//
// mke2fs -d keeps: names (any bytes, 255-byte names), file data with holes
// (all-zero blocks become holes too), directories at any depth, symlinks
// (fast and slow; their owner, mtime and xattrs), hard links between
// non-symlink files, fifos, sockets, char/block devices with any 12-bit
// major/20-bit minor, mode bits incl. setuid/setgid/sticky and 000, 32-bit
// uid/gid, and all xattrs incl. trusted.*, security.*, security.capability and
// POSIX ACLs (converted to the ext4 on-disk ACL format), and the root's mode
// and owner.
// mke2fs -d drops or breaks: nanoseconds of all times, and mtimes outside the
// signed 32-bit second range (they wrap, e.g. 2100 becomes 1963); BuildImage
// repairs both afterwards with debugfs set_inode_field (FixupTimes). Hard
// links between symlinks become separate inodes (GenTree makes none). A
// symlink target must be shorter than the block size (EINVAL otherwise; the
// kernel has the same limit). All xattrs of an inode must fit in the inode
// plus one block (there is no ea_inode support in -d), so GenTree sizes large
// values from TreeSpec.BlockSize. The root directory's mtime is mke2fs's
// clock (FixedTime), and lost+found adds a link to it. Linking is O(n²) per
// directory: 10 000 entries cost 5-10 s of CPU.
//
// debugfs rdump keeps: names, file contents, directories, symlink targets,
// permission bits 0777, uid/gid, atime/mtime in whole seconds for files and
// directories. It drops: setuid/setgid/sticky bits, xattrs, device nodes,
// fifos and sockets (silently skipped), hard links (each name becomes its own
// copy), symlink owner and times, nanoseconds; it reads only the low 32 bits
// of a time, as unsigned, so times before 1970 or from 2106 come out wrong;
// it writes holes out as zeros, so never rdump a tree holding the 5 GiB
// sparse file of the "sparse" preset; and (like debugfs cat) it writes an
// inline-data file as its whole 60-byte inline area, ignoring i_size. So it
// is no oracle for the "sparse" and "times" presets or inline_data images.
// RdumpCompareOptions encodes the rest.
//
// Source trees: the host's /tmp is ext4 and keeps everything GenTree makes,
// but creating thousands of files there is slow on this machine; tmpfs
// (/dev/shm, Linux >= 6.6) keeps it all too (user/trusted/security xattrs,
// ACLs, ns times to 2446, SEEK_DATA), so SourceDir puts trees there.
//
// Atime is not compared by default anywhere: the host updates the source's
// atime (relatime) whenever mke2fs or a comparison reads it.
package testutil
