package ext4go

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/host"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
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

// fillJob is a regular file, or a part of one, whose blocks are allocated
// and whose data a worker copies into them: from data (bytes base… of the
// file) when the source was read already, else from the host file src.
type fillJob struct {
	src  string
	data []byte
	base int64
	size int64 // the file's size
	runs []run
	// pieces, when set, is a gathered batch instead: data of several
	// files (with their last blocks' zero padding) lying end to end on
	// the device from byte at, written with one pwritev.
	pieces [][]byte
	at     int64
	// held are the pooled buffers the job's data lies in; each gets one
	// release when the job is done.
	held []*dataBuf
}

// gathered is a batch of in-memory file data being put together for one
// write: small files are allocated one after another, so their data
// usually lies end to end on the device, and one pwritev of many files
// costs far less than a pwrite each. The allocator spreads small files
// over a few regions (a locality group each), so gatherStreams batches
// are open at once, each continuing in its region.
type gathered struct {
	pieces   [][]byte
	at, end  int64 // device bytes [at, end) the pieces cover
	firstSrc string
	used     uint64     // when last added to, for replacing the oldest
	held     []*dataBuf // a reference to each piece's buffer
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

// reserveHostFile allocates the blocks of a host file's data ranges and
// queues the copy. finish, if set, changes the inode in the same write as
// the size (the times of a file nothing else changes after).
func (b *builder) reserveHostFile(n *node, h *hostEntry, finish func(*inode.Inode)) error {
	size := h.st.Size
	n.mu.Lock()
	runs, err := b.f.reserve(n, size, h.ranges, finish)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	b.queue(fillJob{src: h.path, data: h.data, size: size, runs: runs, held: heldBy(h.buf)})
	h.data, h.buf = nil, nil
	return nil
}

// heldBy is the held list of a job whose data lies in d (nil: not pooled).
func heldBy(d *dataBuf) []*dataBuf {
	if d == nil {
		return nil
	}
	return []*dataBuf{d}
}

// queue hands a job to the fill workers; data already in memory joins the
// batch being gathered.
func (b *builder) queue(j fillJob) {
	if j.data != nil && b.gather(j) {
		for _, d := range j.held {
			d.release() // the batches hold their own references
		}
		return
	}
	var total int64
	for _, r := range j.runs {
		total += int64(r.length) * b.f.blockSize
	}
	b.send(j, total)
}

func (b *builder) send(j fillJob, total int64) {
	b.total.Add(total)
	b.pending.Add(1)
	b.jobs <- j
}

// gather adds the in-memory data of j to the batch, sending the batch on
// when j's data does not continue it. It reports false, leaving the job to
// fill, if the data does not cover the runs (fill reports that).
func (b *builder) gather(j fillJob) bool {
	bs := b.f.blockSize
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		if off < j.base || end-j.base > int64(len(j.data)) {
			return false
		}
	}
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		phys := int64(r.physical) * bs
		piece := j.data[off-j.base : end-j.base]
		var pad []byte
		if end == j.size && j.size%bs != 0 {
			pad = zeroBlock[:bs-j.size%bs]
		}
		g := b.batchAt(phys)
		if len(g.pieces)+2 > dev.MaxIovecs || g.end-g.at+int64(len(piece)) > gatherMax {
			b.flush(g)
		}
		if len(g.pieces) == 0 {
			g.at, g.end, g.firstSrc = phys, phys, j.src
		}
		b.gatherClock++
		g.used = b.gatherClock
		g.pieces = append(g.pieces, piece)
		for _, d := range j.held {
			d.hold()
			g.held = append(g.held, d)
		}
		if pad != nil {
			g.pieces = append(g.pieces, pad)
		}
		g.end += int64(len(piece) + len(pad))
	}
	return true
}

// batchAt returns the batch that data at device byte phys continues, or
// an empty one (sending the oldest batch on to make room).
func (b *builder) batchAt(phys int64) *gathered {
	var oldest *gathered
	for i := range b.batches {
		g := &b.batches[i]
		if len(g.pieces) > 0 && g.end == phys {
			return g
		}
		if oldest == nil || g.used < oldest.used {
			oldest = g
		}
	}
	b.flush(oldest)
	return oldest
}

// flush sends batch g to the workers and empties it.
func (b *builder) flush(g *gathered) {
	if len(g.pieces) > 0 {
		b.send(fillJob{src: g.firstSrc, pieces: g.pieces, at: g.at, held: g.held}, g.end-g.at)
	}
	*g = gathered{}
}

// flushBatch sends every gathered batch to the workers.
func (b *builder) flushBatch() {
	for i := range b.batches {
		b.flush(&b.batches[i])
	}
}

// drainFill waits until every queued job is done: before blocks that a
// queued job writes can be freed (a tar entry replacing an earlier file).
func (b *builder) drainFill() error {
	b.flushBatch()
	b.pending.Wait()
	return b.fillFailed()
}

// reserve maps written blocks over the block-aligned cover of ranges and
// sets n's size; the caller writes the data into the returned runs before
// Close. Allocation happens here, in the caller's order, which keeps
// builds reproducible while the copying runs in parallel. n.mu is held.
func (f *FS) reserve(n *node, size int64, ranges []Range, finish func(*inode.Inode)) ([]run, error) {
	if err := f.checkDataWritable(n); err != nil {
		return nil, err
	}
	if size > f.maxFileSize(n) {
		return nil, syscall.EFBIG
	}
	bs := f.blockSize
	type span struct{ from, to uint64 }
	var spans []span
	for _, r := range ranges {
		s := span{uint64(r.Off / bs), uint64((r.Off + r.Len + bs - 1) / bs)}
		if k := len(spans) - 1; k >= 0 && s.from <= spans[k].to {
			spans[k].to = max(spans[k].to, s.to)
			continue
		}
		spans = append(spans, s)
	}
	finished := false
	for i, s := range spans {
		for lblk := s.from; lblk < s.to; {
			var last func(*inode.Inode)
			if i == len(spans)-1 {
				// The size (and finish) go into the handle that maps
				// the last blocks, if this chunk turns out to be it:
				// one inode write fewer per file.
				last = func(in *inode.Inode) {
					in.Size = uint64(size)
					if finish != nil {
						finish(in)
					}
					finished = true
				}
			}
			got, err := f.reserveChunk(n, size, lblk, s.to, last)
			if err != nil {
				return nil, err
			}
			lblk += got
		}
	}
	if finished {
		return f.mapping(n)
	}
	h, err := f.begin()
	if err != nil {
		return nil, err
	}
	in := editInode(n)
	in.Size = uint64(size)
	if finish != nil {
		finish(in)
	}
	err = f.setInode(h, n, in)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return nil, err
	}
	return f.mapping(n)
}

// reserveChunk maps blocks from lblk towards end, as many as one
// allocation gives; if they reach end, last (when set) changes the inode
// before it is written.
func (f *FS) reserveChunk(n *node, size int64, lblk, end uint64, last func(*inode.Inode)) (uint64, error) {
	h, err := f.begin()
	if err != nil {
		return 0, err
	}
	defer h.End()
	in := editInode(n)
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	req := mballoc.Request{Inode: n.ino, Logical: lblk, Len: uint32(min(end-lblk, maxAllocChunk)),
		Flags: mballoc.FlagData, FileSize: uint64(size)}
	ext, err := f.mapNew(h, in, s, ed, req, nil, false, nil)
	if err != nil {
		return 0, err
	}
	if last != nil && lblk+uint64(ext.Len) >= end {
		last(in)
	}
	return uint64(ext.Len), f.setInode(h, n, in)
}

// startFill starts the workers that copy file data, and the progress
// reports.
func (b *builder) startFill() {
	b.jobs = make(chan fillJob, 4*b.o.Workers)
	for i := 0; i < b.o.Workers; i++ {
		b.fillWG.Add(1)
		go func() {
			defer b.fillWG.Done()
			for j := range b.jobs {
				if b.fillErr.Load() == nil {
					if err := b.fill(j); err != nil {
						err = fmt.Errorf("%s: %w", j.src, err)
						b.fillErr.CompareAndSwap(nil, &err)
					}
				} // else drain: the walk stops at its next entry
				for _, d := range j.held {
					d.release()
				}
				b.pending.Done()
			}
		}()
	}
	b.stopProgress = make(chan struct{})
	if b.o.Progress != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-b.stopProgress:
					return
				case <-t.C:
					b.o.Progress(b.done.Load(), b.total.Load())
				}
			}
		}()
	}
}

// fillFailed returns the first error of a fill worker.
func (b *builder) fillFailed() error {
	if p := b.fillErr.Load(); p != nil {
		return *p
	}
	return nil
}

// stopFill waits for the queued copies and returns the first error.
func (b *builder) stopFill() error {
	b.flushBatch()
	close(b.jobs)
	b.fillWG.Wait()
	close(b.stopProgress)
	if err := b.fillFailed(); err != nil {
		return err
	}
	if b.o.Progress != nil {
		b.o.Progress(b.done.Load(), b.total.Load())
	}
	return nil
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

// writebackStarter is a device that can start writing back what was
// written to it without waiting (dev.File).
type writebackStarter interface{ StartWriteback() error }

// dataSyncer is a device that can wait until what was written to it is
// durable (dev.File).
type dataSyncer interface{ SyncData() error }

// vectorWriter is a device that writes many pieces in one call (dev.File).
type vectorWriter interface {
	WriteVAt(pieces [][]byte, off int64) (int, error)
}

// fill copies a file's data into its reserved blocks, or writes a gathered
// batch. Every writebackEvery bytes written in all (unflushed counts them)
// it starts the device's writeback and, unless another worker is at it,
// waits for the device to have everything so far: done along the way, on a
// worker, the wait costs no CPU, while left to Close's fsync, on a virtual
// disk that fsync waited for the host to write out the whole image's data
// at once (120 of the 800 ms of a build of /usr/local/go here). The error
// of that sync is the build's: it is reported once, and Close's fsync
// would not see it again.
func (b *builder) fill(j fillJob) error {
	f := b.f
	var buf *[]byte
	if j.pieces == nil {
		buf = fillBufs.Get().(*[]byte)
	}
	wrote, err := f.fillData(j, buf, &b.done)
	if buf != nil {
		fillBufs.Put(buf)
	}
	if err != nil {
		return err
	}
	// Only this job's bytes: done moves with the other workers' too.
	if b.unflushed.Add(wrote) < writebackEvery {
		return nil
	}
	b.unflushed.Store(0)
	if w, ok := f.dev.(writebackStarter); ok {
		w.StartWriteback() // only a hint
	}
	if s, ok := f.dev.(dataSyncer); ok && b.syncing.CompareAndSwap(false, true) {
		defer b.syncing.Store(false)
		if err := s.SyncData(); err != nil {
			return fmt.Errorf("syncing the image: %w", err)
		}
	}
	return nil
}

// fillBufs are the read buffers of fills from host files: only as many
// as copies run at once (a few; most data comes in gathered batches),
// not one for each worker, whose first use cost a page fault each 4 KiB.
var fillBufs = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// fillData writes j, adding the bytes to done as it goes, and returns how
// many it wrote; bufp is the read buffer of a job that is not a batch (nil
// for a batch).
func (f *FS) fillData(j fillJob, bufp *[]byte, done *atomic.Int64) (int64, error) {
	if j.pieces != nil {
		var n int
		var err error
		if w, ok := f.dev.(vectorWriter); ok {
			n, err = w.WriteVAt(j.pieces, j.at)
		} else {
			for _, p := range j.pieces {
				if _, err = f.dev.WriteAt(p, j.at+int64(n)); err != nil {
					break
				}
				n += len(p)
			}
		}
		done.Add(int64(n))
		return int64(n), err
	}
	var src io.ReaderAt
	if j.data != nil {
		src = bytesReaderAt{j.data, j.base}
	} else {
		file, err := os.Open(j.src)
		if err != nil {
			return 0, err
		}
		defer file.Close()
		src = file
	}
	buf := *bufp
	bs := f.blockSize
	var wrote int64
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		phys := int64(r.physical) * bs
		for off < end {
			n := min(int64(len(buf)), end-off)
			m, err := src.ReadAt(buf[:n], off)
			if err != nil && err != io.EOF {
				return wrote, err
			}
			if int64(m) < n {
				return wrote, fmt.Errorf("changed while being copied (shorter than %d bytes)", j.size)
			}
			// Pad the file's last block with zeros.
			w := n
			if off+n == j.size && j.size%bs != 0 {
				w = (n + bs - 1) / bs * bs
				if w > int64(len(buf)) {
					w = n
				} else {
					clear(buf[n:w])
				}
			}
			if _, err := f.dev.WriteAt(buf[:w], phys); err != nil {
				return wrote, err
			}
			if w == n && off+n == j.size && j.size%bs != 0 {
				zeros := make([]byte, bs-j.size%bs)
				if _, err := f.dev.WriteAt(zeros, phys+n); err != nil {
					return wrote, err
				}
			}
			done.Add(n)
			wrote += n
			off += n
			phys += n
		}
	}
	return wrote, nil
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

// Estimate is what a source tree needs in a filesystem of a given block
// size: blocks for data, directories, symlinks and xattr blocks, and
// inodes. Metadata the filesystem itself needs (inode tables, bitmaps,
// journal) is not included.
type Estimate struct {
	Blocks, Inodes uint64
	DataBytes      int64
}

// EstimateDir walks the host directory src and estimates what AddDir will
// use with blocks of bs bytes. Directories are read by several goroutines
// at once (on a cold cache the walk waits on the disk).
func EstimateDir(src string, bs int) (Estimate, error) {
	e := &estimator{bs: int64(bs), sem: make(chan struct{}, scanParallel)}
	st, err := os.Lstat(src)
	if err != nil {
		return Estimate{}, err
	}
	if !st.IsDir() {
		return Estimate{}, fmt.Errorf("%s: not a directory", src)
	}
	e.inodes.Add(1)
	if xattrListSize(src) > 64 {
		e.blocks.Add(1)
	}
	e.dir(src)
	e.wg.Wait()
	if p := e.err.Load(); p != nil {
		return Estimate{}, *p
	}
	return Estimate{Blocks: e.blocks.Load(), Inodes: e.inodes.Load(), DataBytes: e.data.Load()}, nil
}

// estimator sums what a tree needs; its counters are updated by the
// goroutines reading the tree.
type estimator struct {
	bs             int64
	sem            chan struct{} // bounds the extra goroutines
	wg             sync.WaitGroup
	blocks, inodes atomic.Uint64
	data           atomic.Int64
	err            atomic.Pointer[error]
}

func (e *estimator) fail(err error) { e.err.CompareAndSwap(nil, &err) }

// dir counts directory p's entries, each in a goroutine of its own while
// sem has room and inline otherwise (so the recursion cannot starve).
func (e *estimator) dir(p string) {
	d, err := os.Open(p)
	if err != nil {
		e.fail(err)
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		e.fail(fmt.Errorf("%s: %w", p, err))
		return
	}
	dirBytes := int64(24) // "." and ".."
	for _, name := range names {
		if e.err.Load() != nil {
			return
		}
		dirBytes += int64(8 + (len(name)+3)&^3)
		child := filepath.Join(p, name)
		select {
		case e.sem <- struct{}{}:
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer func() { <-e.sem }()
				e.entry(child)
			}()
		default:
			e.entry(child)
		}
	}
	// Half-full blocks after splits, and an htree index for big ones.
	e.blocks.Add(uint64(dirBytes*2/e.bs) + 1)
}

// entry counts one entry below the root.
func (e *estimator) entry(p string) {
	e.inodes.Add(1)
	st, err := lstatHost(p)
	if err != nil {
		e.fail(err)
		return
	}
	switch st.Type() {
	case host.IFREG:
		ranges, err := hostDataRanges(p, st.Size)
		if err != nil {
			e.fail(err)
			return
		}
		var blocks uint64
		for _, r := range ranges {
			blocks += uint64((r.Off%e.bs + r.Len + e.bs - 1) / e.bs)
			e.data.Add(r.Len)
		}
		// Extent tree blocks: a leaf block per 340 extents, generously.
		blocks += blocks / 32768 / 100
		e.blocks.Add(blocks)
	case host.IFLNK:
		if st.Size >= 60 {
			e.blocks.Add(1)
		}
	case host.IFDIR:
		e.dir(p)
	}
	if xattrListSize(p) > 64 {
		e.blocks.Add(1) // may not fit the inode
	}
}

// SizeFor returns an image size with room for est plus a margin of
// marginPercent of the content, in a filesystem of block size bs with
// inodeSize-byte inodes and a journal of journalBytes.
func SizeFor(est Estimate, bs, inodeSize int, journalBytes int64, marginPercent int) int64 {
	content := int64(est.Blocks) * int64(bs)
	size := content + content*int64(marginPercent)/100
	size += int64(est.Inodes+est.Inodes/5+64) * int64(inodeSize) // inode tables
	size += journalBytes
	size += size / 64          // bitmaps, descriptors, reserved GDT, resize room
	size += 2 << 20            // superblock backups, root, lost+found, slack
	size += size * 5 / 100 / 1 // the 5% reserved for root
	return (size + 1<<20 - 1) &^ (1<<20 - 1)
}
