//go:build !windows && !wasip1

package host

import (
	"io/fs"
	"os"
)

// fileInfoSys adds nothing: where there is stat(2) (linux, darwin,
// freebsd), FromUnix is used instead; other systems are not known here.
func fileInfoSys(fs.FileInfo, *Stat) {}

// FileID has nothing to add.
func FileID(*os.File, *Stat) error { return nil }
