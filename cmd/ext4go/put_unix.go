//go:build linux || darwin || freebsd

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/host"
)

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
	st, err := host.StatAt(pfd, base)
	if err != nil {
		return failf("cannot stat host file", src, err)
	}
	if merge && st.Type() != host.IFDIR {
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
		return fmt.Errorf("%s of %s could not be copied", countOf(p.errs, "entry", "entries"), quotePath(src))
	}
	return nil
}

// copy copies the entry name of the host directory dirfd (shown as
// srcShown in messages) to the image name dst.
func (p *putter) copy(dirfd int, name, srcShown, dst string, st *host.Stat) error {
	typ := st.Type()
	if typ == host.IFDIR {
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
	case host.IFREG:
		err = p.copyFile(dirfd, name, srcShown, dst, st)
	case host.IFLNK:
		var target string
		if target, err = readlinkat(dirfd, name); err != nil {
			return failf("cannot read host symbolic link", srcShown, err)
		}
		if err = p.fsys.Symlink(target, dst); err != nil {
			return failf("cannot create symbolic link", displayPath(dst), err)
		}
		err = p.setHostMeta(-1, dirfd, name, srcShown, dst, st)
	default: // devices, fifos, sockets
		if err = p.fsys.Mknod(dst, st.Mode&(host.IFMT|0o7777), st.Rdev); err != nil {
			return failf("cannot create", displayPath(dst), err)
		}
		err = p.setHostMeta(-1, dirfd, name, srcShown, dst, st)
	}
	if err != nil {
		return err
	}
	if st.Nlink > 1 {
		p.links[key] = dst
	}
	return nil
}

func (p *putter) copyDir(dirfd int, name, srcShown, dst string, st *host.Stat) error {
	fd, err := unix.Openat(dirfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return failf("cannot open host directory", srcShown, err)
	}
	defer unix.Close(fd)
	if err := p.makeDir(dst, srcShown); err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err != nil {
		return failf("cannot read host directory", srcShown, err)
	}
	for _, n := range names {
		childShown := strings.TrimSuffix(srcShown, "/") + "/" + n
		cst, err := host.StatAt(fd, n)
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
	return p.setHostMeta(fd, -1, "", srcShown, dst, st)
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

func (p *putter) copyFile(dirfd int, name, srcShown, dst string, st *host.Stat) error {
	// O_NOATIME (Linux's: put_linux.go) keeps the source's atimes for
	// later comparisons; only the owner (or root) may use it.
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|openNoAtime, 0)
	if err == unix.EPERM && openNoAtime != 0 {
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
	return p.setHostMeta(fd, dirfd, name, srcShown, dst, st)
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

// setHostMeta gives dst the owner, xattrs, mode and times of the host
// entry: the open descriptor fd, or if fd is -1 the entry name of dirfd
// (its attributes read through entryPath).
func (p *putter) setHostMeta(fd, dirfd int, name, srcShown, dst string, st *host.Stat) error {
	var attrs []host.Xattr
	var err error
	if fd >= 0 {
		attrs, err = host.FdXattrs(fd)
	} else {
		attrs, err = host.LinkXattrs(entryPath(dirfd, name, srcShown))
	}
	if err != nil {
		return failf("cannot read the attributes of host file", srcShown, err)
	}
	return p.setMeta(dst, srcShown, st, attrs)
}
