//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"errors"
	"io"
	"io/fs"
	"log"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

func (r *rawFS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	f, err := n.Reopen(os.O_RDONLY)
	if err != nil {
		return status(err)
	}
	out.Fh = r.handles.add(f, false)
	return fuse.OK
}

// dirStream is a directory handle's entries, read at its first READDIR
// (or one at offset 0): offsets index them, so a reader resuming at an
// offset sees what it would have seen.
type dirStream struct {
	mu      sync.Mutex
	entries []fuse.DirEntry
	read    bool
}

func (r *rawFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.readDir(in, out, false)
}

// ReadDirPlus is ReadDir with each entry looked up as well (the kernel
// then needs no LOOKUP for it): "." and ".." go without, as the kernel
// wants, and so does an entry gone since the listing was taken.
func (r *rawFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.readDir(in, out, true)
}

// readDir serves READDIR and READDIRPLUS from a listing taken when the
// stream is read from its start, so that offsets (indexes into it) stay
// valid while the directory changes.
func (r *rawFS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	f, st := r.handle(in.Fh)
	if !st.Ok() {
		return st
	}
	ds := r.handles.dir(in.Fh)
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if !ds.read || in.Offset == 0 {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return status(err)
		}
		ents, err := f.ReadDir(-1)
		var skipped *ext4go.SkippedEntriesError
		if err != nil && !errors.As(err, &skipped) {
			return status(err)
		}
		s, err := statOf(f)
		if err != nil {
			return status(err)
		}
		parent, err := f.Parent()
		if err != nil {
			return status(err)
		}
		list := []fuse.DirEntry{{Name: ".", Ino: uint64(s.Ino), Mode: syscall.S_IFDIR}, {Name: "..", Ino: uint64(parent), Mode: syscall.S_IFDIR}}
		for _, e := range ents {
			var ino uint64
			if x, ok := e.(interface{ Ino() uint32 }); ok {
				ino = uint64(x.Ino())
			}
			list = append(list, fuse.DirEntry{Name: e.Name(), Ino: ino, Mode: typeMode(e.Type())})
		}
		if skipped != nil {
			list = r.addSkipped(list, s.Ino, skipped)
		}
		ds.entries, ds.read = list, true
	}
	for i := int(in.Offset); i < len(ds.entries); i++ {
		e := ds.entries[i]
		e.Off = uint64(i + 1)
		if !plus {
			if !out.AddDirEntry(e) {
				break
			}
			continue
		}
		eo := out.AddDirLookupEntry(e)
		if eo == nil {
			break
		}
		if i < 2 {
			continue // "." and ".."
		}
		c, err := f.LookupAt(e.Name)
		if err != nil {
			continue
		}
		if r.entry(c, eo).Ok() && eo.Attr.Mode&syscall.S_IFMT != e.Mode {
			out.FixMode(eo.Attr.Mode) // replaced since the listing
		}
	}
	return fuse.OK
}

// addSkipped adds to a listing the entries ext4go's left out that have a
// name a path can hold, as the kernel's readdir shows an entry whose
// inode it cannot read: with an unknown type (DT_UNKNOWN), so that a stat
// of it asks (LOOKUP) and fails with EUCLEAN. Every entry left out is
// logged, as the kernel logs them.
func (r *rawFS) addSkipped(list []fuse.DirEntry, dirIno uint32, se *ext4go.SkippedEntriesError) []fuse.DirEntry {
	logger := r.o.Logger
	if logger == nil {
		logger = log.Default()
	}
	for _, e := range se.Entries {
		logger.Printf("fusefs: directory inode %d: %s", dirIno, e)
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.IndexByte(e.Name, '/') >= 0 || len(e.Name) > 255 {
			continue
		}
		list = append(list, fuse.DirEntry{Name: e.Name, Ino: uint64(e.Ino)})
	}
	return list
}

// typeMode is the S_IF* bits of a directory entry's type.
func typeMode(t fs.FileMode) uint32 {
	switch {
	case t.IsDir():
		return syscall.S_IFDIR
	case t&fs.ModeSymlink != 0:
		return syscall.S_IFLNK
	case t&fs.ModeNamedPipe != 0:
		return syscall.S_IFIFO
	case t&fs.ModeSocket != 0:
		return syscall.S_IFSOCK
	case t&fs.ModeCharDevice != 0:
		return syscall.S_IFCHR
	case t&fs.ModeDevice != 0:
		return syscall.S_IFBLK
	}
	return syscall.S_IFREG
}

func (r *rawFS) ReleaseDir(in *fuse.ReleaseIn) { r.handles.close(in.Fh) }

func (r *rawFS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f, st := r.handle(in.Fh)
	if !st.Ok() {
		return st
	}
	return status(f.Sync())
}
