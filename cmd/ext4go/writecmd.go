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
	"fmt"

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
