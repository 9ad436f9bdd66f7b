//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

// The systems above are where go-fuse v2.12.1 builds (see doc.go).

package fusefs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ext4go/ext4go"
)

// Options choose how the filesystem is mounted.
type Options struct {
	// FsName is the source shown in /proc/mounts (default "ext4go").
	FsName string
	// AllowOther lets users other than the mounting one in (needs
	// user_allow_other in /etc/fuse.conf for non-root mounts). It turns
	// DefaultPermissions on: the server checks no permissions itself.
	AllowOther bool
	// DefaultPermissions makes the kernel check permissions from the
	// modes, owners and POSIX ACLs, as on a local filesystem.
	DefaultPermissions bool
	// ReadOnly mounts read-only (the FS must then not be written either).
	ReadOnly bool
	// Timeout is how long the kernel may cache names and attributes
	// (default 1 s). Every change goes through the server, so longer is
	// safe while no one else writes the image.
	Timeout time.Duration
	// MaxWrite is the largest write the kernel sends (default 1 MiB).
	MaxWrite int
	// UID and GID, when not -1, own every new inode (mount's uid= and
	// gid=); otherwise the calling process's do. (Set them to -1 in
	// Options of your own; nil Options means the caller's.)
	UID, GID int
	// WritebackCache lets the kernel keep written data in its page cache
	// and send it in large writes later (FUSE_WRITEBACK_CACHE), as a
	// local filesystem does; fsync and close still write it through.
	// The kernel then keeps the size and times of files being written.
	WritebackCache bool
	// MaxReadahead is how far ahead the kernel reads a file being read
	// in sequence, in bytes (default MaxWrite: one request of the
	// largest size; -1 leaves the kernel's own, 128 KiB). The kernel
	// offers no more than 128 KiB at mount, so the server raises it after
	// through the mount's backing device in sysfs, which only root may
	// write: for others it stays at 128 KiB.
	MaxReadahead int
	// NoReaddirPlus turns READDIRPLUS off: listings then carry no
	// attributes, and the kernel looks each name up on its own.
	NoReaddirPlus bool
	// ReleaseMemory gives memory the process holds free back to the
	// system (debug.FreeOSMemory) when more than 64 MiB of it waits or
	// the kernel has forgotten many nodes, looking every 2 s: a
	// long-running server's footprint then shrinks
	// after a peak (a directory listed, the kernel forgetting its nodes
	// at drop_caches or under memory pressure, an rm -rf), instead of
	// staying there as the collector's headroom.
	ReleaseMemory bool
	// CachedWriteOnly keeps the page cache for files opened write-only.
	// By default (without WritebackCache) their writes go to the server
	// as they are (FOPEN_DIRECT_IO): a write() is one request, where the
	// kernel's cached path splits one that starts or ends inside a page
	// and asks for security.capability before the first; the kernel
	// drops any pages other opens cached of the range written. The data
	// written is then not in the page cache for a later read.
	CachedWriteOnly bool
	// Uring serves requests over FUSE-over-io_uring (Linux 6.14+ with
	// the fuse module's enable_uring set) instead of read and write on
	// /dev/fuse: a request costs about a third less round trip. Mount
	// returns ErrNoUring where the kernel does not offer it.
	Uring bool
	// UringIdle (with Uring) lets the ring threads wait, and serve
	// requests whose work is small, under SCHED_IDLE while the machine
	// has an idle CPU: the caller a thread wakes then stays on its CPU
	// rather than moving to the idle one at every request. A request
	// that does nothing took 16-18 µs against 24-30 µs on a 2-CPU VM;
	// untar, fallocate2 and random writes did not measurably gain. It is
	// off by default: on a CPU kept busy by other work while another
	// idles, a thread under SCHED_IDLE waits behind that work, and so do
	// the requests it serves (one may hold the journal's commit); see
	// uring_sched_linux.go. Without CAP_SYS_NICE (or an RLIMIT_NICE
	// that allows leaving SCHED_IDLE) the threads keep the daemon's
	// policy.
	UringIdle bool
	// Debug logs every request and reply, to Logger (default
	// log.Default()), where the server's other messages go too.
	Debug  bool
	Logger *log.Logger
	// ExtraOptions are passed to the kernel's mount as they are.
	ExtraOptions []string
}

// ErrNoUring is returned by Mount with Options.Uring where the kernel
// does not offer FUSE over io_uring.
var ErrNoUring = errors.New("fusefs: the kernel does not offer FUSE over io_uring (Linux 6.14+; as root: echo Y > /sys/module/fuse/parameters/enable_uring)")

// Server is a mounted filesystem.
type Server struct {
	srv   *fuse.Server
	raw   *rawFS
	uring *uringTransport // nil unless Options.Uring
	root  string
	done  chan struct{} // closed once the server has closed its Files
}

// Mount mounts fsys on dir and starts serving it; it returns once the
// mount is live. Call Wait to serve until the unmount, and close fsys
// after.
func Mount(fsys *ext4go.FS, dir string, o *Options) (*Server, error) {
	if o == nil {
		o = &Options{UID: -1, GID: -1}
	}
	raw, err := newRawFS(fsys, o)
	if err != nil {
		return nil, err
	}
	mo := &fuse.MountOptions{
		AllowOther: o.AllowOther,
		FsName:     o.FsName,
		// The subtype: the mount's type is fuse.ext4go (as fuse2fs's is
		// fuse.ext4), which findmnt -t and fstab's type name.
		Name:               "ext4go",
		MaxWrite:           o.MaxWrite,
		Debug:              o.Debug,
		Logger:             o.Logger,
		DisableReadDirPlus: o.NoReaddirPlus,
		// Replies carry bytes, not file descriptors: splicing them gains
		// nothing, and a 1 MiB read does not fit a pipe with its header.
		DisableSplice: true,
		// Symlinks never change (a new target is a new inode), and
		// every change of file data goes through the kernel's mount,
		// which updates or drops its pages itself: its automatic
		// invalidation on a changed mtime would only drop the pages
		// of every file this mount has just written.
		EnableSymlinkCaching:     true,
		ExplicitDataCacheControl: true,
		// READDIRPLUS only where the entries are then looked at (the
		// first batch of a listing, and batches after a stat of an
		// entry of the directory): "ls -f" or "find" of a large
		// directory then has no inode read and no node held by the
		// kernel per entry. libfuse asks for the same by default.
		// kernel: fuse_use_readdirplus
		ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO,
		Options:           append([]string(nil), o.ExtraOptions...),
	}
	if mo.FsName == "" {
		mo.FsName = "ext4go"
	}

	if mo.MaxWrite == 0 {
		mo.MaxWrite = 1 << 20
	}
	if o.DefaultPermissions || o.AllowOther {
		// With other users in, the kernel must check their permissions:
		// the server does not.
		mo.Options = append(mo.Options, "default_permissions")
		// The kernel checks POSIX ACLs too (from the xattrs it reads
		// through us) and leaves the umask to us: a directory's default
		// ACL, applied by ext4go on create, replaces it.
		mo.EnableAcl = true
		mo.ExtraCapabilities |= fuse.CAP_DONT_MASK
	}
	if o.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	} else {
		// The server drops setuid bits and file capabilities on every
		// change of a file's data (removePrivs) and on chown, so the
		// kernel need not ask for security.capability before every
		// write.
		mo.ExtraCapabilities |= capHandleKillprivV2
		if o.WritebackCache {
			mo.ExtraCapabilities |= fuse.CAP_WRITEBACK_CACHE
		}
	}
	// File handles (name_to_handle_at, an NFS export of the mount) name
	// a node and its generation; the kernel asks for "." of a node it no
	// longer knows (Lookup, FS.OpenInode).
	mo.ExtraCapabilities |= fuse.CAP_EXPORT_SUPPORT
	if o.Uring {
		if err := uringAvailable(); err != nil {
			raw.closeAll()
			return nil, err
		}
		mo.ExtraCapabilities |= fuse.CAP_OVER_IO_URING
		raw.uringOpts = mo // Init sets the rings up
		// The mount point as the mount table will show it, to find
		// the connection if it must be aborted.
		if raw.uringDir, err = filepath.Abs(dir); err == nil {
			raw.uringDir, err = filepath.EvalSymlinks(raw.uringDir)
		}
		if err != nil {
			raw.closeAll()
			return nil, fmt.Errorf("fusefs: mounting on %s: %w", dir, err)
		}
	}
	srv, err := fuse.NewServer(raw, dir, mo)
	if err != nil {
		raw.closeAll()
		return nil, fmt.Errorf("fusefs: mounting on %s: %w", dir, err)
	}
	go srv.Serve()
	if raw.uringErr != nil {
		// Requests wait in the kernel until every queue has an entry:
		// abort the connection (failing them and the entries' commands),
		// then unmount, lazily if something still holds the mount.
		abortErr := abortConnection(raw.uringDir)
		if srv.Unmount() != nil {
			detachMount(raw.uringDir)
		}
		// Only an aborted connection is sure to end the threads'
		// commands; without fusectl the threads are left, and a
		// request one of them still serves meets closed Files (an
		// error for its caller, no write).
		if abortErr == nil {
			raw.uring.waitIfStarted()
		}
		raw.closeAll()
		return nil, fmt.Errorf("fusefs: mounting on %s: %w", dir, raw.uringErr)
	}
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		raw.uring.waitIfStarted()
		raw.closeAll()
		return nil, fmt.Errorf("fusefs: mounting on %s: %w", dir, err)
	}
	if ra := o.MaxReadahead; ra >= 0 {
		if ra == 0 {
			ra = mo.MaxWrite
		}
		if err := setReadahead(dir, ra); err != nil && o.Debug {
			log.Printf("fusefs: readahead stays the kernel's: %v", err)
		}
	}
	s := &Server{srv: srv, raw: raw, uring: raw.uring, root: dir, done: make(chan struct{})}
	if o.ReleaseMemory {
		go releaseMemory(&raw.nodes, s.done)
	}
	go func() {
		srv.Wait()
		// The kernel has failed the rings' commands; their threads
		// finish what they serve before the Files are closed.
		raw.uring.waitIfStarted()
		raw.closeAll()
		close(s.done)
	}()
	return s, nil
}

// UringRequests is the number of requests served through io_uring
// (Options.Uring) so far.
func (s *Server) UringRequests() int64 {
	if s.uring == nil {
		return 0
	}
	return s.uring.requests()
}

// Wait serves until the filesystem is unmounted and the server has let
// go of every inode it held; the FS may be closed then.
func (s *Server) Wait() {
	s.srv.Wait()
	<-s.done
}

// Unmount unmounts the filesystem (fusermount -u); Wait then returns.
func (s *Server) Unmount() error { return s.srv.Unmount() }

// releaseMemory is Options.ReleaseMemory, until done is closed. The
// nodes the kernel forgets are garbage only at the next collection, which
// an idle server does not run: so a fall in the nodes held releases too.
func releaseMemory(nodes *nodeTable, done <-chan struct{}) {
	const (
		every  = 2 * time.Second
		free   = 64 << 20 // bytes free in the heap
		forgot = 16384    // nodes forgotten since the last release
	)
	sample := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
	t := time.NewTicker(every)
	defer t.Stop()
	last := nodes.held() // at the last release, or the most since
	prev := last         // at the last look
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		held := nodes.held()
		last = max(last, held)
		// Forgotten many, or some and the FORGETs have stopped (the end
		// of an rm -rf or of a drop_caches).
		release := last-held >= forgot || held < last && held == prev
		prev = held
		metrics.Read(sample)
		if release || sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() > free {
			debug.FreeOSMemory()
			last = held
		}
	}
}

// rawFS implements fuse.RawFileSystem over an ext4go.FS.
type rawFS struct {
	fuse.RawFileSystem // ENOSYS for what is not implemented below
	fsys               *ext4go.FS
	o                  Options
	timeout            time.Duration
	nodes              nodeTable
	handles            handleTable
	srv                atomic.Pointer[fuse.Server] // set by Init

	uringOpts *fuse.MountOptions // Options.Uring: the rings' mount options
	uringDir  string             // and the mount point, resolved
	uring     *uringTransport    // set by Init with uringOpts
	uringErr  error              // why Init could not set the rings up
}

func newRawFS(fsys *ext4go.FS, o *Options) (*rawFS, error) {
	r := &rawFS{RawFileSystem: fuse.NewDefaultRawFileSystem(), fsys: fsys, o: *o, timeout: o.Timeout}
	if r.timeout == 0 {
		r.timeout = time.Second
	}
	root, err := fsys.OpenFile(".", os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	r.nodes.init()
	r.handles.init()
	r.nodes.add(fuse.FUSE_ROOT_ID, root, 1)
	return r, nil
}

// String is empty so that go-fuse asks for no subtype: the mount's type
// is plain "fuse", which tools such as xfstests (FSTYP=fuse) expect.
func (r *rawFS) String() string { return "" }

func (r *rawFS) closeAll() {
	r.handles.closeAll()
	r.nodes.closeAll()
}

// nodeID is the FUSE node of inode ino.
func nodeID(ino uint32) uint64 {
	if ino == 2 {
		return fuse.FUSE_ROOT_ID
	}
	return uint64(ino)
}

// inoOf is the inode of FUSE node id (nodeID's inverse).
func inoOf(id uint64) (uint32, bool) {
	if id == fuse.FUSE_ROOT_ID {
		return 2, true
	}
	return uint32(id), id > 2 && id <= 1<<32-1
}

// status maps an ext4go error to the errno the kernel's ext4 returns.
func status(err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return fuse.Status(e)
	}
	var ce *ext4go.CorruptError
	switch {
	case errors.Is(err, ext4go.ErrChecksum):
		return fuse.Status(syscall.EBADMSG) // kernel: EFSBADCRC
	case errors.As(err, &ce), errors.Is(err, ext4go.ErrCorrupt):
		return fuse.Status(errCorrupted) // kernel: EFSCORRUPTED
	case errors.Is(err, fs.ErrExist):
		return fuse.Status(syscall.EEXIST)
	case errors.Is(err, fs.ErrNotExist):
		return fuse.ENOENT
	case errors.Is(err, fs.ErrPermission):
		return fuse.EPERM
	case errors.Is(err, fs.ErrInvalid):
		return fuse.EINVAL
	case errors.Is(err, ext4go.ErrReadOnly):
		return fuse.EROFS
	case errors.Is(err, fs.ErrClosed):
		return fuse.EBADF
	case errors.Is(err, ext4go.ErrUnsupported):
		return fuse.ENOTSUP
	}
	return fuse.EIO
}

// fillAttr sets out from st.
func fillAttr(out *fuse.Attr, st *ext4go.Stat, blockSize uint32) {
	out.Ino = uint64(st.Ino)
	out.Size = uint64(st.Size)
	out.Blocks = uint64(st.Blocks)
	out.Atime, out.Atimensec = uint64(st.Atime.Unix()), uint32(st.Atime.Nanosecond())
	out.Mtime, out.Mtimensec = uint64(st.Mtime.Unix()), uint32(st.Mtime.Nanosecond())
	out.Ctime, out.Ctimensec = uint64(st.Ctime.Unix()), uint32(st.Ctime.Nanosecond())
	out.Mode = uint32(st.Mode)
	out.Nlink = st.Nlink
	out.Uid, out.Gid = st.UID, st.GID
	out.Rdev = uint32(st.Rdev)
	out.Blksize = blockSize
}

func statOf(f *ext4go.File) (*ext4go.Stat, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	st, ok := fi.Sys().(*ext4go.Stat)
	if !ok {
		return nil, errors.New("fusefs: no ext4go.Stat")
	}
	return st, nil
}

// entry answers a lookup of f (a new reference the node table takes).
func (r *rawFS) entry(f *ext4go.File, out *fuse.EntryOut) fuse.Status {
	st, err := statOf(f)
	if err != nil {
		f.Close()
		return status(err)
	}
	id := nodeID(st.Ino)
	r.nodes.add(id, f, 1)
	out.NodeId = id
	out.Generation = uint64(st.Generation)
	fillAttr(&out.Attr, st, uint32(r.fsys.BlockSize()))
	out.SetEntryTimeout(r.timeout)
	out.SetAttrTimeout(r.timeout)
	return fuse.OK
}

func (r *rawFS) node(id uint64) (*ext4go.File, fuse.Status) {
	f := r.nodes.get(id)
	if f == nil {
		return nil, fuse.Status(syscall.ESTALE)
	}
	return f, fuse.OK
}

func (r *rawFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(h.NodeId)
	if name == "." {
		// The kernel decoding a file handle (fuse_get_dentry); it checks
		// the generation itself.
		var f *ext4go.File
		var err error
		if st.Ok() {
			f, err = d.Reopen(oPath)
		} else if ino, ok := inoOf(h.NodeId); ok {
			f, err = r.fsys.OpenInode(ino, 0)
		} else {
			return st
		}
		if err != nil {
			return status(err)
		}
		return r.entry(f, out)
	}
	if !st.Ok() {
		return st
	}
	if name == ".." {
		// The kernel connecting a directory decoded from a handle to
		// the tree (fuse_get_parent).
		ino, err := d.Parent()
		if err != nil {
			return status(err)
		}
		p, err := r.fsys.OpenInode(ino, 0)
		if err != nil {
			return status(err)
		}
		return r.entry(p, out)
	}
	f, err := d.LookupAt(name)
	if errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		// A negative entry the kernel may cache as long as a positive
		// one (libfuse's negative_timeout): every create goes through
		// this server, which the kernel then asks.
		out.NodeId = 0
		out.SetEntryTimeout(r.timeout)
		return fuse.OK
	}
	if err != nil {
		return status(err)
	}
	return r.entry(f, out)
}

func (r *rawFS) Forget(id, n uint64) { r.nodes.forget(id, n) }

func (r *rawFS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	s, err := statOf(f)
	if err != nil {
		return status(err)
	}
	fillAttr(&out.Attr, s, uint32(r.fsys.BlockSize()))
	out.SetTimeout(r.timeout)
	return fuse.OK
}

func (r *rawFS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	if in.Valid&(fuse.FATTR_UID|fuse.FATTR_GID) != 0 {
		uid, gid := -1, -1
		if in.Valid&fuse.FATTR_UID != 0 {
			uid = int(in.Uid)
		}
		if in.Valid&fuse.FATTR_GID != 0 {
			gid = int(in.Gid)
		}
		// A chown drops the setuid bit whoever makes it, and the setgid
		// bit as a write by a caller without CAP_FSETID does, judged on
		// the group before the change (kernel: chown_common); after it,
		// so that a chown refused (an immutable file) drops nothing.
		s, err := statOf(f)
		if err != nil {
			return status(err)
		}
		keepsSetgid := inGroupOrCapable(&in.InHeader)(s.GID)
		if err := f.Chown(uid, gid); err != nil {
			return status(err)
		}
		if _, err := f.KillPriv(true, func(uint32) bool { return keepsSetgid }); err != nil {
			return status(err)
		}
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		if err := f.Chmod(unixMode(in.Mode)); err != nil {
			return status(err)
		}
	}
	if in.Valid&fuse.FATTR_SIZE != 0 {
		w := r.handles.get(in.Fh)
		if in.Valid&fuse.FATTR_FH == 0 || w == nil {
			var err error
			if w, err = f.Reopen(os.O_WRONLY); err != nil {
				return status(err)
			}
			defer w.Close()
		}
		if err := w.Truncate(int64(in.Size)); err != nil {
			return status(err)
		}
		if err := r.removePrivs(w, &in.InHeader, in.NodeId, killFlag(in.Valid&fuse.FATTR_KILL_SUIDGID != 0)); err != nil {
			return status(err)
		}
	}
	var atime, mtime time.Time
	now := time.Now()
	switch {
	case in.Valid&fuse.FATTR_ATIME_NOW != 0:
		atime = now
	case in.Valid&fuse.FATTR_ATIME != 0:
		atime = time.Unix(int64(in.Atime), int64(in.Atimensec))
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		mtime = now
	case in.Valid&fuse.FATTR_MTIME != 0:
		mtime = time.Unix(int64(in.Mtime), int64(in.Mtimensec))
	}
	if !atime.IsZero() || !mtime.IsZero() {
		// Times of nobody's choosing may change an append-only file:
		// utimes(NULL) or both times now (the kernel's ATTR_TOUCH), and
		// with the writeback cache the kernel's own write-back of the
		// times it kept (fuse_flush_times: mtime and ctime through a
		// handle, nothing else). One time alone, even now, is an
		// explicit setting.
		const bothNow = fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW
		const flushTimes = fuse.FATTR_MTIME | fuse.FATTR_CTIME | fuse.FATTR_FH
		touch := in.Valid&bothNow == bothNow || r.o.WritebackCache && in.Valid&^fuse.FATTR_LOCKOWNER == flushTimes ||
			// With the writeback cache the kernel sends its own mtime
			// for "now" (no MTIME_NOW), atime still as now.
			r.o.WritebackCache && in.Valid&fuse.FATTR_ATIME_NOW != 0 && in.Valid&fuse.FATTR_MTIME != 0
		var err error
		if touch {
			err = f.Touch(atime, mtime)
		} else {
			err = f.Chtimes(atime, mtime)
		}
		if err != nil {
			return status(err)
		}
	}
	s, err := statOf(f)
	if err != nil {
		return status(err)
	}
	fillAttr(&out.Attr, s, uint32(r.fsys.BlockSize()))
	out.SetTimeout(r.timeout)
	return fuse.OK
}

// unixMode turns st_mode permission and special bits into an fs.FileMode.
func unixMode(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

func (r *rawFS) make(h *fuse.InHeader, name string, ni ext4go.NewInode, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	ni.UID, ni.GID = r.owner(h)
	f, err := d.MakeAt(name, ni, os.O_RDONLY)
	if err != nil {
		return status(err)
	}
	p, err := f.Reopen(oPath)
	f.Close()
	if err != nil {
		return status(err)
	}
	return r.entry(p, out)
}

// owner is who owns an inode h's caller makes.
func (r *rawFS) owner(h *fuse.InHeader) (uid, gid uint32) {
	uid, gid = h.Uid, h.Gid
	if r.o.UID >= 0 {
		uid = uint32(r.o.UID)
	}
	if r.o.GID >= 0 {
		gid = uint32(r.o.GID)
	}
	return uid, gid
}

// oPath is Linux's O_PATH (ext4go.File.Reopen).
const oPath = 0x200000

func (r *rawFS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(&in.InHeader, name, ext4go.NewInode{Mode: in.Mode, Rdev: uint64(in.Rdev), Umask: in.Umask}, out)
}

func (r *rawFS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(&in.InHeader, name, ext4go.NewInode{Mode: syscall.S_IFDIR | in.Mode&0o7777, Umask: in.Umask}, out)
}

func (r *rawFS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return r.make(h, name, ext4go.NewInode{Mode: syscall.S_IFLNK | 0o777, Target: target}, out)
}

func (r *rawFS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(d.UnlinkAt(name, false))
}

func (r *rawFS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	d, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(d.UnlinkAt(name, true))
}

func (r *rawFS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	d, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	nd, st := r.node(in.Newdir)
	if !st.Ok() {
		return st
	}
	return status(d.RenameAt(oldName, nd, newName, int(in.Flags)))
}

func (r *rawFS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	d, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	old, st := r.node(in.Oldnodeid)
	if !st.Ok() {
		return st
	}
	if err := d.LinkAt(old, name); err != nil {
		return status(err)
	}
	p, err := old.Reopen(oPath)
	if err != nil {
		return status(err)
	}
	return r.entry(p, out)
}

func (r *rawFS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return nil, st
	}
	t, err := f.ReadLink()
	if err != nil {
		return nil, status(err)
	}
	return []byte(t), fuse.OK
}

func (r *rawFS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	// Permissions are the kernel's (default_permissions) or nobody's.
	if _, st := r.node(in.NodeId); !st.Ok() {
		return st
	}
	return fuse.OK
}

func (r *rawFS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	v, err := f.GetXattr(attr)
	if err != nil {
		return 0, status(err)
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

// ListXAttr lists a file's attributes as the kernel's ext4 lists them to
// its caller: trusted.* only to one with CAP_SYS_ADMIN (kernel:
// ext4_xattr_trusted_list); the kernel does not filter a FUSE server's
// list. Reading and writing trusted.* need no check here: the VFS refuses
// them to such a caller before asking the server (xattr_permission:
// ENODATA, EPERM), judging its credentials better than callerCapable can.
func (r *rawFS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	names, err := f.ListXattr()
	if err != nil {
		return 0, status(err)
	}
	var b []byte
	// Looked up once, and only for a file that has such attributes.
	privileged := sync.OnceValue(func() bool { return callerCapable(h, capSysAdmin) })
	for _, n := range names {
		if strings.HasPrefix(n, "trusted.") && !privileged() {
			continue
		}
		b = append(append(b, n...), 0)
	}
	if len(dest) < len(b) {
		return uint32(len(b)), fuse.ERANGE
	}
	return uint32(copy(dest, b)), fuse.OK
}

func (r *rawFS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	if err := f.SetXattr(attr, data, int(in.Flags)); err != nil {
		return status(err)
	}
	if attr == "system.posix_acl_access" {
		// Setting an access ACL drops setgid when the caller is neither
		// in the file's group nor privileged (kernel:
		// posix_acl_update_mode, in_group_or_capable).
		s, err := statOf(f)
		if err != nil {
			return status(err)
		}
		if s.Mode&syscall.S_ISGID != 0 && !inGroupOrCapable(&in.InHeader)(s.GID) {
			if err := f.Chmod(unixMode(uint32(s.Mode) &^ syscall.S_ISGID)); err != nil {
				return status(err)
			}
		}
		r.invalidateAttr(in.NodeId)
	}
	return fuse.OK
}

// setFlags is File.SetFlags for the ioctls, whose replies carry no
// attributes: the kernel is told its cached ones (ctime) are stale.
func (r *rawFS) setFlags(f *ext4go.File, id uint64, flags uint32) fuse.Status {
	if err := f.SetFlags(flags); err != nil {
		return status(err)
	}
	r.invalidateAttr(id)
	return fuse.OK
}

// invalidateAttr tells the kernel its cached attributes of node id are
// stale. It is called before the reply of a request that changed them
// without returning them: an attributes-only invalidation (offset -1)
// takes no lock the kernel holds while it waits for the reply.
func (r *rawFS) invalidateAttr(id uint64) {
	if srv := r.srv.Load(); srv != nil {
		srv.InodeNotify(id, -1, 0)
	}
}

// The capabilities the server asks its callers about
// (linux/capability.h).
const (
	capFSetID   = 4  // keep set-ID bits when changing a file
	capSysAdmin = 21 // among much else, the trusted.* attributes
)

// initUserNS is how /proc/PID/ns/user names the initial user namespace
// (PROC_USER_INIT_INO).
const initUserNS = "user:[4026531837]"

// callerCapable reports whether h's caller holds capability cp as the
// kernel's capable() asks: in its effective set, in the initial user
// namespace (the root of a namespace of its own has every capability in
// it and none outside). A request names its caller's thread, uid and gid,
// not its capabilities: they are read from /proc/<pid>/status. Where
// /proc cannot say (a caller in a pid namespace the server does not see
// comes with pid 0; a server that is not root may not read another user's
// namespace), uid 0 counts as capable, as FUSE servers without /proc
// judge privilege. What /proc shows is the thread's own credentials: a
// kernel service that acts for a thread with credentials of its own
// (overlayfs copying up, say) is judged by the thread's.
func callerCapable(h *fuse.InHeader, cp uint) bool {
	capEff, ok := procStatus(h.Pid, "CapEff:")
	if !ok {
		return h.Uid == 0
	}
	caps, err := strconv.ParseUint(capEff, 16, 64)
	if err != nil || caps&(1<<cp) == 0 {
		return false
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", h.Pid))
	if err != nil {
		return h.Uid == 0
	}
	return ns == initUserNS
}

func (r *rawFS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	f, st := r.node(h.NodeId)
	if !st.Ok() {
		return st
	}
	return status(f.RemoveXattr(attr))
}

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

// keepCache lets the kernel keep a file's cached pages from one open to
// the next (FOPEN_KEEP_CACHE), as a local filesystem does: every change
// of file data goes through the kernel's mount (writes, truncates,
// fallocate and copy_file_range invalidate or update the pages
// themselves), so the pages cannot go stale while this server owns the
// image. Without it each open drops them: every read of a file written
// or read a moment ago came back to the server.
const keepCache = fuse.FOPEN_KEEP_CACHE

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

// killSetID is what a request that changes a file's data says of its
// caller's CAP_FSETID, without which the change drops the setuid and
// setgid bits (kernel: setattr_should_drop_suidgid).
type killSetID uint8

const (
	// callerUnknown: the request carries no word of it (FALLOCATE,
	// COPY_FILE_RANGE), and the caller's capabilities are looked up.
	callerUnknown killSetID = iota
	// kernelSaysKeep and kernelSaysKill: the kernel judged the caller
	// and said so in the request's kill flag (WRITE_KILL_SUIDGID,
	// OPEN_KILL_SUIDGID, FATTR_KILL_SUIDGID).
	kernelSaysKeep
	kernelSaysKill
)

// killFlag is the killSetID of a request's kill flag.
func killFlag(set bool) killSetID {
	if set {
		return kernelSaysKill
	}
	return kernelSaysKeep
}

// changingHandle returns handle fh for a request of h that changes its
// file's data, once the file's privileges are dropped as that change by
// h's caller drops them (removePrivs). Every such request on a handle
// (WRITE, FALLOCATE, COPY_FILE_RANGE's destination) gets its File here,
// so that none changes data and keeps them.
func (r *rawFS) changingHandle(fh uint64, h *fuse.InHeader, nodeID uint64, k killSetID) (*ext4go.File, fuse.Status) {
	f, st := r.handle(fh)
	if !st.Ok() {
		return nil, st
	}
	if err := r.removePrivs(f, h, nodeID, k); err != nil {
		return nil, status(err)
	}
	return f, fuse.OK
}

// removePrivs drops f's privileges before a change of its data by h's
// caller, as the kernel's file_remove_privs does (File.KillPriv): the file
// capability always, the setuid and setgid bits unless the caller has
// CAP_FSETID. With handle_killpriv_v2 the kernel leaves all of it to the
// server. If f's mode changed, the kernel is told its cached attributes of
// node nodeID (f's) are stale: the reply to the request carries none.
// Requests that change data without a handle (an O_TRUNC open, a
// truncating SETATTR) call it themselves; the others go through
// changingHandle.
func (r *rawFS) removePrivs(f *ext4go.File, h *fuse.InHeader, nodeID uint64, k killSetID) error {
	suidgid := k == kernelSaysKill
	if k == callerUnknown {
		// The caller is looked up only when there are bits to drop.
		if s, err := statOf(f); err == nil && s.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			suidgid = !callerCapable(h, capFSetID)
		}
	}
	changed, err := f.KillPriv(suidgid, inGroupOrCapable(h))
	if changed {
		r.invalidateAttr(nodeID) // before the reply: the next stat asks
	}
	return err
}

// callerIn returns whether h's caller is in a group: its gid, or one of
// its supplementary groups (read from /proc; a caller that cannot be read
// counts as in it, so that nothing is dropped on a guess).
func callerIn(h *fuse.InHeader) func(gid uint32) bool {
	return func(gid uint32) bool {
		if h.Gid == gid {
			return true
		}
		groups, ok := procStatus(h.Pid, "Groups:")
		if !ok {
			return true
		}
		for _, g := range strings.Fields(groups) {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) == gid {
				return true
			}
		}
		return false
	}
}

// inGroupOrCapable returns whether h's caller is in a group or holds
// CAP_FSETID, either of which keeps the setgid bit of a file of that
// group that is not group-executable (kernel: in_group_or_capable).
func inGroupOrCapable(h *fuse.InHeader) func(gid uint32) bool {
	in := callerIn(h)
	return func(gid uint32) bool { return in(gid) || callerCapable(h, capFSetID) }
}

// procStatus returns the value of a line of /proc/PID/status ("Groups:",
// "CapEff:"); ok is false when it cannot be read.
func procStatus(pid uint32, key string) (value string, ok bool) {
	if pid == 0 {
		return "", false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, key); found {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}

// Init keeps the server, for notifications to the kernel.
// Init runs once INIT is answered, before any other request is served.
func (r *rawFS) Init(s *fuse.Server) {
	r.srv.Store(s)
	if r.uringOpts != nil {
		r.uring, r.uringErr = startUring(s, r, r.uringOpts, r.uringDir, r.o.UringIdle)
	}
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

// appendOnlyFlag is FS_APPEND_FL.
const appendOnlyFlag = 0x20

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

// lseek's whence values that the kernel sends on to the server.
const (
	seekData = 3
	seekHole = 4
)

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

func (r *rawFS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	u := r.fsys.Usage()
	out.Blocks, out.Bfree, out.Bavail = u.Blocks, u.FreeBlocks, u.Available
	out.Files, out.Ffree = u.Inodes, u.FreeInodes
	out.Bsize, out.Frsize, out.NameLen = u.BlockSize, u.BlockSize, u.NameMax
	return fuse.OK
}

// shardedMap is a map split over locked shards by key, so that requests
// on different nodes or handles do not share a lock.
type shardedMap[V any] struct {
	shards [64]struct {
		mu sync.Mutex
		m  map[uint64]V
	}
}

func (t *shardedMap[V]) init() {
	for i := range t.shards {
		t.shards[i].m = map[uint64]V{}
	}
}

// with runs fn on the shard of key, locked.
func (t *shardedMap[V]) with(key uint64, fn func(m map[uint64]V)) {
	s := &t.shards[key%uint64(len(t.shards))]
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.m)
}

// drain removes every entry and passes it to fn (outside the locks).
func (t *shardedMap[V]) drain(fn func(V)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		vs := make([]V, 0, len(s.m))
		for k, v := range s.m {
			vs = append(vs, v)
			delete(s.m, k)
		}
		s.mu.Unlock()
		for _, v := range vs {
			fn(v)
		}
	}
}

// nodeTable maps node IDs to the Files holding their inodes, with the
// kernel's lookup counts.
type nodeTable struct{ shardedMap[*nodeRef] }

type nodeRef struct {
	f       *ext4go.File
	lookups uint64
}

// add counts n lookups of node id, whose inode f holds: f is kept if the
// node is new, else closed (the node has its File already).
func (t *nodeTable) add(id uint64, f *ext4go.File, n uint64) {
	known := false
	t.with(id, func(m map[uint64]*nodeRef) {
		if ref, ok := m[id]; ok {
			ref.lookups += n
			known = true
		} else {
			m[id] = &nodeRef{f: f, lookups: n}
		}
	})
	if known {
		f.Close()
	}
}

func (t *nodeTable) get(id uint64) (f *ext4go.File) {
	t.with(id, func(m map[uint64]*nodeRef) {
		if ref, ok := m[id]; ok {
			f = ref.f
		}
	})
	return f
}

func (t *nodeTable) forget(id, n uint64) {
	var f *ext4go.File
	t.with(id, func(m map[uint64]*nodeRef) {
		ref, ok := m[id]
		if !ok || id == fuse.FUSE_ROOT_ID {
			return
		}
		if ref.lookups <= n {
			delete(m, id)
			f = ref.f
		} else {
			ref.lookups -= n
		}
	})
	if f != nil {
		f.Close()
	}
}

// held is the number of nodes the kernel holds.
func (t *nodeTable) held() int {
	n := 0
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

func (t *nodeTable) closeAll() { t.drain(func(r *nodeRef) { r.f.Close() }) }

// handleTable maps file handles to open Files.
type handleTable struct {
	next atomic.Uint64
	shardedMap[*handleRef]
}

type handleRef struct {
	f   *ext4go.File
	dir *dirStream
	// appending is an O_APPEND open: its writes go to the end of the
	// file, wherever the kernel thought that was.
	appending bool
}

func (t *handleTable) add(f *ext4go.File, appending bool) uint64 {
	fh := t.next.Add(1)
	t.with(fh, func(m map[uint64]*handleRef) { m[fh] = &handleRef{f: f, appending: appending} })
	return fh
}

func (t *handleTable) get(fh uint64) (f *ext4go.File) {
	if h := t.ref(fh); h != nil {
		return h.f
	}
	return nil
}

func (t *handleTable) ref(fh uint64) (h *handleRef) {
	t.with(fh, func(m map[uint64]*handleRef) { h = m[fh] })
	return h
}

func (t *handleTable) dir(fh uint64) (d *dirStream) {
	t.with(fh, func(m map[uint64]*handleRef) {
		h, ok := m[fh]
		if !ok {
			d = &dirStream{}
			return
		}
		if h.dir == nil {
			h.dir = &dirStream{}
		}
		d = h.dir
	})
	return d
}

func (t *handleTable) close(fh uint64) {
	var h *handleRef
	t.with(fh, func(m map[uint64]*handleRef) {
		h = m[fh]
		delete(m, fh)
	})
	if h != nil {
		h.f.Close()
	}
}

func (t *handleTable) closeAll() { t.drain(func(h *handleRef) { h.f.Close() }) }

// The ioctls served: FS_IOC_GETFLAGS and FS_IOC_SETFLAGS (lsattr, chattr),
// matched by direction, type and number (the kernel sends them with an
// int's size whatever the caller's long).
const (
	ioctlMatch       = 0xC000FFFF
	ioctlGetFlags    = 0x80006601
	ioctlSetFlags    = 0x40006602
	ioctlFSGetXattr  = 0x8000581f // struct fsxattr: the VFS reads the flags so before a set
	ioctlFSSetXattr  = 0x40005820
	fsxattrSize      = 28
	fsxattrXflagsOff = 0
	fsxattrProjidOff = 12
)

// xflagBits pairs the inode flags with the FS_XFLAG_* bits that stand for
// them in struct fsxattr (kernel: ext4_iflags_to_xflags).
var xflagBits = [...][2]uint32{
	{0x00000008, 0x00000020}, // sync
	{0x00000010, 0x00000008}, // immutable
	{0x00000020, 0x00000010}, // append
	{0x00000040, 0x00000080}, // nodump
	{0x00000080, 0x00000040}, // noatime
	{0x20000000, 0x00000200}, // project inherit
	{0x02000000, 0x00008000}, // DAX
}

func (r *rawFS) Ioctl(cancel <-chan struct{}, in *fuse.IoctlIn, inbuf []byte, out *fuse.IoctlOut, outbuf []byte) fuse.Status {
	f, st := r.node(in.NodeId)
	if !st.Ok() {
		return st
	}
	switch in.Cmd & ioctlMatch {
	case ioctlGetFlags:
		if len(outbuf) < 4 {
			return fuse.EINVAL
		}
		flags, err := f.Flags()
		if err != nil {
			return status(err)
		}
		binary.LittleEndian.PutUint32(outbuf, flags)
		clear(outbuf[4:])
		return fuse.OK
	case ioctlSetFlags:
		if len(inbuf) < 4 {
			return fuse.EINVAL
		}
		return r.setFlags(f, in.NodeId, binary.LittleEndian.Uint32(inbuf))
	case ioctlFSGetXattr:
		if len(outbuf) < fsxattrSize {
			return fuse.EINVAL
		}
		st, err := statOf(f)
		if err != nil {
			return status(err)
		}
		var x uint32
		for _, b := range xflagBits {
			if st.Flags&b[0] != 0 {
				x |= b[1]
			}
		}
		clear(outbuf)
		binary.LittleEndian.PutUint32(outbuf[fsxattrXflagsOff:], x)
		binary.LittleEndian.PutUint32(outbuf[fsxattrProjidOff:], st.ProjectID)
		return fuse.OK
	case ioctlFSSetXattr:
		if len(inbuf) < fsxattrSize {
			return fuse.EINVAL
		}
		st, err := statOf(f)
		if err != nil {
			return status(err)
		}
		if binary.LittleEndian.Uint32(inbuf[fsxattrProjidOff:]) != st.ProjectID {
			return fuse.Status(syscall.EOPNOTSUPP) // project quotas are not kept
		}
		x := binary.LittleEndian.Uint32(inbuf[fsxattrXflagsOff:])
		flags := st.Flags
		for _, b := range xflagBits {
			flags &^= b[0]
			if x&b[1] != 0 {
				flags |= b[0]
			}
		}
		return r.setFlags(f, in.NodeId, flags)
	}
	return fuse.Status(syscall.ENOTTY)
}

// copyChunk is how much CopyFileRange moves per read and write.
const copyChunk = 1 << 20

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
