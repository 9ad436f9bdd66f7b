// Package fusefs serves an *ext4go.FS on a directory through FUSE
// (github.com/hanwen/go-fuse/v2's raw protocol), so that any program can
// use the image as a mounted filesystem.
//
// Node IDs are inode numbers (the root, inode 2, is FUSE's node 1), so
// hard links are one node, as the kernel's dentry cache expects. Every
// node the kernel knows holds an O_PATH-like ext4go File (LookupAt) for as
// long as the kernel's lookup count of it is above zero: an inode unlinked
// while the kernel still refers to it lives on until FORGET, as the
// kernel's own ext4 keeps it until the last iput. Requests are served in
// parallel, each in its own goroutine; the node and handle tables are
// sharded maps, and everything else is ext4go's own fine-grained locking,
// so requests on different files do not wait for each other.
//
// Durability follows the filesystem: fsync (and fsyncdir) commit the
// journal and return once the change is durable; Unmount (or the kernel's
// unmount) ends the serving, after which the caller closes the FS.
//
// What the kernel leaves to the server, the server does as the kernel's
// ext4 would: with default_permissions the kernel checks modes and POSIX
// ACLs, ext4go inherits default ACLs on create and keeps modes and access
// ACLs in step; the immutable and append-only flags (chattr, served
// through FS_IOC_GETFLAGS/SETFLAGS) are enforced by ext4go, since the
// kernel does not see them; setuid bits and file capabilities are dropped
// by the server on write, truncate and chown (FUSE_HANDLE_KILLPRIV_V2).
// With Options.WritebackCache the kernel keeps written pages and file
// sizes itself and sends large writes later; without it, writes through
// a write-only open bypass the page cache (FOPEN_DIRECT_IO, one request a
// write; Options.CachedWriteOnly keeps the cache). With Options.Uring requests
// come through FUSE-over-io_uring ring entries, one thread an entry
// pinned to its CPU (uring_linux.go), instead of read and write on
// /dev/fuse; the same RawFileSystem serves both.
//
// A program that serves a mount must not start another program (os/exec)
// with its working directory or executable on that mount: Go starts
// programs with vfork, whose parent thread stops until the child has
// exec'd, a garbage collection that stops the world waits for that
// thread, and the child's chdir or exec waits for this process to answer
// on the mount. Start it through a shell that changes directory and execs
// ("sh -c 'cd DIR && exec PROG'"), or serve from another process
// (ext4go mount).
//
// FUSE mounts need Linux, macOS (through macFUSE) or FreeBSD, and the FUSE
// library this package serves through (github.com/hanwen/go-fuse/v2,
// v2.12.1) builds on those only, on Linux only for 64-bit processors (its
// splice package takes syscall.Splice's result as an int64, an int on
// 32-bit Linux). Everywhere else the package is this comment alone: its
// files carry that build constraint, and so do its users (ext4go mount
// says why it is missing). On macOS and FreeBSD, Options.Uring fails,
// MaxReadahead is the kernel's, and corruption reads as EIO (Linux's
// EUCLEAN is theirs not): system_linux.go, system_bsd.go, uring_other.go.
//
// The files, by concern (as go-fuse's fs package):
//   - mount.go: Options, Mount, Server, giving memory back;
//   - fusefs.go: the raw filesystem, node IDs, errors as errnos,
//     attributes, INIT;
//   - node_ops.go: lookups, attributes, making, removing, renaming and
//     linking names;
//   - file_ops.go: opens, reads, writes, lseek, fallocate, fsync,
//     copy_file_range;
//   - dir_ops.go: directory streams (READDIR, READDIRPLUS);
//   - xattr_ops.go: extended attributes, inode flags and their ioctls;
//   - privs.go: what the server checks for the kernel: callers'
//     capabilities and groups, dropping set-ID bits and capabilities;
//   - tables.go: the sharded tables of nodes the kernel holds and of
//     open handles;
//   - uring_*.go, system_*.go: FUSE over io_uring, per-system constants.
package fusefs
