//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// openFlags keeps what ext4go's Reopen takes of open(2)'s flags. The
// kernel computes the offsets of O_APPEND writes itself.
func openFlags(flags uint32) int {
	return int(flags) & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND)
}

func (r *rawFS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	d, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	uid, gid := r.owner(&in.InHeader)
	mflags := r.writebackFlags(openFlags(in.Flags)) &^ os.O_TRUNC
	if r.o.WritebackCache {
		mflags &^= os.O_APPEND // the kernel sends every write's offset
	}
	appending := mflags&os.O_APPEND != 0
	f, err := d.MakeAt(name, ext4go.NewInode{Mode: syscall.S_IFREG | in.Mode&0o7777, UID: uid, GID: gid, Umask: in.Umask}, mflags)
	if errors.Is(err, fs.ErrExist) && in.Flags&syscall.O_EXCL == 0 {
		// Created meanwhile by another request: open it if it is a
		// regular file (the kernel takes nothing else from a create).
		var p *ext4go.File
		if p, err = d.LookupAt(name); err == nil {
			var st *ext4go.Stat
			if st, err = statOf(p); err == nil {
				switch st.Mode & syscall.S_IFMT {
				case syscall.S_IFREG:
					hdr := in.InHeader
					hdr.NodeId = nodeID(st.Ino)
					f, appending, err = r.open(p, &hdr, in.Flags, in.OpenFlags&fuse.OPEN_KILL_SUIDGID != 0)
				case syscall.S_IFDIR:
					err = syscall.EISDIR
				default:
					err = syscall.EEXIST
				}
			}
			p.Close()
		}
	}
	if err != nil {
		return status(err)
	}
	p, err := f.Reopen(oPath)
	if err != nil {
		f.Close()
		return status(err)
	}
	if st := r.entry(p, &out.EntryOut); !st.Ok() {
		f.Close()
		return st
	}
	out.Fh = r.handles.add(f, appending)
	out.OpenFlags |= keepCache | r.directWrite(in.Flags)
	return fuse.OK
}

// directWrite is FOPEN_DIRECT_IO for a write-only open unless the page
// cache is wanted (Options.CachedWriteOnly, WritebackCache). No pages can
// be mapped through a write-only open, and the kernel invalidates what
// other opens cached of each range written, before and after the write
// (fuse_direct_io, fuse_direct_write_iter).
func (r *rawFS) directWrite(flags uint32) uint32 {
	if r.o.CachedWriteOnly || r.o.WritebackCache || flags&syscall.O_ACCMODE != syscall.O_WRONLY {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO
}

func (r *rawFS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	n, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	f, appending, err := r.open(n, &in.InHeader, in.Flags, in.Mode&fuse.OPEN_KILL_SUIDGID != 0)
	if err != nil {
		return status(err)
	}
	out.Fh = r.handles.add(f, appending)
	out.OpenFlags |= keepCache | r.directWrite(in.Flags)
	return fuse.OK
}

// open opens n for a FUSE open with flags. appending is a handle whose
// writes go to the end of the file: an O_APPEND open, unless the kernel
// keeps the page cache (writeback), which then sends every write with its
// offset (O_APPEND is kept for an append-only inode, which takes writes
// only at its end). An O_TRUNC drops privileges as a write does.
func (r *rawFS) open(n *ext4go.File, h *fuse.InHeader, flags uint32, killSuid bool) (f *ext4go.File, appending bool, err error) {
	of := r.writebackFlags(openFlags(flags))
	if of&os.O_APPEND != 0 && r.o.WritebackCache {
		if fl, err := n.Flags(); err != nil {
			return nil, false, err
		} else if fl&appendOnlyFlag == 0 {
			of &^= os.O_APPEND
		}
	}
	if f, err = n.Reopen(of); err != nil {
		return nil, false, err
	}
	if of&os.O_TRUNC != 0 {
		if err := r.removePrivs(f, h, h.NodeId, killFlag(killSuid)); err != nil {
			f.Close()
			return nil, false, err
		}
	}
	return f, of&os.O_APPEND != 0, nil
}

// writebackFlags: with the writeback cache the kernel reads the pages a
// write covers only in part, through any handle: a write-only open is
// served as read-write.
func (r *rawFS) writebackFlags(of int) int {
	if r.o.WritebackCache && of&(os.O_WRONLY|os.O_RDWR) == os.O_WRONLY {
		of = of&^os.O_WRONLY | os.O_RDWR
	}
	return of
}

// writeAppendOnly serves a write of the kernel's page cache to an
// append-only file (writeback cache; only such files keep appending
// handles then). The kernel writes whole pages back: the part before the
// end of the file must be the bytes already there (else it is a change
// through mmap, which append-only forbids: EPERM); the rest goes at the
// end.
func (r *rawFS) writeAppendOnly(f *ext4go.File, data []byte, off int64) (uint32, fuse.Status) {
	st, err := statOf(f)
	if err != nil {
		return 0, status(err)
	}
	skip := 0
	if off < st.Size {
		skip = int(min(st.Size-off, int64(len(data))))
		old := make([]byte, skip)
		if _, err := f.ReadAt(old, off); err != nil && !errors.Is(err, io.EOF) {
			return 0, status(err)
		}
		if !bytes.Equal(old, data[:skip]) {
			return 0, fuse.EPERM
		}
	}
	n, err := f.Write(data[skip:])
	if err != nil && n == 0 && skip < len(data) {
		return 0, status(err)
	}
	return uint32(skip + n), fuse.OK
}

func (r *rawFS) handle(fh uint64) (*ext4go.File, fuse.Status) {
	f := r.handles.get(fh)
	if f == nil {
		return nil, fuse.EBADF
	}
	return f, fuse.OK
}

func (r *rawFS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	f, st := r.handle(in.Fh)
	if !st.Ok() {
		return nil, st
	}
	n, err := f.ReadAt(buf[:min(len(buf), int(in.Size))], int64(in.Offset))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, status(err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

func (r *rawFS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	f, st := r.changingHandle(in.Fh, &in.InHeader, in.NodeId, killFlag(in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0))
	if !st.Ok() {
		return 0, st
	}
	var n int
	var err error
	if h := r.handles.ref(in.Fh); h != nil && h.appending && r.o.WritebackCache {
		return r.writeAppendOnly(f, data, int64(in.Offset))
	} else if h != nil && h.appending {
		n, err = f.Write(data)
	} else {
		n, err = f.WriteAt(data, int64(in.Offset))
	}
	if err != nil && n == 0 {
		return 0, status(err)
	}
	return uint32(n), fuse.OK
}

func (r *rawFS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if r.o.WritebackCache {
		// The kernel asks without writing its dirty pages back first:
		// the server would call data a hole. ENOSYS makes the kernel
		// answer itself, calling the whole file data.
		return fuse.ENOSYS
	}
	f, st := r.handle(in.Fh)
	if !st.Ok() {
		return st
	}
	if in.Whence == seekData || in.Whence == seekHole {
		// One extent lookup, leaving the handle's offset alone (it is
		// not the kernel's). kernel: ext4_llseek
		off, err := f.FindData(int64(in.Offset), int(in.Whence))
		if err != nil {
			return status(err)
		}
		out.Offset = uint64(off)
		return fuse.OK
	}
	// A File of its own: the handle's offset is not the kernel's.
	g, err := f.Reopen(oPath)
	if err != nil {
		return status(err)
	}
	defer g.Close()
	off, err := g.Seek(int64(in.Offset), int(in.Whence))
	if err != nil {
		return status(err)
	}
	out.Offset = uint64(off)
	return fuse.OK
}

func (r *rawFS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	// The kernel's ext4 drops privileges on every fallocate as on a write
	// (file_modified); FUSE sends no kill flag with it.
	f, st := r.changingHandle(in.Fh, &in.InHeader, in.NodeId, callerUnknown)
	if !st.Ok() {
		return st
	}
	return status(f.Fallocate(int(in.Mode), int64(in.Offset), int64(in.Length)))
}

// Flush has nothing to do (writes are in the FS when they return, and
// locks are the kernel's): ENOSYS tells the kernel not to send FLUSH on
// every close again.
func (r *rawFS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status { return fuse.ENOSYS }

func (r *rawFS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f, st := r.handle(in.Fh)
	if !st.Ok() {
		return st
	}
	return status(f.Sync())
}

func (r *rawFS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) { r.handles.close(in.Fh) }

// CopyFileRange copies by reading and writing, as the kernel's ext4 does
// (it has no reflinks): up to the source's end, at most 1 GiB a request
// (the caller loops, as copy_file_range(2) allows). The destination's
// privileges go as on a write (the kernel's ext4 copies by splicing into
// its write path, which calls file_remove_privs); the request carries no
// kill flag.
func (r *rawFS) CopyFileRange(cancel <-chan struct{}, in *fuse.CopyFileRangeIn) (uint32, fuse.Status) {
	if in.Flags != 0 {
		return 0, fuse.EINVAL
	}
	src, st := r.handle(in.FhIn)
	if !st.Ok() {
		return 0, st
	}
	dst, st := r.changingHandle(in.FhOut, &in.InHeader, in.NodeIdOut, callerUnknown)
	if !st.Ok() {
		return 0, st
	}
	n := min(in.Len, 1<<30)
	buf := make([]byte, min(n, copyChunk))
	var done uint64
	for done < n {
		m, err := src.ReadAt(buf[:min(uint64(len(buf)), n-done)], int64(in.OffIn+done))
		if m > 0 {
			w, werr := dst.WriteAt(buf[:m], int64(in.OffOut+done))
			done += uint64(w)
			if werr != nil {
				if done > 0 {
					break
				}
				return 0, status(werr)
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || done > 0 {
				break
			}
			return 0, status(err)
		}
		if m == 0 {
			break
		}
	}
	return uint32(done), fuse.OK
}
