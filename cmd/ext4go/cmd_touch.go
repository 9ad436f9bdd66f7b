package main

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "touch", usage: "[-c] [-a] [-m] [-h] [-d DATE | -r REF] IMAGE PATH...",
		summary: "set access and modification times to now (or DATE), creating missing files",
		opts: []optDef{
			{'c', "no-create", "", "do not create missing files"},
			{'d', "date", "DATE", "use DATE (RFC 3339 or @SECONDS) instead of now"},
			{'r', "reference", "REF", "use the times of REF (a path in the image)"},
			{'a', "", "", "change only the access time"},
			{'m', "", "", "change only the modification time"},
			{'h', "no-dereference", "", "change symbolic links themselves (never creates)"},
		},
		parse: parseTouch,
	})
}

func parseTouch(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	var when time.Time
	hasDate := false
	if s, ok := o.str("d"); ok {
		t, err := parseTime(s)
		if err != nil {
			return nil, err
		}
		when, hasDate = t, true
	}
	ref, hasRef := o.str("r")
	if hasRef && hasDate {
		return nil, usagef("cannot specify times from more than one source")
	}
	noCreate, noDeref := o.has("c"), o.has("h")
	setA, setM := !o.has("m") || o.has("a"), !o.has("a") || o.has("m")
	return func(x *wctx) error {
		atime, mtime := when, when
		switch {
		case hasRef:
			fi, err := x.fsys.Stat(imagePath(ref))
			if err != nil {
				return failf("failed to get attributes of", ref, err)
			}
			st := fi.Sys().(*ext4go.Stat)
			atime, mtime = st.Atime, st.Mtime
		case !hasDate:
			atime = time.Now()
			mtime = atime
		}
		if !setA {
			atime = time.Time{}
		}
		if !setM {
			mtime = time.Time{}
		}
		return x.each(o.args, func(p string) error { return touchPath(x.fsys, p, atime, mtime, noCreate, noDeref) })
	}, nil
}

// touchPath sets the times of p (a zero time keeps that one), creating an
// empty file (0644) unless noCreate or noDeref.
func touchPath(fsys *ext4go.FS, p string, atime, mtime time.Time, noCreate, noDeref bool) error {
	name := imagePath(p)
	stat := fsys.Stat
	if noDeref {
		stat = fsys.Lstat
	}
	if _, err := stat(name); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return failf("cannot touch", p, err)
		}
		if noCreate {
			return nil
		}
		if noDeref {
			return failf("setting times of", p, err)
		}
		f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return failf("cannot touch", p, err)
		}
		if err := f.Close(); err != nil {
			return failf("cannot touch", p, err)
		}
	}
	chtimes := fsys.Chtimes
	if noDeref {
		chtimes = fsys.Lchtimes
	}
	if err := chtimes(name, atime, mtime); err != nil {
		return failf("setting times of", p, err)
	}
	return nil
}
