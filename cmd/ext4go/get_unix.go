//go:build linux || darwin || freebsd

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/host"
)

// copyOut copies a tree out of an image into a host directory. It creates
// everything relative to open directory descriptors with the *at system
// calls and O_NOFOLLOW, and only ever descends into directories it created
// itself (or that already existed as real directories), so no name or
// symbolic link in the image can make it write outside the destination.
//
// Small files are copied in two stages: this goroutine reads a file from
// the image (user time) while a writer goroutine makes the previous ones
// on the host (kernel time), so the two overlap on two CPUs. The writer
// is one goroutine, making files in the order the walk gives them: more
// would meet on the host directory's lock.
//
// What differs between Linux, macOS and FreeBSD (naming an entry of an
// open directory by path, mknodat, futimens, the umask) lives in
// get_linux.go, get_bsd.go, get_darwin.go, get_freebsd.go; Windows and
// WASI copy by path (get_other.go).
type copyOut struct {
	fsys      *ext4go.FS
	stderr    io.Writer
	noOwner   bool
	quiet     bool
	links     map[uint32]string // inode -> path relative to the destination root, for hard links
	above     map[uint32]bool   // directories being copied, by inode: an entry naming one is a loop
	overwrite bool              // -f: replace existing host files
	isRoot    bool
	buf       []byte
	destLabel string
	writes    chan []*smallFile // to the writer
	batch     []*smallFile      // read, not yet sent
	writerWG  sync.WaitGroup
	buffers   sync.Pool // of *[]byte for smallFile.data
	// What a file made here gets without chmod and chown: permission
	// bits less umask, our uid, and our gid (or a set-gid directory's).
	umask    uint32
	uid, gid uint32

	// dirs maps the open directory descriptors to their paths, where the
	// system cannot name a descriptor's directory (get_bsd.go).
	dirs sync.Map

	mu     sync.Mutex // the fields below, and writes to stderr (the writer reports too)
	warned map[string]bool
	errs   int
}

const (
	// smallCopy is the size up to which a file's data is read whole and
	// handed to the writer.
	smallCopy = 256 << 10
	// writeBatch files go to the writer at once: waking it for each
	// costs more system time than the overlap saves.
	writeBatch = 64
)

// smallFile is a file read from the image for the writer to make in dirfd.
type smallFile struct {
	dirfd     int
	dirGID    uint32 // the group a file made in dirfd gets
	name, src string
	data      *[]byte // from co.buffers; the data ranges' bytes, one after another
	ranges    []ext4go.Range
	size      int64
	meta      hostMeta
	done      *sync.WaitGroup // of the directory's entries
}

func runGet(e *env, args []string) error {
	fsys, o, err := openRead(e, "get", getOptions, args, 3, 3)
	if err != nil {
		return err
	}
	defer fsys.Close()
	src, dest := imagePath(o.args[0]), o.args[1]

	top, err := openTop(fsys, src)
	if err != nil {
		return err
	}
	defer top.Close()
	// cp -r semantics: into an existing directory DEST as DEST/base(PATH),
	// else as DEST itself. The image root goes into DEST.
	parentDir, name := path.Dir(dest), path.Base(dest)
	if st, err := os.Stat(dest); err == nil && st.IsDir() {
		parentDir, name = dest, path.Base(src)
		if src == "." {
			name = "."
		}
	}
	pfd, err := unix.Open(parentDir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", parentDir, err)
	}
	defer unix.Close(pfd)
	co := &copyOut{fsys: fsys, stderr: e.stderr, noOwner: o.has("n"), quiet: o.has("q"),
		links: map[uint32]string{}, warned: map[string]bool{}, isRoot: os.Geteuid() == 0,
		buf: make([]byte, 1<<20), destLabel: dest, overwrite: o.has("f")}
	co.dirOpened(pfd, parentDir)
	defer co.dirClosed(pfd)
	co.umask = processUmask()
	co.uid, co.gid = uint32(os.Geteuid()), uint32(os.Getegid())
	co.startWriter()
	defer co.stopWriter()
	if err := co.copy(pfd, name, src, top, nil, 0); err != nil {
		return err
	}
	if co.errs > 0 {
		return fmt.Errorf("%s could not be copied", countOf(co.errs, "entry", "entries"))
	}
	return nil
}

func (co *copyOut) startWriter() {
	co.writes = make(chan []*smallFile, 4)
	co.writerWG.Add(1)
	go func() {
		defer co.writerWG.Done()
		for batch := range co.writes {
			for _, sf := range batch {
				if err := co.writeSmall(sf); err != nil {
					co.failed(err)
				}
				co.buffers.Put(sf.data)
				sf.done.Done()
			}
		}
	}()
}

func (co *copyOut) stopWriter() {
	co.sendBatch()
	close(co.writes)
	co.writerWG.Wait()
}

// failed reports an entry that could not be copied; the copy goes on.
func (co *copyOut) failed(err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	fmt.Fprintf(co.stderr, "ext4go get: %v\n", err)
	co.errs++
}

func (co *copyOut) warn(kind string, err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.quiet || co.warned[kind] {
		return
	}
	co.warned[kind] = true
	fmt.Fprintf(co.stderr, "ext4go get: warning: %s: %v (further such warnings suppressed)\n", kind, err)
}

// copy creates name in the directory dirfd as a copy of the image's file
// f, whose path in the image is src (for messages). A small file may be
// left to the writer: pending counts it until it is made in dirfd, whose
// new files get the group dirGID.
func (co *copyOut) copy(dirfd int, name, src string, f *ext4go.File, pending *sync.WaitGroup, dirGID uint32) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	st := fi.Sys().(*ext4go.Stat)
	mode := fi.Mode()
	if !mode.IsDir() && st.Nlink > 1 {
		if first, ok := co.links[st.Ino]; ok {
			return co.hardlink(dirfd, name, first)
		}
	}
	if !mode.IsDir() && co.overwrite {
		// As cp -f: an existing non-directory is removed first (never
		// followed: the new file is made in its place).
		var hst unix.Stat_t
		if unix.Fstatat(dirfd, name, &hst, unix.AT_SYMLINK_NOFOLLOW) == nil && hst.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := unix.Unlinkat(dirfd, name, 0); err != nil {
				return fmt.Errorf("cannot remove the existing host file %s: %w", co.hostPath(dirfd, name), err)
			}
		}
	}
	switch {
	case mode.IsDir():
		return co.copyDir(dirfd, name, src, f, st)
	case mode.IsRegular() && st.Nlink == 1 && st.Size <= smallCopy && pending != nil:
		// With one link nothing else waits for it to exist.
		return co.queueSmall(dirfd, dirGID, name, src, f, st, pending)
	case mode.IsRegular():
		err = co.copyFile(dirfd, name, src, f, st)
	case mode&fs.ModeSymlink != 0:
		var target string
		if target, err = f.ReadLink(); err == nil {
			err = unix.Symlinkat(target, dirfd, name)
		}
	default:
		err = mknodAt(co, dirfd, name, uint32(st.Mode), host.HostDev(st.Rdev))
	}
	if err != nil {
		return co.createError(dirfd, name, src, err)
	}
	if !mode.IsRegular() {
		// Regular files got their metadata through their descriptor.
		if err := co.setMeta(dirfd, name, -1, src, f, st, mode); err != nil {
			return err
		}
	}
	if st.Nlink > 1 {
		co.links[st.Ino] = co.entryPath(dirfd, name)
	}
	return nil
}

func (co *copyOut) createError(dirfd int, name, src string, err error) error {
	if errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("%s: the host file %s exists; use -f to overwrite it", displayPath(src), co.hostPath(dirfd, name))
	}
	return fmt.Errorf("%s: %w", displayPath(src), err)
}

// queueSmall reads the small regular file f whole, with its metadata, and
// hands it to the writer.
func (co *copyOut) queueSmall(dirfd int, dirGID uint32, name, src string, f *ext4go.File, st *ext4go.Stat, pending *sync.WaitGroup) error {
	ranges, err := f.DataRanges()
	if err != nil {
		return fmt.Errorf("%s: %w", displayPath(src), err)
	}
	var total int64
	for _, r := range ranges {
		total += r.Len
	}
	bp, _ := co.buffers.Get().(*[]byte)
	if bp == nil || int64(cap(*bp)) < total {
		b := make([]byte, max(total, 16<<10))
		bp = &b
	}
	data := (*bp)[:total]
	at := int64(0)
	for i, r := range ranges {
		m, err := f.ReadAt(data[at:at+r.Len], r.Off)
		if err == io.EOF && m < int(r.Len) {
			// Shorter than its size says: copy what there is, as copyData.
			ranges[i].Len = int64(m)
			ranges = ranges[:i+1]
			data = data[:at+int64(m)]
			break
		}
		if err != nil && err != io.EOF {
			co.buffers.Put(bp)
			return fmt.Errorf("%s: %w", displayPath(src), err)
		}
		at += r.Len
	}
	*bp = data
	meta, err := readImageMeta(f, st)
	if err != nil {
		co.buffers.Put(bp)
		return err
	}
	pending.Add(1)
	co.batch = append(co.batch, &smallFile{dirfd: dirfd, dirGID: dirGID, name: name, src: src, data: bp, ranges: ranges, size: st.Size, meta: meta, done: pending})
	if len(co.batch) == writeBatch {
		co.sendBatch()
	}
	return nil
}

// sendBatch hands the files read so far to the writer.
func (co *copyOut) sendBatch() {
	if len(co.batch) > 0 {
		co.writes <- co.batch
		co.batch = nil
	}
}

// writeSmall makes a file that queueSmall read: the writer's part. Most
// files need neither chown nor chmod: they are made with their own
// permission bits when those hold no set-id or sticky bit (chown would
// clear set-id bits, so those go on after it) and umask takes none, and
// their owner is often who makes them.
func (co *copyOut) writeSmall(sf *smallFile) error {
	m := sf.meta
	perm, chmod := uint32(0o600), true
	if m.perm&0o7000 == 0 && m.perm&co.umask == 0 {
		perm, chmod = m.perm, false
	}
	chown := !co.noOwner && (m.uid != co.uid || m.gid != sf.dirGID)
	fd, err := unix.Openat(sf.dirfd, sf.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
	if err != nil {
		return co.createError(sf.dirfd, sf.name, sf.src, err)
	}
	err = func() error {
		data := *sf.data
		var written int64
		for _, r := range sf.ranges {
			if err := pwriteFull(fd, data[:r.Len], r.Off); err != nil {
				return err
			}
			data = data[r.Len:]
			written = r.Off + r.Len
		}
		if written < sf.size {
			if err := unix.Ftruncate(fd, sf.size); err != nil {
				return err
			}
		}
		return co.applyMeta(sf.dirfd, sf.name, fd, sf.src, m, 0, chown, chmod)
	}()
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		return co.createError(sf.dirfd, sf.name, sf.src, err)
	}
	return nil
}

func (co *copyOut) hardlink(dirfd int, name, first string) error {
	if first == "" {
		return errors.New("cannot find the first copy of a hard link")
	}
	if err := unix.Linkat(unix.AT_FDCWD, first, dirfd, name, 0); err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	return nil
}

// copyDir copies the directory d. Its entries are opened by the inode
// numbers the directory holds (OpenEntry), not looked up by name again.
func (co *copyOut) copyDir(parentfd int, name, src string, d *ext4go.File, st *ext4go.Stat) error {
	if co.above == nil {
		co.above = map[uint32]bool{}
	}
	if co.above[st.Ino] {
		return &fs.PathError{Op: "get", Path: src, Err: &ext4go.CorruptError{What: "directory", Block: -1, Ino: st.Ino, Detail: "names a directory above it (a loop)"}}
	}
	co.above[st.Ino] = true
	defer delete(co.above, st.Ino)
	if name != "." {
		err := unix.Mkdirat(parentfd, name, 0o700)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("mkdir %s: %w", name, err)
		}
	}
	fd, err := unix.Openat(parentfd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s: %w (exists and is not a directory?)", name, err)
	}
	defer unix.Close(fd)
	co.dirOpened(fd, co.dirPath(parentfd)+"/"+name)
	defer co.dirClosed(fd)
	var dst unix.Stat_t
	if err := unix.Fstat(fd, &dst); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	newGID := co.gid
	if dst.Mode&unix.S_ISGID != 0 {
		newGID = dst.Gid
	}
	ents, err := d.ReadDir(-1)
	if err != nil {
		if warnSkipped(co.stderr, "get", src, err) == 0 {
			return err
		}
		co.mu.Lock()
		co.errs++ // reported; the entries that could be read are copied
		co.mu.Unlock()
	}
	var pending sync.WaitGroup // entries left to the writer
	for _, e := range ents {
		child := path.Join(src, e.Name())
		c, err := d.OpenEntry(e)
		if err == nil {
			err = co.copy(fd, e.Name(), child, c, &pending, newGID)
			c.Close()
		}
		if err != nil {
			co.failed(err)
		}
	}
	// Making the entries moved the directory's times: set them after.
	co.sendBatch()
	pending.Wait()
	if name == "." && src == "." {
		// Merging the image root into an existing DEST: keep DEST's own metadata.
		return nil
	}
	return co.setMeta(parentfd, name, fd, src, d, st, fs.ModeDir)
}

// copyFile copies the regular file f: a new host file (O_EXCL: nothing is
// overwritten or followed), its data ranges written where they are so
// holes stay holes, then its metadata set through the descriptor.
func (co *copyOut) copyFile(dirfd int, name, src string, f *ext4go.File, st *ext4go.Stat) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	if err := co.copyData(fd, f, st.Size); err != nil {
		unix.Close(fd)
		return err
	}
	if err := co.setMeta(dirfd, name, fd, src, f, st, 0); err != nil {
		unix.Close(fd)
		return err
	}
	return unix.Close(fd)
}

func (co *copyOut) copyData(fd int, f *ext4go.File, size int64) error {
	ranges, err := f.DataRanges()
	if err != nil {
		return err
	}
	var written int64 // end of the data written
	for _, r := range ranges {
		for off := r.Off; off < r.Off+r.Len; {
			n := min(int64(len(co.buf)), r.Off+r.Len-off)
			m, err := f.ReadAt(co.buf[:n], off)
			if m > 0 {
				if err := pwriteFull(fd, co.buf[:m], off); err != nil {
					return err
				}
				written = off + int64(m)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			off += int64(m)
		}
	}
	if written < size {
		return unix.Ftruncate(fd, size) // a hole at the end
	}
	return nil
}

func pwriteFull(fd int, p []byte, off int64) error {
	for len(p) > 0 {
		n, err := unix.Pwrite(fd, p, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		p, off = p[n:], off+int64(n)
	}
	return nil
}

// setMeta sets owner, mode, xattrs and times of the copy of f, in that
// order: chown clears set-id bits and capabilities, and every change moves
// ctime but not mtime. fd is an open descriptor of the entry, or -1
// (symlinks, devices, fifos), when the calls go by name in dirfd.
func (co *copyOut) setMeta(dirfd int, name string, fd int, src string, f *ext4go.File, st *ext4go.Stat, mode fs.FileMode) error {
	m, err := readImageMeta(f, st)
	if err != nil {
		return err
	}
	return co.applyMeta(dirfd, name, fd, src, m, mode, !co.noOwner, mode&fs.ModeSymlink == 0)
}

// applyMeta sets on the host what readMeta read: the owner if chown, the
// permission bits if chmod, then xattrs and times.
func (co *copyOut) applyMeta(dirfd int, name string, fd int, src string, m hostMeta, mode fs.FileMode, chown, chmod bool) error {
	isLink := mode&fs.ModeSymlink != 0
	if chown {
		var err error
		if fd >= 0 {
			err = unix.Fchown(fd, int(m.uid), int(m.gid))
		} else {
			err = unix.Fchownat(dirfd, name, int(m.uid), int(m.gid), unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			co.warn("cannot set owner", err)
		}
	}
	if chmod {
		var err error
		if fd >= 0 {
			err = unix.Fchmod(fd, m.perm)
		} else {
			err = unix.Fchmodat(dirfd, name, m.perm, 0)
		}
		if err != nil {
			return fmt.Errorf("chmod %s: %w", displayPath(src), err)
		}
	}
	for _, x := range m.xattrs {
		var err error
		switch {
		case fd >= 0:
			err = host.SetFdXattr(fd, x.name, x.value)
		case !strings.HasPrefix(x.name, "user.") || !isLink:
			err = host.SetLinkXattr(co.xattrPath(dirfd, name), x.name, x.value)
		}
		if err != nil {
			co.warn("cannot set xattr "+x.name, err)
		}
	}
	// ext4 times reach the year 2446, past int64 nanoseconds and past a
	// 32-bit time_t: host.SetTimes takes them all.
	err := host.SetTimes(fd, dirfd, name, m.atime, m.mtime)
	if err != nil {
		return fmt.Errorf("set times of %s: %w", displayPath(src), err)
	}
	return nil
}

// hostPath names a host file for messages: the directory it is made in
// (as the kernel names it) and its name.
func (co *copyOut) hostPath(dirfd int, name string) string {
	if p := co.entryPath(dirfd, name); p != "" {
		return p
	}
	return name
}
