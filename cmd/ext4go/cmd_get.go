package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

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

	fi, err := fsys.Lstat(src)
	if err != nil {
		return err
	}
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
	if err := co.copy(pfd, name, src, fi); err != nil {
		return err
	}
	if co.errs > 0 {
		return fmt.Errorf("%d entries could not be copied", co.errs)
	}
	return nil
}

func (co *copyOut) warn(kind string, err error) {
	if co.quiet || co.warned[kind] {
		return
	}
	co.warned[kind] = true
	fmt.Fprintf(co.stderr, "ext4go get: warning: %s: %v (further such warnings suppressed)\n", kind, err)
}

// copy creates name in the directory dirfd as a copy of the image's src.
// rel is src's path relative to the copy's root, for hard links.
func (co *copyOut) copy(dirfd int, name, src string, fi fs.FileInfo) error {
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
	var err error
	switch {
	case mode.IsDir():
		return co.copyDir(dirfd, name, src, st)
	case mode.IsRegular():
		err = co.copyFile(dirfd, name, src, st)
	case mode&fs.ModeSymlink != 0:
		var target string
		if target, err = co.fsys.ReadLink(src); err == nil {
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
		if err := co.setMeta(dirfd, name, -1, src, st, mode); err != nil {
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

func (co *copyOut) copyDir(parentfd int, name, src string, st *ext4go.Stat) error {
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
	ents, err := co.fsys.ReadDir(src)
	if err != nil {
		return err
	}
	for _, d := range ents {
		child := path.Join(src, d.Name())
		info, err := d.Info()
		if err == nil {
			err = co.copy(fd, d.Name(), child, info)
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
	return co.setMeta(parentfd, name, fd, src, st, fs.ModeDir)
}

func (co *copyOut) copyFile(dirfd int, name, src string, st *ext4go.Stat) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	out := os.NewFile(uintptr(fd), name)
	defer out.Close()
	f, err := co.fsys.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	in := f.(*ext4go.File)
	// Copy only the mapped, written ranges so holes stay holes.
	ranges, err := in.DataRanges()
	if err != nil {
		return err
	}
	for _, r := range ranges {
		for off := r.Off; off < r.Off+r.Len; {
			n := min(int64(len(co.buf)), r.Off+r.Len-off)
			m, err := in.ReadAt(co.buf[:n], off)
			if m > 0 {
				if _, werr := out.WriteAt(co.buf[:m], off); werr != nil {
					return werr
				}
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
	if err := out.Truncate(st.Size); err != nil {
		return err
	}
	return co.setMeta(dirfd, name, fd, src, st, 0)
}

// setMeta sets owner, mode, xattrs and times, in that order: chown clears
// set-id bits and capabilities, and every change moves ctime but not mtime.
// fd is an open descriptor of the entry, or -1 (symlinks, devices, fifos).
func (co *copyOut) setMeta(dirfd int, name string, fd int, src string, st *ext4go.Stat, mode fs.FileMode) error {
	isLink := mode&fs.ModeSymlink != 0
	if !co.noOwner {
		if err := unix.Fchownat(dirfd, name, int(st.UID), int(st.GID), unix.AT_SYMLINK_NOFOLLOW); err != nil {
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
	attrs, err := co.fsys.ListXattr(src)
	if err != nil {
		return err
	}
	for _, a := range attrs {
		v, err := co.fsys.GetXattr(src, a)
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
	ts := []unix.Timespec{
		{Sec: st.Atime.Unix(), Nsec: int64(st.Atime.Nanosecond())},
		{Sec: st.Mtime.Unix(), Nsec: int64(st.Mtime.Nanosecond())},
	}
	if err := unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times of %s: %w", displayPath(src), err)
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
