package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// This file reads every e2fsprogs regression image (shared/testdata/
// e2fsprogs, mostly corrupted on purpose): each must open and walk without
// a panic, a hang, unbounded memory or an untyped error, and the clean ones
// must read exactly as the kernel (or debugfs rdump) shows them.

// Limits of one image in TestCorpus.
const (
	corpusTimeout     = 20 * time.Second // open + walk + comparison of one image
	corpusHeapCap     = 512 << 20        // live heap of the whole test process
	corpusParallel    = 3                // images in flight at once
	corpusMemoryLimit = 768 << 20        // debug.SetMemoryLimit while the test runs
)

// corpusShortSample is what -short reads: a fixed mix of clean images (the
// kernel-compared kind), journal, inline-data, ea_inode, htree, bigalloc and
// badly corrupted ones.
var corpusShortSample = []string{
	"d_inline_dump", "f_bad_disconnected_inode", "f_bad_encryption", "f_baddir",
	"f_bigalloc_symlink_with_xattr", "f_convert_bmap_sparse", "f_dir_bad_csum",
	"f_ea_inode_dir_ref", "f_extent_too_deep", "f_h_normal", "f_h_badnode",
	"f_htree_leaf_csum", "f_inlinedata_repair", "f_messy_inode", "f_special_ea",
	"f_uninit_ext_past_eof", "f_verity", "f_zero_xattr", "j_corrupt_commit_csum",
	"j_recover_fast_commit", "f_many_subdirs", "f_dup4", "f_lotsbad", "f_first_meta_bg_too_big",
}

// corpusStat is the outcome of one image, for the summary.
type corpusStat struct {
	name    string
	outcome string // "opened", "opened with OPTS", "refused"
	errs    int
}

// TestCorpus opens and walks every shared e2fsprogs image (a fixed sample
// with -short), and compares the clean ones with the kernel's read-only
// mount, or with debugfs rdump where the kernel cannot mount them.
func TestCorpus(t *testing.T) {
	imgs := testutil.SharedImages(t)
	if len(imgs) == 0 {
		t.Skip("no shared images catalogued")
	}
	old := debug.SetMemoryLimit(corpusMemoryLimit)
	var (
		mu    sync.Mutex
		stats []corpusStat
	)
	t.Cleanup(func() {
		debug.SetMemoryLimit(old)
		slices.SortFunc(stats, func(a, b corpusStat) int { return strings.Compare(a.name, b.name) })
		var opened, refused, witherr int
		for _, s := range stats {
			switch {
			case s.outcome == "refused":
				refused++
			default:
				opened++
			}
			if s.errs > 0 {
				witherr++
			}
		}
		t.Logf("corpus: %d images: %d opened (%d of them with walk errors), %d refused", len(stats), opened, witherr, refused)
	})
	sample := map[string]bool{}
	for _, n := range corpusShortSample {
		sample[n] = true
	}
	sem := make(chan struct{}, corpusParallel)
	for _, img := range imgs {
		if testing.Short() && !sample[img.Name] {
			continue
		}
		t.Run(img.Name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			st := corpusImage(t, img)
			mu.Lock()
			stats = append(stats, st)
			mu.Unlock()
		})
	}
}

// corpusImage checks one shared image.
func corpusImage(t *testing.T, img testutil.SharedImage) corpusStat {
	st := corpusStat{name: img.Name}
	image := img.Decompress(t)
	clean := img.FsckExit == 0

	// The oracle, prepared before the timed part (it needs t).
	var oracle string
	var copts testutil.CompareOptions
	if clean {
		oracle, copts = corpusOracle(t, img, image)
	}

	stop := watchHeap(t, corpusHeapCap)
	defer stop()
	type result struct {
		log   []string
		fails []string
		errs  int
		opt   string
		diffs []string
	}
	done := make(chan result, 1)
	go func() {
		var r result
		fsys, opts, err := openCorpus(image)
		if err != nil {
			r.opt = "refused"
			r.log = append(r.log, fmt.Sprintf("refused: %v", err))
			if !typedErr(err) {
				r.fails = append(r.fails, fmt.Sprintf("open: untyped error %T: %v", err, err))
			}
			if clean && !img.HasFeature("journal_dev") {
				r.fails = append(r.fails, fmt.Sprintf("e2fsck -fn finds the image clean but open refuses it: %v", err))
			}
			done <- r
			return
		}
		defer fsys.Close()
		r.opt = describeOpts(opts)
		start := time.Now()
		w := walkFS(fsys, corpusWalkLimits)
		r.log = append(r.log, fmt.Sprintf("walk took %v", time.Since(start).Round(time.Millisecond)))
		r.errs = len(w.errs)
		r.fails = append(r.fails, w.fails...)
		r.log = append(r.log, fmt.Sprintf("%s: %s", r.opt, w.summary()))
		for i, e := range w.errs {
			if i == 5 {
				r.log = append(r.log, fmt.Sprintf("  ... %d more walk errors", len(w.errs)-i))
				break
			}
			r.log = append(r.log, "  walk error: "+e)
		}
		// A walk with checksums verified stops at the first bad checksum
		// of each structure; walk the rest too.
		if w.checksumErrs > 0 && !opts.IgnoreChecksums {
			o2 := *opts
			o2.IgnoreChecksums = true
			if f2, err := ext4go.Open(image, &o2); err != nil {
				if !typedErr(err) {
					r.fails = append(r.fails, fmt.Sprintf("open with IgnoreChecksums: untyped error %T: %v", err, err))
				}
			} else {
				w2 := walkFS(f2, corpusWalkLimits)
				f2.Close()
				r.fails = append(r.fails, w2.fails...)
				r.log = append(r.log, fmt.Sprintf("again with IgnoreChecksums: %s", w2.summary()))
			}
		}
		if clean {
			if r.errs > 0 {
				r.fails = append(r.fails, fmt.Sprintf("e2fsck -fn finds the image clean but the walk found %d errors", r.errs))
			}
			if oracle != "" {
				start := time.Now()
				r.diffs = testutil.DiffFS(fsys, oracle, copts)
				r.log = append(r.log, fmt.Sprintf("comparison took %v", time.Since(start).Round(time.Millisecond)))
			}
		}
		done <- r
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(corpusTimeout):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("open+walk took over %v (hang?); goroutines:\n%s", corpusTimeout, buf)
	}
	for _, l := range r.log {
		t.Log(l)
	}
	for _, f := range r.fails {
		t.Error(f)
	}
	if len(r.diffs) > 0 {
		t.Errorf("differs from %s (got = ext4go, want = oracle):\n%s", oracleName(oracle, img), strings.Join(r.diffs, "\n"))
	}
	st.outcome, st.errs = r.opt, r.errs
	return st
}

func oracleName(dir string, img testutil.SharedImage) string {
	if img.KernelMounts == "yes" {
		return "the kernel's read-only mount"
	}
	return "debugfs rdump"
}

// corpusOracle returns the directory that shows what a clean image holds
// and how to compare with it: the kernel's read-only mount where the
// catalog says the kernel mounts the image, else a debugfs rdump.
func corpusOracle(t *testing.T, img testutil.SharedImage, image string) (string, testutil.CompareOptions) {
	if img.KernelMounts == "yes" {
		if ok, reason := testutil.CanMount(); ok {
			mp := testutil.Mount(t, image, true)
			co := testutil.CompareOptions{Checks: testutil.CheckAll, CheckRoot: true, Meta: meta}
			corpusKernelExceptions(img, &co)
			return mp, co
		} else {
			t.Logf("kernel comparison impossible (%s): using debugfs rdump", reason)
		}
	}
	if img.HasFeature("journal_dev") {
		return "", testutil.CompareOptions{}
	}
	dst := t.TempDir()
	testutil.DebugfsRdump(t, image, "/", dst)
	co := testutil.RdumpCompareOptions()
	co.CheckRoot = false
	co.SkipPaths = nil // lost+found is on both sides here
	corpusRdumpExceptions(img, &co)
	return dst, co
}

// corpusKernelExceptions documents where the kernel's view of an image
// legitimately differs from the on-disk truth ext4go shows.
func corpusKernelExceptions(img testutil.SharedImage, co *testutil.CompareOptions) {
	switch img.Name {
	}
}

// corpusRdumpExceptions documents where debugfs rdump cannot show an image
// as it is (see the testutil package doc for rdump's general limits).
func corpusRdumpExceptions(img testutil.SharedImage, co *testutil.CompareOptions) {
	switch img.Name {
	}
}

// openCorpus opens image with the default options, adding IgnoreChecksums
// or IgnoreJournal when it is refused for a bad checksum or a journal that
// needs recovery.
func openCorpus(image string) (*ext4go.FS, *ext4go.Options, error) {
	opts := &ext4go.Options{}
	for {
		fsys, err := ext4go.Open(image, opts)
		if err == nil {
			return fsys, opts, nil
		}
		switch {
		case errors.Is(err, ext4go.ErrChecksum) && !opts.IgnoreChecksums:
			opts.IgnoreChecksums = true
		case needsRecovery(err) && !opts.IgnoreJournal:
			opts.IgnoreJournal = true
		default:
			return nil, opts, err
		}
	}
}

func needsRecovery(err error) bool {
	var ue *ext4go.UnsupportedError
	return errors.As(err, &ue) && ue.Feature == "journal replay"
}

func describeOpts(o *ext4go.Options) string {
	var s []string
	if o.IgnoreChecksums {
		s = append(s, "IgnoreChecksums")
	}
	if o.IgnoreJournal {
		s = append(s, "IgnoreJournal")
	}
	if len(s) == 0 {
		return "opened"
	}
	return "opened with " + strings.Join(s, "+")
}

// typedErr reports whether err is one a caller can act on: a corruption,
// checksum or unsupported-feature error of ext4go, or one of the io/fs and
// errno conditions a path walk produces, possibly wrapped in *fs.PathError.
func typedErr(err error) bool {
	for _, target := range []error{
		ext4go.ErrCorrupt, ext4go.ErrUnsupported, fs.ErrNotExist, fs.ErrInvalid,
		syscall.ENOTDIR, syscall.ELOOP, syscall.EISDIR, syscall.ENXIO, syscall.ENODATA, syscall.EINVAL,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// walkLimits bound one walkFS.
type walkLimits struct {
	maxEntries  int   // entries visited
	maxFileRead int64 // bytes read from one file
	maxRead     int64 // bytes read in the whole walk
}

var corpusWalkLimits = walkLimits{maxEntries: 200_000, maxFileRead: 256 << 20, maxRead: 1 << 30}

// walkResult is what walkFS saw.
type walkResult struct {
	entries, dirs, files, symlinks, other int
	bytes                                 int64
	errs                                  []string // typed errors: expected on corrupt images
	checksumErrs                          int
	fails                                 []string // untyped errors and broken API rules
	truncated                             bool
}

func (w *walkResult) summary() string {
	s := fmt.Sprintf("%d entries (%d dirs, %d files, %d symlinks, %d other), %d bytes read, %d walk errors",
		w.entries, w.dirs, w.files, w.symlinks, w.other, w.bytes, len(w.errs))
	if w.truncated {
		s += " (walk cut at its entry limit)"
	}
	return s
}

func (w *walkResult) err(p, op string, err error) {
	if err == nil {
		return
	}
	if !typedErr(err) {
		w.fails = append(w.fails, fmt.Sprintf("%q: %s: untyped error %T: %v", p, op, err, err))
		return
	}
	if errors.Is(err, ext4go.ErrChecksum) {
		w.checksumErrs++
	}
	if len(w.errs) < 1000 {
		w.errs = append(w.errs, fmt.Sprintf("%q: %s: %v", p, op, err))
	}
}

func (w *walkResult) fail(p, format string, args ...any) {
	w.fails = append(w.fails, fmt.Sprintf("%q: ", p)+fmt.Sprintf(format, args...))
}

// walkFS visits everything in fsys with every read API: fs.WalkDir from
// the root, and for each entry Lstat, Stat, the ext4 Stat and its xattrs,
// ListXattr/GetXattr, ReadLink, Extents, whole-file reads by Read and
// spot checks by ReadAt, and SEEK_DATA/SEEK_HOLE. Directories already seen
// (a corrupt image may link one into itself) are not entered again.
func walkFS(fsys *ext4go.FS, lim walkLimits) *walkResult {
	w := &walkResult{}
	seenDirs := map[uint32]bool{}
	_ = fsys.Info()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			w.err(p, "walk", err)
			if d == nil { // the root itself failed
				return err
			}
			return nil
		}
		if w.entries++; w.entries > lim.maxEntries {
			w.truncated = true
			return fs.SkipAll
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			w.err(p, "lstat", err)
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		st, ok := fi.Sys().(*ext4go.Stat)
		if !ok {
			w.fail(p, "Sys() is %T, not *ext4go.Stat", fi.Sys())
			return nil
		}
		if fi.Name() != path.Base(p) && p != "." {
			w.fail(p, "Lstat name %q", fi.Name())
		}
		if p != "." && d.Type() != fi.Mode().Type() {
			// The directory entry's file type disagrees with the inode:
			// legal to see in a corrupt image; Info must follow the inode.
			if di, err := d.Info(); err == nil && di.Mode().Type() != fi.Mode().Type() {
				w.fail(p, "DirEntry.Info type %v, Lstat type %v", di.Mode().Type(), fi.Mode().Type())
			}
		}
		xa, err := st.Xattrs()
		w.err(p, "xattrs", err)
		names, err := fsys.ListXattr(p)
		w.err(p, "listxattr", err)
		if err == nil && xa != nil && len(names) != len(xa) {
			w.fail(p, "ListXattr has %d names, Stat.Xattrs %d", len(names), len(xa))
		}
		for _, n := range names {
			v, err := fsys.GetXattr(p, n)
			w.err(p, "getxattr "+n, err)
			if err == nil && xa != nil && !bytes.Equal(v, xa[n]) {
				w.fail(p, "GetXattr(%q) differs from Stat.Xattrs", n)
			}
		}
		if _, err := fsys.GetXattr(p, "user.ext4go-no-such-attr"); err == nil {
			w.fail(p, "GetXattr of a missing attribute succeeded")
		} else if !errors.Is(err, syscall.ENODATA) {
			w.err(p, "getxattr missing", err)
		}
		if _, err := fsys.Extents(p); err != nil {
			w.err(p, "extents", err)
		}
		switch mode := fi.Mode(); {
		case mode.IsDir():
			w.dirs++
			if seenDirs[st.Ino] {
				return fs.SkipDir
			}
			seenDirs[st.Ino] = true
			if p != "." {
				_, err := fsys.Stat(p)
				w.err(p, "stat", err)
			}
		case mode&fs.ModeSymlink != 0:
			w.symlinks++
			target, err := fsys.ReadLink(p)
			w.err(p, "readlink", err)
			if err == nil && int64(len(target)) > fi.Size() {
				w.fail(p, "symlink target of %d bytes, size %d", len(target), fi.Size())
			}
			if sfi, err := fsys.Stat(p); err != nil {
				w.err(p, "stat (follow)", err)
			} else if sfi.Mode().IsRegular() && w.bytes < lim.maxRead {
				w.readFile(fsys, p, sfi.Size(), lim)
			}
		case mode.IsRegular():
			w.files++
			if w.bytes < lim.maxRead {
				w.readFile(fsys, p, fi.Size(), lim)
			}
		default:
			w.other++
			if f, err := fsys.Open(p); err != nil {
				w.err(p, "open special", err)
			} else {
				f.Close()
			}
		}
		return nil
	})
	if err != nil {
		w.err(".", "walkdir", err)
	}
	return w
}

// readFile reads the regular file p of the given size: all of it with
// Read when small enough, else its data ranges; then compares a few ReadAt
// spot checks with what Read returned, and checks SEEK_DATA/SEEK_HOLE.
func (w *walkResult) readFile(fsys *ext4go.FS, p string, size int64, lim walkLimits) {
	f, err := fsys.Open(p)
	if err != nil {
		w.err(p, "open", err)
		return
	}
	defer f.Close()
	ef, ok := f.(*ext4go.File)
	if !ok {
		w.fail(p, "Open returned %T", f)
		return
	}
	if _, err := ef.Stat(); err != nil {
		w.err(p, "file stat", err)
	}
	budget := min(lim.maxFileRead, lim.maxRead-w.bytes)
	// Spot offsets: start, middle, last byte.
	spots := []int64{0}
	if size > 1 {
		spots = append(spots, size/2, size-1)
	}
	got := map[int64][]byte{}
	if size <= budget {
		sw := &spotWriter{spots: spots, got: got}
		n, err := io.Copy(sw, f)
		w.bytes += n
		if err != nil {
			w.err(p, "read", err)
			return
		}
		if n != size {
			w.fail(p, "read %d bytes of a %d-byte file without an error", n, size)
			return
		}
	} else {
		// Too large to read whole (a sparse or lying i_size): read the
		// data ranges only, within the budget.
		rs, err := ef.DataRanges()
		if err != nil {
			w.err(p, "data ranges", err)
			return
		}
		buf := make([]byte, 64<<10)
		left := budget
		for _, r := range rs {
			for off := r.Off; off < r.Off+r.Len && left > 0; {
				n := int(min(int64(len(buf)), r.Off+r.Len-off, left))
				m, err := ef.ReadAt(buf[:n], off)
				w.bytes += int64(m)
				left -= int64(m)
				if err != nil && !(err == io.EOF && off+int64(m) == size) {
					w.err(p, fmt.Sprintf("readat %d", off), err)
					return
				}
				off += int64(n)
			}
		}
		spots = nil
	}
	for _, off := range spots {
		want, ok := got[off]
		if !ok {
			continue
		}
		b := make([]byte, len(want))
		n, err := ef.ReadAt(b, off)
		if err != nil && !(err == io.EOF && off+int64(n) == size) {
			w.err(p, fmt.Sprintf("readat %d", off), err)
			continue
		}
		if !bytes.Equal(b[:n], want) {
			w.fail(p, "ReadAt(%d) differs from Read", off)
		}
	}
	if n, err := ef.ReadAt(make([]byte, 1), size); n != 0 || err != io.EOF {
		w.fail(p, "ReadAt at the size: %d, %v; want 0, io.EOF", n, err)
	}
	// SEEK_DATA / SEEK_HOLE must agree with DataRanges.
	rs, err := ef.DataRanges()
	if err != nil {
		w.err(p, "data ranges", err)
		return
	}
	for i, r := range rs {
		if r.Len <= 0 || r.Off < 0 || r.Off+r.Len > size || (i > 0 && r.Off <= rs[i-1].Off+rs[i-1].Len) {
			w.fail(p, "bad data range %+v of a %d-byte file", r, size)
			return
		}
	}
	if len(rs) > 0 && len(rs) <= 64 {
		d, err := ef.Seek(0, 3) // SEEK_DATA
		if err != nil || d != rs[0].Off {
			w.fail(p, "SEEK_DATA 0 = %d, %v; want %d", d, err, rs[0].Off)
		}
		h, err := ef.Seek(rs[0].Off, 4) // SEEK_HOLE
		if err != nil || h != rs[0].Off+rs[0].Len {
			w.fail(p, "SEEK_HOLE %d = %d, %v; want %d", rs[0].Off, h, err, rs[0].Off+rs[0].Len)
		}
	}
	if size > 0 && len(rs) == 0 {
		if _, err := ef.Seek(0, 3); !errors.Is(err, syscall.ENXIO) {
			w.fail(p, "SEEK_DATA in a file without data: %v, want ENXIO", err)
		}
	}
}

// spotWriter discards what it is given but keeps up to 64 bytes at each
// of its spot offsets.
type spotWriter struct {
	off   int64
	spots []int64
	got   map[int64][]byte
}

func (s *spotWriter) Write(p []byte) (int, error) {
	for _, o := range s.spots {
		if o >= s.off && o < s.off+int64(len(p)) {
			end := min(int64(len(p)), o-s.off+64)
			s.got[o] = append(s.got[o], p[o-s.off:end]...)
		} else if b, ok := s.got[o]; ok && len(b) < 64 && o+int64(len(b)) == s.off {
			s.got[o] = append(b, p[:min(len(p), 64-len(b))]...)
		}
	}
	s.off += int64(len(p))
	return len(p), nil
}

// watchHeap samples the process's live heap every 10 ms until stop is
// called, and fails t if it ever exceeds limit bytes.
func watchHeap(t *testing.T, limit uint64) (stop func()) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	quit := make(chan struct{})
	peak := make(chan uint64, 1)
	go func() {
		var max uint64
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > max {
				max = v
			}
			select {
			case <-quit:
				peak <- max
				return
			case <-tick.C:
			}
		}
	}()
	return func() {
		close(quit)
		if p := <-peak; p > limit {
			runtime.GC()
			metrics.Read(sample)
			t.Errorf("heap reached %d MiB during this image (limit %d MiB; %d MiB live after GC)", p>>20, limit>>20, sample[0].Value.Uint64()>>20)
		}
	}
}
