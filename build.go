package ext4go

import (
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/host"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/super"
)

// MkfsOptions are the options of Mkfs, those of mke2fs (see the fields).
type MkfsOptions = mkfs.Options

// Mkfs makes a new, empty filesystem on the image file (created or grown to
// o.Size) or block device at path, laid out as mke2fs 1.47 lays it out.
func Mkfs(path string, o MkfsOptions) error { return mkfs.Format(path, o) }

// BuildOptions control how AddDir and AddTar copy files in.
type BuildOptions struct {
	// UID and GID, when not negative, own every file instead of the
	// source's owners.
	UID, GID int
	// UIDMap and GIDMap translate the source's owners (before UID/GID).
	UIDMap, GIDMap map[uint32]uint32
	// Whiteouts turns OCI layer whiteouts (.wh.NAME files and .wh..wh..opq
	// markers) into overlayfs ones: a 0/0 character device NAME, and the
	// trusted.overlay.opaque="y" attribute on the directory.
	Whiteouts bool
	// Time, when set, is the change and creation time of every inode made
	// (SOURCE_DATE_EPOCH); otherwise they get the current time.
	Time time.Time
	// ClampTimes limits modification times to Time, as the
	// reproducible-builds specification asks of SOURCE_DATE_EPOCH, and
	// gives every access time the (limited) modification time: reading
	// the source between two builds moves its atimes, from before Time to
	// after it, and the build must not change with them.
	ClampTimes bool
	// Workers copy file data at once (default: 8, or GOMAXPROCS if more;
	// on a cold cache copying waits on the source's disk more than on the
	// CPU).
	Workers int
	// Progress, if set, is called now and then with bytes of file data
	// written so far and the total to write.
	Progress func(done, total int64)
}

func (o *BuildOptions) owner(uid, gid uint32) (uint32, uint32) {
	if v, ok := o.UIDMap[uid]; ok {
		uid = v
	}
	if v, ok := o.GIDMap[gid]; ok {
		gid = v
	}
	if o.UID >= 0 {
		uid = uint32(o.UID)
	}
	if o.GID >= 0 {
		gid = uint32(o.GID)
	}
	return uid, gid
}

// OpenForBuild opens an image (made by Mkfs) for AddDir and AddTar with
// the allocator and new inodes made reproducible: the same sources and
// options then give a byte-identical image on any machine.
func OpenForBuild(path string) (*FS, error) {
	return openPath(path, &Options{Writable: true}, true)
}

const (
	// gatherMax bounds a batch: large enough that syscalls are few,
	// small enough that the workers get batches to write in parallel
	// with the walk and the buffers come back soon. The memory in open
	// batches is fresh pages to fault in: 4 MiB batches cost a build of
	// /usr/local/go 6k more page faults and 5% more CPU than 512 KiB.
	gatherMax     = 512 << 10
	gatherStreams = 8
	// writebackEvery is how many bytes of file data are written between
	// requests to start writeback and syncs (see builder.fill).
	writebackEvery = 32 << 20
)

// zeroBlock pads the last block of a file; it is only read.
var zeroBlock = make([]byte, 64<<10)

// builder copies a source tree in. One goroutine (the caller's) makes the
// entries and allocates blocks, in source order so the result is
// reproducible; fill workers copy file data into allocated blocks
// meanwhile, and a hostScan reads source entries ahead.
type builder struct {
	f     *FS
	o     BuildOptions
	links map[[2]uint64]string // host (dev, ino) of files with several links -> image path
	above map[[2]uint64]bool   // host (dev, ino) of the directories being copied: a loop's guard
	times []pendingTimes       // set last, directories after their contents
	scan  *hostScan

	jobs         chan fillJob          // nil until startFill
	fillWG       sync.WaitGroup        // the workers
	pending      sync.WaitGroup        // the jobs queued and not yet done
	fillErr      atomic.Pointer[error] // the first worker error
	done, total  atomic.Int64          // bytes of file data copied and queued
	stopProgress chan struct{}
	batches      [gatherStreams]gathered // in-memory data not yet queued; the walk's
	gatherClock  uint64
	unflushed    atomic.Int64 // bytes written since writeback was last started
	syncing      atomic.Bool  // a worker is in SyncData (fill)
}

type pendingTimes struct {
	n            *node
	atime, mtime time.Time
}

// AddDir copies the host directory src (its contents) into the directory
// dst of the image, keeping file types, modes, owners, times, hard links,
// holes and extended attributes, as mke2fs -d does. (Holes are searched
// for, with SEEK_DATA, in files whose block count is not exactly what
// their size needs; see hostEntry.readData.) Entries are made in
// name order; file data is read and written by several workers at once.
func (f *FS) AddDir(dst, src string, o *BuildOptions) error {
	b, parent, err := f.newBuilder(dst, o)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: not a directory", src)
	}
	b.scan = newHostScan()
	stopWarm := make(chan struct{})
	waitWarm := warmTree(src, stopWarm)
	defer waitWarm()
	defer close(stopWarm)
	b.startFill()
	err = b.walkDir(parent, dst, src, false)
	if ferr := b.stopFill(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	return b.setTimes()
}

func (f *FS) newBuilder(dst string, o *BuildOptions) (*builder, *node, error) {
	if f.closed.Load() {
		return nil, nil, fs.ErrClosed
	}
	if f.w == nil {
		return nil, nil, ErrReadOnly
	}
	b := &builder{f: f, links: map[[2]uint64]string{}}
	if o != nil {
		b.o = *o
	} else {
		b.o = BuildOptions{UID: -1, GID: -1}
	}
	if b.o.Workers <= 0 {
		b.o.Workers = max(8, runtime.GOMAXPROCS(0))
	}
	if f.reproducible && !b.o.Time.IsZero() {
		f.clock = b.o.Time
	}
	parent, err := f.resolve("build", dst, true)
	if err != nil {
		return nil, nil, err
	}
	if !parent.isDir() {
		return nil, nil, &fs.PathError{Op: "build", Path: dst, Err: syscall.ENOTDIR}
	}
	return b, parent, nil
}

// walkDir copies the entries of host directory dir into parent, which is
// the image's directory at ipath; made reports that this build made parent
// (so it holds only names from dir).
func (b *builder) walkDir(parent *node, ipath, dir string, made bool) error {
	hd, ents, err := openHostDir(dir)
	if err != nil {
		return err
	}
	defer hd.close() // after ds.stop: the scan reads the entries through hd
	// A directory inside itself (a bind mount of an ancestor) would be
	// copied without end.
	key, known, err := hd.id()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if known {
		if b.above == nil {
			b.above = map[[2]uint64]bool{}
		}
		if b.above[key] {
			return fmt.Errorf("%s: the directory contains itself (a loop, e.g. a bind mount of an ancestor)", dir)
		}
		b.above[key] = true
		defer delete(b.above, key)
	}
	ds := b.scan.start(dir, hd, ents)
	defer ds.stop()
	for range ents {
		if err := b.fillFailed(); err != nil {
			return err
		}
		e := ds.next()
		if err := b.addHostEntry(parent, imageJoin(ipath, e.name), e, made); err != nil {
			return err
		}
	}
	return nil
}

func imageJoin(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	return dir + "/" + name
}

func (b *builder) addHostEntry(parent *node, ipath string, h *hostEntry, parentMade bool) error {
	p, name, st := h.path, h.name, &h.st
	if h.err != nil {
		return fmt.Errorf("%s: %w", p, h.err)
	}
	uid, gid := b.o.owner(st.UID, st.GID)
	e := newEntry{mode: uint16(st.Mode), uid: uid, gid: gid}
	// A directory this build made holds only the distinct names of its
	// host directory, so far: name cannot be there yet, unless whiteouts
	// rename entries or casefolding makes distinct names equal.
	e.absent = parentMade && !b.o.Whiteouts && !b.f.sb.HasIncompat(super.IncompatCasefold)
	atime, mtime := st.Atime, st.Mtime
	kind := st.Type()
	// Hard links are known by the host's identity of the file, where
	// the host gives one.
	linked := kind != host.IFDIR && st.Nlink > 1 && st.HasID
	if b.o.Whiteouts && kind == host.IFREG {
		if done, err := b.whiteout(parent, name, e); done || err != nil {
			return err
		}
	}
	if linked {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := b.links[key]; ok {
			return b.f.Link(first, ipath)
		}
	}
	switch kind {
	case host.IFLNK:
		e.target = h.target
	case host.IFCHR, host.IFBLK:
		e.rdev = st.Rdev
	}
	n, err := b.create(parent, name, e)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if linked {
		b.links[[2]uint64{st.Dev, st.Ino}] = ipath
	}
	for _, x := range h.xattrs {
		if err := b.setXattr(n, x.Name, x.Value); err != nil {
			return fmt.Errorf("%s: xattr %s: %w", p, x.Name, err)
		}
	}
	switch kind {
	case host.IFREG:
		if st.Size == 0 {
			break
		}
		var finish func(*inode.Inode)
		if !linked {
			// Nothing changes the inode after its data: its times go
			// in with its size.
			finish = func(in *inode.Inode) { b.f.stampBuildTimes(in, atime, mtime, b.o.Time, b.o.ClampTimes) }
		}
		if err := b.reserveHostFile(n, h, finish); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if finish != nil {
			return nil
		}
	case host.IFDIR:
		if err := b.walkDir(n, ipath, p, true); err != nil {
			return err
		}
	}
	if kind == host.IFDIR || linked {
		// Entries added later change a directory's mtime, links a
		// file's ctime: their times are set at the end.
		b.times = append(b.times, pendingTimes{n, atime, mtime})
		return nil
	}
	// Set now, so the node need not stay in memory until the end.
	return b.f.setBuildTimes(n, atime, mtime, b.o.Time, b.o.ClampTimes)
}

// create makes one entry under parent.
func (b *builder) create(parent *node, name string, e newEntry) (*node, error) {
	parent.mu.Lock()
	defer parent.mu.Unlock()
	return b.f.create(parent, name, e)
}

// whiteout handles an OCI whiteout file; done reports it was one.
func (b *builder) whiteout(parent *node, name string, e newEntry) (bool, error) {
	const prefix = ".wh."
	if len(name) <= len(prefix) || name[:len(prefix)] != prefix {
		return false, nil
	}
	if name == ".wh..wh..opq" {
		parent.mu.Lock()
		defer parent.mu.Unlock()
		h, err := b.f.begin()
		if err != nil {
			return true, err
		}
		err = b.f.changeXattr(h, parent, xattrChange{name: "trusted.overlay.opaque", value: []byte("y")})
		if e := h.End(); err == nil {
			err = e
		}
		return true, err
	}
	e.mode = 0x2000
	e.rdev = 0
	n, err := b.create(parent, name[len(prefix):], e)
	if err != nil {
		return true, err
	}
	b.times = append(b.times, pendingTimes{n, b.o.Time, b.o.Time})
	return true, nil
}

func (b *builder) setXattr(n *node, name string, v []byte) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := b.f.begin()
	if err != nil {
		return err
	}
	err = b.f.changeXattr(h, n, xattrChange{name: name, value: v})
	if e := h.End(); err == nil {
		err = e
	}
	return err
}

// setTimes gives the made inodes their sources' times. It runs last, in
// reverse order of creation, since adding entries changed the directories'
// mtimes.
func (b *builder) setTimes() error {
	for i := len(b.times) - 1; i >= 0; i-- {
		t := b.times[i]
		if err := b.f.setBuildTimes(t.n, t.atime, t.mtime, b.o.Time, b.o.ClampTimes); err != nil {
			return err
		}
	}
	return nil
}

// setBuildTimes gives a built inode its source's times; ctime and crtime
// are ctime (or now).
func (f *FS) setBuildTimes(n *node, atime, mtime, ctime time.Time, clamp bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	in := editInode(n)
	f.stampBuildTimes(in, atime, mtime, ctime, clamp)
	return f.setInode(h, n, in)
}

// stampBuildTimes sets in's times as setBuildTimes describes.
func (f *FS) stampBuildTimes(in *inode.Inode, atime, mtime, ctime time.Time, clamp bool) {
	if ctime.IsZero() {
		ctime = f.now()
	} else if clamp {
		// ctime is SOURCE_DATE_EPOCH: nothing may be later, and the
		// access time, which reading the source moves, is not kept.
		if mtime.After(ctime) {
			mtime = ctime
		}
		atime = mtime
	}
	in.Atime = inode.FromTime(atime)
	in.Mtime = inode.FromTime(mtime)
	in.Ctime = inode.FromTime(ctime)
	in.Crtime = in.Ctime
}
