package main

import (
	"io"
	"strconv"
	"strings"

	"github.com/ext4go/ext4go"
)

// idNames are the user and group names of the image's own /etc/passwd and
// /etc/group, for ls -l and stat (the host's would name other accounts:
// an image's uid 1000 is not the host's). Numbers without a name are
// shown as numbers, as GNU ls does.
type idNames struct {
	users, groups map[uint32]string
}

// maxIDFile bounds what is read of /etc/passwd or /etc/group: a hostile
// image's may be of any size.
const maxIDFile = 4 << 20

func loadIDNames(fsys *ext4go.FS) *idNames {
	return &idNames{users: readIDFile(fsys, "etc/passwd"), groups: readIDFile(fsys, "etc/group")}
}

// readIDFile maps the ids (third field) of a colon-separated file of the
// image to their names (first field); the first line of an id wins, as
// getpwuid's lookup does.
func readIDFile(fsys *ext4go.FS, name string) map[uint32]string {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIDFile))
	if err != nil {
		return nil
	}
	m := map[uint32]string{}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.SplitN(line, ":", 4)
		if len(f) < 3 || f[0] == "" || strings.HasPrefix(f[0], "#") {
			continue
		}
		id, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		if _, dup := m[uint32(id)]; !dup {
			m[uint32(id)] = quoteName(f[0])
		}
	}
	return m
}

// user and group name an id; a nil *idNames (ls -n) names none.
func (n *idNames) user(id uint32) string {
	if n == nil {
		return nameOf(nil, id)
	}
	return nameOf(n.users, id)
}

func (n *idNames) group(id uint32) string {
	if n == nil {
		return nameOf(nil, id)
	}
	return nameOf(n.groups, id)
}

func nameOf(m map[uint32]string, id uint32) string {
	if s, ok := m[id]; ok {
		return s
	}
	return strconv.FormatUint(uint64(id), 10)
}
