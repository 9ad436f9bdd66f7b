package main

import (
	"os"
	"path"
	"time"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "get", usage: "[-nqf] [--force] IMAGE PATH DEST", summary: "copy PATH out of the image to DEST recursively, keeping mode, owner, times, links and xattrs", run: runGet})
}

// getOptions are get's options, on every system.
var getOptions = []optDef{
	{short: 'n', help: "do not set owners (uid/gid) on the copies"},
	{short: 'q', help: "do not warn about metadata the host refuses (xattrs, owners)"},
	{short: 'f', help: "replace existing host files (as cp -f); without it an existing file is an error"},
}

// hostMeta is what setMeta sets, as read from the image.
type hostMeta struct {
	uid, gid     uint32
	perm         uint32
	xattrs       []imageXattr
	atime, mtime time.Time
}

type imageXattr struct {
	name  string
	value []byte
}

// readImageMeta reads from the image what setMeta sets.
func readImageMeta(f *ext4go.File, st *ext4go.Stat) (hostMeta, error) {
	m := hostMeta{uid: st.UID, gid: st.GID, perm: uint32(st.Mode & 0o7777), atime: st.Atime, mtime: st.Mtime}
	attrs, err := f.ListXattr()
	if err != nil {
		return m, err
	}
	for _, a := range attrs {
		v, err := f.GetXattr(a)
		if err != nil {
			return m, err
		}
		m.xattrs = append(m.xattrs, imageXattr{a, v})
	}
	return m, nil
}

// openTop opens the image's path src without following a final symbolic
// link: for reading if it is a directory or a regular file.
func openTop(fsys *ext4go.FS, src string) (*ext4go.File, error) {
	if _, err := fsys.Lstat(src); err != nil {
		return nil, err
	}
	dir, err := fsys.Open(path.Dir(src))
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	d := dir.(*ext4go.File)
	if src == "." {
		return d.Reopen(os.O_RDONLY)
	}
	f, err := d.LookupAt(path.Base(src))
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && (fi.IsDir() || fi.Mode().IsRegular()) {
		defer f.Close()
		return f.Reopen(os.O_RDONLY)
	}
	return f, nil
}
