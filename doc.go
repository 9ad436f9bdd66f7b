// Package ext4go reads and changes Linux ext4 filesystems (and ext2/ext3,
// which are subsets) held in image files or on block devices, without a
// kernel mount or root.
//
// Open an image with Open (or NewFS for any io.ReaderAt). The returned *FS
// implements io/fs: fs.FS, fs.ReadDirFS, fs.ReadFileFS, fs.StatFS and
// fs.ReadLinkFS, so it works with fs.WalkDir, fs.Sub, http.FS, os.CopyFS and
// testing/fstest. Paths are slash-separated and relative to the filesystem
// root ("." is the root), as fs.ValidPath describes, except that they need
// not be valid UTF-8 because ext4 names are arbitrary bytes. Symbolic links inside the image are followed as if
// the image root were the system root (absolute targets and ".." never leave
// the image). Open files implement io.ReaderAt and io.Seeker. The ext4
// details of a file (inode number, owner, every timestamp including the
// creation time, flags, link count, blocks) are in the *Stat returned by
// FileInfo.Sys.
//
// Errors: bad on-disk data is reported as *CorruptError or *ChecksumError
// (both match ErrCorrupt with errors.Is) naming the structure and the block
// or inode; features ext4go does not implement as *UnsupportedError
// (ErrUnsupported). ext4go never panics on a bad image. A block an inode
// names (file data, an extent tree or indirect block, an xattr or
// directory block) that lies in the filesystem's fixed metadata (the
// system zone: superblock and descriptor copies, bitmaps, inode tables,
// the journal) is refused before it is read or written, as the kernel
// refuses it. A directory listing leaves out the entries it cannot read
// and names them in a *SkippedEntriesError returned with the others.
//
// Concurrency: an *FS and the files opened from it are safe for use by many
// goroutines at once; reads of different files never wait for each other.
// Operations on different files proceed in parallel: there is no global
// lock, only per-inode locks (taken parent before child, two of a kind in
// inode order), sharded caches and the allocators' per-group locks.
//
// Lifetime: an operation that finds an inode by name takes it while the
// directory's lock keeps the name from vanishing, and checks it again
// under the inode's own lock, so a racing unlink happens wholly before
// (the operation fails with fs.ErrNotExist) or wholly after (an open File
// keeps the inode alive, unlinked, until its last Close). A change never
// reaches an inode number that was freed and reused. lifetime.go states
// the rules in full.
//
// Failure: a change that fails (no space, an I/O error, corruption found
// on the way) leaves the filesystem as it was; a write may have written a
// prefix of its data, which it reports. After Close, every method of the
// FS and of its Files returns an error matching fs.ErrClosed.
//
// Errors recorded: a change that finds corruption also records it in the
// superblock as the kernel's ext4_error does (state "with errors", the
// error count, the first and last error: time, inode, block, the method
// that found it, EFSCORRUPTED or EFSBADCRC), which dumpe2fs -h and
// Info show, so that the next e2fsck -p checks the filesystem instead of
// skipping it as clean. Options.Errors then lets later changes go on or
// refuses them with an *ErrorsReadOnlyError (the kernel's errors=
// option; ErrorsPanic does not panic). A writable Open of a filesystem
// marked with errors needs Options.AllowUnclean; Close keeps the mark,
// which only e2fsck clears.
//
// Crash safety: changes to an image with a journal go through it, as the
// kernel's jbd2 in data=ordered mode (internal/journal): a crash or kill
// at any moment leaves each transaction wholly there or wholly absent, and
// everything before the last Sync (or File.Sync) that returned is kept.
// Commits happen every Options.CommitInterval, when a transaction grows to
// a quarter of the journal, on Sync and at Close, which leaves the journal
// empty and the image clean. An image whose journal needs recovery is read
// as the kernel shows it after replaying it; a writable open replays it
// home and finishes the orphans the crash left (recovery.go,
// orphan_cleanup.go). With Options.Lazytime, changes that only move
// timestamps are kept in memory until the inode is next written (or its
// inode-table block is, by a write of a neighbour that copies them
// without ever waiting for the neighbour's lock), Sync, File.Sync, Close
// or Options.LazytimeExpire: a crash may lose such times, nothing else
// (lazytime.go; lifetime.go says who holds what lock while a neighbour's
// times are copied).
//
// Delayed allocation: a write into a hole of a regular file with extents
// reserves its space (a write that does not fit fails with ENOSPC there)
// and keeps the data in memory; the blocks are chosen when the data goes
// to disk, with the whole dirty range and the file's size known, so a file
// written in many small writes gets one extent: on the Close of a File
// that may write, File.Sync, Sync, Close, past Options.DelayedLimit bytes
// held, after a commit interval in the background, and before anything
// that needs the real mapping (fallocate, Extents, DataRanges, SEEK_DATA).
// Reads and stat see the delayed data at once. The size is written with
// the write, so a crash before the flush leaves zeros, never other data.
// A flush that fails keeps the data for the next try and reports the
// error to the file's next Sync or Close (Options.NoDelalloc allocates at
// each write instead; delalloc.go has the rules and the locks).
//
// Privileges: the library checks no permissions and acts as a privileged
// caller, root with CAP_FSETID and CAP_SYS_ADMIN. So a change of a file's
// data (File.Write, WriteAt, Truncate, Fallocate, an O_TRUNC open) drops
// its security.capability attribute, as the kernel does whoever writes,
// and keeps its setuid and setgid bits, as the kernel does for such a
// caller; ListXattr lists trusted.* attributes. A server acting for other
// users (fusefs) tells File.KillPriv who the caller is before each change.
//
// Walks: FS.WalkDir and File.OpenAt read each directory through the one
// above it, so walking a tree costs what it visits, memory grows with the
// depth only, and a directory loop in a corrupt image is reported as
// corruption instead of being followed.//
// # Files
//
// The package is filed by concern, as the kernel's fs/ext4 is (the file
// there to compare with in parentheses); the on-disk formats, the
// allocators, the journal and the block cache live in internal/ packages
// of their own (docs/architecture.md draws the layers):
//
//   - ext4.go (super.c): Options, FS, Open, newFS, Close; super_write.go:
//     the writer, superblock and group descriptor writes, closing;
//     systemzone.go (block_validity.c); fserrors.go (ext4_error); info.go,
//     blockgroups.go, fragmentation.go: what dumpe2fs and e2freefrag show.
//   - jbd2.go (ext4_jbd2.c): transaction handles, the commit loop, Sync;
//     recovery.go, orphan_cleanup.go, orphan_file.go (orphan.c);
//     fastcommit_*.go (fast_commit.c's replay); undo.go: undoing a
//     change that failed half way.
//   - balloc.go (balloc.c, the mballoc glue): block bitmaps, allocation,
//     frees; ialloc.go (ialloc.c): inode bitmaps.
//   - inode.go (inode.c's iget): nodes and the inode cache; inode_table.go
//     (ext4_mark_iloc_dirty): inode-table writes; inode_write.go: making
//     and freeing inodes; inode_defer.go; lifetime.go: who may hold a node
//     and when an inode may go; lazytime.go; atime.go.
//   - extents.go (extents.c, indirect.c): the extent-tree and block-map
//     stores and editors; data.go: reading file data; file_write.go and
//     delalloc.go: writing it; truncate.go: truncate, punch, fallocate.
//   - file.go, file_api.go, handle.go: File and its methods; at.go: the
//     *at calls; open.go: OpenFile.
//   - namei.go, namei_change.go, rename.go (namei.c): making, removing and
//     renaming names; dir.go, dir_store.go (dir.c): reading and writing
//     directories; walk.go: walks; inline.go (inline.c).
//   - xattr.go, xattr_write.go, ea_inode.go (xattr.c, acl.c); flags.go
//     (ioctl.c's flags); privs.go (file_remove_privs).
//   - stat.go, fs.go, errors.go: the io/fs face and the error types.
//   - build*.go: building an image from a host tree or a tar stream.
//
// # Lock order
//
// Outermost first; a lock is never taken while one later in the list is
// held (lifetime.go and delalloc.go give the reasons):
//
//  1. writer.renameMu, for renames that move between directories;
//  2. a directory's node.mu before its entries' (parents before children;
//     two parents, or two children, in inode number order);
//  3. an inode's node.mu before a transaction handle is begun (the
//     handle pins the running transaction; a commit waits for handles);
//  4. inside a handle: a block's buffer lock (txn), then within an
//     inode-table block's buffer lock an inode allocator group's mutex
//     (ialloc); the allocators' group mutexes (mballoc, ialloc) before
//     the buffers of the bitmaps and descriptors they persist;
//  5. leaf locks, held with nothing taken under them: the delayed-data
//     and lazy-time sets (per shard), the node cache's shards.
//
// Neighbours' lazy times are only TryLocked (never waited for), and
// mballoc's scanners only TryLock groups at the cheap criteria: a
// goroutine can be preempted while it holds a lock, which a kernel
// spinlock holder cannot.
package ext4go
