//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

// The systems above are where go-fuse v2.12.1 builds (see doc.go).

package fusefs

import (
	"errors"
	"io/fs"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/ext4go/ext4go"
)

// ErrNoUring is returned by Mount with Options.Uring where the kernel
// does not offer FUSE over io_uring.
var ErrNoUring = errors.New("fusefs: the kernel does not offer FUSE over io_uring (Linux 6.14+; as root: echo Y > /sys/module/fuse/parameters/enable_uring)")

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

// oPath is Linux's O_PATH (ext4go.File.Reopen).
const oPath = 0x200000

// initUserNS is how /proc/PID/ns/user names the initial user namespace
// (PROC_USER_INIT_INO).
const initUserNS = "user:[4026531837]"

// keepCache lets the kernel keep a file's cached pages from one open to
// the next (FOPEN_KEEP_CACHE), as a local filesystem does: every change
// of file data goes through the kernel's mount (writes, truncates,
// fallocate and copy_file_range invalidate or update the pages
// themselves), so the pages cannot go stale while this server owns the
// image. Without it each open drops them: every read of a file written
// or read a moment ago came back to the server.
const keepCache = fuse.FOPEN_KEEP_CACHE

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

// Init keeps the server, for notifications to the kernel.
// Init runs once INIT is answered, before any other request is served.
func (r *rawFS) Init(s *fuse.Server) {
	r.srv.Store(s)
	if r.uringOpts != nil {
		r.uring, r.uringErr = startUring(s, r, r.uringOpts, r.uringDir, r.o.UringIdle)
	}
}

// appendOnlyFlag is FS_APPEND_FL.
const appendOnlyFlag = 0x20

// lseek's whence values that the kernel sends on to the server.
const (
	seekData = 3
	seekHole = 4
)

// copyChunk is how much CopyFileRange moves per read and write.
const copyChunk = 1 << 20
