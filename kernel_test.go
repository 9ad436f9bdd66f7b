package ext4go_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// This file reads files the Linux kernel wrote, which are shaped as mke2fs
// -d never shapes them: deep extent trees of a fragmented file, unwritten
// extents from fallocate, holes from punching, shifted extents from
// collapse/insert range, a two-level htree, EA inodes, shared xattr blocks,
// timestamps with nanoseconds and epoch bits. Each image is written through
// a read-write loop mount, unmounted, checked with e2fsck, and then read by
// ext4go and compared with the kernel's own read-only mount of it.

// kernelConfig is one mke2fs configuration the kernel writes into.
type kernelConfig struct {
	name      string
	blockSize int
	features  string // mke2fs -O
	fragments int    // blocks of the fragmented file: enough for extent depth 2
	bigDir    int    // entries of the big directory
	eaInode   bool   // an xattr value larger than a block (needs ea_inode)
}

var kernelConfigs = []kernelConfig{
	// 4 KiB blocks: the root holds 4 index entries, a leaf 340 extents, so
	// more than 1360 extents need depth 2.
	{name: "4k", blockSize: 4096, features: "metadata_csum,^ea_inode", fragments: 1500, bigDir: 20000},
	// 1 KiB blocks: leaves of 84 extents (depth 2 beyond 336) and htree
	// roots of 123 entries (20 000 names need two levels); ea_inode and
	// large_dir on.
	{name: "1k", blockSize: 1024, features: "metadata_csum,ea_inode,large_dir", fragments: 400, bigDir: 20000, eaInode: true},
}

// TestKernelWritten has the kernel write every kind of file into fresh
// images and checks that ext4go reads them exactly as the kernel does.
func TestKernelWritten(t *testing.T) {
	testutil.RequireMount(t)
	for _, cfg := range kernelConfigs {
		if testing.Short() && cfg.blockSize != 1024 {
			continue // 1 KiB blocks reach every shape sooner
		}
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			image := filepath.Join(t.TempDir(), "kernel.img")
			testutil.Mke2fs(t, image, 256<<20, "-t", "ext4", "-b", strconv.Itoa(cfg.blockSize),
				"-O", cfg.features, "-N", "32768")
			var files kernelFiles
			t.Run("write", func(t *testing.T) {
				// A subtest, so that its cleanup unmounts before the
				// image is read.
				mp := testutil.Mount(t, image, false)
				files = kernelPopulate(t, mp, cfg)
			})
			if t.Failed() {
				return
			}
			testutil.RequireFsckClean(t, image)

			fsys := openImage(t, image)
			mp := testutil.Mount(t, image, true)

			// Everything: names, types, sizes, contents, modes, owners,
			// nanosecond mtimes, nlink and hard-link groups, device
			// numbers, xattrs (ACLs in their xattr form), the root too.
			co := testutil.CompareOptions{Checks: testutil.CheckAll, CheckRoot: true, Meta: meta}
			testutil.CompareFS(t, fsys, mp, co)

			// Every read API over the whole tree, without errors.
			w := walkFS(fsys, corpusWalkLimits, new(atomic.Int64))
			for _, f := range w.fails {
				t.Error(f)
			}
			for _, e := range w.errs {
				t.Errorf("walk: %s", e)
			}
			t.Logf("walk: %s", w.summary())

			for _, p := range files.extentChecked {
				checkExtents(t, fsys, image, p)
				checkDataRanges(t, fsys, mp, p)
			}
			// The kernel shares identical xattr blocks (mbcache).
			var acl []uint64
			for _, n := range []string{"xattrs/block1", "xattrs/block2"} {
				if fi, err := fsys.Lstat(n); err == nil {
					acl = append(acl, fi.Sys().(*ext4go.Stat).FileACL)
				}
			}
			t.Logf("xattr blocks of xattrs/block1 and block2: %v", acl)
			if d := extentDepth(t, image, files.fragmented); d < 2 {
				t.Errorf("%s: extent depth %d, want at least 2 (the test no longer covers deep trees)", files.fragmented, d)
			} else {
				t.Logf("%s: extent depth %d", files.fragmented, d)
			}
			if lv := htreeLevels(t, image, files.bigDir); cfg.blockSize == 1024 && lv < 2 {
				t.Errorf("%s: htree of %d levels, want 2", files.bigDir, lv)
			} else {
				t.Logf("%s: htree of %d levels", files.bigDir, lv)
			}
		})
	}
}

// kernelFiles names what kernelPopulate made that needs extra checks.
type kernelFiles struct {
	fragmented    string
	bigDir        string
	extentChecked []string // compared with debugfs ex and SEEK_DATA/SEEK_HOLE
}

// kernelPopulate writes the test tree into the read-write mount mp.
func kernelPopulate(t *testing.T, mp string, cfg kernelConfig) kernelFiles {
	bs := int64(cfg.blockSize)
	rng := rand.New(rand.NewPCG(uint64(bs), 7))
	randBytes := func(n int64) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	p := func(rel string) string { return filepath.Join(mp, rel) }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	openW := func(rel string) *os.File {
		t.Helper()
		f, err := os.OpenFile(p(rel), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		check(err)
		return f
	}
	pwrite := func(f *os.File, b []byte, off int64) {
		t.Helper()
		_, err := f.WriteAt(b, off)
		check(err)
	}
	fallocate := func(f *os.File, mode uint32, off, n int64) {
		t.Helper()
		if err := unix.Fallocate(int(f.Fd()), mode, off, n); err != nil {
			t.Fatalf("fallocate(%s, %#x, %d, %d): %v", f.Name(), mode, off, n, err)
		}
	}
	var files kernelFiles

	// A fragmented file: one block written every other block, so that
	// every block is an extent of its own (holes between), deep enough
	// for an extent tree of depth 2.
	f := openW("fragmented")
	for i := 0; i < cfg.fragments; i++ {
		pwrite(f, randBytes(bs), int64(i)*2*bs)
	}
	check(f.Close())
	files.fragmented = "fragmented"

	// fallocate without KEEP_SIZE: unwritten extents, then writes that
	// split them (a whole block and a few bytes inside one).
	f = openW("falloc")
	fallocate(f, 0, 0, 64*bs)
	pwrite(f, randBytes(bs), 10*bs)
	pwrite(f, []byte("in the middle of an unwritten extent"), 40*bs+100)
	check(f.Close())

	// fallocate with KEEP_SIZE: unwritten extents beyond the end of file.
	f = openW("falloc-keepsize")
	fallocate(f, unix.FALLOC_FL_KEEP_SIZE, 0, 128*bs)
	pwrite(f, randBytes(5000), 0)
	check(f.Close())

	// Written data reshaped: punch a hole, zero a range (unwritten
	// extents), collapse a range and insert one (extents shifted).
	f = openW("reshaped")
	pwrite(f, randBytes(256*bs), 0)
	check(f.Sync())
	fallocate(f, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 20*bs, 30*bs)
	fallocate(f, unix.FALLOC_FL_ZERO_RANGE, 100*bs, 25*bs)
	fallocate(f, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 150*bs+100, 3*bs) // partial blocks zeroed
	check(f.Sync())
	fallocate(f, unix.FALLOC_FL_COLLAPSE_RANGE, 60*bs, 8*bs)
	fallocate(f, unix.FALLOC_FL_INSERT_RANGE, 4*bs, 16*bs)
	pwrite(f, []byte("tail"), 400*bs+3)
	check(f.Close())

	// A sparse file over 4 GiB: data at the start, across the 4 GiB
	// offset and at the end of its 6 GiB.
	f = openW("sparse")
	pwrite(f, []byte("start"), 0)
	pwrite(f, randBytes(64<<10), 4<<30-32<<10)
	pwrite(f, []byte("end"), 6<<30-3)
	check(f.Close())

	files.extentChecked = []string{"fragmented", "falloc", "falloc-keepsize", "reshaped", "sparse"}

	// Plain files: empty, one byte, a partial last block.
	check(os.WriteFile(p("empty"), nil, 0o600))
	check(os.WriteFile(p("one"), []byte("1"), 0o644))
	check(os.WriteFile(p("partial"), randBytes(3*bs+17), 0o640))

	// A big directory: files and hard links with names of varying length
	// make an htree (two levels on 1 KiB blocks).
	check(os.Mkdir(p("bigdir"), 0o755))
	check(os.WriteFile(p("bigdir/target"), []byte("linked many times"), 0o644))
	for i := 0; i < cfg.bigDir; i++ {
		name := p(fmt.Sprintf("bigdir/entry-%05d-%s", i, strings.Repeat("n", i%40)))
		if i%4 == 0 {
			check(os.WriteFile(name, nil, 0o644))
		} else {
			check(os.Link(p("bigdir/target"), name))
		}
	}
	files.bigDir = "bigdir"

	// Symlinks: fast (in i_block), slow up to the longest the kernel
	// allows (a block minus the NUL), dangling, absolute, to a directory.
	check(os.Mkdir(p("links"), 0o755))
	check(os.Symlink("../one", p("links/fast")))
	check(os.Symlink(strings.Repeat("s", 59), p("links/fast-59")))
	check(os.Symlink(strings.Repeat("l", 60), p("links/slow-60")))
	check(os.Symlink("/"+strings.Repeat("long/", int(bs-2)/5), p("links/slow-max")))
	check(os.Symlink("no/such/target", p("links/dangling")))
	check(os.Symlink("/bigdir", p("links/to-dir")))

	// Hard links within and across directories.
	check(os.MkdirAll(p("hard/a"), 0o755))
	check(os.MkdirAll(p("hard/b"), 0o755))
	check(os.WriteFile(p("hard/a/file"), []byte("hard linked"), 0o644))
	check(os.Link(p("hard/a/file"), p("hard/a/again")))
	check(os.Link(p("hard/a/file"), p("hard/b/file")))

	// Extended attributes: small ones in the inode, large ones in the
	// xattr block, identical sets on two files (which share one block),
	// trusted.*, on a directory and a symlink, a POSIX ACL, and with
	// ea_inode a value larger than a block (in its own inode).
	check(os.Mkdir(p("xattrs"), 0o755))
	setx := func(rel, name string, v []byte) {
		t.Helper()
		if err := unix.Lsetxattr(p(rel), name, v, 0); err != nil {
			t.Fatalf("setxattr %s %s (%d bytes): %v", rel, name, len(v), err)
		}
	}
	check(os.WriteFile(p("xattrs/small"), []byte("x"), 0o644))
	setx("xattrs/small", "user.a", []byte("1"))
	setx("xattrs/small", "trusted.t", []byte("trusted value"))
	setx("xattrs/small", "user.empty", nil)
	big := randBytes(bs / 2)
	for _, n := range []string{"xattrs/block1", "xattrs/block2"} {
		check(os.WriteFile(p(n), []byte(n), 0o644))
		setx(n, "user.in-inode", []byte("short"))
		setx(n, "user.big", big)
		setx(n, "trusted.big", big[:bs/4])
	}
	check(os.WriteFile(p("xattrs/many"), nil, 0o644))
	for i := 0; i < int(bs/150); i++ { // what fits the inode and one block
		setx("xattrs/many", fmt.Sprintf("user.attr%02d", i), []byte(strings.Repeat("v", i)))
	}
	setx("xattrs", "user.on-dir", []byte("dir value"))
	check(os.Symlink("small", p("xattrs/link")))
	setx("xattrs/link", "trusted.on-link", []byte("link value"))
	check(os.WriteFile(p("xattrs/acl"), nil, 0o640))
	setx("xattrs/acl", "system.posix_acl_access", posixACLXattr(
		[3]uint32{0x01, 6, 0xffffffff}, [3]uint32{0x02, 4, 1000}, [3]uint32{0x04, 4, 0xffffffff},
		[3]uint32{0x10, 4, 0xffffffff}, [3]uint32{0x20, 0, 0xffffffff}))
	check(os.Mkdir(p("xattrs/acldir"), 0o750))
	setx("xattrs/acldir", "system.posix_acl_default", posixACLXattr(
		[3]uint32{0x01, 7, 0xffffffff}, [3]uint32{0x04, 5, 0xffffffff}, [3]uint32{0x20, 0, 0xffffffff}))
	check(os.WriteFile(p("xattrs/acldir/inherits"), nil, 0o666))
	if cfg.eaInode {
		check(os.WriteFile(p("xattrs/ea-inode"), []byte("value in an EA inode"), 0o644))
		setx("xattrs/ea-inode", "user.huge", randBytes(20000))
		setx("xattrs/ea-inode", "trusted.max", randBytes(65536))
	}

	// Special files.
	check(os.Mkdir(p("special"), 0o755))
	check(unix.Mknod(p("special/char"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	check(unix.Mknod(p("special/block"), unix.S_IFBLK|0o660, int(unix.Mkdev(8, 1))))
	check(unix.Mknod(p("special/char-big"), unix.S_IFCHR|0o644, int(unix.Mkdev(4095, 1048575))))
	check(unix.Mknod(p("special/block-256"), unix.S_IFBLK|0o644, int(unix.Mkdev(256, 256))))
	check(unix.Mkfifo(p("special/fifo"), 0o644))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p("special/socket"), Net: "unix"})
	check(err)
	l.SetUnlinkOnClose(false)
	check(l.Close())

	// Owners, modes and times the kernel stores with nanoseconds and the
	// extra epoch bits.
	check(os.Mkdir(p("meta"), 0o755))
	for i, c := range []struct {
		name  string
		perm  os.FileMode
		uid   uint32
		mtime time.Time
	}{
		{"ns", 0o644, 1000, time.Unix(1700000000, 123456789)},
		{"pre1970", 0o600, 65534, time.Unix(-1000000, 999999999)},
		{"y1901", 0o444, 0, time.Unix(-1<<31, 1)},
		{"y2038", 0o755 | os.ModeSetuid, 70000, time.Unix(1<<31, 500)},
		{"y2100", 0o700 | os.ModeSetgid, 1 << 31, time.Date(2100, 1, 1, 0, 0, 0, 7, time.UTC)},
		{"y2446", 0o1777, 4294967294, time.Date(2446, 5, 10, 22, 38, 55, 999999999, time.UTC)},
	} {
		name := p("meta/" + c.name)
		check(os.WriteFile(name, []byte(c.name), 0o600))
		// int(c.uid) wraps past 1<<31 on 32-bit platforms; the system
		// call takes the same 32 bits back.
		check(os.Chown(name, int(c.uid), 100+i))
		check(os.Chmod(name, c.perm))
		check(os.Chtimes(name, c.mtime.Add(-time.Hour), c.mtime))
	}
	ts := []unix.Timespec{unix.NsecToTimespec(1600000000123456789), unix.NsecToTimespec(1600000000987654321)}
	check(os.Symlink("ns", p("meta/link")))
	check(unix.UtimesNanoAt(unix.AT_FDCWD, p("meta/link"), ts, unix.AT_SYMLINK_NOFOLLOW))
	check(os.Lchown(p("meta/link"), 123, 456))
	check(unix.UtimesNanoAt(unix.AT_FDCWD, p("meta"), ts, 0))
	return files
}

// posixACLXattr encodes a POSIX ACL in the kernel's xattr form (version 2,
// then tag, perm, id per entry).
func posixACLXattr(entries ...[3]uint32) []byte {
	b := []byte{2, 0, 0, 0}
	for _, e := range entries {
		b = append(b, byte(e[0]), byte(e[0]>>8), byte(e[1]), byte(e[1]>>8),
			byte(e[2]), byte(e[2]>>8), byte(e[2]>>16), byte(e[2]>>24))
	}
	return b
}

// debugfsExtent is one line of "debugfs -R 'ex FILE'".
type debugfsExtent struct {
	level, depth int
	logical      uint64
	lastLogical  uint64
	physical     uint64
	length       uint64
	unwritten    bool
}

// Level Entries Logical Physical Length Flags, e.g.
// " 2/ 2   1/ 84     0 -     0  9217 -  9217      1 Uninit" (a leaf) or
// " 0/ 2   1/  1     0 -   798  8455            799" (an index entry).
var exLine = regexp.MustCompile(`^\s*(\d+)/\s*(\d+)\s+\d+/\s*\d+\s+(\d+)\s+-\s+(\d+)\s+(\d+)(?:\s+-\s+\d+)?\s+(\d+)\s*(Uninit)?\s*$`)

// debugfsExtents returns the extent tree of file (an absolute path in the
// image) as debugfs prints it: index entries and leaf extents.
func debugfsExtents(t *testing.T, image, file string) []debugfsExtent {
	t.Helper()
	q, ok := testutil.DebugfsQuote(file)
	if !ok {
		t.Fatalf("cannot quote %q for debugfs", file)
	}
	out := testutil.Debugfs(t, image, "ex "+q)
	var es []debugfsExtent
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "Level") || strings.TrimSpace(line) == "" {
			continue
		}
		m := exLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("debugfs ex %s: cannot parse %q", file, line)
		}
		n := func(i int) uint64 {
			v, err := strconv.ParseUint(m[i], 10, 64)
			if err != nil {
				t.Fatalf("debugfs ex %s: %q: %v", file, line, err)
			}
			return v
		}
		es = append(es, debugfsExtent{level: int(n(1)), depth: int(n(2)), logical: n(3), lastLogical: n(4),
			physical: n(5), length: n(6), unwritten: m[7] != ""})
	}
	return es
}

// extentDepth is the depth of file's extent tree as debugfs reports it.
func extentDepth(t *testing.T, image, file string) int {
	es := debugfsExtents(t, image, "/"+file)
	if len(es) == 0 {
		return -1
	}
	return es[0].depth
}

// checkExtents compares ext4go's Extents of file with the leaf extents
// debugfs lists, merged as Extents merges them (logically and physically
// continuous, same unwritten flag).
func checkExtents(t *testing.T, fsys *ext4go.FS, image, file string) {
	t.Helper()
	var want []ext4go.Extent
	for _, e := range debugfsExtents(t, image, "/"+file) {
		if e.level != e.depth {
			continue // an index entry
		}
		if e.lastLogical-e.logical+1 != e.length {
			t.Errorf("%s: debugfs extent %+v: logical range and length disagree", file, e)
		}
		x := ext4go.Extent{Logical: e.logical, Physical: e.physical, Length: e.length, Unwritten: e.unwritten}
		if k := len(want) - 1; k >= 0 {
			p := &want[k]
			if p.Unwritten == x.Unwritten && p.Logical+p.Length == x.Logical && p.Physical+p.Length == x.Physical {
				p.Length += x.Length
				continue
			}
		}
		want = append(want, x)
	}
	got, err := fsys.Extents(file)
	if err != nil {
		t.Errorf("Extents(%s): %v", file, err)
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("Extents(%s) differ from debugfs ex:\n got %d: %v\nwant %d: %v", file, len(got), head(got), len(want), head(want))
	}
	unwritten := 0
	for _, e := range got {
		if e.Unwritten {
			unwritten++
		}
	}
	t.Logf("%s: %d extents (%d unwritten) as debugfs lists them", file, len(got), unwritten)
}

func head(es []ext4go.Extent) string {
	if len(es) > 12 {
		return fmt.Sprint(es[:12]) + "..."
	}
	return fmt.Sprint(es)
}

// checkDataRanges compares ext4go's data ranges of file (DataRanges, and
// Seek with SEEK_DATA/SEEK_HOLE) with the kernel's SEEK_DATA/SEEK_HOLE on
// its read-only mount, where unwritten extents are holes too.
func checkDataRanges(t *testing.T, fsys *ext4go.FS, mp, file string) {
	t.Helper()
	want, err := hostDataRanges(filepath.Join(mp, file))
	if err != nil {
		t.Errorf("%s: kernel SEEK_DATA: %v", file, err)
		return
	}
	f, err := fsys.Open(file)
	if err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	defer f.Close()
	ef := f.(*ext4go.File)
	got, err := ef.DataRanges()
	if err != nil {
		t.Errorf("%s: DataRanges: %v", file, err)
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: DataRanges\n got %v\nwant %v (the kernel's SEEK_DATA/SEEK_HOLE)", file, got, want)
	}
	// Seek must walk the same ranges.
	var seeked []ext4go.Range
	for off := int64(0); ; {
		d, err := ef.Seek(off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			t.Errorf("%s: Seek(%d, SEEK_DATA): %v", file, off, err)
			return
		}
		h, err := ef.Seek(d, unix.SEEK_HOLE)
		if err != nil {
			t.Errorf("%s: Seek(%d, SEEK_HOLE): %v", file, d, err)
			return
		}
		seeked = append(seeked, ext4go.Range{Off: d, Len: h - d})
		off = h
	}
	if !slices.Equal(seeked, want) {
		t.Errorf("%s: SEEK_DATA/SEEK_HOLE\n got %v\nwant %v", file, seeked, want)
	}
	// Negative offsets are past the data as the kernel sees it (xfstests
	// generic/448).
	for _, whence := range []int{unix.SEEK_DATA, unix.SEEK_HOLE} {
		if _, err := ef.Seek(-1, whence); !errors.Is(err, syscall.ENXIO) {
			t.Errorf("%s: Seek(-1, %d): %v, want ENXIO", file, whence, err)
		}
	}
}

// hostDataRanges lists the data ranges of a host file with lseek.
func hostDataRanges(path string) ([]ext4go.Range, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// For unwritten extents the kernel's SEEK_DATA/SEEK_HOLE consult the
	// page cache (iomap_seek_data -> mapping_seek_hole_data), where a page
	// read earlier counts as data in whole pages, even on 1 KiB blocks.
	// Evict the file's clean pages so that only the extents answer.
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var out []ext4go.Range
	for off := int64(0); off < fi.Size(); {
		d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, syscall.ENXIO) {
			break
		}
		if err != nil {
			return nil, err
		}
		h, err := unix.Seek(int(f.Fd()), d, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		out = append(out, ext4go.Range{Off: d, Len: h - d})
		off = h
	}
	return out, nil
}

// htreeLevels is the number of levels of dir's htree (1: the root points
// at leaves), from debugfs's htree dump; 0 if not indexed.
func htreeLevels(t *testing.T, image, dir string) int {
	out := testutil.Debugfs(t, image, "htree /"+dir)
	m := regexp.MustCompile(`Indirect levels: (\d+)`).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n + 1
}
