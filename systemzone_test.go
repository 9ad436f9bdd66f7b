//go:build linux

package ext4go_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// The system zone regression tests: images whose inodes name blocks of the
// fixed metadata (inode table, group descriptors, bitmaps, journal) as
// data, as extent index or indirect blocks, as xattr block or as directory
// blocks, made with debugfs edits (and byte edits where debugfs has no
// command). The kernel refuses all of them (ext4_inode_block_valid, EUCLEAN);
// ext4go must refuse the read with a *CorruptError naming the inode and the
// block, and refuse every change before it writes anything.

// zoneBase is a clean image to corrupt and where its metadata lies.
type zoneBase struct {
	image                                       string
	gdt, blockBitmap, inodeBitmap, inodeTable   uint64 // group 0's
	journal                                     uint64 // a block of the journal's data
	leafBlock, indirectBlock                    uint64 // deep's extent leaf or single indirect block
	blockSize                                   int64
	inodes                                      map[string]uint32
	inodeTableBlocks, journalStart, journalSize uint64
}

// zoneSource is the tree of every base image: ext, a one-block file;
// deep, a sparse file of eight runs (an extent tree of depth 1, or a
// block map with an indirect block); xfile, whose xattr is too big for the
// inode (an xattr block); d, a directory of two files.
func zoneSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "ext"), bytes.Repeat([]byte("e"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(src, "deep"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := f.WriteAt(bytes.Repeat([]byte{byte('0' + i)}, 4096), int64(i)*8192); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	os.WriteFile(filepath.Join(src, "xfile"), []byte("x\n"), 0o644)
	os.Mkdir(filepath.Join(src, "d"), 0o755)
	os.WriteFile(filepath.Join(src, "d", "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(src, "d", "b"), []byte("b\n"), 0o644)
	return src
}

// makeZoneBase makes a 32 MiB image with 1 KiB blocks (several groups)
// with mkfsArgs, the tree of zoneSource and xfile's big xattr, and finds
// its metadata.
func makeZoneBase(t *testing.T, src string, mkfsArgs ...string) zoneBase {
	t.Helper()
	image := filepath.Join(t.TempDir(), "base.img")
	testutil.Mke2fs(t, image, 32<<20, append(append([]string{"-b", "1024", "-I", "256"}, mkfsArgs...), "-d", src)...)
	value := filepath.Join(t.TempDir(), "value")
	os.WriteFile(value, bytes.Repeat([]byte("v"), 600), 0o644)
	testutil.DebugfsWrite(t, image, "ea_set -f "+value+" xfile user.big")
	testutil.RequireFsckClean(t, image)
	b := zoneBase{image: image, blockSize: 1024, inodes: map[string]uint32{}}
	dump := testutil.Dumpe2fs(t, image)
	g0 := dump[strings.Index(dump, "Group 0:"):]
	g0 = g0[:strings.Index(g0, "Group 1:")]
	num := func(re string) uint64 {
		m := regexp.MustCompile(re).FindStringSubmatch(g0)
		if m == nil {
			t.Fatalf("dumpe2fs group 0 has no %s:\n%s", re, g0)
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		return v
	}
	b.gdt = num(`Group descriptors at (\d+)`)
	b.blockBitmap = num(`Block bitmap at (\d+)`)
	b.inodeBitmap = num(`Inode bitmap at (\d+)`)
	b.inodeTable = num(`Inode table at (\d+)`)
	b.inodeTableBlocks = num(`Inode table at \d+-(\d+)`) - b.inodeTable + 1
	jb, err := strconv.ParseUint(strings.TrimSpace(testutil.Debugfs(t, image, "bmap <8> 5")), 10, 64)
	if err != nil {
		t.Fatalf("journal block: %v", err)
	}
	b.journal = jb
	for _, name := range []string{"ext", "deep", "xfile", "d"} {
		out := testutil.Debugfs(t, image, "stat "+name)
		m := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("stat %s:\n%s", name, out)
		}
		ino, _ := strconv.ParseUint(m[1], 10, 32)
		b.inodes[name] = uint32(ino)
		if name != "deep" {
			continue
		}
		if m := regexp.MustCompile(`\(ETB0\):(\d+)`).FindStringSubmatch(out); m != nil {
			b.leafBlock, _ = strconv.ParseUint(m[1], 10, 64)
		}
		if m := regexp.MustCompile(`\(IND\):(\d+)`).FindStringSubmatch(out); m != nil {
			b.indirectBlock, _ = strconv.ParseUint(m[1], 10, 64)
		}
	}
	return b
}

// zoneCase is one corruption.
type zoneCase struct {
	name string
	base string // "ext4" (metadata_csum), "ext4-nocsum" (byte edits), "ext3" (block maps)
	path string // the inode corrupted
	kind string // "file", "dir" or "xattr": what reads and changes it gets
	// target is the metadata block the corruption points at.
	target func(b zoneBase) uint64
	// edit corrupts the copy of the base image at image.
	edit func(t *testing.T, b zoneBase, image string, target uint64)
	// detail holds text the read's error must show (the logical
	// block), besides the target's number.
	detail string
	// overwriteAt is where the overwrite writes: in a block whose lookup
	// meets the corruption (a block map's lookup reads only the pointers
	// on its path, as the kernel's).
	overwriteAt int64
}

// sif returns an edit setting a field of path's inode to the target.
func sif(path, field string) func(*testing.T, zoneBase, string, uint64) {
	return func(t *testing.T, b zoneBase, image string, target uint64) {
		testutil.DebugfsWrite(t, image, fmt.Sprintf("sif %s %s %d", path, field, target))
	}
}

// putLE32 returns an edit writing the target as a little-endian word at
// byte off of the block at(b).
func putLE32(at func(zoneBase) uint64, off int64) func(*testing.T, zoneBase, string, uint64) {
	return func(t *testing.T, b zoneBase, image string, target uint64) {
		f, err := os.OpenFile(image, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var w [4]byte
		binary.LittleEndian.PutUint32(w[:], uint32(target))
		if _, err := f.WriteAt(w[:], int64(at(b))*b.blockSize+off); err != nil {
			t.Fatal(err)
		}
	}
}

// The inode table block holding the inodes of the test's files (13..16
// with 256-byte inodes in 1 KiB blocks): a write there would land inside
// other inodes.
func inodeTableTarget(b zoneBase) uint64 { return b.inodeTable + 3 }

var zoneCases = []zoneCase{
	// Extent trees. In an extent inode i_block[3..5] is the root's first
	// entry: for a leaf, ee_block, ee_len|ee_start_hi, ee_start_lo; for an
	// index, ei_block, ei_leaf_lo, ei_leaf_hi.
	{name: "extent-data-in-inode-table", base: "ext4", path: "ext", kind: "file",
		target: inodeTableTarget, edit: sif("ext", "block[5]"), detail: "file blocks 0+1"},
	{name: "extent-data-in-group-descriptors", base: "ext4", path: "ext", kind: "file",
		target: func(b zoneBase) uint64 { return b.gdt }, edit: sif("ext", "block[5]"), detail: "file blocks 0+1"},
	{name: "extent-data-in-block-bitmap", base: "ext4", path: "ext", kind: "file",
		target: func(b zoneBase) uint64 { return b.blockBitmap }, edit: sif("ext", "block[5]"), detail: "file blocks 0+1"},
	{name: "extent-data-in-inode-bitmap", base: "ext4", path: "ext", kind: "file",
		target: func(b zoneBase) uint64 { return b.inodeBitmap }, edit: sif("ext", "block[5]"), detail: "file blocks 0+1"},
	{name: "extent-data-in-journal", base: "ext4", path: "ext", kind: "file",
		target: func(b zoneBase) uint64 { return b.journal }, edit: sif("ext", "block[5]"), detail: "file blocks 0+1"},
	{name: "extent-index-in-inode-table", base: "ext4", path: "deep", kind: "file",
		target: inodeTableTarget, edit: sif("deep", "block[4]"), detail: "file blocks from 0"},
	{name: "extent-leaf-entry-in-block-bitmap", base: "ext4-nocsum", path: "deep", kind: "file",
		// The leaf block's first extent's ee_start_lo: header 12 bytes, then 8.
		target: func(b zoneBase) uint64 { return b.blockBitmap },
		edit:   putLE32(func(b zoneBase) uint64 { return b.leafBlock }, 12+8), detail: "file blocks 0+4"},
	{name: "xattr-block-in-inode-table", base: "ext4", path: "xfile", kind: "xattr",
		target: inodeTableTarget, edit: sif("xfile", "file_acl")},
	{name: "directory-block-in-inode-table", base: "ext4", path: "d", kind: "dir",
		target: inodeTableTarget, edit: sif("d", "block[5]"), detail: "file blocks 0+1"},
	// Block maps.
	{name: "blockmap-data-in-inode-table", base: "ext3", path: "ext", kind: "file",
		target: inodeTableTarget, edit: sif("ext", "block[0]"), detail: "file blocks from 0"},
	{name: "blockmap-data-in-journal", base: "ext3", path: "ext", kind: "file",
		target: func(b zoneBase) uint64 { return b.journal }, edit: sif("ext", "block[0]"), detail: "file blocks from 0"},
	{name: "blockmap-indirect-in-group-descriptors", base: "ext3", path: "deep", kind: "file",
		target: func(b zoneBase) uint64 { return b.gdt }, edit: sif("deep", "block[IND]"), detail: "file blocks from 12"},
	{name: "blockmap-data-under-indirect-in-inode-bitmap", base: "ext3", path: "deep", kind: "file",
		// Pointer 4 of the single indirect block maps file block 16.
		target: func(b zoneBase) uint64 { return b.inodeBitmap },
		edit:   putLE32(func(b zoneBase) uint64 { return b.indirectBlock }, 4*4), detail: "file blocks from 16",
		overwriteAt: 16 << 10},
	{name: "blockmap-directory-block-in-inode-table", base: "ext3", path: "d", kind: "dir",
		target: inodeTableTarget, edit: sif("d", "block[0]"), detail: "file blocks from 0"},
	{name: "blockmap-xattr-block-in-block-bitmap", base: "ext3", path: "xfile", kind: "xattr",
		target: func(b zoneBase) uint64 { return b.blockBitmap }, edit: sif("xfile", "file_acl")},
}

// TestSystemZoneRefused runs every zoneCase: the read fails with a
// *CorruptError naming the inode and the metadata block, every change
// fails, through the journal or without it, and the image is left as it
// was (but for the superblock's write time and, with the journal, the
// journal's blocks), so e2fsck's verdict is the same.
func TestSystemZoneRefused(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "dumpe2fs", "e2fsck")
	src := zoneSource(t)
	bases := map[string]zoneBase{
		"ext4":        makeZoneBase(t, src, "-t", "ext4"),
		"ext4-nocsum": makeZoneBase(t, src, "-t", "ext4", "-O", "^metadata_csum"),
		"ext3":        makeZoneBase(t, src, "-t", "ext3"),
	}
	for _, c := range zoneCases {
		t.Run(c.name, func(t *testing.T) {
			b := bases[c.base]
			target := c.target(b)
			image := copyImage(t, b.image)
			c.edit(t, b, image, target)
			fsckExit, fsckOut := testutil.E2fsckFN(t, image)
			if fsckExit == 0 {
				t.Fatalf("e2fsck -fn finds the corruption clean:\n%s", fsckOut)
			}
			zoneCheckRead(t, c, b, image, target)
			for _, noJournal := range []bool{true, false} {
				work := copyImage(t, image)
				before, err := os.ReadFile(work)
				if err != nil {
					t.Fatal(err)
				}
				zoneCheckChanges(t, c, work, noJournal)
				after, err := os.ReadFile(work)
				if err != nil {
					t.Fatal(err)
				}
				allowed := [][2]int64{{1024, 2048}} // the primary superblock: times, state
				if !noJournal {
					allowed = append(allowed, journalBytes(t, work)...)
				}
				if d := diffOutside(before, after, allowed); d != "" {
					t.Errorf("NoJournal=%v: the refused changes wrote to the image: %s", noJournal, d)
				}
				if exit, out := testutil.E2fsckFN(t, work); exit != fsckExit || fsckProblems(out, work) != fsckProblems(fsckOut, image) {
					t.Errorf("NoJournal=%v: e2fsck -fn changed its verdict: exit %d, was %d\n%s\nwas:\n%s", noJournal, exit, fsckExit, out, fsckOut)
				}
			}
		})
	}
}

// zoneCheckRead reads the corrupted inode read-only and checks the error.
func zoneCheckRead(t *testing.T, c zoneCase, b zoneBase, image string, target uint64) {
	t.Helper()
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer fsys.Close()
	var readErr error
	switch c.kind {
	case "file":
		_, readErr = fsys.ReadFile(c.path)
		if readErr == nil {
			_, readErr = fsys.Extents(c.path)
		}
	case "dir":
		_, readErr = fsys.ReadDir(c.path)
		if readErr == nil {
			_, readErr = fsys.Lstat(c.path + "/a")
		}
	case "xattr":
		_, readErr = fsys.GetXattr(c.path, "user.big")
	}
	var ce *ext4go.CorruptError
	switch {
	case readErr == nil:
		t.Errorf("read of %s succeeded", c.path)
	case !errors.As(readErr, &ce):
		t.Errorf("read of %s: %v, want a *CorruptError", c.path, readErr)
	case ce.Ino != b.inodes[c.path]:
		t.Errorf("read of %s: error names inode %d, want %d: %v", c.path, ce.Ino, b.inodes[c.path], readErr)
	case !strings.Contains(readErr.Error(), fmt.Sprint(target)) || !strings.Contains(readErr.Error(), "fixed metadata"):
		t.Errorf("read of %s: error does not name block %d in the fixed metadata: %v", c.path, target, readErr)
	case c.detail != "" && !strings.Contains(readErr.Error(), c.detail):
		t.Errorf("read of %s: error does not say %q: %v", c.path, c.detail, readErr)
	}
	t.Logf("read: %v", readErr)
	// The rest of the filesystem reads as before.
	want := map[string]bool{"ext": true, "deep": true, "xfile": true, "d": true}
	for name := range want {
		if name == c.path {
			continue
		}
		if _, err := fsys.Lstat(name); err != nil {
			t.Errorf("lstat %s: %v", name, err)
		}
	}
}

// zoneCheckChanges opens image writable and tries the changes of c.kind,
// every one of which must fail as corruption.
func zoneCheckChanges(t *testing.T, c zoneCase, image string, noJournal bool) {
	t.Helper()
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, NoJournal: noJournal})
	if err != nil {
		t.Fatalf("open writable: %v", err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ext4go.ErrCorrupt) {
			t.Errorf("NoJournal=%v: %s of %s: %v, want ErrCorrupt", noJournal, what, c.path, err)
		}
	}
	// onFile opens path for writing and runs op; an error of op, Sync or
	// Close (delayed allocation may report it there) counts.
	onFile := func(flag int, op func(f *ext4go.File) error) error {
		f, err := fsys.OpenFile(c.path, flag, 0)
		if err != nil {
			return err
		}
		ef := f
		err = op(ef)
		if err == nil {
			err = ef.Sync()
		}
		if cerr := ef.Close(); err == nil {
			err = cerr
		}
		return err
	}
	switch c.kind {
	case "file":
		refused("overwrite", onFile(os.O_WRONLY, func(f *ext4go.File) error {
			_, err := f.WriteAt([]byte("zz"), c.overwriteAt+10)
			return err
		}))
		refused("append", onFile(os.O_WRONLY|os.O_APPEND, func(f *ext4go.File) error {
			_, err := f.Write([]byte("more"))
			return err
		}))
		refused("truncate inside the last block", onFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Truncate(50) }))
		refused("truncate to 0", onFile(os.O_WRONLY, func(f *ext4go.File) error { return f.Truncate(0) }))
		refused("remove", fsys.Remove(c.path))
	case "dir":
		refused("create in", fsys.WriteFile(c.path+"/new", []byte("n"), 0o644))
		refused("remove from", fsys.Remove(c.path+"/a"))
		refused("rename into", fsys.Rename("ext", c.path+"/ext"))
		refused("removeall", fsys.RemoveAll(c.path))
	case "xattr":
		refused("setxattr", fsys.SetXattr(c.path, "user.new", []byte("n"), 0))
		refused("removexattr", fsys.RemoveXattr(c.path, "user.big"))
		refused("remove", fsys.Remove(c.path))
	}
	if err := fsys.Close(); err != nil {
		t.Logf("close: %v", err)
	}
}

// fsckProblems returns e2fsck's output without the image's name, with
// numbers masked (e2fsck 1.47.0 reports some values it computes from
// garbage, an "i_blocks should be" of a bitmap read as an xattr block,
// differently from run to run), and without the superblock's total free
// counts, which every writable open's close sets from the group
// descriptors (as the kernel's unmount does).
func fsckProblems(out, image string) string {
	out = strings.ReplaceAll(out, image, "IMAGE")
	out = regexp.MustCompile(`(?m)^Free (blocks|inodes) count wrong \([0-9]+, counted=[0-9]+\)\.\nFix\? no\n\n`).ReplaceAllString(out, "")
	return regexp.MustCompile(`[0-9]+`).ReplaceAllString(out, "N")
}

// journalBytes returns the byte ranges of the journal inode's blocks.
func journalBytes(t *testing.T, image string) [][2]int64 {
	t.Helper()
	var out [][2]int64
	for _, f := range strings.Fields(testutil.Debugfs(t, image, "blocks <8>")) {
		b, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("debugfs blocks <8>: %q", f)
		}
		if n := len(out); n > 0 && out[n-1][1] == b*1024 {
			out[n-1][1] += 1024
			continue
		}
		out = append(out, [2]int64{b * 1024, (b + 1) * 1024})
	}
	return out
}

// diffOutside describes the first bytes where a and b differ outside the
// allowed ranges, or returns "".
func diffOutside(a, b []byte, allowed [][2]int64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("size %d, was %d", len(b), len(a))
	}
	for off := 0; off < len(a); {
		if a[off] == b[off] {
			off++
			continue
		}
		ok := false
		for _, r := range allowed {
			if int64(off) >= r[0] && int64(off) < r[1] {
				ok = true
				off = int(r[1])
				break
			}
		}
		if !ok {
			return fmt.Sprintf("byte %d (block %d of 1 KiB) changed", off, off/1024)
		}
	}
	return ""
}
