package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "batch", usage: "[-n] IMAGE [SCRIPT]",
		summary: "run write commands (put, mkdir, rm, mv, ln, chmod, chown, touch, truncate, fallocate, setfattr, getfattr), one a line without IMAGE, from SCRIPT or standard input in one open of the image; a sync line makes everything before it durable; not atomic: it stops at the first failing command and keeps what the ones before did (each change is whole)",
		run:     runBatch})
}

var batchOpts = []optDef{
	{'n', "check", "", "check the script only; do not open the image"},
	{long: "allow-unclean", help: "write even though the filesystem was not cleanly unmounted or has errors"},
	{long: "no-journal", help: "write in place without the filesystem's journal (faster; a crash may need e2fsck)"},
	{'v', "verbose", "", "print \"done N\" when the command starting on line N is done (after a sync line: durable)"},
	{long: "atomic", help: "all or nothing: one transaction for the whole script, which ext4go does not have yet (refused)"},
}

// batchLine is one command of a script.
type batchLine struct {
	line  int // where the command starts
	words []string
}

// runBatch checks the whole script first (syntax, commands, options), so a
// typo applies nothing; then it opens the image once, runs the commands in
// order and stops at the first that fails. The image is closed cleanly in
// every case, keeping what the commands before the failing one did.
func runBatch(e *env, args []string) error {
	o, err := parseCmd(e, commands["batch"], batchOpts, args)
	if err != nil {
		return err
	}
	if len(o.args) < 1 || len(o.args) > 2 {
		return usagef("want IMAGE and at most one SCRIPT")
	}
	if o.has("atomic") {
		return errors.New("--atomic (the whole script in one transaction) is not implemented; use sync lines to mark what must be durable")
	}
	image, check := o.args[0], o.has("n")
	var in io.Reader = e.stdin
	scriptName := "standard input"
	if len(o.args) == 2 && o.args[1] != "-" {
		f, err := os.Open(o.args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		in, scriptName = f, o.args[1]
	}
	if in == nil {
		return errors.New("no script: standard input is closed")
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading %s: %w", scriptName, err)
	}
	script, err := splitScript(data)
	if err != nil {
		return err
	}
	type step struct {
		batchLine
		act action
	}
	steps := make([]step, 0, len(script))
	for _, l := range script {
		act, err := parseBatchLine(l)
		if err != nil {
			return err
		}
		steps = append(steps, step{l, act})
	}
	if check {
		return nil
	}
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, AllowUnclean: o.has("allow-unclean"), NoJournal: o.has("no-journal")})
	if err != nil {
		return imageError(commands["batch"], image, err, false)
	}
	var failed error
	for _, s := range steps {
		name := s.words[0]
		x := &wctx{fsys: fsys, e: e, batch: true, prefix: fmt.Sprintf("ext4go batch: line %d: %s: ", s.line, name)}
		if err := s.act(x); err != nil {
			failed = fmt.Errorf("line %d: %s: %w", s.line, name, err)
			break
		}
		if o.has("v") {
			fmt.Fprintf(e.stdout, "done %d\n", s.line)
		}
	}
	if cerr := fsys.Close(); cerr != nil {
		if failed != nil {
			fmt.Fprintf(e.stderr, "ext4go batch: %v\n", failed)
		}
		return fmt.Errorf("closing %s: %w", image, cerr)
	}
	return failed
}

// parseBatchLine checks one command of a script and returns its action.
func parseBatchLine(l batchLine) (action, error) {
	name := l.words[0]
	if name == "sync" {
		if len(l.words) > 1 {
			return nil, fmt.Errorf("line %d: sync takes no arguments", l.line)
		}
		return func(x *wctx) error { return x.fsys.Sync() }, nil
	}
	wc := writeCommands[name]
	if wc == nil {
		names := make([]string, 0, len(writeCommands))
		for n := range writeCommands {
			if n != "write" {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		return nil, fmt.Errorf("line %d: unknown command %q (batch runs %s, sync)", l.line, name, strings.Join(names, ", "))
	}
	if name == "write" {
		return nil, fmt.Errorf("line %d: write: not available in batch: standard input is the script (use put to copy a host file)", l.line)
	}
	usage := strings.Replace(wc.usage, "IMAGE ", "", 1)
	o, err := parseOpts(wc.opts, l.words[1:])
	if errors.Is(err, flag.ErrHelp) {
		err = errors.New("--help is not available in batch")
	}
	if err == nil {
		var act action
		if act, err = wc.parse(o); err == nil {
			return act, nil
		}
	}
	return nil, fmt.Errorf("line %d: %s: %v\nusage: %s %s", l.line, name, err, name, usage)
}

// splitScript splits a script into commands, one a line, and each into
// words as a POSIX shell does, without expansions: blanks separate words;
// 'single quotes' keep everything; "double quotes" keep everything but
// \" \\ \$ \` and backslash-newline; outside quotes a backslash keeps the
// next character and backslash-newline continues the line; bash's
// $'...' takes C escapes (\n, \t, \xHH, \NNN, \u...); a word starting
// with # begins a comment. Quotes may span lines.
func splitScript(data []byte) ([]batchLine, error) {
	var (
		out    []batchLine
		words  []string
		cur    []byte
		inWord bool
		line   = 1
		start  = 1
	)
	begin := func() {
		if !inWord {
			inWord = true
			if len(words) == 0 {
				start = line
			}
		}
	}
	flush := func() {
		if inWord {
			words = append(words, string(cur))
			cur, inWord = cur[:0], false
		}
	}
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '\n':
			flush()
			if len(words) > 0 {
				out = append(out, batchLine{start, words})
				words = nil
			}
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			flush()
			i++
		case c == '#' && !inWord:
			for i < len(data) && data[i] != '\n' {
				i++
			}
		case c == '\\':
			if i+1 < len(data) && data[i+1] == '\n' {
				line++
				i += 2
				continue
			}
			begin()
			if i+1 < len(data) {
				cur = append(cur, data[i+1])
			}
			i += 2
		case c == '\'':
			begin()
			qline := line
			j := i + 1
			for j < len(data) && data[j] != '\'' {
				if data[j] == '\n' {
					line++
				}
				j++
			}
			if j >= len(data) {
				return nil, fmt.Errorf("line %d: unterminated single quote", qline)
			}
			cur = append(cur, data[i+1:j]...)
			i = j + 1
		case c == '"':
			begin()
			qline := line
			i++
			for {
				if i >= len(data) {
					return nil, fmt.Errorf("line %d: unterminated double quote", qline)
				}
				d := data[i]
				if d == '"' {
					i++
					break
				}
				if d == '\\' && i+1 < len(data) && strings.IndexByte("\"\\$`\n", data[i+1]) >= 0 {
					if data[i+1] == '\n' {
						line++
					} else {
						cur = append(cur, data[i+1])
					}
					i += 2
					continue
				}
				if d == '\n' {
					line++
				}
				cur = append(cur, d)
				i++
			}
		case c == '$' && i+1 < len(data) && data[i+1] == '\'':
			begin()
			qline := line
			var err error
			if cur, i, line, err = ansiCQuote(data, i+2, cur, line); err != nil {
				return nil, fmt.Errorf("line %d: %v", qline, err)
			}
		default:
			begin()
			cur = append(cur, c)
			i++
		}
	}
	flush()
	if len(words) > 0 {
		out = append(out, batchLine{start, words})
	}
	return out, nil
}

// ansiCQuote decodes the body of $'...' from data[i:], appending to cur,
// and returns the index after the closing quote and the updated line.
func ansiCQuote(data []byte, i int, cur []byte, line int) ([]byte, int, int, error) {
	for i < len(data) {
		c := data[i]
		switch {
		case c == '\'':
			return cur, i + 1, line, nil
		case c != '\\' || i+1 >= len(data):
			if c == '\n' {
				line++
			}
			cur = append(cur, c)
			i++
			continue
		}
		e := data[i+1]
		i += 2
		if simple := strings.IndexByte("abefnrtvE\\'\"?", e); simple >= 0 {
			cur = append(cur, "\a\b\x1b\f\n\r\t\v\x1b\\'\"?"[simple])
			continue
		}
		digits := func(max int, base int, valid string) (uint64, int) {
			j := i
			for j < len(data) && j < i+max && strings.IndexByte(valid, data[j]|0x20) >= 0 {
				j++
			}
			v, _ := strconv.ParseUint(string(data[i:j]), base, 32)
			return v, j - i
		}
		switch {
		case e >= '0' && e <= '7':
			i-- // the digit is part of the number
			v, n := digits(3, 8, "01234567")
			cur = append(cur, byte(v))
			i += n
		case e == 'x':
			v, n := digits(2, 16, "0123456789abcdef")
			if n == 0 {
				cur = append(cur, '\\', 'x')
				continue
			}
			cur = append(cur, byte(v))
			i += n
		case e == 'u' || e == 'U':
			max := 4
			if e == 'U' {
				max = 8
			}
			v, n := digits(max, 16, "0123456789abcdef")
			if n == 0 {
				cur = append(cur, '\\', e)
				continue
			}
			cur = utf8.AppendRune(cur, rune(v))
			i += n
		case e == 'c' && i < len(data):
			cur = append(cur, data[i]&0x1f)
			i++
		default:
			if e == '\n' {
				line++
			}
			cur = append(cur, '\\', e)
		}
	}
	return nil, i, line, errors.New("unterminated $' quote")
}
