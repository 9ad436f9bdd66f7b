package main

import (
	"errors"
	"io/fs"
	"path"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "mkdir", usage: "[-p] [-m MODE] IMAGE PATH...",
		summary: "create directories in the image (mode 0755 unless -m)",
		opts: []optDef{
			{'p', "parents", "", "no error if existing, make parent directories as needed"},
			{'m', "mode", "MODE", "octal mode of the created directory (parents get 0755)"},
		},
		parse: parseMkdir,
	})
}

func parseMkdir(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	mode := uint32(0o755)
	if s, ok := o.str("m"); ok {
		umask := processUmask()
		sp, err := parseMode(s, umask)
		if err != nil {
			return nil, err
		}
		mode = sp.mkdirMode(umask)
	}
	parents := o.has("p")
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return makeDir(x.fsys, p, parents, mode) })
	}, nil
}

// makeDir creates the directory p with mode; with parents, missing
// parents get 0755 and an existing directory is no error.
func makeDir(fsys *ext4go.FS, p string, parents bool, mode uint32) error {
	name := imagePath(p)
	if parents {
		if isDir(fsys, name) {
			return nil
		}
		if d := path.Dir(name); d != "." {
			if err := fsys.MkdirAll(d, 0o755); err != nil {
				return failf("cannot create directory", p, err)
			}
		}
	}
	if name == "." {
		return failf("cannot create directory", p, fs.ErrExist)
	}
	err := fsys.Mkdir(name, fileMode(mode))
	if err != nil && parents && errors.Is(err, fs.ErrExist) && isDir(fsys, name) {
		return nil
	}
	if err != nil {
		return failf("cannot create directory", p, err)
	}
	return nil
}
