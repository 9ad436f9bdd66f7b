package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "ls", usage: "[-lnRa] [--force] IMAGE [PATH]", summary: "list a directory (or show a file) in the image", run: runLs})
}

func runLs(e *env, args []string) error {
	fsys, o, err := openRead(e, "ls", []optDef{
		{short: 'l', help: "long listing: mode, links, owner and group (named by the image's /etc/passwd and /etc/group), size, time"},
		{short: 'n', long: "numeric-uid-gid", help: "as -l, with owner and group as numbers"},
		{short: 'R', long: "recursive", help: "list subdirectories recursively"},
		{short: 'a', long: "all", help: "accepted for compatibility; . and .. are never listed"},
	}, args, 1, 2)
	if err != nil {
		return err
	}
	defer fsys.Close()
	long, recursive := o.has("l") || o.has("n"), o.has("R")
	var names *idNames
	if long && !o.has("n") {
		names = loadIDNames(fsys)
	}
	name := "."
	if len(o.args) == 1 {
		name = imagePath(o.args[0])
	}
	fi, err := fsys.Lstat(name)
	if err != nil {
		if len(o.args) == 1 {
			return operandError(o.args[0], err)
		}
		return err
	}
	if !fi.IsDir() {
		printEntry(e.stdout, fsys, name, fi, long, names)
		return nil
	}
	var firstErr error
	report := func(err error) {
		fmt.Fprintf(e.stderr, "ext4go ls: %v\n", err)
		if firstErr == nil {
			firstErr = err
		}
	}
	// Directories are read through the one above (OpenAt), so a deep tree
	// costs what it holds; above catches a loop in a corrupt image.
	above := map[uint32]bool{}
	var list func(d *ext4go.File, dir string, header bool)
	list = func(d *ext4go.File, dir string, header bool) {
		if above[d.Ino()] {
			report(&fs.PathError{Op: "ls", Path: dir, Err: &ext4go.CorruptError{What: "directory", Block: -1, Ino: d.Ino(), Detail: "names a directory above it (a loop)"}})
			return
		}
		above[d.Ino()] = true
		defer delete(above, d.Ino())
		ents, err := d.ReadDir(-1)
		if err != nil {
			if warnSkipped(e.stderr, "ls", dir, err) == 0 {
				report(err)
				return
			}
			if firstErr == nil {
				firstErr = err // the listing goes on with what could be read
			}
		}
		if header {
			fmt.Fprintf(e.stdout, "%s:\n", displayPath(dir))
		}
		var subdirs []string
		for _, ent := range ents {
			p := path.Join(dir, ent.Name())
			if long {
				info, err := ent.Info()
				if err != nil {
					fmt.Fprintf(e.stderr, "ext4go ls: %s: %v\n", p, err)
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				printEntry(e.stdout, fsys, p, info, true, names)
			} else {
				fmt.Fprintln(e.stdout, quoteName(ent.Name()))
			}
			if ent.IsDir() {
				subdirs = append(subdirs, ent.Name())
			}
		}
		if recursive {
			for _, s := range subdirs {
				fmt.Fprintln(e.stdout)
				c, err := d.OpenAt(s)
				if err != nil {
					report(err)
					continue
				}
				list(c, path.Join(dir, s), true)
				c.Close()
			}
		}
	}
	top, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer top.Close()
	list(top, name, recursive)
	if firstErr != nil {
		return errors.New("some entries could not be read")
	}
	return nil
}

// printEntry prints one line of ls; names (nil: numbers) names owners.
func printEntry(w io.Writer, fsys *ext4go.FS, name string, fi fs.FileInfo, long bool, names *idNames) {
	base := quoteName(path.Base(name))
	if name == "." {
		base = "."
	}
	if !long {
		fmt.Fprintln(w, base)
		return
	}
	st := fi.Sys().(*ext4go.Stat)
	size := fmt.Sprint(st.Size)
	if fi.Mode()&fs.ModeDevice != 0 {
		size = fmt.Sprintf("%d, %d", st.Major(), st.Minor())
	}
	line := fmt.Sprintf("%s %3d %-8s %-8s %10s %s %s", modeString(st.Mode), st.Nlink, names.user(st.UID), names.group(st.GID), size,
		st.Mtime.UTC().Format("2006-01-02 15:04"), base)
	if fi.Mode()&fs.ModeSymlink != 0 {
		if t, err := fsys.ReadLink(name); err == nil {
			line += " -> " + quoteName(t)
		}
	}
	fmt.Fprintln(w, line)
}
