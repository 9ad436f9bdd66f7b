//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	corpusStall       = 20 * time.Second  // longest time without progress (a hang)
	corpusTimeout     = 120 * time.Second // open + walk + comparison of one image
	corpusHeapCap     = 512 << 20         // live heap of the whole test process
	corpusParallel    = 3                 // images in flight at once
	corpusMemoryLimit = 768 << 20         // debug.SetMemoryLimit while the test runs
)

// corpusShortSample is what -short reads: a fixed mix of clean images (the
// kernel-compared kind), journal, inline-data, ea_inode, htree, bigalloc and
// badly corrupted ones.
var corpusShortSample = []string{
	"d_inline_dump", "f_bad_disconnected_inode", "f_bad_encryption", "f_baddir",
	"f_bigalloc_symlink_with_xattr", "f_convert_bmap_sparse", "f_desc_size_128", "f_dir_bad_csum",
	"f_ea_inode_dir_ref", "f_ea_inode_no_feature", "f_ea_zero_size", "f_extent_too_deep",
	"f_extents", "f_fast_symlink_extents", "f_first_meta_bg_too_big", "f_h_reindex", "f_htree_bad_csum",
	"f_inlinedata_repair", "f_lotsbad", "f_messy_inode", "f_rehash_dir", "f_special_ea",
	"f_uninit_ext_past_eof", "f_verity", "f_zero_xattr", "j_corrupt_commit_csum", "j_recover_fast_commit",
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
	known := map[string]bool{}
	for _, img := range imgs {
		known[img.Name] = true
	}
	for _, n := range corpusShortSample {
		if !known[n] {
			t.Errorf("corpusShortSample names %s, which is not catalogued", n)
		}
	}
	for n := range corpusExceptions {
		if !known[n] {
			t.Errorf("corpusExceptions names %s, which is not catalogued", n)
		}
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

// corpusException documents an image on which ext4go and its oracle (or
// e2fsck's verdict) legitimately differ. Every field lists exact paths.
type corpusException struct {
	why string
	// refuse: the image must be refused when opened (its primary
	// superblock is corrupt although e2fsck -fn exits 0, see why).
	refuse bool
	// corrupt: paths that ext4go and the kernel both refuse (ext4go with
	// ErrCorrupt on some operation, the kernel with an error on lstat,
	// read or llistxattr). They are left out of the comparison.
	corrupt []string
	// kernelRefuses: paths the kernel refuses but ext4go reads; they are
	// left out of the kernel comparison and their contents are compared
	// with what debugfs dump writes.
	kernelRefuses []string
	// badXattrs: paths whose xattrs both sides refuse (ErrCorrupt;
	// the kernel's llistxattr fails); everything else of them is compared.
	badXattrs []string
}

// corpusExceptions are all the documented exceptions.
var corpusExceptions = map[string]corpusException{
	"f_zero_inode_size": {refuse: true, why: "the primary superblock has s_inode_size 0; " +
		"e2fsck -fn says \"Superblock invalid, trying backup blocks\" and checks a backup, so it exits 0; " +
		"the kernel and debugfs refuse the image too"},
	"f_first_meta_bg_too_big": {refuse: true, why: "s_first_meta_bg (2) is beyond the one group descriptor block; " +
		"e2fsck -fn reports \"First_meta_bg is too big. Clear? no\" yet exits 0; " +
		"the kernel (ext4_fill_super: \"first meta block group too large\") and debugfs refuse it too"},
	"f_extent_too_deep": {corrupt: []string{"a"}, why: "file a has an extent tree of depth 7 (the kernel's limit, " +
		"EXT4_MAX_EXTENT_DEPTH, is 5); e2fsck 1.47.0 only offers to make the tree shallower, which -n declines, " +
		"so it exits 0; the kernel fails reads of a with EIO (ext4_ext_check_inode)"},
	"f_ea_zero_size": {badXattrs: []string{"lustre"}, why: "lustre has an xattr whose value lives in EA inode 14 " +
		"but whose size is 0, which ea_inode forbids; the kernel's llistxattr fails with EUCLEAN"},
	"f_ea_inode_no_feature": {kernelRefuses: []string{"xfile"}, badXattrs: []string{"xfile"}, why: "xfile's " +
		"in-inode xattr points to an EA inode but the filesystem lacks the ea_inode feature; the kernel checks the " +
		"in-inode xattr area whenever it loads an inode (__ext4_iget -> xattr_check_inode) and so refuses the " +
		"whole file (lstat: EUCLEAN), while ext4go refuses only the xattrs and still reads the data"},
	"f_ea_inode_dir_ref": {corrupt: []string{"xlink"}, why: "the directory entry xlink names inode 13, an EA inode " +
		"(EXT4_EA_INODE_FL) holding an xattr value; the kernel refuses such a lookup (check_igot_inode: " +
		"\"unexpected EA_INODE flag\", EUCLEAN) and so does ext4go; e2fsck 1.47.0 does not notice"},
	"f_verity": {kernelRefuses: []string{"file"}, why: "file is a fs-verity file; this kernel lacks " +
		"CONFIG_FS_VERITY and fails open with EOPNOTSUPP (where the kernel can open it, it is compared too)"},
}

// corpusImage checks one shared image.
func corpusImage(t *testing.T, img testutil.SharedImage) corpusStat {
	st := corpusStat{name: img.Name}
	image := img.Decompress(t)
	clean := img.FsckExit == 0
	exc := corpusExceptions[img.Name]
	if exc.why != "" {
		t.Logf("documented exception: %s", exc.why)
	}

	// The oracle, prepared before the timed part (it needs t).
	var oracle corpusOracleDir
	var copts testutil.CompareOptions
	dumps := map[string]string{} // path -> debugfs dump of it
	if clean && !exc.refuse {
		oracle, copts = corpusOracle(t, img, image)
		copts.SkipPaths = append(copts.SkipPaths, exc.corrupt...)
		copts.SkipPaths = append(copts.SkipPaths, exc.kernelRefuses...)
		for _, p := range exc.kernelRefuses {
			dst := filepath.Join(t.TempDir(), "dump")
			testutil.Debugfs(t, image, fmt.Sprintf("dump /%s %s", p, dst))
			dumps[p] = dst
		}
	}

	stop := watchHeap(t, corpusHeapCap)
	defer stop()
	done := make(chan *corpusResult, 1)
	var prog atomic.Int64
	go func() {
		defer func() { // a panic here would kill the test process
			if p := recover(); p != nil {
				done <- &corpusResult{fails: []string{fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}}
			}
		}()
		done <- corpusCheck(img, image, exc, oracle, copts, dumps, &prog)
	}()
	r := awaitProgress(t, done, &prog, corpusStall, corpusTimeout)
	for _, l := range r.log {
		t.Log(l)
	}
	for _, f := range r.fails {
		t.Error(f)
	}
	if len(r.diffs) > 0 {
		t.Errorf("differs from %s (got = ext4go, want = oracle):\n%s", oracle.name(), strings.Join(r.diffs, "\n"))
	}
	st.outcome, st.errs = r.outcome, r.errs
	return st
}

// corpusResult is what corpusCheck found; it never touches the *testing.T
// (it runs in a goroutine the test may abandon on a timeout).
type corpusResult struct {
	outcome string
	errs    int
	log     []string
	fails   []string
	diffs   []string
}

func (r *corpusResult) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (r *corpusResult) failf(format string, args ...any) {
	r.fails = append(r.fails, fmt.Sprintf(format, args...))
}

// corpusCheck opens and walks image and compares it with the oracle
// directory, if any.
func corpusCheck(img testutil.SharedImage, image string, exc corpusException, oracle corpusOracleDir, copts testutil.CompareOptions, dumps map[string]string, prog *atomic.Int64) *corpusResult {
	r := &corpusResult{}
	clean := img.FsckExit == 0
	fsys, opts, err := openCorpus(image)
	if err != nil {
		r.outcome = "refused"
		r.logf("refused: %v", err)
		if !typedErr(err) {
			r.failf("open: untyped error %T: %v", err, err)
		}
		if clean && !exc.refuse {
			r.failf("e2fsck -fn finds the image clean but open refuses it: %v", err)
		}
		if exc.refuse && !errors.Is(err, ext4go.ErrCorrupt) {
			r.failf("open: want ErrCorrupt, got %v", err)
		}
		return r
	}
	defer fsys.Close()
	if exc.refuse {
		r.failf("opened an image whose primary superblock is corrupt")
	}
	r.outcome = describeOpts(opts)
	start := time.Now()
	w := walkFS(fsys, corpusWalkLimits, prog)
	r.errs = len(w.errs)
	r.fails = append(r.fails, w.fails...)
	r.logf("%s: %s; took %v", r.outcome, w.summary(), time.Since(start).Round(time.Millisecond))
	for i, e := range w.errs {
		if i == 5 {
			r.logf("  ... %d more walk errors", len(w.errs)-i)
			break
		}
		r.logf("  walk error: %s", e)
	}
	// With checksums verified the walk stops at every structure with a bad
	// checksum; walk what lies behind them too.
	if w.checksumErrs > 0 && !opts.IgnoreChecksums {
		o2 := *opts
		o2.IgnoreChecksums = true
		if f2, err := ext4go.Open(image, &o2); err != nil {
			if !typedErr(err) {
				r.failf("open with IgnoreChecksums: untyped error %T: %v", err, err)
			}
		} else {
			w2 := walkFS(f2, corpusRewalkLimits, prog)
			f2.Close()
			r.fails = append(r.fails, w2.fails...)
			r.logf("again with IgnoreChecksums: %s", w2.summary())
		}
	}
	if !clean {
		return r
	}
	// A clean image: errors only where documented, and as the oracle.
	expected := append(append([]string(nil), exc.corrupt...), exc.badXattrs...)
	seen := map[string]bool{}
	for _, e := range w.errs {
		if !slices.Contains(expected, e.path) {
			r.failf("e2fsck -fn finds the image clean but the walk failed: %s", e)
			continue
		}
		seen[e.path] = true
		if !errors.Is(e.err, ext4go.ErrCorrupt) {
			r.failf("%s: want an ErrCorrupt", e)
		}
	}
	for _, p := range expected {
		if !seen[p] {
			r.failf("%q: documented as corrupt but the walk read it without an error", p)
		}
	}
	if oracle.dir == "" {
		return r
	}
	start = time.Now()
	if !oracle.kernel {
		// rdump writes no devices, fifos or sockets: leave ours out.
		copts.SkipPaths = append(slices.Clip(copts.SkipPaths), specialFiles(fsys)...)
	}
	co := copts
	co.SkipPaths = append(slices.Clip(co.SkipPaths), exc.badXattrs...)
	pfs := progressFS{fsys, prog}
	r.diffs = testutil.DiffFS(pfs, oracle.dir, co)
	if len(exc.badXattrs) > 0 {
		// Everything but the xattrs of those paths.
		co = copts
		co.Checks &^= testutil.CheckXattrs
		co.Meta = func(fi fs.FileInfo) (testutil.Meta, bool) {
			m, ok := meta(fi)
			_, isStat := fi.Sys().(*ext4go.Stat)
			return m, ok || isStat // ok is false when only the xattrs failed
		}
		r.diffs = append(r.diffs, testutil.DiffFS(pfs, oracle.dir, co)...)
	}
	r.logf("comparison with %s took %v", oracle.name(), time.Since(start).Round(time.Millisecond))
	if !oracle.kernel {
		return r // the exceptions describe the kernel
	}
	// The kernel must refuse what is documented as corrupt.
	for _, p := range exc.corrupt {
		if oerr := oracleRefuses(filepath.Join(oracle.dir, p)); oerr == nil {
			r.failf("%q: documented as refused by the kernel too, but it reads it", p)
		} else {
			r.logf("%q: the kernel refuses it too: %v", p, oerr)
		}
	}
	for _, p := range exc.badXattrs {
		if _, err := testutil.HostMeta(filepath.Join(oracle.dir, p)); err == nil {
			r.failf("%q: documented as having corrupt xattrs, but the kernel lists them", p)
		}
	}
	// What only the kernel refuses: ext4go must read it as debugfs does.
	for _, p := range exc.kernelRefuses {
		if oerr := oracleRefuses(filepath.Join(oracle.dir, p)); oerr == nil {
			r.logf("%q: the kernel reads it here; compared with the mount", p)
			co := copts
			co.SkipPaths = nil
			co.Checks &^= testutil.CheckXattrs
			r.diffs = append(r.diffs, testutil.DiffFS(pfs, oracle.dir, co)...)
		} else {
			r.logf("%q: the kernel refuses it: %v", p, oerr)
		}
		want, err := os.ReadFile(dumps[p])
		if err != nil {
			r.failf("%q: debugfs dump: %v", p, err)
			continue
		}
		got, err := fs.ReadFile(fsys, p)
		if err != nil {
			r.failf("%q: %v", p, err)
		} else if !bytes.Equal(got, want) {
			r.failf("%q: contents differ from debugfs dump (%d bytes, want %d)", p, len(got), len(want))
		}
	}
	return r
}

// oracleRefuses returns the error a host directory (a kernel mount) gives
// for lstat, reading or listing the xattrs of p, or nil if all work.
func oracleRefuses(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	if fi.Mode().IsRegular() {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	_, err = testutil.HostMeta(p)
	return err
}

// corpusOracleDir is a directory showing what an image holds.
type corpusOracleDir struct {
	dir    string // "" if there is none
	kernel bool   // a kernel mount; else debugfs rdump output
}

func (o corpusOracleDir) name() string {
	if o.kernel {
		return "the kernel's read-only mount"
	}
	return "debugfs rdump"
}

// corpusOracle returns the directory that shows what a clean image holds
// and how to compare with it: the kernel's read-only mount where the
// catalog says the kernel mounts the image, else a debugfs rdump (always
// with EXT4GO_CORPUS_ORACLE=rdump in the environment, to exercise that
// path). Both show the whole tree, lost+found and the root included; with
// the kernel everything but atime and ctime is compared, with rdump what it
// keeps (see the testutil package doc).
func corpusOracle(t *testing.T, img testutil.SharedImage, image string) (corpusOracleDir, testutil.CompareOptions) {
	useRdump := os.Getenv("EXT4GO_CORPUS_ORACLE") == "rdump"
	if img.KernelMounts == "yes" && !useRdump {
		if ok, reason := testutil.CanMount(); ok {
			mp := testutil.Mount(t, image, true)
			return corpusOracleDir{mp, true}, testutil.CompareOptions{Checks: testutil.CheckAll, CheckRoot: true, Meta: meta}
		} else {
			t.Logf("kernel comparison impossible (%s): using debugfs rdump", reason)
		}
	}
	if img.HasFeature("inline_data") {
		t.Logf("no oracle: debugfs rdump writes inline-data files as their whole 60-byte inline area")
		return corpusOracleDir{}, testutil.CompareOptions{}
	}
	if out := testutil.Debugfs(t, image, "stats"); !strings.Contains(out, "Filesystem volume name") {
		t.Logf("no oracle: debugfs cannot open the image")
		return corpusOracleDir{}, testutil.CompareOptions{}
	}
	dst := t.TempDir()
	testutil.DebugfsRdump(t, image, "/", dst)
	co := testutil.RdumpCompareOptions()
	co.Meta = meta
	co.SkipPaths = nil // lost+found is on both sides here
	return corpusOracleDir{dst, false}, co
}

// specialFiles lists the devices, fifos and sockets of fsys.
func specialFiles(fsys fs.FS) []string {
	var out []string
	fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket) != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// openCorpus opens image with the default options, adding IgnoreChecksums
// or IgnoreJournal when it is refused for a bad checksum or a journal that
// needs recovery.
//
// An image whose journal ext4go replays is compared in its on-disk state
// (IgnoreJournal): the oracles (debugfs, a read-only kernel mount) show
// that one. That the replay is right is shown by TestReplayMatchesKernel
// and internal/jbd2's TestRecoverMatchesE2fsck.
func openCorpus(image string) (*ext4go.FS, *ext4go.Options, error) {
	opts := &ext4go.Options{}
	for {
		fsys, err := ext4go.Open(image, opts)
		if err == nil && fsys.Replay() != nil && !opts.IgnoreJournal {
			fsys.Close()
			opts.IgnoreJournal = true
			continue
		}
		if err == nil {
			return fsys, opts, nil
		}
		switch {
		case errors.Is(err, ext4go.ErrChecksum) && !opts.IgnoreChecksums:
			opts.IgnoreChecksums = true
		case (needsRecovery(err) || errors.Is(err, ext4go.ErrJournalReplay)) && !opts.IgnoreJournal:
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
	fullPerDir  int   // entries of a directory checked with every path operation
	sampleEvery int   // of the rest, every sampleEvery-th is checked so too
}

var (
	corpusWalkLimits = walkLimits{maxEntries: 200_000, maxFileRead: 256 << 20, maxRead: 1 << 30,
		fullPerDir: 1000, sampleEvery: 50}
	// The second walk, with IgnoreChecksums, is lighter: it only adds the
	// parts the first walk could not read for their checksums.
	corpusRewalkLimits = walkLimits{maxEntries: 200_000, maxFileRead: 256 << 20, maxRead: 1 << 30,
		fullPerDir: 200, sampleEvery: 500}
)

// walkErr is a typed error a walk met.
type walkErr struct {
	path, op string
	err      error
}

func (e walkErr) String() string { return fmt.Sprintf("%q: %s: %v", e.path, e.op, e.err) }

// walkResult is what walkFS saw.
type walkResult struct {
	entries, dirs, files, symlinks, other int
	bytes                                 int64
	errs                                  []walkErr // typed errors: expected on corrupt images
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
		w.errs = append(w.errs, walkErr{p, op, err})
	}
}

func (w *walkResult) fail(p, format string, args ...any) {
	w.fails = append(w.fails, fmt.Sprintf("%q: ", p)+fmt.Sprintf(format, args...))
}

// walkFS visits everything in fsys with every read API: fs.WalkDir from
// the root, and for each entry Lstat, the ext4 Stat and its xattrs,
// ListXattr/GetXattr, Stat, ReadLink, Extents, whole-file reads by Read and
// spot checks by ReadAt, and SEEK_DATA/SEEK_HOLE. Directories already seen
// (a corrupt image may link one into itself) are not entered again.
//
// Every path operation looks each path element up again, and in a
// directory whose htree index is broken a lookup is a linear scan (as in
// the kernel), so a walk doing everything by path in a directory of n
// entries costs O(n²) block parses. Beyond the first lim.fullPerDir entries
// of a directory, entries are therefore checked through their DirEntry
// (Info, Xattrs) and only every lim.sampleEvery-th one by path as well.
// prog counts the entries visited, for the hang detector.
func walkFS(fsys *ext4go.FS, lim walkLimits, prog *atomic.Int64) *walkResult {
	w := &walkResult{}
	seenDirs := map[uint32]bool{}
	perDir := map[string]int{}
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
		k := perDir[path.Dir(p)]
		perDir[path.Dir(p)] = k + 1
		full := k < lim.fullPerDir || k%lim.sampleEvery == 0
		prog.Add(1)
		var fi fs.FileInfo
		if full || p == "." {
			fi, err = fsys.Lstat(p)
			if err != nil {
				w.err(p, "lstat", err)
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if fi.Name() != path.Base(p) && p != "." {
				w.fail(p, "Lstat name %q", fi.Name())
			}
		}
		if p != "." {
			di, err := d.Info()
			if err != nil {
				w.err(p, "dirent info", err)
				if fi == nil {
					return nil
				}
			} else {
				if fi != nil && di.Mode() != fi.Mode() && !duplicateName(fsys, p) {
					w.fail(p, "DirEntry.Info mode %v (inode %d), Lstat mode %v (inode %d)",
						di.Mode(), di.Sys().(*ext4go.Stat).Ino, fi.Mode(), fi.Sys().(*ext4go.Stat).Ino)
				}
				if fi == nil {
					fi = di
				}
			}
		}
		st, ok := fi.Sys().(*ext4go.Stat)
		if !ok {
			w.fail(p, "Sys() is %T, not *ext4go.Stat", fi.Sys())
			return nil
		}
		xa, err := st.Xattrs()
		w.err(p, "xattrs", err)
		if fi.IsDir() {
			w.dirs++
			if seenDirs[st.Ino] {
				return fs.SkipDir
			}
			seenDirs[st.Ino] = true
		}
		if !full {
			return nil
		}
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
			// A dangling or looping link is no error of the image.
			if sfi, err := fsys.Stat(p); err != nil {
				if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
					w.err(p, "stat (follow)", err)
				}
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
	for _, o := range []int64{size / 2, size - 1} {
		if o > spots[len(spots)-1] {
			spots = append(spots, o)
		}
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

// awaitProgress waits for done while prog keeps moving: it fails t (with
// every goroutine's stack) if prog stays still for stall, which is a hang,
// or the whole run exceeds total.
func awaitProgress[R any](t testing.TB, done <-chan R, prog *atomic.Int64, stall, total time.Duration) R {
	t.Helper()
	start := time.Now()
	last, lastMove := prog.Load(), time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-done:
			return r
		case now := <-tick.C:
			if p := prog.Load(); p != last {
				last, lastMove = p, now
			}
			var why string
			switch {
			case now.Sub(lastMove) > stall:
				why = fmt.Sprintf("no progress for %v (a hang?)", stall)
			case now.Sub(start) > total:
				why = fmt.Sprintf("still running after %v", total)
			default:
				continue
			}
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%s after %d steps; goroutines:\n%s", why, last, buf)
		}
	}
}

// progressFS counts the operations a comparison makes on an FS, for
// awaitProgress.
type progressFS struct {
	fsys *ext4go.FS
	prog *atomic.Int64
}

func (p progressFS) Open(name string) (fs.File, error) {
	p.prog.Add(1)
	return p.fsys.Open(name)
}

func (p progressFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p.prog.Add(1)
	return p.fsys.ReadDir(name)
}

func (p progressFS) Stat(name string) (fs.FileInfo, error) {
	p.prog.Add(1)
	return p.fsys.Stat(name)
}

func (p progressFS) Lstat(name string) (fs.FileInfo, error) {
	p.prog.Add(1)
	return p.fsys.Lstat(name)
}

func (p progressFS) ReadLink(name string) (string, error) {
	p.prog.Add(1)
	return p.fsys.ReadLink(name)
}

// duplicateName reports whether the directory holding p lists p's name
// more than once (a corrupt directory): then a lookup finds one of the
// entries and a listing shows both.
func duplicateName(fsys *ext4go.FS, p string) bool {
	ents, err := fsys.ReadDir(path.Dir(p))
	if err != nil {
		return false
	}
	n := 0
	for _, e := range ents {
		if e.Name() == path.Base(p) {
			n++
		}
	}
	return n > 1
}
