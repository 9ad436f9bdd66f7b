package main

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Linux's lseek whence values for holes (not in package syscall).
const (
	seekData = 3
	seekHole = 4
)

// hostManifest walks a host directory, a kernel mount of an image, with
// the system calls a program would use: lstat, readlink, listxattr and
// getxattr, SEEK_DATA and SEEK_HOLE, read.
func hostManifest(root string) ([]string, error) {
	var entries []*entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		kind, perm := kindAndPerm(fi.Mode())
		sec, nsec := st.Mtim.Unix()
		e := &entry{path: path.Join("/", filepath.ToSlash(rel)), kind: kind, perm: perm, uid: st.Uid, gid: st.Gid,
			size: st.Size, nlink: uint64(st.Nlink), blocks: st.Blocks, mtime: time.Unix(sec, nsec), ino: st.Ino}
		switch kind {
		case "symlink":
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.extra = fmt.Sprintf("target=%q", t)
		case "chr", "blk":
			rdev := uint64(st.Rdev)
			major := uint32(rdev>>8&0xfff) | uint32(rdev>>32&^0xfff)
			minor := uint32(rdev&0xff) | uint32(rdev>>12&^0xff)
			e.extra = fmt.Sprintf("rdev=%d:%d", major, minor)
		case "reg":
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			ranges, err := hostDataRanges(f, st.Size)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if e.extra, err = digest(st.Size, ranges, f.ReadAt); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		// Xattrs of symlinks are not read: getxattr follows them, and
		// the tree sets none there.
		if kind != "symlink" {
			if e.xattrs, err = hostXattrs(p); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return finish(entries), nil
}

// hostDigest is the content digest of a host file.
func hostDigest(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	ranges, err := hostDataRanges(f, fi.Size())
	if err != nil {
		return "", err
	}
	d, err := digest(fi.Size(), ranges, f.ReadAt)
	return fmt.Sprintf("%s size=%d", d, fi.Size()), err
}

// hostDataRanges finds a file's data with SEEK_DATA and SEEK_HOLE.
func hostDataRanges(f *os.File, size int64) ([][2]int64, error) {
	var out [][2]int64
	for off := int64(0); off < size; {
		start, err := f.Seek(off, seekData)
		if err == syscall.ENXIO || err != nil && strings.Contains(err.Error(), "no such device or address") {
			break
		}
		if err != nil {
			return nil, err
		}
		end, err := f.Seek(start, seekHole)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]int64{start, end})
		off = end
	}
	return out, nil
}

// hostXattrs lists and reads a file's xattrs, sorted.
func hostXattrs(p string) ([]string, error) {
	buf := make([]byte, 64<<10)
	n, err := syscall.Listxattr(p, buf)
	if err != nil {
		return nil, fmt.Errorf("listxattr: %w", err)
	}
	var names []string
	for _, name := range strings.Split(string(buf[:n]), "\x00") {
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		v := make([]byte, 64<<10)
		n, err := syscall.Getxattr(p, name, v)
		if err != nil {
			return nil, fmt.Errorf("getxattr %s: %w", name, err)
		}
		out = append(out, xattrLine(name, v[:n]))
	}
	return out, nil
}
