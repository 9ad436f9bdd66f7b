package main

import (
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "chown", usage: "[-h] [-R] IMAGE [UID][:[GID]] PATH...",
		summary: "set owner and group (numbers, or names from the image's /etc/passwd and /etc/group)",
		opts: []optDef{
			{'h', "no-dereference", "", "change symbolic links themselves"},
			{'R', "recursive", "", "change directories and their contents (symlinks themselves, never followed)"},
		},
		parse: parseChown,
	})
}

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
