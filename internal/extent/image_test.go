package extent

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/inode"
)

// This file checks Tree against extent trees built by mke2fs -d (and
// debugfs fallocate for unwritten extents), comparing with debugfs's
// dump_extents and with the source files' data.

// image is a test filesystem image opened for reading.
type image struct {
	path              string
	f                 *os.File
	bs, inodeSize     int
	firstData, blocks uint64
	seed              uint32
	csum              bool
	reads             int
	corrupt           map[uint64][]byte // blocks to return instead of the image's
}

func openImage(t *testing.T, path string) *image {
	out := testutil.Run(t, "dumpe2fs", "-h", path)
	field := func(name string) uint64 {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %q in dumpe2fs output", name)
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		return v
	}
	im := &image{path: path, bs: int(field("Block size")), inodeSize: int(field("Inode size")),
		firstData: field("First block"), blocks: field("Block count")}
	im.csum = regexp.MustCompile(`(?m)^Filesystem features:.*\bmetadata_csum\b`).MatchString(out)
	if m := regexp.MustCompile(`(?m)^Checksum seed:\s+0x([0-9a-f]+)`).FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseUint(m[1], 16, 32)
		im.seed = uint32(v)
	} else {
		m := regexp.MustCompile(`(?m)^Filesystem UUID:\s+(\S+)`).FindStringSubmatch(out)
		u, _ := hex.DecodeString(strings.ReplaceAll(m[1], "-", ""))
		im.seed = csum.CRC32C(^uint32(0), u)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	im.f = f
	return im
}

func (im *image) read(p uint64) ([]byte, error) {
	im.reads++
	if b, ok := im.corrupt[p]; ok {
		return b, nil
	}
	b := make([]byte, im.bs)
	_, err := im.f.ReadAt(b, int64(p)*int64(im.bs))
	return b, err
}

var imapRE = regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`)

// inode reads and decodes the inode debugfs's imap output locates.
func (im *image) inode(t *testing.T, imap string) *inode.Inode {
	m := imapRE.FindStringSubmatch(imap)
	if m == nil {
		t.Fatalf("bad imap output %q", imap)
	}
	blk, _ := strconv.ParseInt(m[1], 10, 64)
	off, _ := strconv.ParseInt(m[2], 16, 64)
	b := make([]byte, im.inodeSize)
	if _, err := im.f.ReadAt(b, blk*int64(im.bs)+off); err != nil {
		t.Fatal(err)
	}
	in, err := inode.Decode(b, im.inodeSize)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (im *image) tree(in *inode.Inode, ino uint32) *Tree {
	return &Tree{
		Root: in.Block[:], Read: im.read, BlockSize: im.bs,
		FirstDataBlock: im.firstData, BlocksCount: im.blocks,
		Csum: im.csum, Seed: inode.Seed(im.seed, ino, in.Generation), Ino: ino,
	}
}

// dumpEntry is one line of debugfs's dump_extents.
type dumpEntry struct {
	level, maxLevel  int
	logical, lastLog uint64
	phys             uint64
	length           uint64
	uninit           bool
}

var exRE = regexp.MustCompile(`^\s*(\d+)/\s*(\d+)\s+\d+/\s*\d+\s+(\d+)\s+-\s+(\d+)\s+(\d+)(?:\s+-\s+\d+)?\s+(\d+)\s*(Uninit)?\s*$`)

func parseEx(t *testing.T, s string) []dumpEntry {
	var out []dumpEntry
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, "Level") || strings.TrimSpace(line) == "" {
			continue
		}
		m := exRE.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsed dump_extents line %q", line)
		}
		n := func(i int) uint64 { v, _ := strconv.ParseUint(m[i], 10, 64); return v }
		out = append(out, dumpEntry{int(n(1)), int(n(2)), n(3), n(4), n(5), n(6), m[7] != ""})
	}
	return out
}

// writeSparse writes size bytes at each offset of a sparse file.
func writeSparse(t *testing.T, path string, total int64, chunk int, offsets []int64, r *rand.Rand) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, chunk)
	for _, off := range offsets {
		for i := range buf {
			buf[i] = byte(r.Uint32()) | 1 // never a zero block
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(total); err != nil {
		t.Fatal(err)
	}
}

func buildSource(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(42, 43))
	// 4 KiB every 64 KiB over 200 MiB: 3200 extents, depth 2 at 1 KiB blocks.
	var offs []int64
	for o := int64(0); o < 200<<20; o += 64 << 10 {
		offs = append(offs, o)
	}
	writeSparse(t, filepath.Join(dir, "frag"), 200<<20, 4096, offs, r)
	// A few hundred extents: depth 1.
	offs = offs[:300]
	writeSparse(t, filepath.Join(dir, "medium"), 300*(64<<10), 4096, offs, r)
	// Dense data, and data far out (block 8 GiB / bs).
	writeSparse(t, filepath.Join(dir, "dense"), 3<<20, 3<<20, []int64{0}, r)
	writeSparse(t, filepath.Join(dir, "far"), 8<<30+8192, 8192, []int64{0, 8 << 30}, r)
	writeSparse(t, filepath.Join(dir, "small"), 5000, 5000, []int64{0}, r)
	writeSparse(t, filepath.Join(dir, "empty"), 0, 0, nil, r)
	return dir
}

var extentFiles = []string{"frag", "medium", "dense", "far", "small", "empty", "fallocated"}

func TestAgainstImages(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "dumpe2fs")
	src := buildSource(t)
	for _, c := range []struct {
		name string
		args []string
	}{
		{"1k-csum", []string{"-b", "1024", "-O", "metadata_csum"}},
		{"4k-csum", []string{"-b", "4096", "-O", "metadata_csum,64bit"}},
		{"4k-nocsum", []string{"-b", "4096", "-O", "^metadata_csum"}},
		{"2k-csum-bigalloc", []string{"-b", "2048", "-O", "metadata_csum,bigalloc", "-C", "8192"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			args := append([]string{"-q", "-F", "-t", "ext4"}, c.args...)
			testutil.Run(t, "mke2fs", append(args, "-d", src, img, "256M")...)
			// Unwritten extents, including ranges longer than UnwrittenMaxLen.
			testutil.Run(t, "debugfs", "-w", "-R", "write /dev/null fallocated", img)
			testutil.Run(t, "debugfs", "-w", "-R", "fallocate /fallocated 10 50000", img)
			testutil.Run(t, "debugfs", "-w", "-R", "fallocate /small 20 30", img)
			im := openImage(t, img)
			var cmds []string
			for _, f := range extentFiles {
				cmds = append(cmds, "ex /"+f, "imap /"+f, "stat /"+f)
			}
			out := testutil.DebugfsBatch(t, img, cmds)
			for _, f := range extentFiles {
				checkFile(t, im, f, filepath.Join(src, f), out["ex /"+f], out["imap /"+f], out["stat /"+f])
			}
		})
	}
}

func checkFile(t *testing.T, im *image, name, srcPath, ex, imap, stat string) {
	in := im.inode(t, imap)
	ino := uint32(0)
	if m := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(stat); m != nil {
		v, _ := strconv.Atoi(m[1])
		ino = uint32(v)
	}
	if !in.HasFlag(inode.FlagExtents) {
		t.Fatalf("%s: no extents flag", name)
	}
	tr := im.tree(in, ino)
	dump := parseEx(t, ex)
	exts, err := tr.Extents()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// Leaf entries equal debugfs's, in order.
	var leaves []dumpEntry
	var indexBlocks []uint64
	for _, d := range dump {
		if d.level == d.maxLevel {
			leaves = append(leaves, d)
		} else {
			indexBlocks = append(indexBlocks, d.phys)
		}
	}
	if len(leaves) != len(exts) {
		t.Fatalf("%s: %d extents, debugfs %d", name, len(exts), len(leaves))
	}
	for i, e := range exts {
		d := leaves[i]
		if uint64(e.Logical) != d.logical || e.End()-1 != d.lastLog || e.Start != d.phys || uint64(e.Len) != d.length || e.Unwritten != d.uninit {
			t.Errorf("%s: extent %d %+v, debugfs %+v", name, i, e, d)
		}
	}
	rn, _ := tr.RootNode()
	if len(dump) > 0 && int(rn.Depth) != dump[0].maxLevel {
		t.Errorf("%s: depth %d, debugfs %d", name, rn.Depth, dump[0].maxLevel)
	}
	blocks, err := tr.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != len(indexBlocks) {
		t.Errorf("%s: %d tree blocks, debugfs names %d", name, len(blocks), len(indexBlocks))
	} else {
		for i := range blocks {
			if blocks[i] != indexBlocks[i] {
				t.Errorf("%s: tree block %d is %d, debugfs %d", name, i, blocks[i], indexBlocks[i])
			}
		}
	}
	var nodes []NodeInfo
	tr.WalkNodes(func(ni NodeInfo) error { nodes = append(nodes, ni); return nil })
	if len(nodes) != len(blocks)+1 || nodes[0].Block != 0 {
		t.Errorf("%s: WalkNodes gave %d nodes", name, len(nodes))
	}
	t.Logf("%s: depth %d, %d extents, %d tree blocks", name, rn.Depth, len(exts), len(blocks))

	// Lookup agrees with the extent list at the edges of each extent, and
	// at random blocks.
	r := rand.New(rand.NewPCG(uint64(len(exts)), 1))
	probes := []uint32{0, MaxLogical}
	for _, e := range exts {
		probes = append(probes, e.Logical, uint32(e.End()-1), uint32(e.End()))
	}
	for range 200 {
		probes = append(probes, r.Uint32N(uint32(in.Size/uint64(im.bs)+10)))
	}
	for _, l := range probes {
		checkLookup(t, tr, exts, l)
	}
	if rn.Depth > 0 {
		im.reads = 0
		if _, err := tr.Lookup(exts[len(exts)/2].Logical); err != nil || im.reads != int(rn.Depth) {
			t.Errorf("%s: lookup read %d blocks (%v)", name, im.reads, err)
		}
	}
	compareData(t, im, name, srcPath, in.Size, exts)
	if im.csum && len(blocks) > 0 {
		corruptTree(t, im, name, tr, blocks)
	}
}

// compareData reads the file back through the extents and compares it
// with the source: mapped blocks equal the source, holes and unwritten
// extents are zeros in the source.
func compareData(t *testing.T, im *image, name, srcPath string, size uint64, exts []Extent) {
	src, err := os.Open(srcPath)
	if os.IsNotExist(err) {
		src = nil // made by debugfs: all unwritten
	} else if err != nil {
		t.Fatal(err)
	} else {
		defer src.Close()
	}
	bs := uint64(im.bs)
	want := make([]byte, bs)
	readSrc := func(lblk uint64) []byte {
		clear(want)
		if src != nil {
			if _, err := src.ReadAt(want, int64(lblk*bs)); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		return want
	}
	zero := make([]byte, bs)
	next := uint64(0)
	// checkHole checks that the source has no data in file blocks
	// [from, to), asking the filesystem (SEEK_DATA) rather than reading
	// gigabytes of zeros.
	checkHole := func(from, to uint64) {
		if src == nil || from >= to || from*bs >= size {
			return
		}
		const seekData = 3
		off, err := src.Seek(int64(from*bs), seekData)
		if err != nil {
			return // ENXIO: no data after from
		}
		if uint64(off) < min(to*bs, size) {
			// SEEK_DATA may report zeros as data; check them.
			b := make([]byte, min(to*bs, size)-uint64(off))
			if len(b) > 64<<20 {
				t.Fatalf("%s: source data at byte %d inside hole [%d, %d)", name, off, from, to)
			}
			if _, err := src.ReadAt(b, off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if !bytes.Equal(b, make([]byte, len(b))) {
				t.Fatalf("%s: source has data in hole [%d, %d)", name, from, to)
			}
		}
	}
	for _, e := range exts {
		checkHole(next, uint64(e.Logical))
		for i := range uint64(e.Len) {
			l := uint64(e.Logical) + i
			got, err := im.read(e.Start + i)
			if err != nil {
				t.Fatal(err)
			}
			w := readSrc(l)
			if e.Unwritten {
				if !bytes.Equal(w, zero) {
					t.Fatalf("%s: unwritten block %d has source data", name, l)
				}
				continue
			}
			if l*bs+bs > size {
				n := size - l*bs
				got, w = got[:n], w[:n]
			}
			if !bytes.Equal(got, w) {
				t.Fatalf("%s: block %d (physical %d) differs from the source", name, l, e.Start+i)
			}
		}
		next = e.End()
	}
	checkHole(next, (size+bs-1)/bs)
}

// corruptTree damages tree blocks one byte at a time: the walk must fail
// with a checksum or corruption error, never panic.
func corruptTree(t *testing.T, im *image, name string, tr *Tree, blocks []uint64) {
	r := rand.New(rand.NewPCG(7, uint64(len(blocks))))
	defer func() { im.corrupt = nil }()
	for range 50 {
		p := blocks[r.IntN(len(blocks))]
		b, _ := im.read(p)
		i := r.IntN(len(b))
		b[i] ^= byte(1 + r.IntN(255))
		im.corrupt = map[uint64][]byte{p: b}
		err := tr.Walk(func(Extent) error { return nil })
		if !errors.Is(err, fserr.ErrCorrupt) {
			t.Fatalf("%s: byte %d of block %d corrupted: walk says %v", name, i, p, err)
		}
		var ke *fserr.ChecksumError
		var ce *fserr.CorruptError
		if !errors.As(err, &ke) && !errors.As(err, &ce) {
			t.Fatalf("%s: untyped error %v", name, err)
		}
		// Without checksums the walk may or may not notice; it must not panic.
		nc := *tr
		nc.Csum = false
		nc.Walk(func(Extent) error { return nil })
	}
	// Corrupt the root: the inode's i_block.
	for i := range RootSize {
		root := append([]byte(nil), tr.Root...)
		root[i] ^= 0xff
		nc := *tr
		nc.Root = root
		nc.Walk(func(Extent) error { return nil })
		nc.Lookup(uint32(i * 1000))
	}
}
