//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"fmt"
	"log"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
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
	// NoSubtype mounts with the plain type fuse instead of fuse.ext4go
	// (for tools that expect it: xfstests with FSTYP=fuse checks the
	// type against fuse).
	NoSubtype bool
}

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
		Name:               subtype(o),
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

// subtype is the mount's subtype (its type is fuse.SUBTYPE), or none.
func subtype(o *Options) string {
	if o.NoSubtype {
		return ""
	}
	return "ext4go"
}
