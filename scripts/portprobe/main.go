// Command portprobe checks that ext4go writes and reads the same
// filesystem on every platform. It uses the public API only (the
// standard library and package ext4go), so that what it proves is what
// a program written against the library gets.
//
//	portprobe [-mode journal|build] [-size BYTES] IMAGE
//	portprobe -read IMAGE
//	portprobe -walk DIR
//	portprobe -digest FILE
//
// The first form makes a filesystem in IMAGE (created, or truncated to
// -size), writes a fixed tree into it (directories, files of many sizes,
// inline data, a sparse file with data past 3 and past 4 GiB, a large
// fallocated file written past 4 GiB on the device, symlinks, hard links,
// device nodes, xattrs in the inode, in a shared block and in an xattr
// inode, renames and removes), closes it, opens it again read-only and
// prints the tree's manifest. -read prints the manifest of an existing
// image (one written on another platform); -walk prints the manifest of a
// host directory, a kernel mount of the image (Linux only). Identical
// manifests mean the same tree. -digest prints the content digest of a
// host file (Linux only): two images compare by it in the time it takes
// to read their data, not their 5 GiB.
//
// -mode journal writes through a plain writable Open: the journal,
// delayed allocation, the hot paths. Its image differs from run to run
// in what the clock and the random generator put there (timestamps,
// inode generations, the journal's commits). -mode build writes through
// OpenForBuild, which fixes the clock (given through AddTar's
// BuildOptions.Time), generations and allocator, so its image is
// byte-identical across platforms.
//
// The manifest has one line per inode path, sorted: the path, its type,
// permission bits, owner, size, link count, 512-byte blocks, modification
// time (set explicitly on every path at the end), the first path of the
// same inode for further hard links, and the content: the link target,
// the device number, or a digest of the file's non-zero 64 KiB chunks
// (holes and zeros read alike, so the kernel's SEEK_DATA and ext4go's
// data ranges give the same digest without reading holes), then the
// xattrs, each with its length and digest.
package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ext4go/ext4go"
)

// Fixed identity and clock, so that nothing but the platform differs.
var (
	fixedUUID     = [16]byte{0xe4, 0x60, 0x91, 0x7a, 0x3c, 0x11, 0x4d, 0x2e, 0x9a, 0x55, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab}
	fixedHashSeed = [16]byte{0x5e, 0xed, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d}
	epoch         = time.Unix(1700000000, 0).UTC()
)

const (
	gib = int64(1) << 30
	// The image's default size: over 4 GiB, so that device offsets past
	// 32 bits are written (the fallocated file fills most of it).
	defaultSize = 5 * gib
	chunk       = 64 << 10 // the content digest's unit
)

func main() {
	mode := flag.String("mode", "journal", "how the tree is written: journal (plain writable open) or build (OpenForBuild, reproducible)")
	size := flag.Int64("size", defaultSize, "filesystem size in bytes")
	read := flag.Bool("read", false, "only print the manifest of an existing IMAGE")
	walk := flag.Bool("walk", false, "print the manifest of a host directory DIR (a kernel mount of an image)")
	dig := flag.Bool("digest", false, "print the content digest of a host FILE (an image)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: portprobe [-mode journal|build] [-size BYTES] IMAGE\n       portprobe -read IMAGE\n       portprobe -walk DIR\n       portprobe -digest FILE\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	target := flag.Arg(0)
	var lines []string
	var err error
	switch {
	case *walk:
		lines, err = hostManifest(target)
	case *dig:
		var d string
		d, err = hostDigest(target)
		lines = []string{d}
	case *read:
		lines, err = imageManifest(target)
	default:
		if *mode != "journal" && *mode != "build" {
			err = fmt.Errorf("unknown -mode %q (journal or build)", *mode)
			break
		}
		if err = makeImage(target, *size, *mode == "build"); err == nil {
			lines, err = imageManifest(target)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "portprobe:", err)
		os.Exit(1)
	}
	for _, l := range lines {
		fmt.Println(l)
	}
}

// makeImage makes the filesystem and writes the tree.
func makeImage(image string, size int64, build bool) error {
	// A fresh file: Mkfs keeps an existing file's size and would find the
	// previous run's filesystem.
	if err := os.Remove(image); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	o := ext4go.MkfsOptions{
		Size:         size,
		Label:        "portprobe",
		UUID:         fixedUUID,
		HashSeed:     fixedHashSeed,
		CreationTime: epoch,
		// inline_data for the 59/60/61-byte files and small directories,
		// ea_inode for an xattr value larger than a block.
		Features: "inline_data,ea_inode",
	}
	if err := ext4go.Mkfs(image, o); err != nil {
		return fmt.Errorf("mkfs: %w", err)
	}
	var fsys *ext4go.FS
	var err error
	if build {
		if fsys, err = ext4go.OpenForBuild(image); err != nil {
			return err
		}
		// The build's clock is set by the options of AddDir and AddTar:
		// an empty archive sets it for every change that follows.
		var empty bytes.Buffer
		tar.NewWriter(&empty).Close()
		if err := fsys.AddTar(".", &empty, &ext4go.BuildOptions{UID: -1, GID: -1, Time: epoch}); err != nil {
			fsys.Close()
			return fmt.Errorf("setting the build clock: %w", err)
		}
	} else {
		// No periodic commits: what is committed when depends on the
		// clock, not on the platform.
		if fsys, err = ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: -1}); err != nil {
			return err
		}
	}
	w := &writer{fsys: fsys}
	w.tree()
	if err := fsys.Close(); w.err == nil && err != nil {
		w.err = fmt.Errorf("close: %w", err)
	}
	return w.err
}

// writer writes the tree, keeping the first error.
type writer struct {
	fsys *ext4go.FS
	err  error
}

func (w *writer) check(what string, err error) {
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("%s: %w", what, err)
	}
}

// pattern returns n bytes of a deterministic sequence seeded by seed
// (xorshift64*), the same on every platform.
func pattern(seed string, n int) []byte {
	x := uint64(0x9e3779b97f4a7c15)
	for _, c := range []byte(seed) {
		x = (x ^ uint64(c)) * 0x100000001b3
	}
	out := make([]byte, n)
	for i := 0; i < n; i += 8 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], x*0x2545f4914f6cdd1d)
		copy(out[i:], b[:])
	}
	return out
}

func (w *writer) mkdir(name string, perm fs.FileMode) {
	w.check("mkdir "+name, w.fsys.Mkdir(name, perm))
}

// file writes a file of size bytes, in pieces of step bytes (all at once
// when step is 0), so that appends of odd sizes are exercised too.
func (w *writer) file(name string, size, step int, perm fs.FileMode) {
	f, err := w.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		w.check("create "+name, err)
		return
	}
	data := pattern(name, size)
	if step <= 0 {
		step = max(size, 1)
	}
	for off := 0; off < size; off += step {
		_, err := f.Write(data[off:min(off+step, size)])
		w.check("write "+name, err)
	}
	w.check("close "+name, f.Close())
}

// writeAt writes n bytes of name's pattern at off, making the file if
// needed.
func (w *writer) writeAt(name string, off int64, n int) {
	f, err := w.fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		w.check("open "+name, err)
		return
	}
	_, err = f.WriteAt(pattern(fmt.Sprint(name, off), n), off)
	w.check(fmt.Sprintf("write %s at %d", name, off), err)
	w.check("close "+name, f.Close())
}

func (w *writer) symlink(target, name string) {
	w.check("symlink "+name, w.fsys.Symlink(target, name))
}

func (w *writer) link(old, name string) {
	w.check("link "+name, w.fsys.Link(old, name))
}

func (w *writer) setxattr(name, attr string, value []byte) {
	w.check("setxattr "+name+" "+attr, w.fsys.SetXattr(name, attr, value, 0))
}

// tree writes the whole tree; the order of the calls is part of what the
// manifests compare (it decides inode numbers, htree splits, placement).
func (w *writer) tree() {
	fsys := w.fsys
	w.mkdir("d", 0o755)
	w.mkdir("d/e", 0o750)
	w.mkdir("d/e/f", 0o700)
	w.mkdir("d/e/f/g", 0o755)
	w.mkdir("sizes", 0o755)
	w.mkdir("sparse", 0o755)

	// Sizes around the boundaries: inline data (60 bytes in i_block, more
	// in the system.data xattr), one block, and a larger multi-extent file
	// written in odd pieces.
	for _, n := range []int{0, 1, 59, 60, 61, 150, 4095, 4096, 4097, 1<<20 + 3} {
		w.file(fmt.Sprintf("sizes/%d", n), n, 0, 0o644)
	}
	w.file("d/e/f/g/deep", 12345, 1000, 0o600)
	w.file("d/pieces", 8<<20+17, 65537, 0o640)

	// Sparse: data at 0 and past 3 GiB, and past 4 GiB (logical blocks
	// past 2^20, sizes past 32 bits).
	w.writeAt("sparse/past3g", 0, 100)
	w.writeAt("sparse/past3g", 3*gib+5, 5000)
	w.writeAt("sparse/past4g", 4*gib+12345, 3)
	w.writeAt("sparse/past4g", 4*gib+12345+3, 70000)
	f, err := fsys.OpenFile("sparse/truncated", os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		_, err = f.Write(pattern("truncated", 300000))
		w.check("write sparse/truncated", err)
		w.check("truncate down", f.Truncate(123457))
		w.check("truncate up", f.Truncate(6*gib+1))
		w.check("close sparse/truncated", f.Close())
	}
	w.check("create sparse/truncated", err)

	// Most of the filesystem fallocated, and written near its end, so
	// that blocks past 4 GiB on the device hold data.
	if size := w.fallocSize(); size > 0 {
		f, err := fsys.OpenFile("sparse/fallocated", os.O_RDWR|os.O_CREATE, 0o644)
		if err == nil {
			w.check("fallocate", f.Fallocate(0, 0, size))
			// Unaligned writes every 128 MiB: some land past 4 GiB on
			// the device wherever the allocator put the extents, and
			// each splits an unwritten extent (an extent tree with
			// index blocks).
			for off := int64(1000); off < size; off += 128 << 20 {
				_, err = f.WriteAt(pattern(fmt.Sprint("fallocated", off), 8192), off)
				w.check("write sparse/fallocated", err)
			}
			w.check("close sparse/fallocated", f.Close())
		}
		w.check("create sparse/fallocated", err)
	}

	// Symlinks: fast (in i_block), just short of and just past 60
	// bytes, and long (a block of their own).
	w.mkdir("links", 0o755)
	w.symlink("../sizes/1", "links/fast")
	w.symlink(strings.Repeat("x", 59), "links/59")
	w.symlink(strings.Repeat("y", 60), "links/60")
	w.symlink("/"+strings.Repeat("long/", 40)+"end", "links/long")
	w.symlink("dangling/target", "links/dangling")

	// Hard links, across directories, one whose first name goes away.
	w.file("links/h1", 5000, 0, 0o644)
	w.link("links/h1", "links/h2")
	w.link("links/h1", "d/e/h3")
	w.file("links/gone", 10, 0, 0o644)
	w.link("links/gone", "links/stays")
	w.check("remove links/gone", fsys.Remove("links/gone"))

	// Device nodes and a fifo.
	w.mkdir("dev", 0o755)
	w.check("mknod null", fsys.Mknod("dev/null", 0o020666, mkdev(1, 3)))
	// Numbers past 8 bits of minor and 12 of major take the inode's
	// second device field.
	w.check("mknod big", fsys.Mknod("dev/bigdev", 0o060600, mkdev(0x12345, 0x4567ab)))
	w.check("mkfifo", fsys.Mknod("dev/fifo", 0o010644, 0))

	// Xattrs: small ones in the inode, a value that needs the xattr
	// block, the same set on two files (one shared block), a value
	// larger than a block (an xattr inode), one trusted.
	w.mkdir("xattrs", 0o755)
	w.file("xattrs/small", 10, 0, 0o644)
	w.setxattr("xattrs/small", "user.a", []byte("1"))
	w.setxattr("xattrs/small", "user.bb", []byte("22"))
	w.setxattr("xattrs/small", "trusted.t", []byte("trusted value"))
	for _, n := range []string{"xattrs/block1", "xattrs/block2"} {
		w.file(n, 100, 0, 0o644)
		w.setxattr(n, "user.big", pattern("big", 1500))
		w.setxattr(n, "user.other", pattern("other", 300))
	}
	w.file("xattrs/huge", 0, 0, 0o644)
	w.setxattr("xattrs/huge", "user.huge", pattern("huge", 10000))
	w.setxattr("xattrs", "user.ondir", []byte("directory"))
	w.setxattr("xattrs/small", "user.bb", []byte("replaced"))
	w.check("removexattr", fsys.RemoveXattr("xattrs/block2", "user.other"))

	// An htree directory: enough names for several blocks, then every
	// seventh removed.
	w.mkdir("many", 0o755)
	for i := range 600 {
		name := fmt.Sprintf("many/entry-%04d-%s", i, strings.Repeat("n", i%40))
		if i%7 == 3 {
			w.check("create "+name, fsys.WriteFile(name, nil, 0o644))
			w.check("remove "+name, fsys.Remove(name))
			continue
		}
		w.check("create "+name, fsys.WriteFile(name, []byte(name), 0o644))
	}

	// Renames: over an existing file, a directory over an empty one,
	// across directories; removes of a file, an empty directory and a
	// subtree.
	w.mkdir("mv", 0o755)
	w.file("mv/a", 777, 0, 0o644)
	w.file("mv/b", 3333, 0, 0o644)
	w.check("rename over", fsys.Rename("mv/a", "mv/b"))
	w.mkdir("mv/dir1", 0o755)
	w.file("mv/dir1/inner", 64, 0, 0o644)
	w.mkdir("mv/empty", 0o755)
	w.check("rename dir over empty", fsys.Rename("mv/dir1", "mv/empty"))
	w.check("rename across", fsys.Rename("sizes/4097", "d/e/moved"))
	w.mkdir("rm", 0o755)
	w.file("rm/file", 9000, 0, 0o644)
	w.mkdir("rm/emptydir", 0o755)
	w.mkdir("rm/sub", 0o755)
	w.file("rm/sub/x", 70000, 0, 0o644)
	w.symlink("x", "rm/sub/l")
	w.check("remove file", fsys.Remove("rm/file"))
	w.check("remove dir", fsys.Remove("rm/emptydir"))
	w.check("remove all", fsys.RemoveAll("rm/sub"))

	// Owners and modes, an owner past 1<<31 (a negative int on 32-bit
	// platforms) and setuid/setgid/sticky bits.
	w.check("chown", fsys.Chown("sizes/1", 1000, 1000))
	big := uint32(3000000000)
	w.check("chown big", fsys.Lchown("links/fast", int(big), int(big)))
	w.check("chmod", fsys.Chmod("sizes/59", 0o755|fs.ModeSetuid|fs.ModeSetgid))
	w.check("chmod sticky", fsys.Chmod("d", 0o755|fs.ModeSticky))

	// Times last, on every path in walk order: then no later change
	// moves a directory's modification time, and renamed files get
	// theirs too.
	var all []string
	w.check("walk", fsys.WalkDir(".", func(name string, _ fs.DirEntry, err error) error {
		all = append(all, name)
		return err
	}))
	for i, p := range all {
		mt := epoch.Add(time.Duration(i)*time.Hour + time.Duration(i)*1234567*time.Nanosecond)
		w.check("lchtimes "+p, fsys.Lchtimes(p, mt, mt))
	}
}

// mkdev encodes a device number as Linux does (unix.Mkdev), the form
// Mknod takes.
func mkdev(major, minor uint32) uint64 {
	return uint64(major&0xfff)<<8 | uint64(major&^0xfff)<<32 | uint64(minor&0xff) | uint64(minor&^0xff)<<12
}

// fallocSize is the size of the fallocated file: most of the free space
// left, so that its last blocks lie past 4 GiB on a filesystem larger
// than that; 0 on a small filesystem.
func (w *writer) fallocSize() int64 {
	u := w.fsys.Usage()
	free := int64(u.FreeBlocks) * int64(w.fsys.BlockSize())
	if free < 5*gib/4 {
		return 0
	}
	return free - gib/4
}

// entry is one manifest line's fields.
type entry struct {
	path              string
	kind              string
	perm              fs.FileMode
	uid, gid          uint32
	size              int64
	nlink             uint64
	blocks            int64
	mtime             time.Time
	ino               uint64
	extra             string // link target, device number or content digest
	xattrs            []string
	firstOfInodeOrNil string
}

func (e *entry) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %04o %d:%d size=%d nlink=%d blocks=%d mtime=%d.%09d", e.path, e.kind, uint32(e.perm), e.uid, e.gid,
		e.size, e.nlink, e.blocks, e.mtime.Unix(), e.mtime.Nanosecond())
	if e.firstOfInodeOrNil != "" {
		fmt.Fprintf(&b, " linkof=%s", e.firstOfInodeOrNil)
	}
	if e.extra != "" {
		b.WriteString(" " + e.extra)
	}
	for _, x := range e.xattrs {
		b.WriteString(" " + x)
	}
	return b.String()
}

// finish sorts the entries, names hard links by their first path and
// formats the lines.
func finish(entries []*entry) []string {
	sort.Slice(entries, func(i, j int) bool { return entries[i].path < entries[j].path })
	first := map[uint64]string{}
	var lines []string
	for _, e := range entries {
		if e.kind != "dir" && e.nlink > 1 {
			if p, ok := first[e.ino]; ok {
				e.firstOfInodeOrNil = p
			} else {
				first[e.ino] = e.path
			}
		}
		lines = append(lines, e.line())
	}
	return lines
}

// kindAndPerm splits an fs.FileMode into the manifest's type name and the
// Unix permission bits (with setuid, setgid and sticky).
func kindAndPerm(m fs.FileMode) (string, fs.FileMode) {
	kind := "reg"
	switch {
	case m&fs.ModeDir != 0:
		kind = "dir"
	case m&fs.ModeSymlink != 0:
		kind = "symlink"
	case m&fs.ModeCharDevice != 0:
		kind = "chr"
	case m&fs.ModeDevice != 0:
		kind = "blk"
	case m&fs.ModeNamedPipe != 0:
		kind = "fifo"
	case m&fs.ModeSocket != 0:
		kind = "sock"
	}
	perm := m.Perm()
	if m&fs.ModeSetuid != 0 {
		perm |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		perm |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		perm |= 0o1000
	}
	return kind, perm
}

// xattrLine formats an xattr for the manifest.
func xattrLine(name string, value []byte) string {
	sum := sha256.Sum256(value)
	return fmt.Sprintf("x:%s=%d:%s", name, len(value), hex.EncodeToString(sum[:8]))
}

// digest hashes size bytes read through readAt: the index and bytes of
// every 64 KiB chunk that is not all zeros, looking only at the chunks
// overlapping ranges (the parts that may hold data; the rest reads as
// zeros).
func digest(size int64, ranges [][2]int64, readAt func([]byte, int64) (int, error)) (string, error) {
	h := sha256.New()
	buf := make([]byte, chunk)
	zero := make([]byte, chunk)
	next := int64(0) // first chunk not yet hashed
	for _, r := range ranges {
		start, end := max(r[0]/chunk, next), (min(r[1], size)+chunk-1)/chunk
		for c := start; c < end; c++ {
			n := min(int64(chunk), size-c*chunk)
			b := buf[:n]
			if _, err := readAt(b, c*chunk); err != nil && !(errors.Is(err, io.EOF) && n > 0) {
				return "", fmt.Errorf("read at %d: %w", c*chunk, err)
			}
			if !bytes.Equal(b, zero[:n]) {
				var idx [8]byte
				binary.LittleEndian.PutUint64(idx[:], uint64(c))
				h.Write(idx[:])
				h.Write(b)
			}
		}
		next = max(next, end)
	}
	return "sha256=" + hex.EncodeToString(h.Sum(nil)), nil
}

// imageManifest walks the image read-only through ext4go.
func imageManifest(image string) ([]string, error) {
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	var entries []*entry
	pastFourGiB := false
	err = fsys.WalkDir(".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*ext4go.Stat)
		kind, perm := kindAndPerm(fi.Mode())
		e := &entry{path: path.Join("/", name), kind: kind, perm: perm, uid: st.UID, gid: st.GID, size: st.Size,
			nlink: uint64(st.Nlink), blocks: st.Blocks, mtime: st.Mtime, ino: uint64(st.Ino)}
		switch kind {
		case "symlink":
			t, err := fsys.ReadLink(name)
			if err != nil {
				return err
			}
			e.extra = fmt.Sprintf("target=%q", t)
		case "chr", "blk":
			e.extra = fmt.Sprintf("rdev=%d:%d", st.Major(), st.Minor())
		case "reg":
			f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			rs, err := f.DataRanges()
			if err != nil {
				return err
			}
			var ranges [][2]int64
			for _, r := range rs {
				ranges = append(ranges, [2]int64{r.Off, r.Off + r.Len})
			}
			if e.extra, err = digest(st.Size, ranges, f.ReadAt); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			exts, err := f.Extents()
			if err != nil {
				return err
			}
			for _, x := range exts {
				if !x.Unwritten && int64(x.Physical+x.Length)*int64(fsys.BlockSize()) > 4*gib {
					pastFourGiB = true
				}
			}
		}
		names, err := fsys.ListXattr(name)
		if err != nil {
			return err
		}
		slices.Sort(names)
		for _, x := range names {
			v, err := fsys.GetXattr(name, x)
			if err != nil {
				return err
			}
			e.xattrs = append(e.xattrs, xattrLine(x, v))
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	// On an image over 4 GiB the point is data past 32-bit byte offsets
	// on the device: say so when none was found.
	if info, err := os.Stat(image); err == nil && info.Size() > 4*gib+gib/2 && !pastFourGiB {
		return nil, fmt.Errorf("%s: no file's written data lies past 4 GiB on the device", image)
	}
	return finish(entries), nil
}
