//go:build !linux && !darwin && !freebsd

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/ext4go/ext4go"
)

// copyOut copies a tree out of an image into a host directory where there
// are no *at calls (Windows, WASI): by path, through os. What the host
// keeps: file data, directories, symbolic links (where the system lets
// this user make them), hard links, the permission bits os can set
// (Windows: only whether a file is read-only) and the modification and
// access times. Owners, extended attributes and device nodes, fifos and
// sockets have no place here: the first two are warned about once, the
// others are errors of their entry.
//
// Each name from the image is checked to be one plain local name
// (filepath.IsLocal, no separator of either kind: on Windows no drive,
// colon or reserved device name), and the copy descends only into
// directories it made or that are real directories (not links), so no
// name in the image can make it write outside the destination. The check
// and the use are two steps: a host path swapped for a link in between by
// another program is not guarded against, as it is on Unix.
type copyOut struct {
	fsys      *ext4go.FS
	stderr    io.Writer
	quiet     bool
	overwrite bool
	warnOwner bool
	links     map[uint32]string // inode -> host path of the first copy, for hard links
	above     map[uint32]bool   // directories being copied, by inode: an entry naming one is a loop
	buf       []byte
	warned    map[string]bool
	errs      int
}

func runGet(e *env, args []string) error {
	fsys, o, err := openRead(e, "get", getOptions, args, 3, 3)
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
	target, merge := dest, false
	if st, err := os.Stat(dest); err == nil && st.IsDir() {
		if src == "." {
			merge = true
		} else {
			target = filepath.Join(dest, path.Base(src))
		}
	}
	co := &copyOut{fsys: fsys, stderr: e.stderr, quiet: o.has("q"), overwrite: o.has("f"), warnOwner: !o.has("n"),
		links: map[uint32]string{}, above: map[uint32]bool{}, buf: make([]byte, 1<<20), warned: map[string]bool{}}
	if err := co.copy(target, src, top, merge); err != nil {
		return err
	}
	if co.errs > 0 {
		return fmt.Errorf("%s could not be copied", countOf(co.errs, "entry", "entries"))
	}
	return nil
}

// failed reports an entry that could not be copied; the copy goes on.
func (co *copyOut) failed(err error) {
	fmt.Fprintf(co.stderr, "ext4go get: %v\n", err)
	co.errs++
}

func (co *copyOut) warn(kind string, err error) {
	if co.quiet || co.warned[kind] {
		return
	}
	co.warned[kind] = true
	fmt.Fprintf(co.stderr, "ext4go get: warning: %s: %v (further such warnings suppressed)\n", kind, err)
}

// copy makes the host file p a copy of the image's file f, whose path in
// the image is src; merge is set for the image root copied into an
// existing DEST, whose own metadata stays.
func (co *copyOut) copy(p, src string, f *ext4go.File, merge bool) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st := fi.Sys().(*ext4go.Stat)
	mode := fi.Mode()
	if !mode.IsDir() && st.Nlink > 1 {
		if first, ok := co.links[st.Ino]; ok {
			if err := co.clear(p); err != nil {
				return err
			}
			if err := os.Link(first, p); err != nil {
				return fmt.Errorf("link %s: %w", p, err)
			}
			return nil
		}
	}
	if !mode.IsDir() {
		if err := co.clear(p); err != nil {
			return err
		}
	}
	switch {
	case mode.IsDir():
		return co.copyDir(p, src, f, st, merge)
	case mode.IsRegular():
		err = co.copyFile(p, f, st.Size)
	case mode&fs.ModeSymlink != 0:
		var target string
		if target, err = f.ReadLink(); err == nil {
			err = os.Symlink(filepath.FromSlash(target), p)
		}
	default:
		err = fmt.Errorf("device nodes, fifos and sockets cannot be made on %s", runtime.GOOS)
	}
	if err != nil {
		return co.createError(p, src, err)
	}
	if err := co.setMeta(p, src, f, st, mode); err != nil {
		return err
	}
	if st.Nlink > 1 {
		co.links[st.Ino] = p
	}
	return nil
}

// clear removes an existing host non-directory at p with -f (as cp -f);
// without -f the creation then fails on it.
func (co *copyOut) clear(p string) error {
	if !co.overwrite {
		return nil
	}
	if fi, err := os.Lstat(p); err == nil && !fi.IsDir() {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("cannot remove the existing host file %s: %w", p, err)
		}
	}
	return nil
}

func (co *copyOut) createError(p, src string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s: the host file %s exists; use -f to overwrite it", displayPath(src), p)
	}
	return fmt.Errorf("%s: %w", displayPath(src), err)
}

// localName reports whether name from the image is one plain name on this
// host: nothing that climbs out, names a drive or device, or holds a
// separator of either kind.
func localName(name string) bool {
	return name != "." && name != ".." && filepath.IsLocal(name) && !strings.ContainsAny(name, `/\`)
}

// copyDir copies the directory d into the host directory p, made here or
// existing as a real directory (not a link).
func (co *copyOut) copyDir(p, src string, d *ext4go.File, st *ext4go.Stat, merge bool) error {
	if co.above[st.Ino] {
		return &fs.PathError{Op: "get", Path: src, Err: &ext4go.CorruptError{What: "directory", Block: -1, Ino: st.Ino, Detail: "names a directory above it (a loop)"}}
	}
	co.above[st.Ino] = true
	defer delete(co.above, st.Ino)
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", p, err)
	}
	if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || fi.Mode()&(fs.ModeSymlink|fs.ModeIrregular) != 0 {
		return fmt.Errorf("%s: exists and is not a directory", p)
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		return err
	}
	for _, e := range ents {
		child := path.Join(src, e.Name())
		if !localName(e.Name()) {
			co.failed(fmt.Errorf("%s: the name %q cannot be made on %s", displayPath(child), e.Name(), runtime.GOOS))
			continue
		}
		c, err := d.OpenEntry(e)
		if err == nil {
			err = co.copy(filepath.Join(p, e.Name()), child, c, false)
			c.Close()
		}
		if err != nil {
			co.failed(err)
		}
	}
	if merge {
		return nil // the image root merged into an existing DEST keeps DEST's metadata
	}
	return co.setMeta(p, src, d, st, fs.ModeDir)
}

// copyFile writes the data ranges of f to a new host file p (O_EXCL:
// nothing is overwritten), and sets its size.
func (co *copyOut) copyFile(p string, f *ext4go.File, size int64) error {
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = co.copyData(out, f, size)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func (co *copyOut) copyData(out *os.File, f *ext4go.File, size int64) error {
	ranges, err := f.DataRanges()
	if err != nil {
		return err
	}
	for _, r := range ranges {
		for off := r.Off; off < r.Off+r.Len; {
			n := min(int64(len(co.buf)), r.Off+r.Len-off)
			m, err := f.ReadAt(co.buf[:n], off)
			if m > 0 {
				if _, err := out.WriteAt(co.buf[:m], off); err != nil {
					return err
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
	return out.Truncate(size)
}

// setMeta sets what this host keeps of the image file's metadata on p:
// the permission bits and the times (not those of a symbolic link, which
// os cannot set without following it). Owners and xattrs are warned
// about once.
func (co *copyOut) setMeta(p, src string, f *ext4go.File, st *ext4go.Stat, mode fs.FileMode) error {
	m, err := readImageMeta(f, st)
	if err != nil {
		return err
	}
	if co.warnOwner && (m.uid != 0 || m.gid != 0) {
		co.warn("cannot set owner", fmt.Errorf("owners are not kept on %s (-n: do not try)", runtime.GOOS))
	}
	if len(m.xattrs) > 0 {
		co.warn("cannot set xattr "+m.xattrs[0].name, fmt.Errorf("extended attributes are not kept on %s", runtime.GOOS))
	}
	if mode&fs.ModeSymlink != 0 {
		return nil
	}
	if err := os.Chmod(p, fileMode(m.perm)); err != nil {
		co.warn("cannot set mode", err)
	}
	if err := os.Chtimes(p, m.atime, m.mtime); err != nil {
		return fmt.Errorf("set times of %s: %w", displayPath(src), err)
	}
	return nil
}
