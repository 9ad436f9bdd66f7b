package main

import (
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/ext4go/ext4go"
)

// Paths in the image as the commands take them.

// joinImage returns the io/fs name of child inside directory dir.
func joinImage(dir, child string) string {
	if dir == "." {
		return child
	}
	return dir + "/" + child
}

// baseName is the last element of a path the user typed, ignoring
// trailing slashes ("/" for the root).
func baseName(p string) string {
	t := strings.TrimRight(p, "/")
	if t == "" {
		return "/"
	}
	return path.Base(t)
}

// isDotName reports whether p names "." or ".." as its last element,
// which rm refuses.
func isDotName(p string) bool {
	b := baseName(p)
	return b == "." || b == ".."
}

// isDir reports whether name is a directory, following symlinks.
func isDir(fsys *ext4go.FS, name string) bool {
	fi, err := fsys.Stat(name)
	return err == nil && fi.IsDir()
}

// realPath resolves every symbolic link in name (an io/fs name) as the
// kernel would with the image root as "/", so the xattr calls, which do
// not follow links, can act on a link's target. It fails as stat would.
func realPath(fsys *ext4go.FS, name string) (string, error) {
	if name == "." {
		return name, nil
	}
	todo := strings.Split(name, "/")
	var done []string
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := strings.Join(append(done, c), "/")
		fi, err := fsys.Lstat(cur)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return "", &fs.PathError{Op: "stat", Path: name, Err: syscall.ELOOP}
		}
		target, err := fsys.ReadLink(cur)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = done[:0]
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return strings.Join(done, "/"), nil
}

// walkTree calls fn on name and, if it is a directory (not following
// symlinks below name), on everything under it, parents first. A
// directory loop (a corrupt image) is an error, not an endless walk.
func walkTree(fsys *ext4go.FS, name string, fn func(name string, fi fs.FileInfo) error) error {
	fi, err := fsys.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fn(name, fi)
	}
	return fsys.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() {
				return failf("cannot read directory", displayPath(p), err)
			}
			return failf("cannot access", displayPath(p), err)
		}
		cfi, err := d.Info()
		if err != nil {
			return failf("cannot access", displayPath(p), err)
		}
		return fn(p, cfi)
	})
}
