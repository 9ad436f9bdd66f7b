//go:build darwin || freebsd

package ext4go

import (
	"io/fs"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// openHostDir opens host directory dir and reads its entries but "." and
// "..", sorted by name, with the types the directory gives (os.ReadDir
// on a second descriptor; the first stays for the *at calls). The caller
// closes hd.
func openHostDir(dir string) (hd *hostDir, ents []hostDirent, err error) {
	var fd int
	for {
		fd, err = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		unix.Close(fd)
		return nil, nil, &fs.PathError{Op: "dup", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(dup), dir)
	des, err := f.ReadDir(-1)
	f.Close()
	if err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	for _, de := range des {
		ents = append(ents, hostDirent{name: de.Name(), typ: de.Type()})
	}
	slices.SortFunc(ents, func(a, b hostDirent) int { return strings.Compare(a.name, b.name) })
	return &hostDir{fd}, ents, nil
}
