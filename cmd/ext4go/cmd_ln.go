package main

import (
	"fmt"
	"io/fs"
	"syscall"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "ln", usage: "[-s] [-f] [-T] [-n] IMAGE TARGET... LINK",
		summary: "make a hard link (or with -s a symbolic link) LINK to TARGET, or links in the directory LINK",
		opts: []optDef{
			{'s', "symbolic", "", "make a symbolic link; TARGET is stored as given"},
			{'f', "force", "", "remove an existing LINK"},
			{'T', "no-target-directory", "", "treat LINK as a normal file even if it is a directory"},
			{'n', "no-dereference", "", "treat a LINK that is a symlink to a directory as a normal file"},
		},
		parse: parseLn,
	})
}

func parseLn(o *opts) (action, error) {
	noTarget := o.has("T")
	if noTarget {
		if err := wantArgs(o, 2, 2, "TARGET LINK"); err != nil {
			return nil, err
		}
	} else if err := wantArgs(o, 2, -1, "TARGET... LINK"); err != nil {
		return nil, err
	}
	symbolic, force, noDeref := o.has("s"), o.has("f"), o.has("n")
	return func(x *wctx) error {
		targets, link := o.args[:len(o.args)-1], o.args[len(o.args)-1]
		into := false
		if !noTarget {
			name := imagePath(link)
			if noDeref {
				fi, err := x.fsys.Lstat(name)
				into = err == nil && fi.IsDir()
			} else {
				into = isDir(x.fsys, name)
			}
		}
		if !into && len(targets) > 1 {
			return fmt.Errorf("target %s is not a directory", quotePath(link))
		}
		return x.each(targets, func(target string) error {
			l := link
			if into {
				b := baseName(target)
				if b == "/" || b == "." || b == ".." {
					return fmt.Errorf("cannot derive a link name inside %s from %s", quotePath(link), quotePath(target))
				}
				l = displayPath(joinImage(imagePath(link), b))
			}
			return makeLink(x.fsys, target, l, symbolic, force)
		})
	}, nil
}

// makeLink creates link as a hard link to the image path target, or with
// symbolic a symlink holding target. With force an existing non-directory
// link is replaced.
func makeLink(fsys *ext4go.FS, target, link string, symbolic, force bool) error {
	name := imagePath(link)
	what := "cannot create hard link"
	if symbolic {
		what = "cannot create symbolic link"
	}
	if force {
		if fi, err := fsys.Lstat(name); err == nil {
			if fi.IsDir() {
				return failf(what, link, syscall.EISDIR)
			}
			if !symbolic {
				if tfi, err := fsys.Lstat(imagePath(target)); err == nil && sameFile(tfi, fi) {
					return fmt.Errorf("%s and %s are the same file", quotePath(target), quotePath(link))
				}
			}
			if err := fsys.Remove(name); err != nil {
				return failf("cannot remove", link, err)
			}
		}
	}
	var err error
	if symbolic {
		err = fsys.Symlink(target, name)
	} else {
		if _, serr := fsys.Lstat(imagePath(target)); serr != nil {
			return failf("cannot access", target, serr)
		}
		err = fsys.Link(imagePath(target), name)
	}
	if err != nil {
		return fmt.Errorf("%s %s to %s: %s", what, quotePath(link), quotePath(target), errText(cause(err)))
	}
	return nil
}

func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*ext4go.Stat)
	sb, ok2 := b.Sys().(*ext4go.Stat)
	return ok1 && ok2 && sa.Ino == sb.Ino
}
