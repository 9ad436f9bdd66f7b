package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/host"
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

// putter copies host trees into an image. Where the host has *at calls
// (put_unix.go) it reads the host relative to open directory descriptors
// (openat, fstatat with AT_SYMLINK_NOFOLLOW), so trees deeper than
// PATH_MAX copy too and no symlink on the host is followed below SRC;
// elsewhere (put_other.go) it reads by path through os, with what that
// system keeps of a file (internal/host).
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

// fatal reports whether err dooms every further entry.
func fatal(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EIO) ||
		errors.Is(err, ext4go.ErrCorrupt) || errors.Is(err, ext4go.ErrReadOnly)
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

// makeDir makes room for a directory at dst: an existing directory is
// merged into, a missing one made.
func (p *putter) makeDir(dst, srcShown string) error {
	if dst == "." {
		return nil
	}
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
	return nil
}

// setMeta gives dst the owner, xattrs, mode and times of the host entry
// srcShown, in that order (times last, as every change moves only ctime).
// Where one fails, a non-directory dst (just made by put) is removed, as
// a failed copy leaves none behind; a directory stays with what was
// copied into it.
func (p *putter) setMeta(dst, srcShown string, st *host.Stat, attrs []host.Xattr) (err error) {
	if st.Type() != host.IFDIR {
		defer func() {
			if err == nil {
				return
			}
			if rerr := p.fsys.Remove(dst); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				p.report(failf("cannot remove the partial copy", displayPath(dst), rerr))
			}
		}()
	}
	shown := displayPath(dst)
	if !p.o.noOwner {
		if err := p.fsys.Lchown(dst, int(st.UID), int(st.GID)); err != nil {
			return failf("cannot set the owner of", shown, err)
		}
	}
	for _, a := range attrs {
		err := p.fsys.SetXattr(dst, a.Name, a.Value, 0)
		if err != nil && errors.Is(err, syscall.EOPNOTSUPP) {
			if !p.o.quiet && !p.warned[a.Name] {
				p.warned[a.Name] = true
				p.report(fmt.Errorf("warning: the image cannot store attribute %s (%s), first met on %s; not copied (further such warnings suppressed)",
					a.Name, errText(cause(err)), quotePath(srcShown)))
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cannot set attribute %s of %s: %s", a.Name, quotePath(shown), errText(cause(err)))
		}
	}
	if st.Type() != host.IFLNK {
		if err := p.fsys.Chmod(dst, fileMode(st.Mode&0o7777)); err != nil {
			return failf("cannot set the mode of", shown, err)
		}
	}
	if err := p.fsys.Lchtimes(dst, st.Atime, st.Mtime); err != nil {
		return failf("cannot set the times of", shown, err)
	}
	return nil
}
