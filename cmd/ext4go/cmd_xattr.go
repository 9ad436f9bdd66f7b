package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strings"

	"github.com/ext4go/ext4go"
)

// setfattr and getfattr.

func init() {
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
}

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
