package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/ext4go/ext4go"
)

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
