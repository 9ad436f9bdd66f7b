package main

// The write commands change an image. Each one is a writeCommand: a parse
// function that checks its command line (GNU getopt_long conventions:
// options anywhere, bundled short options, --long[=value], "--") and
// returns an action, a function on an open *ext4go.FS. Run alone, the
// command opens the image writable, runs the action and closes the image;
// batch runs many actions in one open (cmd_batch.go). Commands taking
// several paths go on past a failing one and report each failure, as
// coreutils do; the exit status is then 1.

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ext4go/ext4go"
)

// writeCommand is a command that changes an image (getfattr only reads it,
// but belongs with setfattr and works in batch).
type writeCommand struct {
	name    string
	usage   string // with IMAGE; batch lines omit it
	summary string
	opts    []optDef
	// readOnly opens the image read-only when the command runs alone.
	readOnly bool
	// parse checks the options and operands (IMAGE removed) and returns
	// the action to run on the open image.
	parse func(o *opts) (action, error)
}

// action is a parsed write command, ready to run on an open filesystem.
type action func(x *wctx) error

// wctx is what an action runs with.
type wctx struct {
	fsys   *ext4go.FS
	e      *env
	prefix string // put before reported errors: "ext4go rm: " or "ext4go batch: line 3: rm: "
	batch  bool
}

// report prints a failure that does not stop the command.
func (x *wctx) report(err error) { fmt.Fprintf(x.e.stderr, "%s%v\n", x.prefix, err) }

// each runs fn on every operand, going on after failures as coreutils do.
// All failures but the last are reported here; the last is returned for
// the caller to report, so a failing command always returns an error.
func (x *wctx) each(args []string, fn func(arg string) error) error {
	var last error
	for _, a := range args {
		if err := fn(a); err != nil {
			if last != nil {
				x.report(last)
			}
			last = err
		}
	}
	return last
}

var writeCommands = map[string]*writeCommand{}

func registerWrite(c *writeCommand) {
	writeCommands[c.name] = c
	register(&command{name: c.name, usage: c.usage, summary: c.summary,
		run: func(e *env, args []string) error { return runWrite(c, e, args) }})
}

// runWrite runs c from the command line: IMAGE is its first operand.
func runWrite(c *writeCommand, e *env, args []string) error {
	defs := c.opts
	if !c.readOnly {
		defs = append(defs[:len(defs):len(defs)], optDef{long: "allow-unclean", help: "write even though the filesystem was not cleanly unmounted or has errors (check it with e2fsck -f first)"},
			optDef{long: "no-journal", help: "write in place without the filesystem's journal (faster; a crash may need e2fsck)"})
	}
	o, err := parseCmd(e, commands[c.name], defs, args)
	if err != nil {
		return err
	}
	if len(o.args) == 0 {
		return usagef("missing IMAGE")
	}
	image := o.args[0]
	o.args = o.args[1:]
	act, err := c.parse(o)
	if err != nil {
		return err
	}
	if c.readOnly {
		warnInUse(e, image)
	}
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: !c.readOnly, AllowUnclean: o.has("allow-unclean"), NoJournal: o.has("no-journal")})
	if err != nil {
		return imageError(commands[c.name], image, err, c.readOnly)
	}
	x := &wctx{fsys: fsys, e: e, prefix: "ext4go " + c.name + ": "}
	err = act(x)
	if cerr := fsys.Close(); cerr != nil {
		if err != nil {
			x.report(err)
		}
		return fmt.Errorf("closing %s: %w", image, cerr)
	}
	return err
}

// parseCmd parses the command line of c, whose options are defs, with
// parseOpts. On --help it prints c's usage and options to standard output
// (asked for, as coreutils prints it) and returns flag.ErrHelp, which run
// turns into exit status 0.
func parseCmd(e *env, c *command, defs []optDef, args []string) (*opts, error) {
	o, err := parseOpts(defs, args)
	if errors.Is(err, flag.ErrHelp) {
		printOptUsage(e.stdout, c, defs)
	}
	return o, err
}

func printOptUsage(w io.Writer, c *command, defs []optDef) {
	fmt.Fprintf(w, "usage: ext4go %s %s\n%s\n", c.name, c.usage, c.summary)
	for _, d := range defs {
		var names []string
		if d.short != 0 {
			names = append(names, "-"+string(d.short))
		}
		if d.long != "" {
			names = append(names, "--"+d.long)
		}
		n := strings.Join(names, ", ")
		if d.arg != "" {
			n += " " + d.arg
		}
		fmt.Fprintf(w, "  %-24s %s\n", n, d.help)
	}
	printExamples(w, c.name)
}

// optDef is one option of a command.
type optDef struct {
	short byte   // 0 for a long-only option
	long  string // "" for a short-only option
	arg   string // name of its argument; "" for a flag
	help  string
}

// key names the option in opts: its short letter, else its long name.
func (d optDef) key() string {
	if d.short != 0 {
		return string(d.short)
	}
	return d.long
}

// opts is a parsed command line.
type opts struct {
	vals map[string][]string // by optDef.key, in order ("" for flags)
	args []string            // operands
	// image is the IMAGE operand as given, once openRead has taken it
	// from args.
	image string
}

func (o *opts) has(k string) bool { return len(o.vals[k]) > 0 }

// str returns the last value given for k.
func (o *opts) str(k string) (string, bool) {
	v := o.vals[k]
	if len(v) == 0 {
		return "", false
	}
	return v[len(v)-1], true
}

// parseOpts parses args as getopt_long does with argument permutation:
// options may come before, between and after operands; short flags bundle
// ("-rf"); a short option's argument may be attached ("-m755") or follow;
// long options take "--name=value" or "--name value" and may be
// abbreviated to a unique prefix; "--" ends the options. --help (and -h
// where the command has no -h of its own) returns flag.ErrHelp.
func parseOpts(defs []optDef, args []string) (*opts, error) {
	o := &opts{vals: map[string][]string{}}
	hasShortH := false
	for _, d := range defs {
		if d.short == 'h' {
			hasShortH = true
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.args = append(o.args, args[i+1:]...)
			return o, nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			if name == "help" {
				return nil, flag.ErrHelp
			}
			d, err := findLong(defs, name)
			if err != nil {
				return nil, err
			}
			switch {
			case d.arg == "" && hasVal:
				return nil, usagef("option '--%s' doesn't allow an argument", d.long)
			case d.arg != "" && !hasVal:
				if i+1 >= len(args) {
					return nil, usagef("option '--%s' requires an argument", d.long)
				}
				i++
				val = args[i]
			}
			o.vals[d.key()] = append(o.vals[d.key()], val)
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := a[j]
				d := findShort(defs, c)
				if d == nil {
					if c == 'h' && !hasShortH {
						return nil, flag.ErrHelp
					}
					// "-force": Go's flag package took long options
					// with one dash; point to the two-dash spelling.
					if ld, _ := findLong(defs, a[1:]); ld != nil && ld.long == a[1:] {
						return nil, usagef("invalid option -- '%c' (did you mean '--%s'?)", c, ld.long)
					}
					return nil, usagef("invalid option -- '%c'", c)
				}
				if d.arg == "" {
					o.vals[d.key()] = append(o.vals[d.key()], "")
					continue
				}
				val := a[j+1:]
				if val == "" {
					if i+1 >= len(args) {
						return nil, usagef("option requires an argument -- '%c'", c)
					}
					i++
					val = args[i]
				}
				o.vals[d.key()] = append(o.vals[d.key()], val)
				break
			}
		default:
			o.args = append(o.args, a)
		}
	}
	return o, nil
}

func findShort(defs []optDef, c byte) *optDef {
	for i := range defs {
		if defs[i].short == c {
			return &defs[i]
		}
	}
	return nil
}

// exactLong reports whether "name" or "name=value" names a long option
// exactly.
func exactLong(defs []optDef, arg string) bool {
	name, _, _ := strings.Cut(arg, "=")
	for _, d := range defs {
		if d.long != "" && d.long == name {
			return true
		}
	}
	return false
}

func findLong(defs []optDef, name string) (*optDef, error) {
	var match *optDef
	for i := range defs {
		d := &defs[i]
		if d.long == "" || !strings.HasPrefix(d.long, name) || name == "" {
			continue
		}
		if d.long == name {
			return d, nil
		}
		if match != nil {
			return nil, usagef("option '--%s' is ambiguous", name)
		}
		match = d
	}
	if match == nil {
		return nil, usagef("unrecognized option '--%s'", name)
	}
	return match, nil
}

// wantArgs checks the number of operands.
func wantArgs(o *opts, min, max int, what string) error {
	n := len(o.args)
	switch {
	case n < min && n == 0:
		return usagef("missing operand: want %s", what)
	case n < min:
		return usagef("missing operand after '%s': want %s", o.args[n-1], what)
	case max >= 0 && n > max:
		return usagef("extra operand '%s': want %s", o.args[max], what)
	}
	return nil
}

// --- Messages ---

// pathError is a failure on a path, worded like coreutils:
// "cannot remove '/a': no such file or directory".
type pathError struct {
	what string // "cannot remove"
	path string
	err  error
}

func (e *pathError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.what, quotePath(e.path), errText(e.err))
}

func (e *pathError) Unwrap() error { return e.err }

// failf wraps err (without the operation and path ext4go puts around it)
// as a failure of what on p.
func failf(what, p string, err error) error {
	return &pathError{what: what, path: p, err: cause(err)}
}

// cause strips the *fs.PathError or *os.LinkError ext4go wraps errors in:
// messages name the path as the user typed it instead.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// errText words the common errors as the C library does.
func errText(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "file exists"
	case errors.Is(err, fs.ErrInvalid):
		return "invalid argument"
	}
	return err.Error()
}

// quotePath quotes a path for a message, escaping control characters.
func quotePath(p string) string { return "'" + quoteName(p) + "'" }

// --- Argument syntax ---

// fileMode converts permission and set-id/sticky bits to an fs.FileMode.
func fileMode(perm uint32) fs.FileMode {
	m := fs.FileMode(perm & 0o777)
	if perm&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if perm&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// sizeSpec is coreutils truncate's SIZE: an absolute size or, with op,
// one relative to the current size.
type sizeSpec struct {
	op byte // 0, '+', '-', '<' (at most), '>' (at least), '/' (round down to a multiple), '%' (round up)
	n  int64
}

func parseSizeSpec(s string) (sizeSpec, error) {
	var sp sizeSpec
	if s != "" && strings.IndexByte("+-<>/%", s[0]) >= 0 {
		sp.op = s[0]
		s = s[1:]
	}
	n, err := parseByteSize(s)
	if err != nil {
		return sp, usagef("%v", err)
	}
	if (sp.op == '/' || sp.op == '%') && n == 0 {
		return sp, usagef("division by zero in size")
	}
	sp.n = n
	return sp, nil
}

// apply returns the new size of a file of size cur.
func (sp sizeSpec) apply(cur int64) (int64, error) {
	switch sp.op {
	case 0:
		return sp.n, nil
	case '+':
		if cur > math.MaxInt64-sp.n {
			return 0, syscall.EFBIG
		}
		return cur + sp.n, nil
	case '-':
		return max(cur-sp.n, 0), nil
	case '<':
		return min(cur, sp.n), nil
	case '>':
		return max(cur, sp.n), nil
	case '/':
		return cur / sp.n * sp.n, nil
	default: // '%'
		r := (cur + sp.n - 1) / sp.n * sp.n
		if r < cur {
			return 0, syscall.EFBIG
		}
		return r, nil
	}
}

// parseTime parses touch -d: RFC 3339 (with or without the zone, "T" or a
// space between date and time, fractions of seconds), a bare date, or
// "@SECONDS[.FRACTION]" since the epoch. Times without a zone are local.
func parseTime(s string) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		secs, frac, _ := strings.Cut(rest, ".")
		sec, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || len(frac) > 9 || strings.Trim(frac, "0123456789") != "" {
			return time.Time{}, usagef("invalid date '%s'", s)
		}
		ns := int64(0)
		if frac != "" {
			ns, _ = strconv.ParseInt((frac + "000000000")[:9], 10, 64)
			if sec < 0 {
				ns = -ns
			}
		}
		return time.Unix(sec, ns), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("invalid date '%s' (want RFC 3339, e.g. 2024-05-01T12:00:00Z, or @SECONDS)", s)
}

// --- Paths in the image ---

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

func init() {
	registerWrite(&writeCommand{
		name: "mkdir", usage: "[-p] [-m MODE] IMAGE PATH...",
		summary: "create directories in the image (mode 0755 unless -m)",
		opts: []optDef{
			{'p', "parents", "", "no error if existing, make parent directories as needed"},
			{'m', "mode", "MODE", "octal mode of the created directory (parents get 0755)"},
		},
		parse: parseMkdir,
	})
	registerWrite(&writeCommand{
		name: "rm", usage: "[-r] [-f] [-d] IMAGE PATH...",
		summary: "remove files or directories from the image",
		opts: []optDef{
			{'r', "recursive", "", "remove directories and their contents"},
			{'R', "", "", "same as -r"},
			{'f', "force", "", "ignore missing paths"},
			{'d', "dir", "", "remove empty directories"},
		},
		parse: parseRm,
	})
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
	registerWrite(&writeCommand{
		name: "ln", usage: "[-s] [-f] [-T] [-n] IMAGE TARGET... LINK",
		summary: "make a hard link (or with -s a symbolic link) LINK to TARGET, or links in the directory LINK",
		opts: []optDef{
			{'s', "symbolic", "", "make a symbolic link; TARGET is stored as given"},
			{'f', "force", "", "remove an existing LINK"},
			{'T', "no-target-directory", "", "treat LINK as a normal file even if it is a directory"},
			{'n', "no-dereference", "", "treat a LINK that is a symlink to a directory as a normal file"},
		},
		parse: parseLn,
	})
	registerWrite(&writeCommand{
		name: "chmod", usage: "[-R] IMAGE MODE PATH...",
		summary: "set permission bits (octal MODE, with setuid/setgid/sticky) of files in the image",
		opts: []optDef{
			{'R', "recursive", "", "change directories and their contents (symlinks inside are skipped)"},
		},
		parse: parseChmod,
	})
	registerWrite(&writeCommand{
		name: "chown", usage: "[-h] [-R] IMAGE [UID][:[GID]] PATH...",
		summary: "set owner and group (numbers, or names from the image's /etc/passwd and /etc/group)",
		opts: []optDef{
			{'h', "no-dereference", "", "change symbolic links themselves"},
			{'R', "recursive", "", "change directories and their contents (symlinks themselves, never followed)"},
		},
		parse: parseChown,
	})
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
	registerWrite(&writeCommand{
		name: "fallocate", usage: "[-n] [-p | -z | -d] [-o OFFSET] -l LENGTH IMAGE PATH",
		summary: "preallocate, punch or zero a range of a file (as util-linux fallocate)",
		opts: []optDef{
			{'o', "offset", "OFFSET", "start of the range (default 0)"},
			{'l', "length", "LENGTH", "length of the range"},
			{'n', "keep-size", "", "do not change the file size"},
			{'p', "punch-hole", "", "free the range (implies -n)"},
			{'z', "zero-range", "", "make the range read as zeros, keeping it allocated"},
			{'d', "dig-holes", "", "punch out every all-zero block (in the range, or the whole file)"},
		},
		parse: parseFallocate,
	})
	registerWrite(&writeCommand{
		name: "setfattr", usage: "{-n NAME [-v VALUE] | -x NAME} [-h] IMAGE PATH...",
		summary: "set or remove an extended attribute (VALUE as text, \"quoted text\", 0x hex or 0s base64)",
		opts: []optDef{
			{'n', "name", "NAME", "attribute to set, e.g. user.comment"},
			{'v', "value", "VALUE", "its value (default empty)"},
			{'x', "remove", "NAME", "attribute to remove"},
			{'h', "no-dereference", "", "act on symbolic links themselves"},
			{0, "raw", "", "take VALUE as it is, without decoding"},
		},
		parse: parseSetfattr,
	})
	registerWrite(&writeCommand{
		name: "getfattr", usage: "[-d] [-n NAME] [-e ENC] [-m PATTERN] [-h] [-R] IMAGE PATH...",
		summary:  "print extended attributes as getfattr does",
		readOnly: true,
		opts: []optDef{
			{'n', "name", "NAME", "print only this attribute, with its value"},
			{'d', "dump", "", "print values too"},
			{'e', "encoding", "ENC", "value encoding: text, hex or base64 (default: text, or hex if not printable)"},
			{'m', "match", "PATTERN", "names to print, a regular expression (default ^user\\.; - for all)"},
			{'h', "no-dereference", "", "examine symbolic links themselves"},
			{'R', "recursive", "", "list directories recursively"},
			{0, "only-values", "", "print the bare values only"},
			{0, "absolute-names", "", "accepted; paths are always printed as given"},
		},
		parse: parseGetfattr,
	})
	registerWrite(&writeCommand{
		name: "write", usage: "[-a] IMAGE PATH",
		summary: "copy standard input into a file of the image, creating or truncating it",
		opts: []optDef{
			{'a', "append", "", "append instead of truncating"},
		},
		parse: parseWrite,
	})
}

// --- mkdir ---

func parseMkdir(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	mode := uint32(0o755)
	if s, ok := o.str("m"); ok {
		umask := processUmask()
		sp, err := parseMode(s, umask)
		if err != nil {
			return nil, err
		}
		mode = sp.mkdirMode(umask)
	}
	parents := o.has("p")
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return makeDir(x.fsys, p, parents, mode) })
	}, nil
}

// makeDir creates the directory p with mode; with parents, missing
// parents get 0755 and an existing directory is no error.
func makeDir(fsys *ext4go.FS, p string, parents bool, mode uint32) error {
	name := imagePath(p)
	if parents {
		if isDir(fsys, name) {
			return nil
		}
		if d := path.Dir(name); d != "." {
			if err := fsys.MkdirAll(d, 0o755); err != nil {
				return failf("cannot create directory", p, err)
			}
		}
	}
	if name == "." {
		return failf("cannot create directory", p, fs.ErrExist)
	}
	err := fsys.Mkdir(name, fileMode(mode))
	if err != nil && parents && errors.Is(err, fs.ErrExist) && isDir(fsys, name) {
		return nil
	}
	if err != nil {
		return failf("cannot create directory", p, err)
	}
	return nil
}

// --- rm ---

func parseRm(o *opts) (action, error) {
	force := o.has("f")
	if !force {
		if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
			return nil, err
		}
	}
	recursive := o.has("r") || o.has("R")
	dirs := o.has("d")
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return removePath(x.fsys, p, recursive, force, dirs) })
	}, nil
}

// removePath removes p as rm does: directories only with recursive (or
// emptyDirs for empty ones); with force a missing p is no error.
func removePath(fsys *ext4go.FS, p string, recursive, force, emptyDirs bool) error {
	name := imagePath(p)
	if name == "." {
		return fmt.Errorf("refusing to remove the root directory %s", quotePath(p))
	}
	if isDotName(p) {
		return fmt.Errorf("refusing to remove '.' or '..' directory: skipping %s", quotePath(p))
	}
	fi, err := fsys.Lstat(name)
	if err != nil {
		if force && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return failf("cannot remove", p, err)
	}
	switch {
	case fi.IsDir() && recursive:
		err = fsys.RemoveAll(name)
	case fi.IsDir() && !emptyDirs:
		return failf("cannot remove", p, syscall.EISDIR)
	default:
		err = fsys.Remove(name)
	}
	if err != nil {
		return failf("cannot remove", p, err)
	}
	return nil
}

// --- mv ---

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

// --- ln ---

func parseLn(o *opts) (action, error) {
	noTarget := o.has("T")
	if noTarget {
		if err := wantArgs(o, 2, 2, "TARGET LINK"); err != nil {
			return nil, err
		}
	} else if err := wantArgs(o, 2, -1, "TARGET... LINK"); err != nil {
		return nil, err
	}
	symbolic, force, noDeref := o.has("s"), o.has("f"), o.has("n")
	return func(x *wctx) error {
		targets, link := o.args[:len(o.args)-1], o.args[len(o.args)-1]
		into := false
		if !noTarget {
			name := imagePath(link)
			if noDeref {
				fi, err := x.fsys.Lstat(name)
				into = err == nil && fi.IsDir()
			} else {
				into = isDir(x.fsys, name)
			}
		}
		if !into && len(targets) > 1 {
			return fmt.Errorf("target %s is not a directory", quotePath(link))
		}
		return x.each(targets, func(target string) error {
			l := link
			if into {
				b := baseName(target)
				if b == "/" || b == "." || b == ".." {
					return fmt.Errorf("cannot derive a link name inside %s from %s", quotePath(link), quotePath(target))
				}
				l = displayPath(joinImage(imagePath(link), b))
			}
			return makeLink(x.fsys, target, l, symbolic, force)
		})
	}, nil
}

// makeLink creates link as a hard link to the image path target, or with
// symbolic a symlink holding target. With force an existing non-directory
// link is replaced.
func makeLink(fsys *ext4go.FS, target, link string, symbolic, force bool) error {
	name := imagePath(link)
	what := "cannot create hard link"
	if symbolic {
		what = "cannot create symbolic link"
	}
	if force {
		if fi, err := fsys.Lstat(name); err == nil {
			if fi.IsDir() {
				return failf(what, link, syscall.EISDIR)
			}
			if !symbolic {
				if tfi, err := fsys.Lstat(imagePath(target)); err == nil && sameFile(tfi, fi) {
					return fmt.Errorf("%s and %s are the same file", quotePath(target), quotePath(link))
				}
			}
			if err := fsys.Remove(name); err != nil {
				return failf("cannot remove", link, err)
			}
		}
	}
	var err error
	if symbolic {
		err = fsys.Symlink(target, name)
	} else {
		if _, serr := fsys.Lstat(imagePath(target)); serr != nil {
			return failf("cannot access", target, serr)
		}
		err = fsys.Link(imagePath(target), name)
	}
	if err != nil {
		return fmt.Errorf("%s %s to %s: %s", what, quotePath(link), quotePath(target), errText(cause(err)))
	}
	return nil
}

func sameFile(a, b fs.FileInfo) bool {
	sa, ok1 := a.Sys().(*ext4go.Stat)
	sb, ok2 := b.Sys().(*ext4go.Stat)
	return ok1 && ok2 && sa.Ino == sb.Ino
}

// --- chmod ---

func parseChmod(o *opts) (action, error) {
	if err := wantArgs(o, 2, -1, "MODE PATH..."); err != nil {
		return nil, err
	}
	mode, err := parseMode(o.args[0], processUmask())
	if err != nil {
		return nil, err
	}
	recursive := o.has("R")
	return func(x *wctx) error {
		return x.each(o.args[1:], func(p string) error { return chmodPath(x.fsys, p, mode, recursive) })
	}, nil
}

// chmodPath sets the mode of p (following a symlink p), and with recursive
// of everything under it but symlinks, as GNU chmod (modeSpec.apply).
func chmodPath(fsys *ext4go.FS, p string, mode modeSpec, recursive bool) error {
	name := imagePath(p)
	set := func(name string, fi fs.FileInfo, shown string) error {
		m := mode.apply(uint32(fi.Sys().(*ext4go.Stat).Mode), fi.IsDir())
		if err := fsys.Chmod(name, fileMode(m)); err != nil {
			return failf("changing permissions of", shown, err)
		}
		return nil
	}
	fi, err := fsys.Stat(name)
	if err != nil {
		return failf("cannot access", p, err)
	}
	if err := set(name, fi, p); err != nil || !recursive || !fi.IsDir() {
		return err
	}
	ents, err := fsys.ReadDir(name)
	if err != nil {
		return failf("cannot read directory", p, err)
	}
	for _, d := range ents {
		err := walkTree(fsys, joinImage(name, d.Name()), func(n string, fi fs.FileInfo) error {
			if fi.Mode()&fs.ModeSymlink != 0 {
				return nil
			}
			return set(n, fi, displayPath(n))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// --- chown ---

// ownerSpec is chown's [USER][:[GROUP]].
type ownerSpec struct {
	user, group string
	colon       bool // "USER:" takes USER's login group
}

func parseOwnerSpec(s string) (ownerSpec, error) {
	var sp ownerSpec
	var ok bool
	sp.user, sp.group, ok = strings.Cut(s, ":")
	if !ok {
		// The old "USER.GROUP" form, as chown still accepts it.
		if u, g, dot := strings.Cut(s, "."); dot && isNumber(u) && isNumber(g) {
			sp.user, sp.group, ok = u, g, true
		}
	}
	sp.colon = ok && sp.group == "" && sp.user != ""
	if sp.user == "" && sp.group == "" && !ok {
		return sp, usagef("invalid owner: '%s'", s)
	}
	return sp, nil
}

func isNumber(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

// resolve turns the spec into ids (-1 keeps), looking names up in the
// image's /etc/passwd and /etc/group.
func (sp ownerSpec) resolve(fsys *ext4go.FS) (uid, gid int, err error) {
	uid, gid = -1, -1
	if sp.user != "" {
		var pw []string
		if uid, pw, err = lookupID(fsys, "etc/passwd", sp.user, "user"); err != nil {
			return
		}
		if sp.colon {
			if pw == nil {
				pw, err = findEntry(fsys, "etc/passwd", 2, sp.user)
			}
			if pw == nil || len(pw) < 4 || !isNumber(pw[3]) {
				return 0, 0, fmt.Errorf("invalid spec '%s:': user %s has no entry in the image's /etc/passwd to take a login group from", sp.user, sp.user)
			}
			g, _ := strconv.ParseUint(pw[3], 10, 32)
			gid = int(g) // past 2^31-1: a negative int on 32-bit systems, as Chown takes it
		}
	}
	if sp.group != "" {
		if gid, _, err = lookupID(fsys, "etc/group", sp.group, "group"); err != nil {
			return
		}
	}
	return uid, gid, nil
}

// lookupID returns a numeric id as it is, else the id of the name in the
// image's database file db, with its entry.
func lookupID(fsys *ext4go.FS, db, s, what string) (int, []string, error) {
	if isNumber(s) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil || n == math.MaxUint32 {
			return 0, nil, fmt.Errorf("invalid %s: '%s'", what, s)
		}
		return int(n), nil, nil // past 2^31-1: a negative int on 32-bit systems, as Chown takes it
	}
	ent, err := findEntry(fsys, db, 0, s)
	if err != nil || ent == nil || len(ent) < 3 || !isNumber(ent[2]) {
		return 0, nil, fmt.Errorf("invalid %s: '%s' (not a number, nor a name in the image's /%s)", what, s, db)
	}
	n, _ := strconv.ParseUint(ent[2], 10, 32)
	return int(n), ent, nil // past 2^31-1: a negative int on 32-bit systems, as Chown takes it
}

// findEntry returns the first line of the image's colon-separated file db
// whose field i is v.
func findEntry(fsys *ext4go.FS, db string, i int, v string) ([]string, error) {
	data, err := fsys.ReadFile(db)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(line, ":")
		if len(f) > i && len(f) > 2 && f[i] == v {
			return f, nil
		}
	}
	return nil, nil
}

func parseChown(o *opts) (action, error) {
	if err := wantArgs(o, 2, -1, "OWNER PATH..."); err != nil {
		return nil, err
	}
	spec, err := parseOwnerSpec(o.args[0])
	if err != nil {
		return nil, err
	}
	noDeref, recursive := o.has("h"), o.has("R")
	return func(x *wctx) error {
		uid, gid, err := spec.resolve(x.fsys)
		if err != nil {
			return err
		}
		return x.each(o.args[1:], func(p string) error { return chownPath(x.fsys, p, uid, gid, noDeref, recursive) })
	}, nil
}

// chownPath sets the owner of p (-1 keeps a value). noDeref changes a
// symlink itself; recursive changes everything under p and, as GNU chown
// -R, never follows symlinks.
func chownPath(fsys *ext4go.FS, p string, uid, gid int, noDeref, recursive bool) error {
	name := imagePath(p)
	if recursive {
		return walkTree(fsys, name, func(n string, fi fs.FileInfo) error {
			if err := fsys.Lchown(n, uid, gid); err != nil {
				return failf("changing ownership of", displayPath(n), err)
			}
			return nil
		})
	}
	chown := fsys.Chown
	if noDeref {
		chown = fsys.Lchown
	}
	if err := chown(name, uid, gid); err != nil {
		return failf("changing ownership of", p, err)
	}
	return nil
}

// --- touch ---

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

// --- truncate ---

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

// --- fallocate ---

func parseFallocate(o *opts) (action, error) {
	if err := wantArgs(o, 1, 1, "PATH"); err != nil {
		return nil, err
	}
	var off, length int64
	var err error
	if s, ok := o.str("o"); ok {
		if off, err = parseByteSize(s); err != nil {
			return nil, usagef("invalid offset value specified: %v", err)
		}
	}
	s, hasLen := o.str("l")
	if hasLen {
		if length, err = parseByteSize(s); err != nil {
			return nil, usagef("invalid length value specified: %v", err)
		}
		if length == 0 {
			return nil, usagef("invalid length value specified")
		}
	}
	dig := o.has("d")
	mode := 0
	switch {
	case o.has("p") && o.has("z"), dig && (o.has("p") || o.has("z")):
		return nil, usagef("-p, -z and -d are mutually exclusive")
	case o.has("p"):
		mode = ext4go.FallocPunchHole | ext4go.FallocKeepSize
	case o.has("z"):
		mode = ext4go.FallocZeroRange
	}
	if o.has("n") {
		mode |= ext4go.FallocKeepSize
	}
	if !hasLen && !dig {
		return nil, usagef("no length argument specified")
	}
	p := o.args[0]
	return func(x *wctx) error {
		if dig {
			return digHoles(x.fsys, p, off, length)
		}
		return fallocatePath(x.fsys, p, mode, off, length)
	}, nil
}

// fallocatePath applies fallocate(2) mode to [off, off+length) of p; as
// util-linux, only plain allocation creates a missing file.
func fallocatePath(fsys *ext4go.FS, p string, mode int, off, length int64) error {
	name := imagePath(p)
	flag := os.O_RDWR
	if mode == 0 {
		flag |= os.O_CREATE
	}
	f, err := fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		return failf("cannot open", p, err)
	}
	err = f.Fallocate(mode, off, length)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failf("fallocate failed on", p, err)
	}
	return nil
}

// digHoles punches every all-zero filesystem block of p's data within
// [off, off+length) (length 0: to the end), as fallocate --dig-holes.
func digHoles(fsys *ext4go.FS, p string, off, length int64) error {
	name := imagePath(p)
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return failf("cannot open", p, err)
	}
	defer f.Close()
	fail := func(err error) error { return failf("fallocate failed on", p, err) }
	ranges, err := f.DataRanges()
	if err != nil {
		return fail(err)
	}
	bs := int64(fsys.BlockSize())
	end := int64(math.MaxInt64)
	if length > 0 && off <= math.MaxInt64-length {
		end = off + length
	}
	buf := make([]byte, bs)
	var holeStart, holeEnd int64 = -1, -1
	punch := func() error {
		if holeStart >= 0 && holeEnd > holeStart {
			if err := f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, holeStart, holeEnd-holeStart); err != nil {
				return err
			}
		}
		holeStart, holeEnd = -1, -1
		return nil
	}
	for _, r := range ranges {
		// Whole blocks only: round the range's start up, its end down.
		lo := max((max(r.Off, off)+bs-1)/bs*bs, 0)
		hi := min(r.Off+r.Len, end) / bs * bs
		for b := lo; b+bs <= hi; b += bs {
			n, err := f.ReadAt(buf, b)
			if err != nil && !errors.Is(err, io.EOF) {
				return fail(err)
			}
			if n == len(buf) && isZero(buf) {
				if holeEnd != b {
					if err := punch(); err != nil {
						return fail(err)
					}
					holeStart = b
				}
				holeEnd = b + bs
			}
		}
	}
	if err := punch(); err != nil {
		return fail(err)
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// --- setfattr / getfattr ---

func parseSetfattr(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	name, set := o.str("n")
	rmName, remove := o.str("x")
	valStr, hasVal := o.str("v")
	switch {
	case set == remove:
		return nil, usagef("want exactly one of -n NAME and -x NAME")
	case remove && hasVal:
		return nil, usagef("-v cannot be used with -x")
	}
	var value []byte
	if set {
		if o.has("raw") {
			value = []byte(valStr)
		} else {
			var err error
			if value, err = decodeXattrValue(valStr); err != nil {
				return nil, usagef("%v", err)
			}
		}
	} else {
		name = rmName
	}
	noDeref := o.has("h")
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return setXattrPath(x.fsys, p, name, value, remove, noDeref) })
	}, nil
}

// decodeXattrValue decodes setfattr's VALUE: 0x... hex and 0s... base64
// (whitespace ignored), else text, optionally in double quotes, where \\,
// \" and \NNN (octal) are escapes.
func decodeXattrValue(s string) ([]byte, error) {
	if len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		b, err := hex.DecodeString(strings.Join(strings.Fields(s[2:]), ""))
		if err != nil {
			return nil, fmt.Errorf("bad hex value '%s'", s)
		}
		return b, nil
	}
	if len(s) >= 2 && s[0] == '0' && (s[1] == 's' || s[1] == 'S') {
		b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(s[2:]), ""))
		if err != nil {
			return nil, fmt.Errorf("bad base64 value '%s'", s)
		}
		return b, nil
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			continue
		}
		switch n := s[i+1]; {
		case n == '\\' || n == '"':
			out = append(out, n)
			i++
		case n >= '0' && n <= '7':
			v, j := 0, i+1
			for ; j < len(s) && j < i+4 && s[j] >= '0' && s[j] <= '7'; j++ {
				v = v<<3 | int(s[j]-'0')
			}
			out = append(out, byte(v))
			i = j - 1
		default:
			out = append(out, c)
		}
	}
	return out, nil
}

// setXattrPath sets (or with remove removes) the attribute attr of p,
// following symlinks unless noDeref.
func setXattrPath(fsys *ext4go.FS, p, attr string, value []byte, remove, noDeref bool) error {
	name, err := xattrTarget(fsys, p, noDeref)
	if err != nil {
		return err
	}
	if remove {
		err = fsys.RemoveXattr(name, attr)
	} else {
		err = fsys.SetXattr(name, attr, value, 0)
	}
	if err != nil {
		return fmt.Errorf("%s: %s: %s", quotePath(p), attr, xattrErrText(cause(err)))
	}
	return nil
}

// xattrTarget is the io/fs name whose attributes p means.
func xattrTarget(fsys *ext4go.FS, p string, noDeref bool) (string, error) {
	name := imagePath(p)
	var err error
	if noDeref {
		_, err = fsys.Lstat(name)
	} else {
		name, err = realPath(fsys, name)
	}
	if err != nil {
		return "", failf("cannot access", p, err)
	}
	return name, nil
}

func xattrErrText(err error) string {
	if errors.Is(err, ext4go.ErrNoXattr) {
		return "no such attribute"
	}
	return errText(err)
}

// getfattrOptions are getfattr's output choices.
type getfattrOptions struct {
	name       string         // -n: only this attribute
	dump       bool           // -d or -n: values too
	onlyValues bool           // --only-values
	encoding   string         // "", "text", "hex", "base64"
	match      *regexp.Regexp // -m
	noDeref    bool
	recursive  bool
}

func parseGetfattr(o *opts) (action, error) {
	if err := wantArgs(o, 1, -1, "PATH..."); err != nil {
		return nil, err
	}
	g := getfattrOptions{dump: o.has("d"), onlyValues: o.has("only-values"), noDeref: o.has("h"), recursive: o.has("R")}
	if n, ok := o.str("n"); ok {
		g.name, g.dump = n, true
	}
	if e, ok := o.str("e"); ok {
		if e != "text" && e != "hex" && e != "base64" {
			return nil, usagef("invalid encoding '%s' (want text, hex or base64)", e)
		}
		g.encoding = e
	}
	pattern := `^user\.`
	if m, ok := o.str("m"); ok {
		pattern = m
		if m == "-" {
			pattern = ""
		}
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, usagef("invalid regular expression \"%s\"", pattern)
	}
	g.match = re
	return func(x *wctx) error {
		return x.each(o.args, func(p string) error { return getXattrs(x, p, g) })
	}, nil
}

// getXattrs prints the attributes of p (and with recursive of everything
// under it) as getfattr does: "# file: PATH", then "name=value" lines (or
// names only without dump), then a blank line; nothing for a file without
// matching attributes.
func getXattrs(x *wctx, p string, g getfattrOptions) error {
	name, err := xattrTarget(x.fsys, p, g.noDeref)
	if err != nil {
		return err
	}
	if !g.recursive {
		return printXattrs(x.fsys, x.e.stdout, name, p, g)
	}
	var last error
	err = walkTree(x.fsys, name, func(n string, fi fs.FileInfo) error {
		shown := p
		if n != name {
			rel := strings.TrimPrefix(n, name) // "/child/..."
			if name == "." {
				rel = "/" + n
			}
			shown = strings.TrimRight(p, "/") + rel
		}
		if err := printXattrs(x.fsys, x.e.stdout, n, shown, g); err != nil {
			if last != nil {
				x.report(last)
			}
			last = err
		}
		return nil
	})
	if err != nil {
		return err
	}
	return last
}

func printXattrs(fsys *ext4go.FS, w io.Writer, name, shown string, g getfattrOptions) error {
	var names []string
	if g.name != "" {
		names = []string{g.name}
	} else {
		all, err := fsys.ListXattr(name)
		if err != nil {
			return failf("cannot list attributes of", shown, err)
		}
		for _, a := range all {
			if g.match.MatchString(a) {
				names = append(names, a)
			}
		}
		sort.Strings(names)
	}
	var out bytes.Buffer
	var failed error
	for _, a := range names {
		var v []byte
		if g.dump || g.onlyValues {
			var err error
			if v, err = fsys.GetXattr(name, a); err != nil {
				failed = fmt.Errorf("%s: %s: %s", quotePath(shown), a, xattrErrText(cause(err)))
				continue
			}
		}
		switch {
		case g.onlyValues:
			out.Write(v)
			continue
		case out.Len() == 0:
			fmt.Fprintf(&out, "# file: %s\n", escapeChars(shown, "\n\r"))
		}
		if g.dump {
			fmt.Fprintf(&out, "%s=%s\n", escapeChars(a, "=\n\r"), encodeXattrValue(v, g.encoding))
		} else {
			fmt.Fprintf(&out, "%s\n", escapeChars(a, "=\n\r"))
		}
	}
	if out.Len() > 0 && !g.onlyValues {
		out.WriteByte('\n')
	}
	if _, err := w.Write(out.Bytes()); err != nil {
		return err
	}
	return failed
}

// escapeChars writes backslashes and the bytes in chars as \NNN octal, as
// getfattr quotes names.
func escapeChars(s, chars string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || strings.IndexByte(chars, c) >= 0 {
			fmt.Fprintf(&b, "\\%03o", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// encodeXattrValue formats a value as getfattr does: text in double quotes
// (\NNN for NUL, newline and CR; \\ and \"; a trailing NUL dropped), 0x
// hex, or 0s base64. With no encoding, values with more than 1/8
// unprintable bytes are shown in hex.
func encodeXattrValue(v []byte, enc string) string {
	if enc == "" {
		enc = "text"
		t := v
		if len(t) > 0 && t[len(t)-1] == 0 {
			t = t[:len(t)-1]
		}
		nonprint := 0
		for _, c := range t {
			if c < 0x20 || c > 0x7e {
				nonprint++
			}
		}
		if len(t) < nonprint*8 {
			enc = "hex"
		}
	}
	switch enc {
	case "hex":
		return "0x" + hex.EncodeToString(v)
	case "base64":
		return "0s" + base64.StdEncoding.EncodeToString(v)
	}
	var b strings.Builder
	b.WriteByte('"')
	for i, c := range v {
		switch {
		case c == 0 && i == len(v)-1:
		case c == 0 || c == '\n' || c == '\r':
			fmt.Fprintf(&b, "\\%03o", c)
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// --- write ---

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
