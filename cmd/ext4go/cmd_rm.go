package main

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "rm", usage: "[-r] [-f] [-d] IMAGE PATH...",
		summary: "remove files or directories from the image",
		opts: []optDef{
			{'r', "recursive", "", "remove directories and their contents"},
			{'R', "", "", "same as -r"},
			{'f', "force", "", "ignore missing paths"},
			{'d', "dir", "", "remove empty directories"},
		},
		parse: parseRm,
	})
}

func parseRm(o *opts) (action, error) {
	force := o.has("f")
	if !force {
		if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
			return nil, err
		}
	}
	recursive := o.has("r") || o.has("R")
	dirs := o.has("d")
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return removePath(x.fsys, p, recursive, force, dirs) })
	}, nil
}

// removePath removes p as rm does: directories only with recursive (or
// emptyDirs for empty ones); with force a missing p is no error.
func removePath(fsys *ext4go.FS, p string, recursive, force, emptyDirs bool) error {
	name := imagePath(p)
	if name == "." {
		return fmt.Errorf("refusing to remove the root directory %s", quotePath(p))
	}
	if isDotName(p) {
		return fmt.Errorf("refusing to remove '.' or '..' directory: skipping %s", quotePath(p))
	}
	fi, err := fsys.Lstat(name)
	if err != nil {
		if force && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return failf("cannot remove", p, err)
	}
	switch {
	case fi.IsDir() && recursive:
		err = fsys.RemoveAll(name)
	case fi.IsDir() && !emptyDirs:
		return failf("cannot remove", p, syscall.EISDIR)
	default:
		err = fsys.Remove(name)
	}
	if err != nil {
		return failf("cannot remove", p, err)
	}
	return nil
}
