//go:build !linux && !darwin && !freebsd

package ext4go

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ext4go/ext4go/internal/host"
)

// Reading a source tree where the host has no stat(2) (Windows, WASI):
// by path, through the os package. What each system keeps is
// host.FromFileInfo's: no owners (0, unless BuildOptions.UID and GID say
// otherwise), the permission bits os gives (Windows: 0666 or 0444 for
// files, 0777 for directories), no device nodes, no extended attributes;
// hard links where the system tells identities (host.FileID). Holes are
// not searched for: a sparse file is copied as the zeros it reads as.

// hostDir is a host directory being copied, by path.
type hostDir struct{ path string }

func (d *hostDir) close() {}

// id is the directory's identity, where the system gives one, to find
// loops.
func (d *hostDir) id() (key [2]uint64, known bool, err error) {
	f, err := os.Open(d.path)
	if err != nil {
		return key, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return key, false, err
	}
	st := host.FromFileInfo(fi)
	if err := host.FileID(f, &st); err != nil {
		return key, false, err
	}
	return [2]uint64{st.Dev, st.Ino}, st.HasID, nil
}

// openHostDir reads the entries of host directory dir, sorted by name.
func openHostDir(dir string) (*hostDir, []hostDirent, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	ents := make([]hostDirent, 0, len(des))
	for _, de := range des {
		ents = append(ents, hostDirent{name: de.Name(), typ: de.Type()})
	}
	return &hostDir{dir}, ents, nil
}

// load reads everything the builder will ask of the entry.
func (e *hostEntry) load(*hostDir) {
	fi, err := os.Lstat(e.path)
	if err != nil {
		e.err = err
		return
	}
	e.st = host.FromFileInfo(fi)
	switch e.st.Type() {
	case 0:
		// Windows junctions (mount points) are neither directories nor
		// symbolic links to os: kept as the links they resemble.
		target, err := os.Readlink(e.path)
		if err != nil {
			e.err = fmt.Errorf("a file of a kind ext4 does not keep (%v)", fi.Mode().Type())
			return
		}
		e.st.Mode = host.IFLNK | 0o777
		e.target = filepath.ToSlash(target)
	case host.IFLNK:
		var target string
		target, e.err = os.Readlink(e.path)
		e.target = filepath.ToSlash(target) // Windows writes ..\x for ../x
	case host.IFREG:
		e.err = e.loadFile()
	}
}

// loadFile reads a regular file's identity and link count (where only an
// open file tells them) and, for a small file, its data.
func (e *hostEntry) loadFile() error {
	f, err := os.Open(e.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := host.FileID(f, &e.st); err != nil {
		return err
	}
	size := e.st.Size
	if size == 0 {
		return nil
	}
	e.ranges = []Range{{0, size}}
	if size > smallFile {
		return nil
	}
	buf := getDataBuf(int(size))
	data := buf.b[:size]
	if _, err := f.ReadAt(data, 0); err != nil {
		buf.release()
		if err == io.EOF {
			return fmt.Errorf("changed while being copied (shorter than %d bytes)", size)
		}
		return err
	}
	e.data, e.buf = data, buf
	return nil
}

// hostDataRanges is the whole file: holes are not found here.
func hostDataRanges(_ string, size int64) ([]Range, error) {
	if size == 0 {
		return nil, nil
	}
	return []Range{{0, size}}, nil
}

// lstatHost is what os.Lstat tells of host file p.
func lstatHost(p string) (host.Stat, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return host.Stat{}, err
	}
	return host.FromFileInfo(fi), nil
}

// xattrListSize is 0: no extended attributes are read here.
func xattrListSize(string) int { return 0 }
