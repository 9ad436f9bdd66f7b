//go:build linux

package testutil

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Meta is the metadata CompareFS checks beyond what fs.FileInfo carries
// (name, type, size, mode bits). A reader under test fills it from its
// FileInfo.Sys() through CompareOptions.Meta; the host side comes from
// lstat and llistxattr.
type Meta struct {
	Ino          uint64 // inode number; 0 if unknown. Used to check hard-link grouping.
	Nlink        uint64
	Uid, Gid     uint32
	Major, Minor uint32 // device number, for char and block devices
	Mtime, Atime time.Time
	// Xattrs maps every extended attribute name ("user.x", "trusted.y",
	// "security.capability", "system.posix_acl_access" in the kernel's
	// posix_acl_xattr format) to its value. nil means "not available".
	Xattrs map[string][]byte
}

// Check selects what CompareFS compares besides names, types, sizes, file
// contents and symlink targets, which it always compares.
type Check uint

const (
	CheckPerm        Check = 1 << iota // permission bits 0777
	CheckSpecialBits                   // setuid, setgid, sticky
	CheckOwner                         // Meta.Uid, Meta.Gid
	CheckMtime                         // Meta.Mtime (to CompareOptions.TimeGranularity)
	CheckAtime                         // Meta.Atime; see the package doc before using it
	CheckNlink                         // Meta.Nlink, and that hard-link groups (Meta.Ino) match
	CheckRdev                          // Meta.Major/Minor of devices
	CheckXattrs                        // Meta.Xattrs

	// CheckAll is everything but atime.
	CheckAll = CheckPerm | CheckSpecialBits | CheckOwner | CheckMtime | CheckNlink | CheckRdev | CheckXattrs

	metaChecks = CheckOwner | CheckMtime | CheckAtime | CheckNlink | CheckRdev | CheckXattrs
)

// CompareOptions tunes CompareFS and CompareDirs. The zero value compares
// names, types, sizes, contents and symlink targets only.
type CompareOptions struct {
	Checks Check
	// Meta extracts the got side's metadata from a FileInfo of the FS under
	// test (CompareFS only; CompareDirs reads the host). Returning false
	// means "none for this entry", which is a difference if Checks need it.
	Meta func(fi fs.FileInfo) (Meta, bool)
	// SkipPaths are slash-separated paths relative to the roots ignored on
	// both sides with everything under them, e.g. "lost+found".
	SkipPaths []string
	// IgnoreMissing: a want entry whose type has any of these bits (e.g.
	// fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) may be absent from got.
	IgnoreMissing fs.FileMode
	// SkipSymlinkMeta skips the Meta checks (not the target) for symlinks.
	SkipSymlinkMeta bool
	// CheckRoot also compares the root directory's mode and metadata, which
	// mke2fs -d does not copy from the source and lost+found changes.
	CheckRoot bool
	// TimeGranularity truncates both times before comparing; 0 = exact ns.
	TimeGranularity time.Duration
	// StampedAfter, when set, makes any two times at or after it equal:
	// times two journal replays stamped at their own moments (the
	// kernel's fast-commit replay sets a directory's mtime to the time
	// of the replay).
	StampedAfter time.Time
	// XattrFilter, if set, limits the xattr comparison to names it accepts.
	XattrFilter func(name string) bool
	// TolerateInvalidUTF8: the got FS may refuse (with any error) to open,
	// list or readlink paths that are not valid UTF-8, as fs.ValidPath
	// demands; those entries are then compared by their FileInfo only.
	TolerateInvalidUTF8 bool
	// MaxDiffs caps the differences reported (default 200); the rest are
	// counted.
	MaxDiffs int
}

// MountCompareOptions is what a kernel mount of an image built by BuildImage
// must match against the source tree: everything but atime, minus the
// lost+found that mke2fs adds.
func MountCompareOptions() CompareOptions {
	return CompareOptions{Checks: CheckAll, SkipPaths: []string{"lost+found"}}
}

// RdumpCompareOptions is what "debugfs rdump" output keeps of the source
// tree (see the package doc): contents, perms 0777, owners, file and
// directory mtimes in seconds; no devices, fifos, sockets, special mode bits,
// xattrs, hard links or symlink metadata.
func RdumpCompareOptions() CompareOptions {
	return CompareOptions{
		Checks:          CheckPerm | CheckOwner | CheckMtime,
		SkipPaths:       []string{"lost+found"},
		IgnoreMissing:   fs.ModeDevice | fs.ModeCharDevice | fs.ModeNamedPipe | fs.ModeSocket,
		SkipSymlinkMeta: true,
		TimeGranularity: time.Second,
	}
}

// CompareFS walks got and the host directory wantDir together and fails the
// test listing every difference (up to opts.MaxDiffs) with its path.
func CompareFS(t testing.TB, got fs.FS, wantDir string, opts CompareOptions) {
	t.Helper()
	report(t, DiffFS(got, wantDir, opts), wantDir)
}

// CompareDirs is CompareFS for two host directories (a kernel mount, rdump
// output, a source tree); both sides' metadata come from the host.
func CompareDirs(t testing.TB, gotDir, wantDir string, opts CompareOptions) {
	t.Helper()
	report(t, DiffDirs(gotDir, wantDir, opts), wantDir)
}

func report(t testing.TB, diffs []string, wantDir string) {
	t.Helper()
	if len(diffs) > 0 {
		t.Errorf("testutil: tree differs from %s (got vs want):\n%s", wantDir, strings.Join(diffs, "\n"))
	}
}

// DiffFS returns the differences CompareFS would report, one line each,
// "PATH: what differs"; the last line counts those beyond the cap.
func DiffFS(got fs.FS, wantDir string, opts CompareOptions) []string {
	var gotMeta metaFunc
	if opts.Meta != nil {
		gotMeta = func(_ string, fi fs.FileInfo) (Meta, error) {
			m, ok := opts.Meta(fi)
			if !ok {
				return m, errors.New("Meta extractor has nothing for this entry")
			}
			return m, nil
		}
	}
	return diff(side{got, gotMeta}, hostSide(wantDir, opts.Checks), opts)
}

// DiffDirs returns the differences CompareDirs would report.
func DiffDirs(gotDir, wantDir string, opts CompareOptions) []string {
	return diff(hostSide(gotDir, opts.Checks), hostSide(wantDir, opts.Checks), opts)
}

type metaFunc func(rel string, fi fs.FileInfo) (Meta, error)

type side struct {
	fsys fs.FS
	meta metaFunc // nil: no metadata
}

func hostSide(dir string, checks Check) side {
	h := hostFS(dir)
	return side{h, func(rel string, fi fs.FileInfo) (Meta, error) {
		m, ok := statMeta(fi)
		if !ok {
			return m, errors.New("no syscall.Stat_t")
		}
		p, err := h.join("lstat", rel)
		if err != nil {
			return m, err
		}
		if err := exactTimes(&m, p); err != nil {
			return m, err
		}
		if checks&CheckXattrs != 0 {
			if m.Xattrs, err = hostXattrs(p); err != nil {
				return m, err
			}
		}
		return m, nil
	}}
}

type comparer struct {
	opts      CompareOptions
	got, want side
	skip      map[string]bool
	diffs     []string
	more      int
	w2g, g2w  map[uint64]uint64 // hard-link grouping: want ino <-> got ino
	inoPath   map[uint64]string // want ino -> first path seen
	gbuf      []byte
	wbuf      []byte
}

func diff(got, want side, opts CompareOptions) []string {
	if opts.MaxDiffs <= 0 {
		opts.MaxDiffs = 200
	}
	c := &comparer{
		opts: opts, got: got, want: want,
		skip: map[string]bool{},
		w2g:  map[uint64]uint64{}, g2w: map[uint64]uint64{}, inoPath: map[uint64]string{},
	}
	for _, p := range opts.SkipPaths {
		c.skip[path.Clean(p)] = true
	}
	if opts.Checks&metaChecks != 0 && got.meta == nil {
		c.add(".", "CompareOptions.Meta is nil but Checks ask for metadata; metadata not compared")
		c.opts.Checks &^= metaChecks
	}
	gfi, gerr := fs.Stat(got.fsys, ".")
	wfi, werr := fs.Stat(want.fsys, ".")
	switch {
	case werr != nil:
		c.add(".", "want root: %v", werr)
	case gerr != nil:
		c.add(".", "got root: %v", gerr)
	default:
		c.walk(".", gfi, wfi)
	}
	if c.more > 0 {
		c.diffs = append(c.diffs, fmt.Sprintf("... and %d more differences", c.more))
	}
	return c.diffs
}

func (c *comparer) add(rel, format string, args ...any) {
	if len(c.diffs) >= c.opts.MaxDiffs {
		c.more++
		return
	}
	c.diffs = append(c.diffs, fmt.Sprintf("%q: ", rel)+fmt.Sprintf(format, args...))
}

// gotErr records an error of the got FS, unless it concerns a non-UTF-8
// path the options allow it to refuse.
func (c *comparer) gotErr(rel, what string, err error) {
	if c.opts.TolerateInvalidUTF8 && !utf8.ValidString(rel) {
		return
	}
	c.add(rel, "got: %s: %v", what, err)
}

func (c *comparer) walk(rel string, g, w fs.FileInfo) {
	if !c.entry(rel, g, w) || !w.IsDir() {
		return
	}
	gents, gerr := fs.ReadDir(c.got.fsys, rel)
	wents, werr := fs.ReadDir(c.want.fsys, rel)
	if werr != nil {
		c.add(rel, "want: readdir: %v", werr)
		return
	}
	if gerr != nil {
		c.gotErr(rel, "readdir", gerr)
		return
	}
	i, j := 0, 0
	for i < len(gents) || j < len(wents) {
		var gn, wn string
		if i < len(gents) {
			gn = gents[i].Name()
		}
		if j < len(wents) {
			wn = wents[j].Name()
		}
		switch {
		case j >= len(wents) || (i < len(gents) && gn < wn):
			if child := join(rel, gn); !c.skip[child] {
				if i > 0 && gents[i-1].Name() == gn {
					c.add(child, "got: duplicate directory entry")
				} else {
					c.add(child, "unexpected in got (%v)", gents[i].Type())
				}
			}
			i++
		case i >= len(gents) || wn < gn:
			child := join(rel, wn)
			if !c.skip[child] && wents[j].Type()&c.opts.IgnoreMissing == 0 {
				c.add(child, "missing in got (%v)", wents[j].Type())
			}
			j++
		default:
			child := join(rel, gn)
			if !c.skip[child] {
				c.pair(child, gents[i], wents[j])
			}
			i++
			j++
		}
	}
}

func (c *comparer) pair(rel string, g, w fs.DirEntry) {
	wfi, err := w.Info()
	if err != nil {
		c.add(rel, "want: %v", err)
		return
	}
	gfi, err := g.Info()
	if err != nil {
		c.add(rel, "got: %v", err)
		return
	}
	if g.Type() != gfi.Mode().Type() {
		c.add(rel, "got: DirEntry type %v but FileInfo type %v", g.Type(), gfi.Mode().Type())
	}
	c.walk(rel, gfi, wfi)
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// entry compares one entry present on both sides. It reports whether the
// types match (and so whether a directory should be descended into).
func (c *comparer) entry(rel string, g, w fs.FileInfo) bool {
	gt, wt := g.Mode().Type(), w.Mode().Type()
	if gt != wt {
		c.add(rel, "type: got %v, want %v", gt, wt)
		return false
	}
	root := rel == "."
	checks := c.opts.Checks
	if root && !c.opts.CheckRoot {
		checks = 0
	}
	if checks&CheckPerm != 0 && g.Mode().Perm() != w.Mode().Perm() {
		c.add(rel, "perm: got %v, want %v", g.Mode().Perm(), w.Mode().Perm())
	}
	const special = fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky
	if checks&CheckSpecialBits != 0 && g.Mode()&special != w.Mode()&special {
		c.add(rel, "setuid/setgid/sticky: got %v, want %v", g.Mode()&special, w.Mode()&special)
	}
	switch {
	case wt == 0: // regular
		if g.Size() != w.Size() {
			c.add(rel, "size: got %d, want %d", g.Size(), w.Size())
		} else {
			c.content(rel, w.Size())
		}
	case wt == fs.ModeSymlink:
		if g.Size() != w.Size() {
			c.add(rel, "symlink size: got %d, want %d", g.Size(), w.Size())
		}
		wl, werr := fs.ReadLink(c.want.fsys, rel)
		gl, gerr := fs.ReadLink(c.got.fsys, rel)
		switch {
		case werr != nil:
			c.add(rel, "want: readlink: %v", werr)
		case gerr != nil:
			c.gotErr(rel, "readlink", gerr)
		case gl != wl:
			c.add(rel, "symlink target: got %q, want %q", gl, wl)
		}
	}
	if checks&metaChecks != 0 && !(wt == fs.ModeSymlink && c.opts.SkipSymlinkMeta) {
		c.meta(rel, g, w, checks)
	}
	return true
}

func (c *comparer) meta(rel string, g, w fs.FileInfo, checks Check) {
	wm, err := c.want.meta(rel, w)
	if err != nil {
		c.add(rel, "want: metadata: %v", err)
		return
	}
	gm, err := c.got.meta(rel, g)
	if err != nil {
		c.gotErr(rel, "metadata", err)
		return
	}
	if checks&CheckOwner != 0 && (gm.Uid != wm.Uid || gm.Gid != wm.Gid) {
		c.add(rel, "owner: got %d:%d, want %d:%d", gm.Uid, gm.Gid, wm.Uid, wm.Gid)
	}
	if checks&CheckMtime != 0 && !c.sameTime(gm.Mtime, wm.Mtime) {
		c.add(rel, "mtime: got %s, want %s", fmtTime(gm.Mtime), fmtTime(wm.Mtime))
	}
	if checks&CheckAtime != 0 && !c.sameTime(gm.Atime, wm.Atime) {
		c.add(rel, "atime: got %s, want %s", fmtTime(gm.Atime), fmtTime(wm.Atime))
	}
	if checks&CheckNlink != 0 {
		if gm.Nlink != wm.Nlink {
			c.add(rel, "nlink: got %d, want %d", gm.Nlink, wm.Nlink)
		}
		if !w.IsDir() {
			c.links(rel, gm.Ino, wm.Ino)
		}
	}
	if checks&CheckRdev != 0 && w.Mode()&fs.ModeDevice != 0 && (gm.Major != wm.Major || gm.Minor != wm.Minor) {
		c.add(rel, "device: got %d:%d, want %d:%d", gm.Major, gm.Minor, wm.Major, wm.Minor)
	}
	if checks&CheckXattrs != 0 {
		c.xattrs(rel, gm.Xattrs, wm.Xattrs)
	}
}

// links checks that names sharing an inode on the want side share one on
// the got side, and only those.
func (c *comparer) links(rel string, gino, wino uint64) {
	if gino == 0 || wino == 0 {
		return
	}
	if prev, ok := c.w2g[wino]; ok && prev != gino {
		c.add(rel, "hard link: want the same inode as %q, got a different one", c.inoPath[wino])
	}
	if prev, ok := c.g2w[gino]; ok && prev != wino {
		c.add(rel, "hard link: got the same inode as %q, want a different one", c.inoPath[prev])
	}
	if _, ok := c.w2g[wino]; !ok {
		c.w2g[wino] = gino
		c.inoPath[wino] = rel
	}
	if _, ok := c.g2w[gino]; !ok {
		c.g2w[gino] = wino
	}
}

func (c *comparer) sameTime(a, b time.Time) bool {
	if s := c.opts.StampedAfter; !s.IsZero() && !a.Before(s) && !b.Before(s) {
		return true
	}
	if g := c.opts.TimeGranularity; g > 0 {
		a, b = a.Truncate(g), b.Truncate(g)
	}
	return a.Equal(b)
}

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (c *comparer) xattrs(rel string, g, w map[string][]byte) {
	if w == nil {
		c.add(rel, "want: xattrs not available")
		return
	}
	if g == nil {
		c.add(rel, "got: xattrs not available")
		return
	}
	keep := func(n string) bool { return c.opts.XattrFilter == nil || c.opts.XattrFilter(n) }
	var names []string
	for n := range w {
		names = append(names, n)
	}
	for n := range g {
		if _, ok := w[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if !keep(n) {
			continue
		}
		gv, gok := g[n]
		wv, wok := w[n]
		switch {
		case !gok:
			c.add(rel, "xattr %q missing in got (want %s)", n, showBytes(wv))
		case !wok:
			c.add(rel, "xattr %q unexpected in got (%s)", n, showBytes(gv))
		case !bytes.Equal(gv, wv):
			c.add(rel, "xattr %q: got %s, want %s", n, showBytes(gv), showBytes(wv))
		}
	}
}

func showBytes(b []byte) string {
	const max = 32
	if len(b) <= max {
		return fmt.Sprintf("%d bytes %x", len(b), b)
	}
	return fmt.Sprintf("%d bytes %x...", len(b), b[:max])
}

// content compares two regular files of equal size, streaming. Where both
// files report a hole (SEEK_HOLE), both read as zeros and are skipped, so a
// sparse multi-GiB file costs only its data; everything else is read from
// both sides and compared byte for byte.
func (c *comparer) content(rel string, size int64) {
	wf, err := c.want.fsys.Open(rel)
	if err != nil {
		c.add(rel, "want: open: %v", err)
		return
	}
	defer wf.Close()
	gf, err := c.got.fsys.Open(rel)
	if err != nil {
		c.gotErr(rel, "open", err)
		return
	}
	defer gf.Close()
	ranges := unionRanges(dataRanges(gf, size), dataRanges(wf, size))
	if c.gbuf == nil {
		c.gbuf, c.wbuf = make([]byte, 1<<20), make([]byte, 1<<20)
	}
	gr, wr := newPosReader(gf), newPosReader(wf)
	for _, r := range ranges {
		for off := r[0]; off < r[1]; {
			n := int(min(int64(len(c.gbuf)), r[1]-off))
			if err := wr.readFull(c.wbuf[:n], off); err != nil {
				c.add(rel, "want: read at %d: %v", off, err)
				return
			}
			if err := gr.readFull(c.gbuf[:n], off); err != nil {
				c.add(rel, "got: read at %d: %v", off, err)
				return
			}
			if !bytes.Equal(c.gbuf[:n], c.wbuf[:n]) {
				i := 0
				for c.gbuf[i] == c.wbuf[i] {
					i++
				}
				e := min(n, i+16)
				c.add(rel, "content differs at offset %d: got %x, want %x", off+int64(i), c.gbuf[i:e], c.wbuf[i:e])
				return
			}
			off += int64(n)
		}
	}
	if gr.ra == nil && gr.sk == nil { // sequential: must end exactly at size
		if n, _ := gf.Read(c.gbuf[:1]); n > 0 {
			c.add(rel, "got: data beyond size %d", size)
		}
	}
}

// dataRanges lists the [start, end) ranges of f holding data, using
// Seek(off, SEEK_DATA/SEEK_HOLE) as os.File supports (a reader under test
// may support it too: whence 3 and 4, an error wrapping syscall.ENXIO when
// no data follows). Without that support it returns the whole file.
func dataRanges(f fs.File, size int64) [][2]int64 {
	whole := [][2]int64{{0, size}}
	s, ok := f.(io.Seeker)
	if !ok || size == 0 {
		return whole
	}
	var rs [][2]int64
	for off := int64(0); off < size; {
		d, err := s.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil || d < off {
			return whole
		}
		if d >= size {
			break
		}
		h, err := s.Seek(d, unix.SEEK_HOLE)
		if err != nil || h <= d {
			return whole
		}
		h = min(h, size)
		rs = append(rs, [2]int64{d, h})
		off = h
		if len(rs) > 1<<16 { // pathological: just read it all
			return whole
		}
	}
	return rs
}

// unionRanges merges two sorted lists of disjoint ranges.
func unionRanges(a, b [][2]int64) [][2]int64 {
	all := append(append([][2]int64(nil), a...), b...)
	slices.SortFunc(all, func(x, y [2]int64) int { return cmp.Compare(x[0], y[0]) })
	var out [][2]int64
	for _, r := range all {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// posReader reads at offsets from an fs.File by ReadAt, Seek+Read or, for a
// plain stream, reading forward.
type posReader struct {
	f   fs.File
	ra  io.ReaderAt
	sk  io.Seeker
	pos int64
}

func newPosReader(f fs.File) *posReader {
	p := &posReader{f: f}
	p.ra, _ = f.(io.ReaderAt)
	p.sk, _ = f.(io.Seeker)
	return p
}

func (p *posReader) readFull(b []byte, off int64) error {
	switch {
	case p.ra != nil:
		n, err := p.ra.ReadAt(b, off)
		if n == len(b) {
			return nil
		}
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	case p.sk != nil:
		if _, err := p.sk.Seek(off, io.SeekStart); err != nil {
			return err
		}
	case off != p.pos:
		// Unreachable: a stream has no known holes, so its ranges are
		// the whole file, read in order.
		return fmt.Errorf("stream at %d cannot read at %d", p.pos, off)
	}
	n, err := io.ReadFull(p.f, b)
	p.pos = off + int64(n)
	return err
}
