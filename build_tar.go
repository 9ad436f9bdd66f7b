package ext4go

import (
	"archive/tar"
	"bufio"
	"bytes"

	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Decompress returns r decompressed if it starts with a gzip or zstd
// header, else r itself (buffered). Both decoders are klauspost/compress's
// (its gzip inflates about twice as fast as compress/gzip, and decompression
// bounds how fast a compressed layer becomes an image).
func Decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		return gzip.NewReader(br)
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		d, err := zstd.NewReader(br)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	}
	return br, nil
}

// AddTar extracts the tar stream r (plain, gzip or zstd) into the image
// directory dst: regular files (runs of zero blocks become holes),
// directories, symlinks, hard links, device nodes, fifos, modes, owners,
// times and PAX extended attributes (SCHILY.xattr.*). Entries are applied
// in stream order; a later entry replaces an earlier one of the same name.
// Names that would leave dst ("..") are refused.
func (f *FS) AddTar(dst string, r io.Reader, o *BuildOptions) error {
	b, _, err := f.newBuilder(dst, o)
	if err != nil {
		return err
	}
	dr, err := Decompress(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(dr)
	dirTimes := map[string]pendingTimes{}
	// The archive is read (and decompressed) here while fill workers
	// write the data already read.
	b.startFill()
	err = b.readTar(tr, dst, dirTimes)
	if ferr := b.stopFill(); err == nil {
		err = ferr
	}
	if err != nil {
		return err
	}
	// Directory times last, deepest first.
	names := make([]string, 0, len(dirTimes))
	for n := range dirTimes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return len(names[i]) > len(names[j]) || (len(names[i]) == len(names[j]) && names[i] < names[j])
	})
	for _, n := range names {
		t := dirTimes[n]
		if err := f.setBuildTimes(t.n, t.atime, t.mtime, b.o.Time, b.o.ClampTimes); err != nil {
			return err
		}
	}
	return nil
}

// readTar applies the entries of tr under dst.
func (b *builder) readTar(tr *tar.Reader, dst string, dirTimes map[string]pendingTimes) error {
	for {
		if err := b.fillFailed(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tar: %w", err)
		}
		name, err := tarName(dst, hdr.Name)
		if err != nil {
			return err
		}
		if name == dst || name == "." {
			continue // the root itself
		}
		if err := b.addTarEntry(tr, hdr, name, dirTimes); err != nil {
			return fmt.Errorf("tar: %s: %w", hdr.Name, err)
		}
	}
}

// tarName maps an archive name to an image path under dst.
func tarName(dst, name string) (string, error) {
	clean := path.Clean("/" + name)
	if strings.Contains(name, "\x00") {
		return "", fmt.Errorf("tar: bad name %q", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("tar: %q leaves the target directory", name)
		}
	}
	if clean == "/" {
		return dst, nil
	}
	return imageJoin(dst, clean[1:]), nil
}

func (b *builder) addTarEntry(tr *tar.Reader, hdr *tar.Header, name string, dirTimes map[string]pendingTimes) error {
	f := b.f
	dir, base := path.Dir(name), path.Base(name)
	if err := f.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	parent, err := f.resolve("tar", dir, true)
	if err != nil {
		return err
	}
	uid, gid := b.o.owner(uint32(hdr.Uid), uint32(hdr.Gid))
	mode := uint16(hdr.Mode & 0o7777)
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = hdr.ModTime
	}
	e := newEntry{uid: uid, gid: gid}
	if b.o.Whiteouts && strings.HasPrefix(base, ".wh.") && (hdr.Typeflag == tar.TypeReg || hdr.Typeflag == tar.TypeRegA) {
		_, err := b.whiteout(parent, base, newEntry{uid: uid, gid: gid, mode: mode})
		return err
	}
	// A later entry replaces an earlier one (but a directory stays if the
	// new entry is a directory too).
	if fi, err := f.Lstat(name); err == nil {
		if fi.IsDir() && hdr.Typeflag == tar.TypeDir {
			n, err := f.resolve("tar", name, false)
			if err != nil {
				return err
			}
			if err := b.setOwnerMode(n, uid, gid, mode); err != nil {
				return err
			}
			dirTimes[name] = pendingTimes{n, atime, hdr.ModTime}
			return b.tarXattrs(n, hdr)
		}
		// Queued copies may still write into the blocks this frees.
		if err := b.drainFill(); err != nil {
			return err
		}
		if err := f.RemoveAll(name); err != nil {
			return err
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		e.mode = 0x4000 | mode
	case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
		// archive/tar gives a sparse entry's (GNU tar -S, old GNU or PAX
		// format) whole contents, holes read as zeros: writeSparse makes
		// holes of them again.
		e.mode = 0x8000 | mode
	case tar.TypeSymlink:
		e.mode = 0xA000 | 0o777
		e.target = hdr.Linkname
	case tar.TypeLink:
		target, err := tarName(b.root(name, hdr), hdr.Linkname)
		if err != nil {
			return err
		}
		return f.Link(target, name)
	case tar.TypeChar:
		e.mode = 0x2000 | mode
		e.rdev = mkdev(hdr.Devmajor, hdr.Devminor)
	case tar.TypeBlock:
		e.mode = 0x6000 | mode
		e.rdev = mkdev(hdr.Devmajor, hdr.Devminor)
	case tar.TypeFifo:
		e.mode = 0x1000 | mode
	case tar.TypeXGlobalHeader:
		return nil
	default:
		return &UnsupportedError{Feature: fmt.Sprintf("tar entry type %q", hdr.Typeflag)}
	}
	n, err := b.create(parent, base, e)
	if err != nil {
		return err
	}
	if err := b.tarXattrs(n, hdr); err != nil {
		return err
	}
	if e.mode&0xF000 == 0x8000 && hdr.Size > 0 {
		if err := b.writeSparse(n, name, tr, hdr.Size); err != nil {
			return err
		}
	}
	if e.mode&0xF000 == 0x4000 {
		dirTimes[name] = pendingTimes{n, atime, hdr.ModTime}
		return nil
	}
	return f.setBuildTimes(n, atime, hdr.ModTime, b.o.Time, b.o.ClampTimes)
}

// root returns the directory hard-link targets are relative to: the
// tar's root, dst (recovered from the entry's image path).
func (b *builder) root(name string, hdr *tar.Header) string {
	clean := path.Clean("/" + hdr.Name)[1:]
	if clean == "" || !strings.HasSuffix(name, clean) {
		return "."
	}
	d := strings.TrimSuffix(strings.TrimSuffix(name, clean), "/")
	if d == "" {
		return "."
	}
	return d
}

func mkdev(major, minor int64) uint64 {
	ma, mi := uint64(major), uint64(minor)
	return (mi & 0xff) | (ma&0xfff)<<8 | (mi&^0xff)<<12 | (ma&^0xfff)<<32
}

func (b *builder) setOwnerMode(n *node, uid, gid uint32, mode uint16) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, err := b.f.begin()
	if err != nil {
		return err
	}
	defer h.End()
	in := editInode(n)
	in.UID, in.GID = uid, gid
	in.Mode = in.Mode&0xF000 | mode
	return b.f.setInode(h, n, in)
}

// tarXattrs applies the PAX xattr records of hdr.
func (b *builder) tarXattrs(n *node, hdr *tar.Header) error {
	const prefix = "SCHILY.xattr."
	var names []string
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, prefix) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if err := b.setXattr(n, k[len(prefix):], []byte(hdr.PAXRecords[k])); err != nil {
			return fmt.Errorf("xattr %s: %w", k[len(prefix):], err)
		}
	}
	return nil
}

// tarChunk is how much of a file the archive reader reads at once and
// hands to a fill worker.
const tarChunk = 1 << 20

// writeSparse copies size bytes of r into regular file n (at image path
// name), leaving blocks that are all zeros as holes (as mke2fs -d does).
// Blocks are allocated here, chunk by chunk in file order (reproducible);
// fill workers write the chunks' data.
func (b *builder) writeSparse(n *node, name string, r io.Reader, size int64) error {
	f := b.f
	bs := int(f.blockSize)
	n.mu.Lock()
	defer n.mu.Unlock()
	for off := int64(0); off < size; {
		chunk := make([]byte, min(tarChunk, size-off))
		m, err := io.ReadFull(r, chunk)
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("archive ends inside the file")
			}
			return err
		}
		// The runs of non-zero blocks.
		var ranges []Range
		for i := 0; i < m; {
			if isZero(chunk[i:min(i+bs, m)]) {
				i += bs
				continue
			}
			j := i
			for j < m && !isZero(chunk[j:min(j+bs, m)]) {
				j += bs
			}
			j = min(j, m)
			ranges = append(ranges, Range{off + int64(i), int64(j - i)})
			i = j
		}
		if len(ranges) > 0 {
			runs, err := f.reserve(n, size, ranges, nil)
			if err != nil {
				return err
			}
			first, end := uint64(off)/uint64(bs), (uint64(off)+uint64(m)+uint64(bs)-1)/uint64(bs)
			b.queue(fillJob{src: name, data: chunk, base: off, size: size, runs: clipRuns(runs, first, end)})
		}
		off += int64(m)
	}
	if int64(n.in().Size) < size {
		h, err := f.begin()
		if err != nil {
			return err
		}
		defer h.End()
		in := editInode(n)
		in.Size = uint64(size)
		return f.setInode(h, n, in)
	}
	return nil
}

// clipRuns returns the parts of runs within logical blocks [first, end).
func clipRuns(runs []run, first, end uint64) []run {
	var out []run
	for _, r := range runs {
		lo, hi := max(r.logical, first), min(r.logical+r.length, end)
		if lo >= hi || r.unwritten {
			continue
		}
		out = append(out, run{logical: lo, physical: r.physical + (lo - r.logical), length: hi - lo})
	}
	return out
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
