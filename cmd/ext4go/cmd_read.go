package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "ls", usage: "[-lnRa] [--force] IMAGE [PATH]", summary: "list a directory (or show a file) in the image", run: runLs})
	register(&command{name: "cat", usage: "[--force] IMAGE PATH...", summary: "write files of the image to standard output", run: runCat})
	register(&command{name: "stat", usage: "[--force] IMAGE PATH...", summary: "show the inode of a path (without following a final symlink)", run: runStat})
}

// openRead parses the command line of the read command name: its options
// defs and --force (read even if checksums do not match), then IMAGE and
// the operands after it, min to max operands in all counting IMAGE (max < 0:
// no limit). It opens IMAGE read-only and returns it with the parsed line,
// IMAGE removed from its operands. The caller closes the image.
func openRead(e *env, name string, defs []optDef, args []string, min, max int) (*ext4go.FS, *opts, error) {
	c := commands[name]
	defs = append(defs, optDef{long: "force", help: "read even if checksums do not match"},
		optDef{long: "ignore-journal", help: "read what is on disk without replaying the journal's changes not yet written home (may be stale)"})
	o, err := parseCmd(e, c, defs, args)
	if err != nil {
		return nil, nil, err
	}
	// The operands as the usage names them: "IMAGE [PATH]".
	if err := wantArgs(o, min, max, c.usage[strings.Index(c.usage, "IMAGE"):]); err != nil {
		return nil, nil, err
	}
	// A mounted journalled image needs recovery while mounted: its
	// journal is replayed in memory like any other (the warning says the
	// kernel may have more that is not written yet).
	warnInUse(e, o.args[0])
	fsys, err := ext4go.Open(o.args[0], &ext4go.Options{IgnoreChecksums: o.has("force"), IgnoreJournal: o.has("ignore-journal")})
	if err != nil {
		return nil, nil, imageError(c, o.args[0], err, true)
	}
	o.image, o.args = o.args[0], o.args[1:]
	return fsys, o, nil
}

// imagePath turns a user's path in the image ("/", "/a/b", "a/b/") into an
// io/fs name.
func imagePath(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
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

// warnSkipped prints a warning for every entry a listing of dir left out
// (err from ReadDir: a *ext4go.SkippedEntriesError), naming the
// directory, the entry and its inode, and returns how many; 0 for any
// other error.
func warnSkipped(w io.Writer, cmd, dir string, err error) int {
	var se *ext4go.SkippedEntriesError
	if !errors.As(err, &se) {
		return 0
	}
	for _, s := range se.Entries {
		what := fmt.Sprintf("entry %q (inode %d)", s.Name, s.Ino)
		if s.Name == "" && s.Ino == 0 {
			what = fmt.Sprintf("the entries from a damaged one on in its block %d", s.Block)
		}
		fmt.Fprintf(w, "ext4go %s: warning: %s: %s left out: %v\n", cmd, displayPath(dir), what, s.Err)
	}
	return len(se.Entries)
}

func displayPath(name string) string {
	if name == "." {
		return "/"
	}
	return "/" + name
}

// quoteName makes names with control characters or invalid UTF-8 printable,
// as ls -b does, so a listing is one line per entry.
func quoteName(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '\\' || r == 0xFFFD {
			q := fmt.Sprintf("%q", s)
			return q[1 : len(q)-1]
		}
	}
	return s
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

// typeLetters are ls -l's letters for the file types of an i_mode; other
// types show as '?'.
var typeLetters = map[uint16]byte{
	0x8000: '-', 0x4000: 'd', 0xA000: 'l', 0x2000: 'c', 0x6000: 'b', 0x1000: 'p', 0xC000: 's',
}

// modeString formats an i_mode like ls -l.
func modeString(m uint16) string {
	b := []byte("?rwxrwxrwx")
	if c, ok := typeLetters[m&0xF000]; ok {
		b[0] = c
	}
	for i := 0; i < 9; i++ {
		if m&(1<<(8-i)) == 0 {
			b[i+1] = '-'
		}
	}
	special := func(bit uint16, pos int, set, unsetExec byte) {
		if m&bit != 0 {
			if b[pos] == '-' {
				b[pos] = unsetExec
			} else {
				b[pos] = set
			}
		}
	}
	special(0o4000, 3, 's', 'S')
	special(0o2000, 6, 's', 'S')
	special(0o1000, 9, 't', 'T')
	return string(b)
}

func runCat(e *env, args []string) error {
	fsys, o, err := openRead(e, "cat", nil, args, 2, -1)
	if err != nil {
		return err
	}
	defer fsys.Close()
	return eachOperand(e, "cat", o.args, func(p string) error {
		f, err := fsys.Open(imagePath(p))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(e.stdout, f)
		return err
	})
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

// warnInUse warns that an image the kernel has mounted read-write may be
// read in a stale state (the kernel's changes may not be written yet).
// It reports whether it warned.
func warnInUse(e *env, image string) bool {
	if usage, writable, err := ext4go.InUse(image); err == nil && writable {
		fmt.Fprintf(e.stderr, "ext4go: warning: %s is %s; what is read may be stale\n", image, usage)
		return true
	}
	return false
}

// imageError adds to an error opening the image which operand was taken
// as the image, when that is a likely mistake (arguments in the wrong
// order): the file is missing or holds no ext4 filesystem; and, for a
// command that only reads, the way past a journal it cannot replay.
func imageError(c *command, image string, err error, reading bool) error {
	if errors.Is(err, ext4go.ErrNotExt4) || errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w\n(%q was taken as the image: usage: ext4go %s %s)", err, image, c.name, c.usage)
	}
	var ue *ext4go.UnsupportedError
	if reading && (errors.Is(err, ext4go.ErrJournalReplay) || errors.As(err, &ue) && strings.Contains(ue.Feature, "journal")) {
		return fmt.Errorf("%w (--ignore-journal reads the on-disk state, which may be stale)", err)
	}
	return err
}

// operandError says what went wrong with an operand in the user's words:
// the path as they wrote it, not the name inside the library.
func operandError(operand string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%s: %w", operand, err)
}

// eachOperand runs fn on every operand and goes on past failures, as
// coreutils do: each failure is reported, and the command fails at the
// end.
func eachOperand(e *env, name string, operands []string, fn func(operand string) error) error {
	failed := 0
	for _, op := range operands {
		if err := fn(op); err != nil {
			fmt.Fprintf(e.stderr, "ext4go %s: %v\n", name, operandError(op, err))
			failed++
		}
	}
	if failed > 0 {
		return errReported
	}
	return nil
}

// errReported is the error of a command that reported its failures
// itself: it exits 1 without another message.
var errReported = errors.New("reported")
