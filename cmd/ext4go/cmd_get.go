package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "get", usage: "[-nqf] [--force] IMAGE PATH DEST", summary: "copy PATH out of the image to DEST recursively, keeping mode, owner, times, links and xattrs", run: runGet})
}

// copyOut copies a tree out of an image into a host directory. It creates
// everything relative to open directory descriptors with the *at system
// calls and O_NOFOLLOW, and only ever descends into directories it created
// itself (or that already existed as real directories), so no name or
// symbolic link in the image can make it write outside the destination.
type copyOut struct {
	fsys      *ext4go.FS
	stderr    io.Writer
	noOwner   bool
	quiet     bool
	links     map[uint32]string // inode -> path relative to the destination root, for hard links
	above     map[uint32]bool   // directories being copied, by inode: an entry naming one is a loop
	overwrite bool              // -f: replace existing host files
	warned    map[string]bool
	errs      int
	isRoot    bool
	buf       []byte
	destLabel string
}

func runGet(e *env, args []string) error {
	fsys, o, err := openRead(e, "get", []optDef{
		{short: 'n', help: "do not set owners (uid/gid) on the copies"},
		{short: 'q', help: "do not warn about metadata the host refuses (xattrs, owners)"},
		{short: 'f', help: "replace existing host files (as cp -f); without it an existing file is an error"},
	}, args, 3, 3)
	if err != nil {
		return err
	}
	defer fsys.Close()
	src, dest := imagePath(o.args[0]), o.args[1]

	top, err := openTop(fsys, src)
	if err != nil {
		return err
	}
	defer top.Close()
	// cp -r semantics: into an existing directory DEST as DEST/base(PATH),
	// else as DEST itself. The image root goes into DEST.
	parentDir, name := path.Dir(dest), path.Base(dest)
	if st, err := os.Stat(dest); err == nil && st.IsDir() {
		parentDir, name = dest, path.Base(src)
		if src == "." {
			name = "."
		}
	}
	pfd, err := unix.Open(parentDir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", parentDir, err)
	}
	defer unix.Close(pfd)
	co := &copyOut{fsys: fsys, stderr: e.stderr, noOwner: o.has("n"), quiet: o.has("q"),
		links: map[uint32]string{}, warned: map[string]bool{}, isRoot: os.Geteuid() == 0,
		buf: make([]byte, 1<<20), destLabel: dest, overwrite: o.has("f")}
	if err := co.copy(pfd, name, src, top); err != nil {
		return err
	}
	if co.errs > 0 {
		return fmt.Errorf("%d entries could not be copied", co.errs)
	}
	return nil
}

// openTop opens the image's path src without following a final symbolic
// link: for reading if it is a directory or a regular file.
func openTop(fsys *ext4go.FS, src string) (*ext4go.File, error) {
	if _, err := fsys.Lstat(src); err != nil {
		return nil, err
	}
	dir, err := fsys.Open(path.Dir(src))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	d := dir.(*ext4go.File)
	if src == "." {
		return d.Reopen(os.O_RDONLY)
	}
	f, err := d.LookupAt(path.Base(src))
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		defer f.Close()
		return f.Reopen(os.O_RDONLY)
	}
	return f, nil
}

func (co *copyOut) warn(kind string, err error) {
	if co.quiet || co.warned[kind] {
		return
	}
	co.warned[kind] = true
	fmt.Fprintf(co.stderr, "ext4go get: warning: %s: %v (further such warnings suppressed)\n", kind, err)
}

// copy creates name in the directory dirfd as a copy of the image's file
// f, whose path in the image is src (for messages).
func (co *copyOut) copy(dirfd int, name, src string, f *ext4go.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st := fi.Sys().(*ext4go.Stat)
	mode := fi.Mode()
	if !mode.IsDir() && st.Nlink > 1 {
		if first, ok := co.links[st.Ino]; ok {
			return co.hardlink(dirfd, name, first)
		}
	}
	if !mode.IsDir() && co.overwrite {
		// As cp -f: an existing non-directory is removed first (never
		// followed: the new file is made in its place).
		var hst unix.Stat_t
		if unix.Fstatat(dirfd, name, &hst, unix.AT_SYMLINK_NOFOLLOW) == nil && hst.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(dirfd, name, 0); err != nil {
				return fmt.Errorf("cannot remove the existing host file %s: %w", co.hostPath(dirfd, name), err)
			}
		}
	}
	switch {
	case mode.IsDir():
		return co.copyDir(dirfd, name, src, f, st)
	case mode.IsRegular():
		err = co.copyFile(dirfd, name, src, f, st)
	case mode&fs.ModeSymlink != 0:
		var target string
		if target, err = f.ReadLink(); err == nil {
			err = unix.Symlinkat(target, dirfd, name)
		}
	default:
		err = unix.Mknodat(dirfd, name, uint32(st.Mode), int(st.Rdev))
	}
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: the host file %s exists; use -f to overwrite it", displayPath(src), co.hostPath(dirfd, name))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", displayPath(src), err)
	}
	if !mode.IsRegular() {
		// Regular files got their metadata through their descriptor.
		if err := co.setMeta(dirfd, name, -1, src, f, st, mode); err != nil {
			return err
		}
	}
	if st.Nlink > 1 {
		co.links[st.Ino] = fdPath(dirfd, name)
	}
	return nil
}

// fdPath names an entry of an open directory in a way linkat can use later
// without walking a path the image controls.
func fdPath(dirfd int, name string) string {
	p, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", dirfd))
	if err != nil {
		return ""
	}
	return p + "/" + name
}

func (co *copyOut) hardlink(dirfd int, name, first string) error {
	if first == "" {
		return errors.New("cannot find the first copy of a hard link")
	}
	if err := unix.Linkat(unix.AT_FDCWD, first, dirfd, name, 0); err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	return nil
}

// copyDir copies the directory d. Its entries are opened by the inode
// numbers the directory holds (OpenEntry), not looked up by name again.
func (co *copyOut) copyDir(parentfd int, name, src string, d *ext4go.File, st *ext4go.Stat) error {
	if co.above == nil {
		co.above = map[uint32]bool{}
	}
	if co.above[st.Ino] {
		return &fs.PathError{Op: "get", Path: src, Err: &ext4go.CorruptError{What: "directory", Block: -1, Ino: st.Ino, Detail: "names a directory above it (a loop)"}}
	}
	co.above[st.Ino] = true
	defer delete(co.above, st.Ino)
	if name != "." {
		err := unix.Mkdirat(parentfd, name, 0o700)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
	}
	fd, err := unix.Openat(parentfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w (exists and is not a directory?)", name, err)
	}
	defer unix.Close(fd)
	ents, err := d.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range ents {
		child := path.Join(src, e.Name())
		c, err := d.OpenEntry(e)
		if err == nil {
			err = co.copy(fd, e.Name(), child, c)
			c.Close()
		}
		if err != nil {
			fmt.Fprintf(co.stderr, "ext4go get: %v\n", err)
			co.errs++
		}
	}
	if name == "." && src == "." {
		// Merging the image root into an existing DEST: keep DEST's own metadata.
		return nil
	}
	return co.setMeta(parentfd, name, fd, src, d, st, fs.ModeDir)
}

// copyFile copies the regular file f: a new host file (O_EXCL: nothing is
// overwritten or followed), its data ranges written where they are so
// holes stay holes, then its metadata set through the descriptor.
func (co *copyOut) copyFile(dirfd int, name, src string, f *ext4go.File, st *ext4go.Stat) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if err := co.copyData(fd, f, st.Size); err != nil {
		unix.Close(fd)
		return err
	}
	if err := co.setMeta(dirfd, name, fd, src, f, st, 0); err != nil {
		unix.Close(fd)
		return err
	}
	return unix.Close(fd)
}

func (co *copyOut) copyData(fd int, f *ext4go.File, size int64) error {
	ranges, err := f.DataRanges()
	if err != nil {
		return err
	}
	var written int64 // end of the data written
	for _, r := range ranges {
		for off := r.Off; off < r.Off+r.Len; {
			n := min(int64(len(co.buf)), r.Off+r.Len-off)
			m, err := f.ReadAt(co.buf[:n], off)
			if m > 0 {
				if err := pwriteFull(fd, co.buf[:m], off); err != nil {
					return err
				}
				written = off + int64(m)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			off += int64(m)
		}
	}
	if written < size {
		return unix.Ftruncate(fd, size) // a hole at the end
	}
	return nil
}

func pwriteFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// setMeta sets owner, mode, xattrs and times, in that order: chown clears
// set-id bits and capabilities, and every change moves ctime but not mtime.
// fd is an open descriptor of the entry, or -1 (symlinks, devices, fifos),
// when the calls go by name in dirfd.
func (co *copyOut) setMeta(dirfd int, name string, fd int, src string, f *ext4go.File, st *ext4go.Stat, mode fs.FileMode) error {
	isLink := mode&fs.ModeSymlink != 0
	if !co.noOwner {
		var err error
		if fd >= 0 {
			err = unix.Fchown(fd, int(st.UID), int(st.GID))
		} else {
			err = unix.Fchownat(dirfd, name, int(st.UID), int(st.GID), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			co.warn("cannot set owner", err)
		}
	}
	if !isLink {
		perm := uint32(st.Mode & 0o7777)
		var err error
		if fd >= 0 {
			err = unix.Fchmod(fd, perm)
		} else {
			err = unix.Fchmodat(dirfd, name, perm, 0)
		}
		if err != nil {
			return fmt.Errorf("chmod %s: %w", displayPath(src), err)
		}
	}
	attrs, err := f.ListXattr()
	if err != nil {
		return err
	}
	for _, a := range attrs {
		v, err := f.GetXattr(a)
		if err != nil {
			return err
		}
		switch {
		case fd >= 0:
			err = unix.Fsetxattr(fd, a, v, 0)
		case !strings.HasPrefix(a, "user.") || !isLink:
			err = unix.Lsetxattr(fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name), a, v, 0)
		}
		if err != nil {
			co.warn("cannot set xattr "+a, err)
		}
	}
	// Not UnixNano: ext4 times reach the year 2446, past int64 nanoseconds.
	ts := [2]unix.Timespec{
		{Sec: st.Atime.Unix(), Nsec: int64(st.Atime.Nanosecond())},
		{Sec: st.Mtime.Unix(), Nsec: int64(st.Mtime.Nanosecond())},
	}
	if fd >= 0 {
		err = futimens(fd, &ts)
	} else {
		err = unix.UtimesNanoAt(dirfd, name, ts[:], unix.AT_SYMLINK_NOFOLLOW)
	}
	if err != nil {
		return fmt.Errorf("set times of %s: %w", displayPath(src), err)
	}
	return nil
}

// futimens sets the times of the open file fd: utimensat with a NULL path,
// which x/sys/unix does not offer.
func futimens(fd int, ts *[2]unix.Timespec) error {
	_, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// hostPath names a host file for messages: the directory it is made in
// (as the kernel names it) and its name.
func (co *copyOut) hostPath(dirfd int, name string) string {
	if p := fdPath(dirfd, name); p != "" {
		return p
	}
	return name
}
