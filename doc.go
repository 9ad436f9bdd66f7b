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
// (ErrUnsupported). ext4go never panics on a bad image.
//
// Concurrency: an *FS and the files opened from it are safe for use by many
// goroutines at once; reads of different files never wait for each other.
package ext4go
