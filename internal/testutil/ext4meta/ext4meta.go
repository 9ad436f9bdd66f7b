//go:build linux

// Package ext4meta gives testutil's comparisons the metadata of an
// ext4go FileInfo. It is apart from testutil so that testutil does not
// import ext4go (tests inside package ext4go may use testutil).
package ext4meta

import (
	"io/fs"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// Meta extracts what the harness compares from an ext4go FileInfo: it
// is a testutil.CompareOptions.Meta.
func Meta(fi fs.FileInfo) (testutil.Meta, bool) {
	st, ok := fi.Sys().(*ext4go.Stat)
	if !ok {
		return testutil.Meta{}, false
	}
	m := testutil.Meta{
		Ino: uint64(st.Ino), Nlink: uint64(st.Nlink), Uid: st.UID, Gid: st.GID,
		Major: st.Major(), Minor: st.Minor(), Mtime: st.Mtime, Atime: st.Atime,
	}
	x, err := st.Xattrs()
	if err != nil {
		return m, false
	}
	m.Xattrs = x
	return m, true
}
