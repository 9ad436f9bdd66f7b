package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// The command line: every command takes its options as GNU getopt_long
// does (parseOpts); optset.go declares them flag-style for the commands
// with many typed options.

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
