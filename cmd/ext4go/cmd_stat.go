package main

import (
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "stat", usage: "[--force] IMAGE PATH...", summary: "show the inode of a path (without following a final symlink)", run: runStat})
}

func runStat(e *env, args []string) error {
	fsys, o, err := openRead(e, "stat", nil, args, 2, -1)
	if err != nil {
		return err
	}
	defer fsys.Close()
	first := true
	names := loadIDNames(fsys)
	return eachOperand(e, "stat", o.args, func(p string) error {
		name := imagePath(p)
		fi, err := fsys.Lstat(name)
		if err != nil {
			return err
		}
		if !first {
			fmt.Fprintln(e.stdout)
		}
		first = false
		st := fi.Sys().(*ext4go.Stat)
		w := e.stdout
		fmt.Fprintf(w, "  File: %s", displayPath(name))
		if fi.Mode()&fs.ModeSymlink != 0 {
			if t, err := fsys.ReadLink(name); err == nil {
				fmt.Fprintf(w, " -> %s", t)
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "  Type: %s\n", fileTypeName(fi.Mode()))
		fmt.Fprintf(w, " Inode: %d  Links: %d  Generation: %d\n", st.Ino, st.Nlink, st.Generation)
		fmt.Fprintf(w, "  Mode: (%04o/%s)  Uid: (%5d/%8s)  Gid: (%5d/%8s)\n", st.Mode&0o7777, modeString(st.Mode),
			st.UID, names.user(st.UID), st.GID, names.group(st.GID))
		fmt.Fprintf(w, "  Size: %d  Blocks: %d (512-byte)\n", st.Size, st.Blocks)
		if fi.Mode()&fs.ModeDevice != 0 {
			fmt.Fprintf(w, "Device: %d,%d\n", st.Major(), st.Minor())
		}
		fmt.Fprintf(w, " Flags: %#x %s\n", st.Flags, strings.Join(ext4go.InodeFlagNames(st.Flags), ","))
		if st.FileACL != 0 {
			fmt.Fprintf(w, "   ACL: xattr block %d\n", st.FileACL)
		}
		if st.ProjectID != 0 {
			fmt.Fprintf(w, "Project: %d\n", st.ProjectID)
		}
		for _, t := range []struct {
			name string
			t    time.Time
		}{{"Access", st.Atime}, {"Modify", st.Mtime}, {"Change", st.Ctime}, {" Birth", st.Crtime}} {
			if t.t.IsZero() {
				fmt.Fprintf(w, "%s: -\n", t.name)
				continue
			}
			fmt.Fprintf(w, "%s: %s\n", t.name, t.t.UTC().Format("2006-01-02 15:04:05.000000000 -0700"))
		}
		attrs, err := fsys.ListXattr(name)
		if err != nil {
			return err
		}
		sort.Strings(attrs)
		for _, a := range attrs {
			v, err := fsys.GetXattr(name, a)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, " Xattr: %s=%s\n", a, xattrValueString(v))
		}
		return nil
	})
}

func fileTypeName(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "block device"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return "unknown"
}

// xattrValueString shows printable values as quoted text and others as hex,
// like getfattr.
func xattrValueString(v []byte) string {
	printable := true
	for i, c := range v {
		if (c < 0x20 || c > 0x7e) && !(c == 0 && i == len(v)-1) {
			printable = false
			break
		}
	}
	if printable {
		return fmt.Sprintf("%q", strings.TrimSuffix(string(v), "\x00"))
	}
	return fmt.Sprintf("0x%x", v)
}
