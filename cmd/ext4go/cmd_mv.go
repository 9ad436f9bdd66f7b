package main

import (
	"fmt"
	"io/fs"
	"path"
	"syscall"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "mv", usage: "[-n] [-T] [--exchange] IMAGE SRC... DST",
		summary: "rename SRC to DST, or move SRC... into the directory DST",
		opts: []optDef{
			{'n', "no-clobber", "", "fail instead of replacing an existing DST (RENAME_NOREPLACE)"},
			{0, "exchange", "", "swap SRC and DST atomically (RENAME_EXCHANGE)"},
			{'T', "no-target-directory", "", "treat DST as a normal file even if it is a directory"},
			{'t', "target-directory", "DIR", "move all SRC arguments into DIR"},
			{'f', "force", "", "replace an existing DST (the default)"},
		},
		parse: parseMv,
	})
}

func parseMv(o *opts) (action, error) {
	flags := 0
	if o.has("n") {
		flags |= ext4go.RenameNoReplace
	}
	exchange := o.has("exchange")
	if exchange {
		if flags != 0 {
			return nil, usagef("--exchange and -n cannot be combined")
		}
		flags = ext4go.RenameExchange
	}
	noTarget := o.has("T") || exchange
	targetDir, hasTarget := o.str("t")
	switch {
	case hasTarget && noTarget:
		return nil, usagef("-t cannot be combined with -T or --exchange")
	case hasTarget:
		if err := wantArgs(o, 1, -1, "SRC..."); err != nil {
			return nil, err
		}
	case noTarget:
		if err := wantArgs(o, 2, 2, "SRC DST"); err != nil {
			return nil, err
		}
	default:
		if err := wantArgs(o, 2, -1, "SRC... DST"); err != nil {
			return nil, err
		}
	}
	return func(x *wctx) error {
		srcs, dst := o.args, targetDir
		if !hasTarget {
			srcs, dst = o.args[:len(o.args)-1], o.args[len(o.args)-1]
		}
		if noTarget {
			return movePath(x.fsys, srcs[0], dst, false, flags)
		}
		into := isDir(x.fsys, imagePath(dst))
		if !into && (hasTarget || len(srcs) > 1) {
			return fmt.Errorf("target %s is not a directory", quotePath(dst))
		}
		return x.each(srcs, func(src string) error { return movePath(x.fsys, src, dst, into, flags) })
	}, nil
}

// movePath renames src to dst, or into the directory dst if into. flags
// are ext4go.RenameWith flags.
func movePath(fsys *ext4go.FS, src, dst string, into bool, flags int) error {
	from, to := imagePath(src), imagePath(dst)
	shown := dst
	if into {
		to = joinImage(to, path.Base(from))
		shown = displayPath(to)
	}
	if from == "." {
		return failf("cannot move", src, syscall.EBUSY)
	}
	if _, err := fsys.Lstat(from); err != nil {
		return failf("cannot stat", src, err)
	}
	err := error(nil)
	if _, lerr := fsys.Lstat(to); lerr == nil && flags&ext4go.RenameNoReplace != 0 {
		// RenameWith treats two links of one inode as a no-op even with
		// RenameNoReplace; renameat2 fails with EEXIST.
		err = fs.ErrExist
	} else {
		err = fsys.RenameWith(from, to, flags)
	}
	if err != nil {
		return fmt.Errorf("cannot move %s to %s: %s", quotePath(src), quotePath(shown), errText(cause(err)))
	}
	return nil
}
