package main

import (
	"flag"
	"strconv"
	"time"
)

// optSet declares options the way flag.FlagSet does (String, Int, Bool,
// ...) for the commands with many typed options (mkfs, bench), but parses
// them with parseOpts like every other command: one option syntax
// (getopt_long: -x, --name, --name=value, bundling, permutation) and one
// help format for all of ext4go. A one-letter name is a short option,
// a longer one a long option. These commands used Go's flag package,
// which spells long options with one dash, so "-size 32M" is still taken
// as "--size 32M" when it names a long option exactly.
type optSet struct {
	c    *command
	e    *env
	defs []optDef
	set  map[string]func(string) error // by optDef.key
	args []string
}

func newFlags(c *command, e *env) *optSet {
	return &optSet{c: c, e: e, set: map[string]func(string) error{}}
}

func (s *optSet) add(name, arg, help string, def string, set func(string) error) {
	d := optDef{arg: arg, help: help}
	if len(name) == 1 {
		d.short = name[0]
	} else {
		d.long = name
	}
	if def != "" {
		d.help += " (default " + def + ")"
	}
	s.defs = append(s.defs, d)
	s.set[d.key()] = set
}

func (s *optSet) String(name, def, help string) *string {
	p := &def
	s.add(name, "VALUE", help, def, func(v string) error { *p = v; return nil })
	return p
}

func (s *optSet) Int(name string, def int, help string) *int {
	p := &def
	s.add(name, "N", help, defaultNum(def), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return usagef("option %s wants a number, not %q", dashes(name), v)
		}
		*p = n
		return nil
	})
	return p
}

func (s *optSet) Uint64(name string, def uint64, help string) *uint64 {
	p := &def
	s.add(name, "N", help, defaultNum(int(def)), func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return usagef("option %s wants a number, not %q", dashes(name), v)
		}
		*p = n
		return nil
	})
	return p
}

func (s *optSet) Float64(name string, def float64, help string) *float64 {
	p := &def
	s.add(name, "N", help, "", func(v string) error {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return usagef("option %s wants a number, not %q", dashes(name), v)
		}
		*p = n
		return nil
	})
	return p
}

func (s *optSet) Duration(name string, def time.Duration, help string) *time.Duration {
	p := &def
	s.add(name, "DURATION", help, def.String(), func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return usagef("option %s wants a duration (2s, 500ms), not %q", dashes(name), v)
		}
		*p = d
		return nil
	})
	return p
}

// Bool is a flag; one that defaults to true is turned off with
// --no-NAME.
func (s *optSet) Bool(name string, def bool, help string) *bool {
	p := &def
	if def {
		s.add("no-"+name, "", "turn off: "+help, "", func(string) error { *p = false; return nil })
		s.add(name, "", help+" (the default)", "", func(string) error { *p = true; return nil })
		return p
	}
	s.add(name, "", help, "", func(string) error { *p = true; return nil })
	return p
}

// Var declares a flag.Value; a boolean one (IsBoolFlag) takes no argument
// and is Set once per use.
func (s *optSet) Var(v flag.Value, name, help string) {
	arg := "VALUE"
	if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		arg = ""
	}
	s.add(name, arg, help, "", v.Set)
}

func defaultNum(def int) string {
	if def == 0 || def == -1 {
		return "" // "none" or "as mke2fs": said in the help text
	}
	return strconv.Itoa(def)
}

func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// Parse parses args; --help prints the command's help and returns
// flag.ErrHelp.
func (s *optSet) Parse(args []string) error {
	args = append([]string(nil), args...)
	for i, a := range args {
		if a == "--" {
			break
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && exactLong(s.defs, a[1:]) {
			args[i] = "-" + a
		}
	}
	o, err := parseCmd(s.e, s.c, s.defs, args)
	if err != nil {
		return err
	}
	for _, d := range s.defs {
		for _, v := range o.vals[d.key()] {
			if err := s.set[d.key()](v); err != nil {
				return err
			}
		}
	}
	s.args = o.args
	return nil
}

func (s *optSet) NArg() int { return len(s.args) }

func (s *optSet) Arg(i int) string {
	if i < len(s.args) {
		return s.args[i]
	}
	return ""
}
