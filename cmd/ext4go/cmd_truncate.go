package main

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "truncate", usage: "[-c] {-s SIZE | -r REF} IMAGE PATH...",
		summary: "shrink or extend files to SIZE, creating missing ones",
		opts: []optDef{
			{'s', "size", "SIZE", "new size: N[KMGTPE][iB|B], or +N, -N, <N, >N, /N, %N relative to the current size"},
			{'r', "reference", "REF", "use the size of REF (a path in the image)"},
			{'c', "no-create", "", "do not create missing files"},
		},
		parse: parseTruncate,
	})
}

func parseTruncate(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	s, hasSize := o.str("s")
	ref, hasRef := o.str("r")
	var spec sizeSpec
	switch {
	case !hasSize && !hasRef:
		return nil, usagef("you must specify either -s SIZE or -r REF")
	case hasSize:
		var err error
		if spec, err = parseSizeSpec(s); err != nil {
			return nil, err
		}
		if hasRef && spec.op == 0 {
			return nil, usagef("you must specify a relative -s SIZE with -r REF")
		}
	}
	noCreate := o.has("c")
	return func(x *wctx) error {
		sp := spec
		if hasRef {
			fi, err := x.fsys.Stat(imagePath(ref))
			if err != nil {
				return failf("cannot stat", ref, err)
			}
			n, err := sp.apply(fi.Size())
			if !hasSize {
				n, err = fi.Size(), nil
			}
			if err != nil {
				return err
			}
			sp = sizeSpec{n: n}
		}
		return x.each(o.args, func(p string) error { return truncatePath(x.fsys, p, sp, noCreate) })
	}, nil
}

// truncatePath sets the size of the regular file p, creating it (0644)
// unless noCreate.
func truncatePath(fsys *ext4go.FS, p string, sp sizeSpec, noCreate bool) error {
	name := imagePath(p)
	flag := os.O_WRONLY
	if fi, err := fsys.Stat(name); err == nil {
		if !fi.Mode().IsRegular() {
			return failf("cannot truncate", p, syscall.EINVAL)
		}
	} else if errors.Is(err, fs.ErrNotExist) && noCreate {
		return nil
	} else {
		flag |= os.O_CREATE
	}
	f, err := fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		return failf("cannot open", p, err)
	}
	fi, err := f.Stat()
	if err == nil {
		var n int64
		if n, err = sp.apply(fi.Size()); err == nil {
			err = f.Truncate(n)
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failf("failed to truncate", p, err)
	}
	return nil
}
