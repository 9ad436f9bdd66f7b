package main

import (
	"errors"
	"io"
	"os"
	"syscall"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "write", usage: "[-a] IMAGE PATH",
		summary: "copy standard input into a file of the image, creating or truncating it",
		opts: []optDef{
			{'a', "append", "", "append instead of truncating"},
		},
		parse: parseWrite,
	})
}

func parseWrite(o *opts) (action, error) {
	if err := wantArgs(o, 1, 1, "PATH"); err != nil {
		return nil, err
	}
	appendTo := o.has("a")
	return func(x *wctx) error {
		if x.batch {
			return errors.New("write reads standard input, which is the batch script here; use put to copy a host file")
		}
		if x.e.stdin == nil {
			return errors.New("no standard input")
		}
		return writeFrom(x.fsys, o.args[0], x.e.stdin, appendTo)
	}, nil
}

// writeFrom copies r into the regular file p, creating it (0644) or
// truncating it (appending with appendTo).
func writeFrom(fsys *ext4go.FS, p string, r io.Reader, appendTo bool) error {
	name := imagePath(p)
	if fi, err := fsys.Stat(name); err == nil && !fi.Mode().IsRegular() {
		return failf("cannot write", p, syscall.EINVAL)
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if appendTo {
		flag = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		return failf("cannot open", p, err)
	}
	_, err = f.ReadFrom(r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failf("cannot write", p, err)
	}
	return nil
}
