package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "put", usage: "[-n] [-q] IMAGE SRC... PATH",
		summary: "copy host files or trees into the image (as cp -a: modes, owners, ns times, symlinks, hard links, devices, fifos, sockets, xattrs, ACLs; holes stay holes)",
		opts: []optDef{
			{'n', "no-owner", "", "do not keep owners: new entries belong to 0:0"},
			{'q', "quiet", "", "do not warn about attributes the image cannot store"},
		},
		parse: parsePut,
	})
}

func parsePut(o *opts) (action, error) {
	if err := wantArgs(o, 2, -1, "SRC... PATH"); err != nil {
		return nil, err
	}
	po := putOptions{noOwner: o.has("n"), quiet: o.has("q")}
	return func(x *wctx) error {
		srcs, dst := o.args[:len(o.args)-1], o.args[len(o.args)-1]
		if len(srcs) > 1 && !isDir(x.fsys, imagePath(dst)) {
			return fmt.Errorf("target %s is not a directory", quotePath(dst))
		}
		// One putter for all sources, so hard links between them are kept.
		p := newPutter(x.fsys, po, x.report)
		return x.each(srcs, func(src string) error { return p.put(src, dst) })
	}, nil
}

// putOptions are put's choices.
type putOptions struct {
	noOwner bool // leave new entries owned by 0:0
	quiet   bool // no warnings about attributes the image refuses
}

// putter copies host trees into an image. It reads the host relative to
// open directory descriptors (openat, fstatat with AT_SYMLINK_NOFOLLOW), so
// trees deeper than PATH_MAX copy too and no symlink on the host is
// followed below SRC.
type putter struct {
	fsys   *ext4go.FS
	o      putOptions
	report func(error)          // failures put goes on after, and warnings
	links  map[[2]uint64]string // host (dev, ino) -> image name of the first copy
	warned map[string]bool
	buf    []byte
	errs   int
}

// newPutter returns a putter writing to fsys; report gets the failures of
// single entries and warnings.
func newPutter(fsys *ext4go.FS, o putOptions, report func(error)) *putter {
	return &putter{fsys: fsys, o: o, report: report, links: map[[2]uint64]string{},
		warned: map[string]bool{}, buf: make([]byte, 1<<20)}
}

// put copies the host file or tree src into the image with cp -r
// semantics: into the existing directory dst as dst/base(src), else as
// dst; "SRC/." copies SRC's contents into dst. Existing directories are
// merged; other existing entries are replaced. Content comes first, then
// owner, xattrs, mode, and times last, a directory's after its contents.
// Failures of single entries are reported and counted, and put goes on;
// those that doom the rest (no space, a corrupt image) stop it. Hard links
// are kept across all the puts of one putter.
func (p *putter) put(src, dst string) error {
	clean := filepath.Clean(src)
	merge := clean == "." || clean == "/" || strings.HasSuffix(src, "/.")
	parent, base := filepath.Dir(clean), filepath.Base(clean)
	if clean == "/" {
		parent, base = "/", "."
	}
	pfd, err := unix.Open(parent, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return failf("cannot open directory", parent, err)
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return failf("cannot stat host file", src, err)
	}
	if merge && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return failf("cannot stat host file", src, syscall.ENOTDIR)
	}
	target := imagePath(dst)
	if !merge && isDir(p.fsys, target) {
		target = joinImage(target, base)
	}
	p.errs = 0
	if err := p.copy(pfd, base, src, target, &st); err != nil {
		return err
	}
	if p.errs > 0 {
		return fmt.Errorf("%d entries of %s could not be copied", p.errs, quotePath(src))
	}
	return nil
}

// fatal reports whether err dooms every further entry.
func fatal(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) ||
		errors.Is(err, ext4go.ErrCorrupt) || errors.Is(err, ext4go.ErrReadOnly)
}

// copy copies the entry name of the host directory dirfd (shown as
// srcShown in messages) to the image name dst.
func (p *putter) copy(dirfd int, name, srcShown, dst string, st *unix.Stat_t) error {
	typ := st.Mode & unix.S_IFMT
	if typ == unix.S_IFDIR {
		return p.copyDir(dirfd, name, srcShown, dst, st)
	}
	key := [2]uint64{st.Dev, st.Ino}
	if st.Nlink > 1 {
		if first, ok := p.links[key]; ok {
			if err := p.clear(dst); err != nil {
				return err
			}
			if err := p.fsys.Link(first, dst); err != nil {
				return failf("cannot create hard link", displayPath(dst), err)
			}
			return nil
		}
	}
	if err := p.clear(dst); err != nil {
		return err
	}
	var err error
	switch typ {
	case unix.S_IFREG:
		err = p.copyFile(dirfd, name, srcShown, dst, st)
	case unix.S_IFLNK:
		var target string
		if target, err = readlinkat(dirfd, name); err != nil {
			return failf("cannot read host symbolic link", srcShown, err)
		}
		if err = p.fsys.Symlink(target, dst); err != nil {
			return failf("cannot create symbolic link", displayPath(dst), err)
		}
		err = p.setMeta(-1, dirfd, name, srcShown, dst, st)
	default: // devices, fifos, sockets
		if err = p.fsys.Mknod(dst, st.Mode&(unix.S_IFMT|0o7777), st.Rdev); err != nil {
			return failf("cannot create", displayPath(dst), err)
		}
		err = p.setMeta(-1, dirfd, name, srcShown, dst, st)
	}
	if err != nil {
		return err
	}
	if st.Nlink > 1 {
		p.links[key] = dst
	}
	return nil
}

// clear makes room for a non-directory at dst: an existing non-directory is
// removed (so hard links to it keep their content, as cp
// --remove-destination), an existing directory is an error.
func (p *putter) clear(dst string) error {
	fi, err := p.fsys.Lstat(dst)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return failf("cannot stat", displayPath(dst), err)
	case fi.IsDir():
		return fmt.Errorf("cannot overwrite directory %s with non-directory", quotePath(displayPath(dst)))
	}
	if err := p.fsys.Remove(dst); err != nil {
		return failf("cannot remove", displayPath(dst), err)
	}
	return nil
}

func (p *putter) copyDir(dirfd int, name, srcShown, dst string, st *unix.Stat_t) error {
	fd, err := unix.Openat(dirfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return failf("cannot open host directory", srcShown, err)
	}
	defer unix.Close(fd)
	if dst != "." {
		fi, err := p.fsys.Lstat(dst)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := p.fsys.Mkdir(dst, 0o700); err != nil {
				return failf("cannot create directory", displayPath(dst), err)
			}
		case err != nil:
			return failf("cannot stat", displayPath(dst), err)
		case !fi.IsDir():
			return fmt.Errorf("cannot overwrite non-directory %s with directory %s", quotePath(displayPath(dst)), quotePath(srcShown))
		}
	}
	names, err := readDirNames(fd)
	if err != nil {
		return failf("cannot read host directory", srcShown, err)
	}
	for _, n := range names {
		childShown := strings.TrimSuffix(srcShown, "/") + "/" + n
		var cst unix.Stat_t
		err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil {
			err = p.copy(fd, n, childShown, joinImage(dst, n), &cst)
		} else {
			err = failf("cannot stat", childShown, err)
		}
		if err != nil {
			if fatal(err) {
				return err
			}
			p.report(err)
			p.errs++
		}
	}
	return p.setMeta(fd, -1, "", srcShown, dst, st)
}

// readDirNames lists the open directory fd, sorted so copies are
// reproducible.
func readDirNames(fd int) ([]string, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(dup), "")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		b := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, b)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(b[:n]), nil
		}
	}
}

func (p *putter) copyFile(dirfd int, name, srcShown, dst string, st *unix.Stat_t) error {
	// O_NOATIME keeps the source's atimes for later comparisons; only the
	// owner (or root) may use it.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NOATIME, 0)
	if err == unix.EPERM {
		fd, err = unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return failf("cannot open host file", srcShown, err)
	}
	defer unix.Close(fd)
	f, err := p.fsys.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return failf("cannot create", displayPath(dst), err)
	}
	err = p.copyData(fd, f, srcShown, dst, st.Size)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = failf("cannot write", displayPath(dst), cerr)
	}
	if err != nil {
		// As cp: no partial copy is left behind (the file is ours, made
		// with O_EXCL above).
		if rerr := p.fsys.Remove(dst); rerr != nil {
			p.report(failf("cannot remove the partial copy", displayPath(dst), rerr))
		}
		return err
	}
	return p.setMeta(fd, dirfd, name, srcShown, dst, st)
}

// copyData copies the data ranges of the host file fd (SEEK_DATA and
// SEEK_HOLE) to f with WriteAt and sets f's size, so holes stay holes.
func (p *putter) copyData(fd int, f *ext4go.File, srcShown, dst string, size int64) error {
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		hole := size
		if err != nil {
			data = off // no SEEK_DATA here: copy everything
		} else if h, err := unix.Seek(fd, data, unix.SEEK_HOLE); err == nil {
			hole = min(h, size)
		}
		for data < hole {
			n := min(int64(len(p.buf)), hole-data)
			m, err := unix.Pread(fd, p.buf[:n], data)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return failf("cannot read host file", srcShown, err)
			}
			if m == 0 {
				break // the file shrank while we copied
			}
			if _, err := f.WriteAt(p.buf[:m], data); err != nil {
				return failf("cannot write", displayPath(dst), err)
			}
			data += int64(m)
		}
		off = max(hole, off+1)
	}
	if err := f.Truncate(size); err != nil {
		return failf("cannot write", displayPath(dst), err)
	}
	return nil
}

// setMeta gives dst the owner, xattrs, mode and times of the host entry,
// in that order (times last, as every change moves only ctime). The host
// entry is the open descriptor fd, or if fd is -1 the entry name of dirfd.
func (p *putter) setMeta(fd, dirfd int, name, srcShown, dst string, st *unix.Stat_t) error {
	shown := displayPath(dst)
	if !p.o.noOwner {
		if err := p.fsys.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
			return failf("cannot set the owner of", shown, err)
		}
	}
	attrs, err := hostXattrs(fd, dirfd, name)
	if err != nil {
		return failf("cannot read the attributes of host file", srcShown, err)
	}
	for _, a := range attrs {
		err := p.fsys.SetXattr(dst, a.name, a.value, 0)
		if err != nil && errors.Is(err, syscall.EOPNOTSUPP) {
			if !p.o.quiet && !p.warned[a.name] {
				p.warned[a.name] = true
				p.report(fmt.Errorf("warning: the image cannot store attribute %s (%s), first met on %s; not copied (further such warnings suppressed)",
					a.name, errText(cause(err)), quotePath(srcShown)))
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot set attribute %s of %s: %s", a.name, quotePath(shown), errText(cause(err)))
		}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		if err := p.fsys.Chmod(dst, fileMode(st.Mode&0o7777)); err != nil {
			return failf("cannot set the mode of", shown, err)
		}
	}
	atime := time.Unix(st.Atim.Sec, st.Atim.Nsec)
	mtime := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	if err := p.fsys.Lchtimes(dst, atime, mtime); err != nil {
		return failf("cannot set the times of", shown, err)
	}
	return nil
}

type hostXattr struct {
	name  string
	value []byte
}

// hostXattrs reads every extended attribute of a host entry: of the open
// descriptor fd, or (fd -1) of the entry name of dirfd without following
// it. A host filesystem without xattrs has none.
func hostXattrs(fd, dirfd int, name string) ([]hostXattr, error) {
	lpath := fmt.Sprintf("/proc/self/fd/%d/%s", dirfd, name)
	list := func(b []byte) (int, error) {
		if fd >= 0 {
			return unix.Flistxattr(fd, b)
		}
		return unix.Llistxattr(lpath, b)
	}
	get := func(attr string, b []byte) (int, error) {
		if fd >= 0 {
			return unix.Fgetxattr(fd, attr, b)
		}
		return unix.Lgetxattr(lpath, attr, b)
	}
	names, err := readSized(list)
	if err == unix.ENOTSUP || err == unix.EOPNOTSUPP {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hostXattr
	for _, n := range strings.Split(string(names), "\x00") {
		if n == "" {
			continue
		}
		v, err := readSized(func(b []byte) (int, error) { return get(n, b) })
		if err == unix.ENODATA {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, hostXattr{n, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// readSized calls a listxattr/getxattr-style function with a buffer large
// enough for its result.
func readSized(call func([]byte) (int, error)) ([]byte, error) {
	for {
		n, err := call(nil)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return []byte{}, nil
		}
		b := make([]byte, n)
		m, err := call(b)
		if err == unix.ERANGE {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		return b[:m], nil
	}
}
