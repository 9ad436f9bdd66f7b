package main

import (
	"io/fs"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "chmod", usage: "[-R] IMAGE MODE PATH...",
		summary: "set permission bits (octal MODE, with setuid/setgid/sticky) of files in the image",
		opts: []optDef{
			{'R', "recursive", "", "change directories and their contents (symlinks inside are skipped)"},
		},
		parse: parseChmod,
	})
}

func parseChmod(o *opts) (action, error) {
	if err := wantArgs(o, 2, -1, "MODE PATH..."); err != nil {
		return nil, err
	}
	mode, err := parseMode(o.args[0], processUmask())
	if err != nil {
		return nil, err
	}
	recursive := o.has("R")
	return func(x *wctx) error {
		return x.each(o.args[1:], func(p string) error { return chmodPath(x.fsys, p, mode, recursive) })
	}, nil
}

// chmodPath sets the mode of p (following a symlink p), and with recursive
// of everything under it but symlinks, as GNU chmod (modeSpec.apply).
func chmodPath(fsys *ext4go.FS, p string, mode modeSpec, recursive bool) error {
	name := imagePath(p)
	set := func(name string, fi fs.FileInfo, shown string) error {
		m := mode.apply(uint32(fi.Sys().(*ext4go.Stat).Mode), fi.IsDir())
		if err := fsys.Chmod(name, fileMode(m)); err != nil {
			return failf("changing permissions of", shown, err)
		}
		return nil
	}
	fi, err := fsys.Stat(name)
	if err != nil {
		return failf("cannot access", p, err)
	}
	if err := set(name, fi, p); err != nil || !recursive || !fi.IsDir() {
		return err
	}
	ents, err := fsys.ReadDir(name)
	if err != nil {
		return failf("cannot read directory", p, err)
	}
	for _, d := range ents {
		err := walkTree(fsys, joinImage(name, d.Name()), func(n string, fi fs.FileInfo) error {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil
			}
			return set(n, fi, displayPath(n))
		})
		if err != nil {
			return err
		}
	}
	return nil
}
