package ext4go

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/mkfs"
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
	// Workers read sources and write data at once (default GOMAXPROCS).
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

// fillJob is a regular file whose blocks are allocated and whose data a
// worker copies from the source.
type fillJob struct {
	n    *node
	src  string
	size int64
	runs []run
}

// builder copies a source tree in.
type builder struct {
	f     *FS
	o     BuildOptions
	links map[[2]uint64]string // host (dev, ino) of files with several links -> image path
	jobs  []fillJob
	total int64
	times []pendingTimes // set last, directories after their contents
}

type pendingTimes struct {
	n            *node
	atime, mtime time.Time
}

// AddDir copies the host directory src (its contents) into the directory
// dst of the image, keeping file types, modes, owners, times, hard links,
// holes and extended attributes, as mke2fs -d does. Entries are made in
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
	if err := b.walkDir(parent, dst, src); err != nil {
		return err
	}
	return b.finish()
}

func (f *FS) newBuilder(dst string, o *BuildOptions) (*builder, *node, error) {
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
		b.o.Workers = runtime.GOMAXPROCS(0)
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
// the image's directory at ipath.
func (b *builder) walkDir(parent *node, ipath, dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	sort.Strings(names)
	for _, name := range names {
		p := filepath.Join(dir, name)
		if err := b.addHostEntry(parent, imageJoin(ipath, name), name, p); err != nil {
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

func (b *builder) addHostEntry(parent *node, ipath, name, p string) error {
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	uid, gid := b.o.owner(st.Uid, st.Gid)
	e := newEntry{mode: uint16(st.Mode), uid: uid, gid: gid}
	atime := time.Unix(st.Atim.Sec, st.Atim.Nsec)
	mtime := time.Unix(st.Mtim.Sec, st.Mtim.Nsec)
	kind := st.Mode & unix.S_IFMT
	if b.o.Whiteouts && kind == unix.S_IFREG {
		if done, err := b.whiteout(parent, name, e); done || err != nil {
			return err
		}
	}
	if kind != unix.S_IFDIR && st.Nlink > 1 {
		key := [2]uint64{uint64(st.Dev), st.Ino}
		if first, ok := b.links[key]; ok {
			return b.f.Link(first, ipath)
		}
	}
	switch kind {
	case unix.S_IFLNK:
		t, err := os.Readlink(p)
		if err != nil {
			return err
		}
		e.target = t
	case unix.S_IFCHR, unix.S_IFBLK:
		e.rdev = st.Rdev
	}
	n, err := b.create(parent, name, e)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if kind != unix.S_IFDIR && st.Nlink > 1 {
		b.links[[2]uint64{uint64(st.Dev), st.Ino}] = ipath
	}
	if err := b.copyHostXattrs(n, p); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	switch kind {
	case unix.S_IFREG:
		if err := b.reserveHostFile(n, p, st.Size); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	case unix.S_IFDIR:
		if err := b.walkDir(n, ipath, p); err != nil {
			return err
		}
	}
	b.times = append(b.times, pendingTimes{n, atime, mtime})
	return nil
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

// copyHostXattrs copies the extended attributes of host file p.
func (b *builder) copyHostXattrs(n *node, p string) error {
	size, err := unix.Llistxattr(p, nil)
	if err != nil || size == 0 {
		return nil // no xattrs, or the host has none to give
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(p, buf)
	if err != nil {
		return nil
	}
	var names []string
	for _, nm := range splitNul(buf[:size]) {
		names = append(names, nm)
	}
	sort.Strings(names)
	for _, nm := range names {
		vs, err := unix.Lgetxattr(p, nm, nil)
		if err != nil {
			continue
		}
		v := make([]byte, vs)
		vs, err = unix.Lgetxattr(p, nm, v)
		if err != nil {
			continue
		}
		if err := b.setXattr(n, nm, v[:vs]); err != nil {
			return fmt.Errorf("xattr %s: %w", nm, err)
		}
	}
	return nil
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

func splitNul(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}

// reserveHostFile allocates the blocks of host file p's data ranges and
// queues the copy.
func (b *builder) reserveHostFile(n *node, p string, size int64) error {
	if size == 0 {
		return nil
	}
	ranges, err := hostDataRanges(p, size)
	if err != nil {
		return err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	runs, err := b.f.reserve(n, size, ranges)
	if err != nil {
		return err
	}
	b.jobs = append(b.jobs, fillJob{n: n, src: p, size: size, runs: runs})
	for _, r := range runs {
		b.total += int64(r.length) * b.f.blockSize
	}
	return nil
}

// hostDataRanges returns the data ranges of a host file (SEEK_DATA and
// SEEK_HOLE), or one range for the whole file where the host cannot tell.
func hostDataRanges(p string, size int64) ([]Range, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []Range
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return []Range{{0, size}}, nil
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return []Range{{0, size}}, nil
		}
		hole = min(hole, size)
		if hole > data {
			out = append(out, Range{data, hole - data})
		}
		off = hole
	}
	return out, nil
}

// reserve maps written blocks over the block-aligned cover of ranges and
// sets n's size; the caller writes the data into the returned runs before
// Close. Allocation happens here, in the caller's order, which keeps
// builds reproducible while the copying runs in parallel. n.mu is held.
func (f *FS) reserve(n *node, size int64, ranges []Range) ([]run, error) {
	if err := f.checkDataWritable(n); err != nil {
		return nil, err
	}
	if size > f.maxFileSize() {
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
	for _, s := range spans {
		for lblk := s.from; lblk < s.to; {
			got, err := f.reserveChunk(n, size, lblk, s.to)
			if err != nil {
				return nil, err
			}
			lblk += got
		}
	}
	h, err := f.begin()
	if err != nil {
		return nil, err
	}
	in := editInode(n)
	in.Size = uint64(size)
	err = f.setInode(h, n, in)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return nil, err
	}
	return f.mapping(n)
}

func (f *FS) reserveChunk(n *node, size int64, lblk, end uint64) (uint64, error) {
	h, err := f.begin()
	if err != nil {
		return 0, err
	}
	defer h.End()
	in := editInode(n)
	s := &extStore{f: f, h: h, ino: n.ino}
	ed := f.editor(n, in, s)
	req := mballoc.Request{Inode: n.ino, Logical: lblk, Len: uint32(min(end-lblk, maxAllocChunk)),
		Flags: mballoc.FlagData, FileSize: uint64(size)}
	ext, err := f.mapNew(h, in, s, ed, req, false, nil)
	if err != nil {
		return 0, err
	}
	return uint64(ext.Len), f.setInode(h, n, in)
}

// finish copies the queued file data with workers, then sets times.
func (b *builder) finish() error {
	f := b.f
	var done atomic.Int64
	jobs := make(chan fillJob)
	errc := make(chan error, b.o.Workers)
	var wg sync.WaitGroup
	for i := 0; i < b.o.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1<<20)
			for j := range jobs {
				if err := f.fill(j, buf, &done); err != nil {
					errc <- fmt.Errorf("%s: %w", j.src, err)
					for range jobs {
					}
					return
				}
			}
		}()
	}
	stopProgress := make(chan struct{})
	if b.o.Progress != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					b.o.Progress(done.Load(), b.total)
				}
			}
		}()
	}
	for _, j := range b.jobs {
		jobs <- j
	}
	close(jobs)
	wg.Wait()
	close(stopProgress)
	select {
	case err := <-errc:
		return err
	default:
	}
	if b.o.Progress != nil {
		b.o.Progress(done.Load(), b.total)
	}
	// Times last: adding entries changed the directories' mtimes.
	for i := len(b.times) - 1; i >= 0; i-- {
		t := b.times[i]
		if err := f.setBuildTimes(t.n, t.atime, t.mtime, b.o.Time); err != nil {
			return err
		}
	}
	return nil
}

// fill copies a file's data into its reserved blocks.
func (f *FS) fill(j fillJob, buf []byte, done *atomic.Int64) error {
	src, err := os.Open(j.src)
	if err != nil {
		return err
	}
	defer src.Close()
	bs := f.blockSize
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		phys := int64(r.physical) * bs
		for off < end {
			n := min(int64(len(buf)), end-off)
			m, err := src.ReadAt(buf[:n], off)
			if err != nil && err != io.EOF {
				return err
			}
			if int64(m) < n {
				return fmt.Errorf("changed while being copied (shorter than %d bytes)", j.size)
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
				return err
			}
			if w == n && off+n == j.size && j.size%bs != 0 {
				zeros := make([]byte, bs-j.size%bs)
				if _, err := f.dev.WriteAt(zeros, phys+n); err != nil {
					return err
				}
			}
			done.Add(n)
			off += n
			phys += n
		}
	}
	return nil
}

// setBuildTimes gives a built inode its source's times; ctime and crtime
// are ctime (or now).
func (f *FS) setBuildTimes(n *node, atime, mtime, ctime time.Time) error {
	if ctime.IsZero() {
		ctime = f.now()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	in := editInode(n)
	in.Atime = inode.FromTime(atime)
	in.Mtime = inode.FromTime(mtime)
	in.Ctime = inode.FromTime(ctime)
	in.Crtime = in.Ctime
	return f.setInode(h, n, in)
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
// use with blocks of bs bytes.
func EstimateDir(src string, bs int) (Estimate, error) {
	var est Estimate
	dirBytes := map[string]int64{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		est.Inodes++
		if p != src {
			dirBytes[filepath.Dir(p)] += int64(8 + (len(d.Name())+3)&^3)
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			ranges, err := hostDataRanges(p, st.Size)
			if err != nil {
				return err
			}
			var blocks uint64
			for _, r := range ranges {
				blocks += uint64((r.Off%int64(bs) + r.Len + int64(bs) - 1) / int64(bs))
				est.DataBytes += r.Len
			}
			// Extent tree blocks: a leaf block per 340 extents, generously.
			blocks += blocks / 32768 / 100
			est.Blocks += blocks
		case unix.S_IFLNK:
			if st.Size >= 60 {
				est.Blocks++
			}
		case unix.S_IFDIR:
			dirBytes[p] += 24 // "." and ".."
		}
		if n, _ := unix.Llistxattr(p, nil); n > 64 {
			est.Blocks++ // may not fit the inode
		}
		return nil
	})
	for _, b := range dirBytes {
		// Half-full blocks after splits, and an htree index for big ones.
		est.Blocks += uint64(b*2/int64(bs)) + 1
	}
	return est, err
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
