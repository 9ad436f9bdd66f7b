//go:build linux

package ext4go_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/extent"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/testutil"
	"github.com/ext4go/ext4go/internal/xattr"
)

// The hostile-image harness: small images holding every kind of structure
// (extent trees of depth 0 to 2, block maps with indirect blocks, inline
// data, xattrs in the inode and in a block, linear and htree directories,
// fast and slow symlinks, hard links, a journal) get one seeded corruption
// of one metadata kind per case (now and then two); then the library
// opens the image read-only and reads everything, opens it writable and
// changes the corrupted entry (each change in an open of its own) and
// others, and the case fails on a panic, a hang, a heap past its bound,
// an untyped error, a broken API rule, a write by a read-only open, a
// refused writable open or a change that failed, a change to a file the
// changes did not touch (read by ext4go and by debugfs, before and
// after; files sharing blocks with what was touched or with free space
// are left out, as the kernel would change them too), or an image e2fsck
// found clean and finds unclean after ext4go's changes. New e2fsck
// findings on an image that was not clean are counted, not failed: a
// correct change can make a corruption show otherwise.
//
// go test -run TestHostileImages runs hostileDefaultCases cases
// (hostileShortCases with -short); EXT4GO_HOSTILE=N runs N (about one a
// second; give -timeout room: cases that would run past it are
// skipped), and EXT4GO_HOSTILE_SEED=S another sequence. A case is
// reproduced by its subtest name with the same seed and N:
// -run 'TestHostileImages/0042-'. -v prints the figures;
// EXT4GO_HOSTILE_KEEP=DIR keeps each case's image before and after the
// changes in DIR. Then (as root, with /dev/fuse; EXT4GO_HOSTILE_MOUNT=0
// leaves it out) the corrupted image is mounted through fusefs and used
// through the kernel: hostile_mount_test.go.

const (
	hostileDefaultCases = 60
	hostileShortCases   = 20
	hostileParallel     = 2
	hostileStall        = 15 * time.Second // no progress for this long is a hang
	hostileCaseTimeout  = 90 * time.Second
	hostileHeapCap      = 512 << 20 // live heap of the whole test process
	hostileToolTimeout  = 60 * time.Second
)

// hostileNode is an inode of a base image and where its blocks are.
type hostileNode struct {
	path       string // "" for reserved inodes not in the tree
	ino        uint32
	mode       fs.FileMode
	flags      uint32
	generation uint32
	data       []ext4go.Extent // data blocks
	meta       []uint64        // extent tree blocks, or indirect blocks
	acl        uint64          // xattr block, 0 if none
}

func (n *hostileNode) has(flag uint32) bool { return n.flags&flag != 0 }

const (
	flagExtents = 0x80000
	flagInline  = 0x10000000
	flagIndex   = 0x1000
)

// hostileBase is a clean image to corrupt copies of.
type hostileBase struct {
	name, image    string
	bs             int64
	csum           bool
	fsSeed         uint32
	sb             *super.Superblock
	inodeSize      int
	inodesPerGroup uint32
	descSize       int
	gdt            uint64 // primary group descriptor block
	groups         []ext4go.BlockGroup
	journal        []ext4go.BlockRange
	nodes          []*hostileNode
	dirFormat      dir.Format
	bytes          []byte // the image, shared by every case: not to be changed
}

// inodeOffset returns the byte offset of inode ino in the image.
func (b *hostileBase) inodeOffset(ino uint32) int64 {
	g := (ino - 1) / b.inodesPerGroup
	var table uint64
	for _, gr := range b.groups {
		for _, m := range gr.Metadata {
			if m.Kind == ext4go.KindInodeTable && m.Owner == g {
				table = m.Start
			}
		}
	}
	return int64(table)*b.bs + int64((ino-1)%b.inodesPerGroup)*int64(b.inodeSize)
}

// metadataBlocks lists the fixed metadata blocks (ranges) of the image.
func (b *hostileBase) metadataBlocks() []ext4go.BlockRange {
	var out []ext4go.BlockRange
	for _, g := range b.groups {
		out = append(out, g.Metadata...)
	}
	return out
}

// hostileSource writes the tree every base image holds.
func hostileSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	put := func(p string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, p), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sparse := func(p string, runs int, runLen, stride int64) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(src, p))
		if err != nil {
			t.Fatal(err)
		}
		for i := range runs {
			if _, err := f.WriteAt(pattern(int64(i+7), 0, int(runLen)), int64(i)*stride); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
	}
	for i := range 12 {
		put(fmt.Sprintf("small/f%02d", i), pattern(int64(i), 0, i*17))
	}
	put("mid/one-block", pattern(100, 0, 900))
	put("mid/few-blocks", pattern(101, 0, 7000))
	put("big/contiguous", pattern(102, 0, 600<<10))
	sparse("sparse/runs-6", 6, 1024, 8192)     // a few extents: depth 1 at most
	sparse("sparse/runs-400", 400, 1024, 4096) // hundreds: depth 2 at 1 KiB blocks
	sparse("sparse/holes-ind", 3, 1024, 300<<10)
	for i := range 300 {
		put(fmt.Sprintf("htree/entry-with-a-longish-name-%03d", i), []byte{byte(i)})
	}
	for i := range 6 {
		put(fmt.Sprintf("lin/file%d", i), pattern(int64(200+i), 0, 3000*i))
	}
	put("nest/a/b/c/deep-file", pattern(300, 0, 5000))
	for _, d := range []string{"empty", "xattr"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	put("xattr/in-inode", []byte("small xattr\n"))
	put("xattr/in-block", []byte("big xattr\n"))
	put("xattr/both", pattern(301, 0, 2500))
	if err := os.MkdirAll(filepath.Join(src, "lnk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../small/f01", filepath.Join(src, "lnk/fast")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strings.Repeat("long-target/", 12)+"end", filepath.Join(src, "lnk/slow")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(src, "small/f02"), filepath.Join(src, "small/hard")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(src, "lnk/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return src
}

// makeHostileBase formats a base image from src and maps it.
func makeHostileBase(t *testing.T, name, src string, size int64, args ...string) *hostileBase {
	t.Helper()
	image := filepath.Join(t.TempDir(), name+".img")
	testutil.Mke2fs(t, image, size, append(append([]string{"-N", "2048"}, args...), "-d", src)...)
	testutil.E2fsckFyD(t, image) // the big directories become htrees
	val := filepath.Join(t.TempDir(), "value")
	os.WriteFile(val, bytes.Repeat([]byte("block-sized xattr value "), 30), 0o644)
	testutil.DebugfsWrite(t, image,
		"ea_set xattr/in-inode user.small tiny",
		"ea_set -f "+val+" xattr/in-block user.big",
		"ea_set xattr/both user.small tiny",
		"ea_set -f "+val+" xattr/both user.big",
		"ea_set -f "+val+" mid/one-block user.big",
		"ea_set htree user.dir value-of-a-directory")
	testutil.RequireFsckClean(t, image)
	whole, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}

	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	info := fsys.Info()
	b := &hostileBase{name: name, image: image, bytes: whole, bs: int64(info.BlockSize), csum: info.Checksummed, fsSeed: info.ChecksumSeed,
		inodeSize: int(info.InodeSize), inodesPerGroup: info.InodesPerGroup, descSize: 32}
	if slices.Contains(info.Features, "64bit") {
		b.descSize = 64
	}
	raw := make([]byte, 1024)
	f, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	f.ReadAt(raw, 1024)
	f.Close()
	if b.sb, err = super.Decode(raw); err != nil {
		t.Fatal(err)
	}
	if b.groups, err = fsys.BlockGroups(); err != nil {
		t.Fatal(err)
	}
	for _, g := range b.groups {
		for _, m := range g.Metadata {
			switch {
			case m.Kind == ext4go.KindGroupDescriptors && g.Index == 0:
				b.gdt = m.Start
			case m.Kind == ext4go.KindJournal:
				b.journal = append(b.journal, m)
			}
		}
	}
	b.dirFormat = dir.Format{BlockSize: int(b.bs), FileType: true, Csum: b.csum}
	err = fsys.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := fsys.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*ext4go.Stat)
		n := &hostileNode{path: p, ino: st.Ino, mode: fi.Mode(), flags: st.Flags, generation: st.Generation, acl: st.FileACL}
		if n.data, err = fsys.Extents(p); err != nil {
			return err
		}
		b.nodes = append(b.nodes, n)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, ino := range []uint32{7, 8} { // the resize inode and the journal
		if info.JournalInode != 8 && ino == 8 {
			continue
		}
		b.nodes = append(b.nodes, &hostileNode{ino: ino})
	}
	// Tree and indirect blocks, from debugfs.
	var cmds []string
	for _, n := range b.nodes {
		cmds = append(cmds, fmt.Sprintf("stat <%d>", n.ino))
	}
	outs := testutil.DebugfsBatch(t, image, cmds)
	metaRE := regexp.MustCompile(`\((?:ETB\d+|IND|DIND|TIND)\):(\d+)`)
	for _, n := range b.nodes {
		out := outs[fmt.Sprintf("stat <%d>", n.ino)]
		for _, m := range metaRE.FindAllStringSubmatch(out, -1) {
			v, _ := strconv.ParseUint(m[1], 10, 64)
			n.meta = append(n.meta, v)
		}
		if n.path == "" {
			if m := regexp.MustCompile(`Flags: 0x([0-9a-f]+)`).FindStringSubmatch(out); m != nil {
				v, _ := strconv.ParseUint(m[1], 16, 32)
				n.flags = uint32(v)
			}
		}
	}
	return b
}

// hostilePatch is one corruption: bytes written at an offset of the
// image, and then the structure's checksum computed again, or not.
type hostilePatch struct {
	off   int64
	data  []byte
	what  string
	seal  func(img []byte) // recomputes the checksum covering the patch; nil: none to recompute
	stale bool             // leave the checksum stale (seal not called)
	// victim is the path of the inode corrupted (or whose block is), ""
	// if none: the changes go to it first.
	victim string
}

// hostileKind corrupts one kind of metadata.
type hostileKind struct {
	name string
	// make returns the patches of one corruption, or nil when the base
	// has nothing of the kind.
	make func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch
}

// mutate returns a corrupt value for the n bytes old: random, a flipped
// bit, all zeros or ones, a small step, or (for a block number) one of
// blocks.
func mutate(rng *rand.Rand, old []byte, blocks []uint64) []byte {
	n := len(old)
	out := slices.Clone(old)
	if len(blocks) > 0 && n >= 2 && rng.IntN(10) < 6 {
		putLE(out, blocks[rng.IntN(len(blocks))])
		if !bytes.Equal(out, old) {
			return out
		}
	}
	switch c := rng.IntN(8); {
	case c == 0:
		for i := range out {
			out[i] = byte(rng.Uint32())
		}
	case c == 1:
		i := rng.IntN(n * 8)
		out[i/8] ^= 1 << (i % 8)
	case c == 2:
		clear(out)
	case c == 3:
		for i := range out {
			out[i] = 0xff
		}
	case c == 4 && (n == 2 || n == 4):
		var v uint64
		if n == 2 {
			v = uint64(binary.LittleEndian.Uint16(out))
		} else {
			v = uint64(binary.LittleEndian.Uint32(out))
		}
		v += uint64(rng.IntN(5)) - 2
		putLE(out, v)
	case c == 5:
		out[0] ^= byte(1 << rng.IntN(8)) // a low bit: off by a little
	default: // a high bit: a huge value, a sign
		out[n-1] ^= 0x80
	}
	if bytes.Equal(out, old) {
		out[rng.IntN(n)] ^= byte(1 + rng.IntN(255))
	}
	return out
}

func putLE(b []byte, v uint64) {
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
}

// interestingBlocks are block numbers a corrupt pointer is made of: fixed
// metadata of every kind (about half of them), the journal, other files'
// data and tree blocks, the last block, past the end, 0 and 1.
func (b *hostileBase) interestingBlocks(rng *rand.Rand) []uint64 {
	out := []uint64{0, 1, b.sb.BlocksCount() - 1, b.sb.BlocksCount(), b.sb.BlocksCount() + 100, 1 << 31}
	meta := b.metadataBlocks()
	for range 12 {
		m := meta[rng.IntN(len(meta))]
		out = append(out, m.Start+uint64(rng.IntN(int(m.Length))))
	}
	for range 4 {
		n := b.nodes[rng.IntN(len(b.nodes))]
		if len(n.data) > 0 {
			out = append(out, n.data[0].Physical)
		}
		out = append(out, n.meta...)
	}
	return out
}

// field patches the n bytes at off (absolute) with a mutation.
func field(img []byte, rng *rand.Rand, off int64, n int, blocks []uint64, what string) hostilePatch {
	return hostilePatch{off: off, data: mutate(rng, img[off:off+int64(n)], blocks), what: what}
}

// pickable are the nodes corruptions pick from: all but most of the
// htree directory's files, which would otherwise be most picks.
func (b *hostileBase) pickable() []*hostileNode {
	var out []*hostileNode
	for i, n := range b.nodes {
		if !strings.HasPrefix(n.path, "htree/") || i%50 == 0 {
			out = append(out, n)
		}
	}
	return out
}

// pickNode returns a random node of pickable that satisfies keep, or nil.
func pickNode(b *hostileBase, rng *rand.Rand, keep func(*hostileNode) bool) *hostileNode {
	var c []*hostileNode
	for _, n := range b.pickable() {
		if keep(n) {
			c = append(c, n)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[rng.IntN(len(c))]
}

// inodeSeal recomputes the checksum of inode n.
func (b *hostileBase) inodeSeal(ino uint32) func([]byte) {
	if !b.csum {
		return nil
	}
	return func(img []byte) {
		off := b.inodeOffset(ino)
		inode.SetChecksum(b.fsSeed, ino, img[off:off+int64(b.inodeSize)])
	}
}

// blockSeal recomputes the checksum of block blk with fn (given the block).
func (b *hostileBase) blockSeal(blk uint64, fn func(blkb []byte)) func([]byte) {
	if !b.csum {
		return nil
	}
	return func(img []byte) { fn(img[int64(blk)*b.bs : int64(blk+1)*b.bs]) }
}

// Superblock fields: offset and size.
var superFields = [][2]int{
	{0x0, 4}, {0x4, 4}, {0xC, 4}, {0x10, 4}, {0x14, 4}, {0x18, 4}, {0x1C, 4}, {0x20, 4}, {0x24, 4}, {0x28, 4},
	{0x3A, 2}, {0x4C, 4}, {0x54, 4}, {0x58, 2}, {0x5C, 4}, {0x60, 4}, {0x64, 4}, {0xCE, 2}, {0xE0, 4}, {0xE8, 4},
	{0xEC, 4}, {0xFC, 1}, {0xFE, 2}, {0x104, 4}, {0x150, 4}, {0x15C, 2}, {0x15E, 2}, {0x160, 4}, {0x174, 1},
	{0x175, 1}, {0x270, 4}, {0x278, 4},
}

// Group descriptor fields.
var descFields = [][2]int{{0x0, 4}, {0x4, 4}, {0x8, 4}, {0xC, 2}, {0xE, 2}, {0x10, 2}, {0x12, 2}, {0x1C, 2}, {0x1E, 2}}

// Inode fields (i_block words apart).
var inodeFields = [][2]int{{0x0, 2}, {0x4, 4}, {0x6C, 4}, {0x1A, 2}, {0x1C, 4}, {0x20, 4}, {0x68, 4}, {0x80, 2}, {0x64, 4}, {0x14, 4}, {0x74, 2}}

var hostileKinds = []hostileKind{
	{"superblock", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		f := superFields[rng.IntN(len(superFields))]
		p := field(img, rng, 1024+int64(f[0]), f[1], b.interestingBlocks(rng), fmt.Sprintf("superblock field %#x", f[0]))
		if b.csum {
			p.seal = func(img []byte) {
				sb := img[1024:2048]
				binary.LittleEndian.PutUint32(sb[0x3FC:], super.Checksum(sb))
			}
		}
		return []hostilePatch{p}
	}},
	{"group-descriptor", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		g := uint32(rng.IntN(len(b.groups)))
		f := descFields[rng.IntN(len(descFields))]
		base := int64(b.gdt)*b.bs + int64(g)*int64(b.descSize)
		p := field(img, rng, base+int64(f[0]), f[1], b.interestingBlocks(rng), fmt.Sprintf("group %d descriptor field %#x", g, f[0]))
		if b.sb.HasMetadataCsum() || b.sb.HasGDTCsum() {
			p.seal = func(img []byte) {
				d := img[base : base+int64(b.descSize)]
				binary.LittleEndian.PutUint16(d[0x1E:], super.GroupDescChecksum(b.sb, d, g))
			}
		}
		return []hostilePatch{p}
	}},
	{"bitmap", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		var bms []ext4go.BlockRange
		for _, m := range b.metadataBlocks() {
			if m.Kind == ext4go.KindBlockBitmap || m.Kind == ext4go.KindInodeBitmap {
				bms = append(bms, m)
			}
		}
		m := bms[rng.IntN(len(bms))]
		off := int64(m.Start) * b.bs
		blk := slices.Clone(img[off : off+b.bs])
		switch rng.IntN(3) {
		case 0:
			for range 1 + rng.IntN(32) {
				i := rng.IntN(len(blk) * 8)
				blk[i/8] ^= 1 << (i % 8)
			}
		case 1:
			clear(blk)
		default:
			for i := range blk {
				blk[i] = 0xff
			}
		}
		// The bitmaps' checksums live in the descriptor: left stale.
		return []hostilePatch{{off: off, data: blk, what: fmt.Sprintf("%v of group %d", m.Kind, m.Owner)}}
	}},
	{"inode", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(*hostileNode) bool { return true })
		off := b.inodeOffset(n.ino)
		var p hostilePatch
		if rng.IntN(3) == 0 {
			w := rng.IntN(15)
			p = field(img, rng, off+0x28+int64(4*w), 4, b.interestingBlocks(rng), fmt.Sprintf("inode %d (%s) i_block[%d]", n.ino, n.path, w))
		} else {
			f := inodeFields[rng.IntN(len(inodeFields))]
			p = field(img, rng, off+int64(f[0]), f[1], b.interestingBlocks(rng), fmt.Sprintf("inode %d (%s) field %#x", n.ino, n.path, f[0]))
		}
		p.seal, p.victim = b.inodeSeal(n.ino), n.path
		return []hostilePatch{p}
	}},
	{"extent-header", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		return extentPatch(b, img, rng, true)
	}},
	{"extent-entry", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		return extentPatch(b, img, rng, false)
	}},
	{"block-map", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool {
			return !n.has(flagExtents) && !n.has(flagInline) && len(n.data) > 0 && n.path != ""
		})
		if n == nil {
			return nil
		}
		blocks := b.interestingBlocks(rng)
		if len(n.meta) > 0 && rng.IntN(2) == 0 {
			blk := n.meta[rng.IntN(len(n.meta))]
			w := rng.IntN(int(b.bs / 4))
			if rng.IntN(2) == 0 {
				w = rng.IntN(8) // the start, where the pointers are
			}
			p := field(img, rng, int64(blk)*b.bs+int64(4*w), 4, blocks, fmt.Sprintf("indirect block %d of inode %d (%s) word %d", blk, n.ino, n.path, w))
			p.victim = n.path
			return []hostilePatch{p}
		}
		w := rng.IntN(15)
		p := field(img, rng, b.inodeOffset(n.ino)+0x28+int64(4*w), 4, blocks, fmt.Sprintf("inode %d (%s) i_block[%d]", n.ino, n.path, w))
		p.seal, p.victim = b.inodeSeal(n.ino), n.path
		return []hostilePatch{p}
	}},
	{"dirent", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool { return n.mode.IsDir() && len(n.data) > 0 })
		if n == nil {
			return nil
		}
		var lblk uint64
		blk := n.data[0].Physical
		if e := n.data[rng.IntN(len(n.data))]; true {
			k := uint64(rng.IntN(int(e.Length)))
			lblk, blk = e.Logical+k, e.Physical+k
		}
		base := int64(blk) * b.bs
		block := img[base : base+b.bs]
		// The dirents of the block: an htree root holds "." and ".."
		// only, a node one fake dirent.
		var offs []int
		for off := 0; off+8 <= len(block); {
			rl := int(binary.LittleEndian.Uint16(block[off+4:]))
			if rl == 0 && b.bs == 65536 {
				rl = 65536
			}
			if rl < 8 || off+rl > len(block) {
				break
			}
			offs = append(offs, off)
			off += rl
		}
		if len(offs) == 0 {
			return nil
		}
		off := int64(offs[rng.IntN(len(offs))])
		f := [][2]int{{0, 4}, {4, 2}, {6, 1}, {7, 1}, {8, 1}}[rng.IntN(5)]
		var blocks []uint64
		if f[0] == 0 { // an inode number: of another file, reserved, past the end
			blocks = []uint64{0, 1, 2, 7, 8, 11, uint64(b.sb.InodesCount), uint64(b.sb.InodesCount) + 1, 999}
			for range 3 {
				blocks = append(blocks, uint64(b.nodes[rng.IntN(len(b.nodes))].ino))
			}
		}
		p := field(img, rng, base+off+int64(f[0]), f[1], blocks, fmt.Sprintf("directory %s (inode %d) block %d dirent at %d field %d", n.path, n.ino, lblk, off, f[0]))
		p.seal = b.blockSeal(blk, func(bb []byte) {
			seed := inode.Seed(b.fsSeed, n.ino, n.generation)
			if dir.HasTail(bb, b.dirFormat) {
				dir.SetLeafChecksum(bb, b.dirFormat, seed)
			} else {
				dir.SetDxChecksum(bb, b.dirFormat, seed)
			}
		})
		p.victim = n.path
		return []hostilePatch{p}
	}},
	{"htree", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool { return n.mode.IsDir() && n.has(flagIndex) && len(n.data) > 0 })
		if n == nil {
			return nil
		}
		blk := n.data[0].Physical // the root
		base := int64(blk) * b.bs
		// dx_root_info (hash version, info length, levels, flags), then
		// limit, count, block 0, and the entries (hash, block).
		f := [][2]int{{0x18, 4}, {0x1C, 1}, {0x1D, 1}, {0x1E, 1}, {0x1F, 1}, {0x20, 2}, {0x22, 2}, {0x24, 4}}[rng.IntN(8)]
		if rng.IntN(3) == 0 {
			k := rng.IntN(8)
			f = [2]int{0x28 + 8*k + 4*rng.IntN(2), 4}
		}
		blocks := []uint64{0, 1, uint64(n.data[len(n.data)-1].Logical + n.data[len(n.data)-1].Length), 1 << 20}
		p := field(img, rng, base+int64(f[0]), f[1], blocks, fmt.Sprintf("htree root of %s (inode %d) at %#x", n.path, n.ino, f[0]))
		p.seal = b.blockSeal(blk, func(bb []byte) { dir.SetDxChecksum(bb, b.dirFormat, inode.Seed(b.fsSeed, n.ino, n.generation)) })
		p.victim = n.path
		return []hostilePatch{p}
	}},
	{"xattr", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool { return n.acl != 0 || strings.HasPrefix(n.path, "xattr/") })
		if n == nil {
			return nil
		}
		if n.acl != 0 && rng.IntN(2) == 0 {
			base := int64(n.acl) * b.bs
			// Header: magic, refcount, blocks, hash, checksum; entries from 32.
			f := [][2]int{{0, 4}, {4, 4}, {8, 4}, {12, 4}, {32, 1}, {33, 1}, {34, 2}, {36, 4}, {40, 4}, {44, 4}, {48, 1}}[rng.IntN(11)]
			p := field(img, rng, base+int64(f[0]), f[1], nil, fmt.Sprintf("xattr block %d of %s at %d", n.acl, n.path, f[0]))
			p.seal = b.blockSeal(n.acl, func(bb []byte) { xattr.SetBlockChecksum(bb, n.acl, b.fsSeed) })
			p.victim = n.path
			return []hostilePatch{p}
		}
		off := b.inodeOffset(n.ino)
		extra := int64(binary.LittleEndian.Uint16(img[off+0x80:]))
		area := off + 128 + extra
		// Magic, then the first entry: name_len, index, value_offs,
		// value_inum, value_size, hash.
		f := [][2]int{{0, 4}, {4, 1}, {5, 1}, {6, 2}, {8, 4}, {12, 4}, {16, 4}, {20, 1}}[rng.IntN(8)]
		if area+int64(f[0]+f[1]) > off+int64(b.inodeSize) {
			return nil
		}
		p := field(img, rng, area+int64(f[0]), f[1], nil, fmt.Sprintf("in-inode xattrs of %s (inode %d) at %d", n.path, n.ino, f[0]))
		p.seal, p.victim = b.inodeSeal(n.ino), n.path
		return []hostilePatch{p}
	}},
	{"inline-data", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool { return n.has(flagInline) })
		if n == nil {
			return nil
		}
		off := b.inodeOffset(n.ino)
		var p hostilePatch
		if rng.IntN(2) == 0 {
			at := rng.IntN(60)
			p = field(img, rng, off+0x28+int64(at), 1+rng.IntN(min(4, 60-at)), nil, fmt.Sprintf("inline i_block of %s (inode %d) byte %d", n.path, n.ino, at))
		} else {
			p = field(img, rng, off+0x4, 4, nil, fmt.Sprintf("size of inline %s (inode %d)", n.path, n.ino))
		}
		p.seal, p.victim = b.inodeSeal(n.ino), n.path
		return []hostilePatch{p}
	}},
	{"symlink", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		n := pickNode(b, rng, func(n *hostileNode) bool { return n.mode&fs.ModeSymlink != 0 })
		if n == nil {
			return nil
		}
		off := b.inodeOffset(n.ino)
		f := [][2]int{{0x4, 4}, {0x28, 4}, {0x2C, 4}, {0x20, 4}, {0x1C, 4}}[rng.IntN(5)]
		p := field(img, rng, off+int64(f[0]), f[1], b.interestingBlocks(rng), fmt.Sprintf("symlink %s (inode %d) field %#x", n.path, n.ino, f[0]))
		p.seal, p.victim = b.inodeSeal(n.ino), n.path
		return []hostilePatch{p}
	}},
	{"journal-superblock", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		if len(b.journal) == 0 {
			return nil
		}
		base := int64(b.journal[0].Start) * b.bs
		// Big-endian fields: magic, blocktype, sequence, blocksize,
		// maxlen, first, sequence, start, errno, features, nr_users,
		// max transaction, checksum type, fast-commit blocks.
		f := [][2]int{{0, 4}, {4, 4}, {8, 4}, {0xC, 4}, {0x10, 4}, {0x14, 4}, {0x18, 4}, {0x1C, 4}, {0x20, 4},
			{0x24, 4}, {0x28, 4}, {0x2C, 4}, {0x40, 4}, {0x48, 4}, {0x50, 1}, {0x54, 4}}[rng.IntN(16)]
		// The journal's own checksum is left stale: the harness does
		// not seal jbd2 superblocks.
		return []hostilePatch{field(img, rng, base+int64(f[0]), f[1], nil, fmt.Sprintf("journal superblock at %#x", f[0]))}
	}},
	{"garbage-block", func(b *hostileBase, img []byte, rng *rand.Rand) []hostilePatch {
		// A run of random bytes in a metadata block: a tree, indirect,
		// directory or xattr block, or fixed metadata.
		var blks []uint64
		owner := map[uint64]string{}
		for _, n := range b.nodes {
			blks = append(blks, n.meta...)
			if n.acl != 0 {
				blks = append(blks, n.acl)
				owner[n.acl] = n.path
			}
			if n.mode.IsDir() {
				for _, e := range n.data {
					blks = append(blks, e.Physical)
				}
			}
			for _, blk := range n.meta {
				owner[blk] = n.path
			}
			if n.mode.IsDir() {
				for _, e := range n.data {
					owner[e.Physical] = n.path
				}
			}
		}
		for _, m := range b.metadataBlocks() {
			if m.Kind != ext4go.KindJournal && m.Kind != ext4go.KindReservedGDT {
				blks = append(blks, m.Start+uint64(rng.IntN(int(m.Length))))
			}
		}
		blk := blks[rng.IntN(len(blks))]
		n := 8 + rng.IntN(120)
		at := int64(rng.IntN(int(b.bs) - n))
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		return []hostilePatch{{off: int64(blk)*b.bs + at, data: data, what: fmt.Sprintf("%d random bytes at %d of block %d", n, at, blk), victim: owner[blk]}}
	}},
}

// extentPatch corrupts the header (header) or an entry of an extent node:
// the root in the inode or a tree block.
func extentPatch(b *hostileBase, img []byte, rng *rand.Rand, header bool) []hostilePatch {
	n := pickNode(b, rng, func(n *hostileNode) bool { return n.has(flagExtents) && !n.has(flagInline) && len(n.data) > 0 })
	if n == nil {
		return nil
	}
	var base int64
	var seal func([]byte)
	where := "root"
	room := 4 // entries
	if len(n.meta) > 0 && rng.IntN(2) == 0 {
		blk := n.meta[rng.IntN(len(n.meta))]
		base = int64(blk) * b.bs
		room = int(b.bs-12) / 12
		where = fmt.Sprintf("tree block %d", blk)
		seal = b.blockSeal(blk, func(bb []byte) {
			extent.SetChecksum(bb, inode.Seed(b.fsSeed, n.ino, n.generation)) // fails on a bad eh_max: stale then
		})
	} else {
		base = b.inodeOffset(n.ino) + 0x28
		seal = b.inodeSeal(n.ino)
	}
	var off int64
	var size int
	if header {
		f := [][2]int{{0, 2}, {2, 2}, {4, 2}, {6, 2}}[rng.IntN(4)] // magic, entries, max, depth
		off, size = int64(f[0]), f[1]
	} else {
		entries := int(binary.LittleEndian.Uint16(img[base+2:]))
		k := rng.IntN(max(1, min(entries, room)))
		// logical, len (or index leaf_lo), start_hi, start_lo
		f := [][2]int{{0, 4}, {4, 2}, {4, 4}, {6, 2}, {8, 4}}[rng.IntN(5)]
		off, size = int64(12+12*k+f[0]), f[1]
	}
	p := field(img, rng, base+off, size, b.interestingBlocks(rng), fmt.Sprintf("extent %s of %s (inode %d) at %d", where, n.path, n.ino, off))
	p.seal, p.victim = seal, n.path
	return []hostilePatch{p}
}

// hostileStats counts outcomes over all cases.
type hostileStats struct {
	mu       sync.Mutex
	cases    int
	byKind   map[string]int
	outcomes map[string]int
	failures map[string][]string // class -> case names
	newFsck  []string            // cases whose changes e2fsck finds problems in it did not find before
}

func (s *hostileStats) add(outcome string) {
	s.mu.Lock()
	s.outcomes[outcome]++
	s.mu.Unlock()
}

func (s *hostileStats) fail(class, caseName string) {
	s.mu.Lock()
	if !slices.Contains(s.failures[class], caseName) {
		s.failures[class] = append(s.failures[class], caseName)
	}
	s.mu.Unlock()
}

// TestHostileImages runs the hostile-image harness (see above).
func TestHostileImages(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck", "dumpe2fs")
	cases := hostileDefaultCases
	if testing.Short() {
		cases = hostileShortCases
	}
	if v := os.Getenv("EXT4GO_HOSTILE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			t.Fatalf("EXT4GO_HOSTILE=%q: want a number of cases", v)
		}
		cases = n
	}
	seed := uint64(1)
	if v := os.Getenv("EXT4GO_HOSTILE_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("EXT4GO_HOSTILE_SEED=%q: want a number", v)
		}
		seed = s
	}
	start := time.Now()
	src := hostileSource(t)
	bases := []*hostileBase{
		makeHostileBase(t, "ext4-1k", src, 24<<20, "-t", "ext4", "-b", "1024", "-g", "2048", "-I", "256",
			"-O", "^metadata_csum,^uninit_bg,inline_data"),
		makeHostileBase(t, "ext4-4k-csum", src, 48<<20, "-t", "ext4", "-b", "4096", "-g", "4096"),
		makeHostileBase(t, "ext3-1k", src, 24<<20, "-t", "ext3", "-b", "1024", "-g", "2048", "-I", "256"),
	}
	t.Logf("base images built in %v", time.Since(start).Round(time.Millisecond))
	old := debug.SetMemoryLimit(corpusMemoryLimit)
	stats := &hostileStats{byKind: map[string]int{}, outcomes: map[string]int{}, failures: map[string][]string{}}
	t.Cleanup(func() {
		debug.SetMemoryLimit(old)
		var b strings.Builder
		fmt.Fprintf(&b, "hostile images: seed %d, %d cases in %v\n", seed, stats.cases, time.Since(start).Round(time.Second))
		keys := func(m map[string]int) []string {
			k := make([]string, 0, len(m))
			for x := range m {
				k = append(k, x)
			}
			sort.Strings(k)
			return k
		}
		fmt.Fprintf(&b, "  by kind:")
		for _, k := range keys(stats.byKind) {
			fmt.Fprintf(&b, " %s %d,", k, stats.byKind[k])
		}
		fmt.Fprintf(&b, "\n  outcomes:")
		for _, k := range keys(stats.outcomes) {
			fmt.Fprintf(&b, " %s %d,", k, stats.outcomes[k])
		}
		if len(stats.newFsck) > 0 {
			sort.Strings(stats.newFsck)
			fmt.Fprintf(&b, "\n  e2fsck finds new problems after the changes (not failures: a corrupt image's): %s", strings.Join(stats.newFsck, " "))
		}
		if len(stats.failures) == 0 {
			fmt.Fprintf(&b, "\n  failures: none")
		}
		for class, names := range stats.failures {
			sort.Strings(names)
			fmt.Fprintf(&b, "\n  FAILURES %s: %d cases (%s)", class, len(names), strings.Join(names[:min(len(names), 12)], " "))
		}
		t.Log(b.String())
	})
	sem := make(chan struct{}, hostileParallel)
	for i := range cases {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		b := bases[rng.IntN(len(bases))]
		var kind hostileKind
		var patches []hostilePatch
		for tries := 0; patches == nil && tries < 20; tries++ {
			kind = hostileKinds[rng.IntN(len(hostileKinds))]
			patches = kind.make(b, b.bytes, rng)
		}
		if rng.IntN(5) == 0 {
			// Now and then a second corruption of the same kind: the
			// victim stays the first's.
			patches = append(patches, kind.make(b, b.bytes, rng)...)
		}
		for j := range patches {
			patches[j].stale = patches[j].seal != nil && rng.IntN(4) == 0
		}
		name := fmt.Sprintf("%04d-%s-%s", i, b.name, kind.name)
		stats.mu.Lock()
		stats.cases++
		stats.byKind[kind.name]++
		stats.mu.Unlock()
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sem <- struct{}{}
			defer func() { <-sem }()
			if dl, ok := t.Deadline(); ok && time.Until(dl) < hostileCaseTimeout+30*time.Second {
				stats.add("skipped: the test's -timeout is near")
				t.Skip("too close to the test's deadline (-timeout) for another case")
			}
			hostileCase(t, name, b, patches, rng.Uint64(), stats)
		})
	}
}

// hostileCase corrupts a copy of base's image with patches and checks
// the library on it.
func hostileCase(t *testing.T, name string, b *hostileBase, patches []hostilePatch, opSeed uint64, stats *hostileStats) {
	img := slices.Clone(b.bytes)
	for _, p := range patches {
		copy(img[p.off:], p.data)
		if p.seal != nil && !p.stale {
			p.seal(img)
		}
		t.Logf("corruption: %s: %d bytes at %d = %x (checksum %s)", p.what, len(p.data), p.off, p.data,
			map[bool]string{true: "stale", false: "sealed or none"}[p.stale])
	}
	image := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(image, img, 0o644); err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("EXT4GO_HOSTILE_KEEP"); keep != "" {
		// For a closer look: the corrupted image, and (below) the image
		// after the changes.
		os.WriteFile(filepath.Join(keep, name+".before.img"), img, 0o644)
		defer func() {
			if data, err := os.ReadFile(image); err == nil {
				os.WriteFile(filepath.Join(keep, name+".after.img"), data, 0o644)
			}
		}()
	}
	imageM := ""
	if ok, _ := hostileMountEnabled(); ok {
		imageM = filepath.Join(t.TempDir(), "img-mount")
		if err := os.WriteFile(imageM, img, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img = nil
	fail := func(class, format string, args ...any) {
		t.Helper()
		stats.fail(class, name)
		t.Errorf("%s: %s", class, fmt.Sprintf(format, args...))
	}
	t0 := time.Now()
	fsckBefore, fsckOutBefore, err := hostileFsck(image)
	if err != nil {
		t.Fatalf("e2fsck before: %v", err)
	}
	t1 := time.Now()
	debugfsBefore := hostileDebugfsHashes(t, b, image)
	t.Logf("e2fsck -fn: exit %d in %v; debugfs dump of %d files in %v", fsckBefore, t1.Sub(t0).Round(time.Millisecond), len(debugfsBefore), time.Since(t1).Round(time.Millisecond))
	t2 := time.Now()
	defer func() { t.Logf("ext4go's part took %v", time.Since(t2).Round(time.Millisecond)) }()

	stop := watchHeap(t, hostileHeapCap)
	var prog atomic.Int64
	done := make(chan *hostileResult, 1)
	go func() {
		r := &hostileResult{}
		defer func() {
			if p := recover(); p != nil {
				r.fails = append(r.fails, [2]string{"panic", fmt.Sprintf("%v\n%s", p, debug.Stack())})
			}
			done <- r
		}()
		hostileRun(r, b, image, patches[0].victim, opSeed, &prog)
	}()
	finished := false
	defer func() {
		if !finished { // awaitProgress ended the test: a hang
			stats.fail("hang", name)
		}
	}()
	r := awaitProgress(t, done, &prog, hostileStall, hostileCaseTimeout)
	finished = true
	stop()
	if t.Failed() {
		stats.fail("heap", name)
	}
	for _, l := range r.log {
		t.Log(l)
	}
	for _, f := range r.fails {
		fail(f[0], "%s", f[1])
	}
	stats.add("read: " + r.readOutcome)
	stats.add("write: " + r.writeOutcome)
	if imageM != "" {
		tm := time.Now()
		stats.add("mount: " + hostileMount(t, imageM, patches[0].victim, fsckBefore, fail))
		t.Logf("mount phase took %v", time.Since(tm).Round(time.Millisecond))
	}
	if r.writeOutcome != "accepted" {
		return
	}
	// What only the changes touched may differ, as debugfs reads it too.
	debugfsAfter := hostileDebugfsHashes(t, b, image)
	for p, h := range debugfsBefore {
		if !r.untouched[p] {
			continue
		}
		switch after, ok := debugfsAfter[p]; {
		case !ok:
			fail("untouched file changed (debugfs)", "%s: debugfs cannot dump it after the changes", p)
		case after != h:
			fail("untouched file changed (debugfs)", "%s: debugfs dumps other contents after the changes", p)
		}
	}
	fsckAfter, fsckOutAfter, err := hostileFsck(image)
	if err != nil {
		t.Fatalf("e2fsck after: %v", err)
	}
	switch {
	case fsckBefore == 0 && fsckAfter != 0:
		fail("e2fsck clean before, unclean after", "e2fsck -fn exits %d after the changes:\n%s", fsckAfter, fsckOutAfter)
	case fsckBefore != 0:
		if added := newFsckProblems(fsckOutBefore, fsckOutAfter); len(added) > 0 {
			stats.add("write: e2fsck reports problems it did not before")
			stats.mu.Lock()
			stats.newFsck = append(stats.newFsck, name)
			stats.mu.Unlock()
			t.Logf("e2fsck -fn after the changes reports what it did not before (exit %d, was %d):\n%s",
				fsckAfter, fsckBefore, strings.Join(added, "\n"))
		}
	}
}

// hostileResult is what hostileRun found; it never touches the
// *testing.T (it runs in a goroutine the test may abandon on a hang).
type hostileResult struct {
	readOutcome, writeOutcome string
	log                       []string
	fails                     [][2]string     // class, message
	untouched                 map[string]bool // regular files the changes did not touch and ext4go read before
}

func (r *hostileResult) failf(class, format string, args ...any) {
	r.fails = append(r.fails, [2]string{class, fmt.Sprintf(format, args...)})
}

func (r *hostileResult) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

var hostileWalkLimits = walkLimits{maxEntries: 20_000, maxFileRead: 8 << 20, maxRead: 64 << 20, fullPerDir: 500, sampleEvery: 10}

// hostileRun reads image, then changes it, as the package doc says.
func hostileRun(r *hostileResult, b *hostileBase, image, victim string, opSeed uint64, prog *atomic.Int64) {
	before, err := fileSum(image)
	if err != nil {
		r.failf("harness", "%v", err)
		return
	}
	fsys, opts, err := openCorpus(image)
	if err != nil {
		r.readOutcome = "refused"
		if !typedErr(err) {
			r.failf("untyped error", "open: %T: %v", err, err)
		}
		r.logf("read-only open refused: %v", err)
	} else {
		r.readOutcome = describeOpts(opts)
		tw := time.Now()
		w := walkFS(fsys, hostileWalkLimits, prog)
		r.logf("walk took %v", time.Since(tw).Round(time.Millisecond))
		for _, f := range w.fails {
			class := "api rule"
			if strings.Contains(f, "untyped error") {
				class = "untyped error"
			}
			r.failf(class, "%s", f)
		}
		r.logf("walk: %s", w.summary())
		for i, e := range w.errs {
			if i == 5 {
				break
			}
			r.logf("  walk error: %s", e)
		}
		fsys.Close()
	}
	if after, err := fileSum(image); err != nil || after != before {
		r.failf("read-only open wrote", "the image changed (%v)", err)
		return
	}

	// Before the changes: what ext4go reads of every regular file.
	ts := time.Now()
	snap := hostileSnapshot(image, opts)
	r.logf("snapshot took %v", time.Since(ts).Round(time.Millisecond))
	rng := rand.New(rand.NewPCG(opSeed, 1))
	wopts := &ext4go.Options{Writable: true, AllowUnclean: true}
	if opts != nil {
		wopts.IgnoreChecksums = opts.IgnoreChecksums
	}
	fsys, err = ext4go.Open(image, wopts)
	if err != nil {
		r.writeOutcome = "refused"
		if !writeTypedErr(err) {
			r.failf("untyped error", "writable open: %T: %v", err, err)
		}
		if after, rerr := fileSum(image); rerr != nil || after != before {
			r.failf("refused open wrote", "a refused writable open (%v) changed the image", err)
		}
		r.logf("writable open refused: %v", err)
		return
	}
	r.writeOutcome = "accepted"
	if err := fsys.Close(); err != nil {
		if !writeTypedErr(err) {
			r.failf("untyped error", "close: %T: %v", err, err)
		}
		r.logf("close: %v", err)
	}
	tc := time.Now()
	touched := &hostileTouched{inos: map[uint32]bool{}}
	if victim != "" && victim != "." {
		touched.add(snap, victim)
		hostileVictimChanges(r, b, image, wopts, victim, rng, prog)
	}
	if fsys, err = ext4go.Open(image, wopts); err != nil {
		if !writeTypedErr(err) {
			r.failf("untyped error", "writable open: %T: %v", err, err)
		}
		r.logf("writable open after the changes to %s: %v", victim, err)
	} else {
		hostileChanges(r, fsys, b, snap, touched, rng, prog)
		if err := fsys.Close(); err != nil {
			if !writeTypedErr(err) {
				r.failf("untyped error", "close: %T: %v", err, err)
			}
			r.logf("close: %v", err)
		}
	}
	r.logf("changes took %v", time.Since(tc).Round(time.Millisecond))
	// Every file the changes did not touch reads as before.
	after := hostileSnapshot(image, opts)
	r.untouched = map[string]bool{}
	for p, s := range snap.files {
		if touched.has(p, s) || snap.shares(p, s, touched) {
			continue
		}
		r.untouched[p] = true
		a, ok := after.files[p]
		switch {
		case !ok:
			r.failf("untouched file changed", "%s is gone (%v)", p, after.errs[p])
		case a.hash != s.hash:
			r.failf("untouched file changed", "%s reads otherwise after the changes (%d bytes, were %d)", p, a.size, s.size)
		}
	}
}

func fileSum(p string) ([32]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return [32]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [32]byte{}, err
	}
	return [32]byte(h.Sum(nil)), nil
}

// imageChunk is the unit imageChunks sums.
const imageChunk = 1024

// imageChunks returns a checksum (crc32c) of every KiB of the image,
// read in pieces: comparing two such lists tells where an image changed
// without holding two copies of it (the harness's own garbage would
// otherwise be most of the heap it watches).
func imageChunks(p string) ([]uint32, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tab := crc32.MakeTable(crc32.Castagnoli)
	var out []uint32
	buf := make([]byte, 1<<20)
	for {
		n, err := io.ReadFull(f, buf)
		for off := 0; off < n; off += imageChunk {
			out = append(out, crc32.Checksum(buf[off:min(n, off+imageChunk)], tab))
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// diffChunks describes the first KiB where two imageChunks lists differ
// outside the allowed byte ranges, or returns "".
func diffChunks(a, b []uint32, allowed [][2]int64) string {
	if len(a) != len(b) {
		return fmt.Sprintf("size %d KiB, was %d", len(b), len(a))
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		off := int64(i) * imageChunk
		ok := false
		for _, r := range allowed {
			ok = ok || (off >= r[0] && off+imageChunk <= r[1])
		}
		if !ok {
			return fmt.Sprintf("KiB %d (bytes %d..%d) changed", i, off, off+imageChunk)
		}
	}
	return ""
}

// hostileFile is what a snapshot read of a regular file.
type hostileFile struct {
	ino    uint32
	size   int64
	hash   [32]byte
	blocks [][2]uint64 // its data blocks and xattr block, [start, end)
}

// hostileSnap is every regular file ext4go reads whole, the blocks of
// every directory, and the free space.
type hostileSnap struct {
	files map[string]hostileFile
	dirs  map[string][][2]uint64
	errs  map[string]error
	free  [][2]uint64
}

// hostileSnapshot reads image read-only with opts (nil: the open failed
// before; an empty snapshot then).
func hostileSnapshot(image string, opts *ext4go.Options) *hostileSnap {
	s := &hostileSnap{files: map[string]hostileFile{}, dirs: map[string][][2]uint64{}, errs: map[string]error{}}
	if opts == nil {
		return s
	}
	o := *opts
	fsys, err := ext4go.Open(image, &o)
	if err != nil {
		return s
	}
	defer fsys.Close()
	fsys.FreeExtents(func(start, length uint64) error {
		s.free = append(s.free, [2]uint64{start, start + length})
		return nil
	})
	blocksOf := func(p string, acl uint64) ([][2]uint64, error) {
		exts, err := fsys.Extents(p)
		var out [][2]uint64
		for _, e := range exts {
			out = append(out, [2]uint64{e.Physical, e.Physical + e.Length})
		}
		if acl != 0 {
			out = append(out, [2]uint64{acl, acl + 1})
		}
		return out, err
	}
	fsys.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d == nil || len(s.files) > 2000 {
			return nil
		}
		if d.IsDir() {
			if fi, err := fsys.Lstat(p); err == nil {
				s.dirs[p], _ = blocksOf(p, fi.Sys().(*ext4go.Stat).FileACL)
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := fsys.Lstat(p)
		if err != nil || fi.Size() > 8<<20 {
			s.errs[p] = err
			return nil
		}
		data, err := fsys.ReadFile(p)
		if err != nil {
			s.errs[p] = err
			return nil
		}
		st := fi.Sys().(*ext4go.Stat)
		blocks, err := blocksOf(p, st.FileACL)
		if err != nil {
			s.errs[p] = err
			return nil
		}
		s.files[p] = hostileFile{ino: st.Ino, size: fi.Size(), hash: sha256.Sum256(data), blocks: blocks}
		return nil
	})
	return s
}

// hostileTouched is what the changes touched: paths (and everything
// under them), inodes and blocks.
type hostileTouched struct {
	paths  []string
	inos   map[uint32]bool
	blocks [][2]uint64
}

func (t *hostileTouched) add(s *hostileSnap, p string) {
	t.paths = append(t.paths, p)
	under := func(q string) bool { return q == p || strings.HasPrefix(q, p+"/") || p == "." }
	for q, f := range s.files {
		if under(q) {
			t.inos[f.ino] = true
			t.blocks = append(t.blocks, f.blocks...)
		}
	}
	for q, bs := range s.dirs {
		if under(q) {
			t.blocks = append(t.blocks, bs...)
		}
	}
}

func (t *hostileTouched) has(p string, f hostileFile) bool {
	if t.inos[f.ino] {
		return true // another name of a touched inode
	}
	for _, q := range t.paths {
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}

// shares reports whether the blocks of file p, or of a directory on its
// path, meet the free space or the blocks of what the changes touched: a
// corrupt image may share them (a file's data block that is also a
// directory's), and then a change to the one (or an allocation of "free"
// blocks) changes the other, as it would under the kernel.
func (s *hostileSnap) shares(p string, f hostileFile, t *hostileTouched) bool {
	meets := func(rs [][2]uint64, start, end uint64) bool {
		for _, r := range rs {
			if start < r[1] && r[0] < end {
				return true
			}
		}
		return false
	}
	check := func(blocks [][2]uint64) bool {
		for _, b := range blocks {
			if meets(s.free, b[0], b[1]) || meets(t.blocks, b[0], b[1]) {
				return true
			}
		}
		return false
	}
	if check(f.blocks) {
		return true
	}
	for d := path.Dir(p); ; d = path.Dir(d) {
		if check(s.dirs[d]) {
			return true
		}
		if d == "." || d == "/" {
			return false
		}
	}
}

// hostileCheck returns the function that checks an operation's error:
// counted as progress, typed or a failure.
func hostileCheck(r *hostileResult, prog *atomic.Int64) func(what string, err error) {
	return func(what string, err error) {
		prog.Add(1)
		if err != nil {
			if !writeTypedErr(err) {
				r.failf("untyped error", "%s: %T: %v", what, err, err)
			} else {
				r.logf("%s: %v", what, err)
			}
		}
	}
}

// fileOps are the changes made to one regular file.
type fileOps struct {
	fsys  *ext4go.FS
	check func(what string, err error)
}

func (o fileOps) on(what, p string, flag int, op func(f *ext4go.File) error) error {
	f, err := o.fsys.OpenFile(p, flag, 0)
	if err != nil {
		o.check(what+" open "+p, err)
		return err
	}
	err = op(f)
	o.check(what+" "+p, err)
	if cerr := f.Close(); err == nil {
		err = cerr
		o.check(what+" close "+p, err)
	}
	return err
}

func (o fileOps) append(p string) error {
	return o.on("append", p, os.O_WRONLY|os.O_APPEND, func(f *ext4go.File) error {
		_, err := f.Write(pattern(3, 0, 3000))
		return err
	})
}

func (o fileOps) overwrite(p string) error {
	return o.on("overwrite", p, os.O_RDWR, func(f *ext4go.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		_, err = f.WriteAt(pattern(4, 0, 700), st.Size()/2)
		return err
	})
}

func (o fileOps) truncate(p string) error {
	return o.on("truncate", p, os.O_RDWR, func(f *ext4go.File) error {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		return f.Truncate(st.Size() / 3)
	})
}

// hostileVictimChanges changes the corrupted entry, each change in a
// writable open of its own: a change that fails must leave the image as
// it was (but for the superblock's times and the journal's blocks).
func hostileVictimChanges(r *hostileResult, b *hostileBase, image string, wopts *ext4go.Options, victim string, rng *rand.Rand, prog *atomic.Int64) {
	check := hostileCheck(r, prog)
	allowed := [][2]int64{{1024, 2048}}
	for _, j := range b.journal {
		allowed = append(allowed, [2]int64{int64(j.Start) * b.bs, int64(j.Start+j.Length) * b.bs})
	}
	alone := func(what string, op func(fsys *ext4go.FS) error) {
		before, err := imageChunks(image)
		if err != nil {
			r.failf("harness", "%v", err)
			return
		}
		fsys, err := ext4go.Open(image, wopts)
		if err != nil {
			check("writable open for "+what, err)
			return
		}
		opErr := op(fsys)
		check("close after "+what, fsys.Close())
		if opErr == nil {
			return
		}
		after, err := imageChunks(image)
		if err != nil {
			r.failf("harness", "%v", err)
			return
		}
		if d := diffChunks(before, after, allowed); d != "" {
			r.failf("failed change wrote", "%s of %s failed (%v) but changed the image: %s", what, victim, opErr, d)
		}
	}
	var st fs.FileInfo
	alone("lstat", func(fsys *ext4go.FS) error {
		var err error
		st, err = fsys.Lstat(victim)
		check("lstat victim", err)
		return nil
	})
	if st == nil {
		return
	}
	switch {
	case st.Mode().IsRegular():
		alone("overwrite", func(fsys *ext4go.FS) error { return fileOps{fsys, check}.overwrite(victim) })
		alone("append", func(fsys *ext4go.FS) error { return fileOps{fsys, check}.append(victim) })
		alone("setxattr", func(fsys *ext4go.FS) error {
			err := fsys.SetXattr(victim, "user.victim", pattern(7, 0, 100), 0)
			check("setxattr victim", err)
			return err
		})
		alone("truncate", func(fsys *ext4go.FS) error { return fileOps{fsys, check}.truncate(victim) })
	case st.IsDir():
		alone("create in", func(fsys *ext4go.FS) error {
			err := fsys.WriteFile(path.Join(victim, "hostile-in-victim"), pattern(8, 0, 2000), 0o644)
			check("create in victim", err)
			return err
		})
		var name string
		alone("readdir", func(fsys *ext4go.FS) error {
			ents, err := fsys.ReadDir(victim)
			check("readdir victim", err)
			if len(ents) > 0 {
				name = ents[rng.IntN(len(ents))].Name()
			}
			return nil
		})
		if name != "" {
			alone("rename in", func(fsys *ext4go.FS) error {
				err := fsys.Rename(path.Join(victim, name), path.Join(victim, name+"-renamed"))
				check("rename in victim", err)
				return err
			})
			alone("remove in", func(fsys *ext4go.FS) error {
				err := fsys.RemoveAll(path.Join(victim, name+"-renamed"))
				check("remove in victim", err)
				return err
			})
		}
		alone("setxattr", func(fsys *ext4go.FS) error {
			err := fsys.SetXattr(victim, "user.victim", pattern(7, 0, 100), 0)
			check("setxattr victim", err)
			return err
		})
	}
	alone("remove", func(fsys *ext4go.FS) error {
		// One entry: RemoveAll of a directory is many changes, some of
		// which may succeed before one fails.
		err := fsys.Remove(victim)
		if errors.Is(err, syscall.ENOTEMPTY) {
			err = nil
		}
		check("remove victim", err)
		return err
	})
}

// hostileChanges makes the round of changes to the tree but the
// corrupted entry: new files and directories, and changes to other
// existing entries, every error typed. It adds what it touches to
// touched.
func hostileChanges(r *hostileResult, fsys *ext4go.FS, b *hostileBase, snap *hostileSnap, touched *hostileTouched, rng *rand.Rand, prog *atomic.Int64) {
	check := hostileCheck(r, prog)
	ops := fileOps{fsys, check}
	touched.add(snap, "hostile-w")
	check("mkdir", fsys.MkdirAll("hostile-w/d", 0o755))
	check("write small", fsys.WriteFile("hostile-w/d/small", pattern(1, 0, 100), 0o644))
	check("write big", fsys.WriteFile("hostile-w/d/big", pattern(2, 0, 300<<10), 0o644))
	check("symlink", fsys.Symlink("small", "hostile-w/d/lnk"))
	check("setxattr new", fsys.SetXattr("hostile-w/d/small", "user.h", bytes.Repeat([]byte("x"), 300), 0))
	check("link new", fsys.Link("hostile-w/d/small", "hostile-w/hard"))
	check("rename new", fsys.Rename("hostile-w/d/big", "hostile-w/big"))

	// Existing entries, picked from the base tree: they may be the
	// corrupted ones, or reach them.
	var files, dirs []string
	for _, n := range b.nodes {
		switch {
		case n.path == "" || n.path == "." || n.path == "lost+found":
		case n.mode.IsRegular():
			files = append(files, n.path)
		case n.mode.IsDir():
			dirs = append(dirs, n.path)
		}
	}
	pick := func(from []string) string {
		p := from[rng.IntN(len(from))]
		touched.add(snap, p)
		return p
	}
	ops.append(pick(files))
	ops.overwrite(pick(files))
	ops.truncate(pick(files))
	check("remove", fsys.Remove(pick(files)))
	// Adding to a directory touches no file in it.
	d := dirs[rng.IntN(len(dirs))]
	touched.add(snap, path.Join(d, "hostile-new"))
	check("create in "+d, fsys.WriteFile(path.Join(d, "hostile-new"), pattern(5, 0, 1500), 0o644))
	from, to := pick(files), dirs[rng.IntN(len(dirs))]
	touched.add(snap, path.Join(to, "hostile-moved"))
	check("rename into "+to, fsys.Rename(from, path.Join(to, "hostile-moved")))
	p := pick(files)
	check("setxattr", fsys.SetXattr(p, "user.hostile", pattern(6, 0, 200), 0))
	if names, err := fsys.ListXattr(p); err == nil && len(names) > 0 {
		check("removexattr", fsys.RemoveXattr(p, names[0]))
	}
	if rng.IntN(2) == 0 {
		check("removeall", fsys.RemoveAll(pick(dirs)))
	} else {
		d := pick(dirs)
		check("rename dir", fsys.Rename(d, "hostile-w/renamed-dir"))
	}
	check("sync", fsys.Sync())
}

// hostileDebugfsHashes returns what debugfs dumps of the regular files
// of the base tree in image (but most of the htree directory's), leaving
// out the files it cannot dump and those whose size it says is past 8
// MiB (a corrupt size would have it write gigabytes).
func hostileDebugfsHashes(t *testing.T, b *hostileBase, image string) map[string][32]byte {
	t.Helper()
	var paths []string
	for i, n := range b.nodes {
		// One in 25 of the htree directory's files: debugfs's time is
		// most of a case's.
		if n.path != "" && n.mode.IsRegular() && (!strings.HasPrefix(n.path, "htree/") || i%25 == 0) {
			paths = append(paths, n.path)
		}
	}
	sizeRE := regexp.MustCompile(`Size: (\d+)`)
	// One session for all, then one each for those it gave nothing for:
	// after an inode checksum error debugfs 1.47 answers every later
	// lookup of its session with "Ext2 inode is not a directory".
	sizeOf := func(out string) (int64, bool) {
		if m := sizeRE.FindStringSubmatch(out); m != nil {
			if n, err := strconv.ParseInt(m[1], 10, 64); err == nil {
				return n, true
			}
		}
		return 0, false
	}
	var stats []string
	for _, p := range paths {
		stats = append(stats, fmt.Sprintf("stat \"/%s\"", p))
	}
	parts := strings.Split(hostileDebugfs(t, image, stats), "debugfs: stat ")[1:]
	var small []string
	for i, p := range paths {
		n, ok := int64(0), false
		if i < len(parts) {
			n, ok = sizeOf(parts[i])
		}
		if !ok {
			n, ok = sizeOf(hostileDebugfs(t, image, stats[i:i+1]))
		}
		if ok && n <= 8<<20 {
			small = append(small, p)
		}
	}
	dst := t.TempDir()
	dump := func(i int) string { return fmt.Sprintf("dump \"/%s\" %s/%d", small[i], dst, i) }
	var dumps []string
	for i := range small {
		dumps = append(dumps, dump(i))
	}
	hostileDebugfs(t, image, dumps) // a corrupt image may make some dumps fail: those files are left out
	out := map[string][32]byte{}
	for i, p := range small {
		f := fmt.Sprintf("%s/%d", dst, i)
		if _, err := os.Stat(f); err != nil {
			hostileDebugfs(t, image, []string{dump(i)})
		}
		if data, err := os.ReadFile(f); err == nil && len(data) <= 8<<20 {
			out[p] = sha256.Sum256(data)
		}
	}
	return out
}

// hostileDebugfs runs the requests in one debugfs session, with a time
// limit, and returns its output, each request's after a "debugfs: REQUEST"
// line.
func hostileDebugfs(t *testing.T, image string, requests []string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cmds")
	if err := os.WriteFile(f, []byte(strings.Join(requests, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hostileToolTimeout)
	defer cancel()
	// -c (catastrophic mode): no bitmaps read, so that a bad descriptor
	// does not keep debugfs from the files.
	out, _ := exec.CommandContext(ctx, "debugfs", "-c", "-f", f, image).Output()
	return string(out)
}

// hostileFsck runs e2fsck -fn on image with a time limit.
func hostileFsck(image string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hostileToolTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "e2fsck", "-fn", image).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out), nil
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), string(out), nil
	}
	return -1, string(out), err
}

// newFsckProblems returns the problem lines of e2fsck's output after that
// were not in its output before, numbers masked.
func newFsckProblems(before, after string) []string {
	// Numbers, and the modification times pass 1D prints (changes move them).
	norm := regexp.MustCompile(`[0-9]+|mod time [^)]*`)
	seen := map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		seen[norm.ReplaceAllString(l, "N")] = true
	}
	var out []string
	for _, l := range strings.Split(after, "\n") {
		if strings.HasPrefix(l, "Pass ") || strings.Contains(l, "e2fsck") || strings.Contains(l, "WARNING") || strings.TrimSpace(l) == "" {
			continue
		}
		if !seen[norm.ReplaceAllString(l, "N")] {
			out = append(out, l)
		}
	}
	return out
}
