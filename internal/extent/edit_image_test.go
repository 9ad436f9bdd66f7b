//go:build linux

package extent

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/testutil"
)

// This file edits the extent tree of a file in a real image with the
// Editor, keeping the block bitmaps, group descriptors and superblock
// counts right itself, then asks e2fsck, debugfs and the kernel (a
// read-only loop mount) whether the result is a good file with the
// expected data.

// imgStore is a Store over an image file. It allocates from the free
// blocks of the groups whose bitmaps are initialised and records every
// change of a block's state for flush.
type imgStore struct {
	t       *testing.T
	f       *os.File
	sb      *super.Superblock
	bs      int
	free    []bool          // free and usable by us
	changed map[uint64]bool // block -> now in use
	cursor  uint64          // where data allocation goes on
	nodes   int             // tree blocks now allocated minus freed
}

func (s *imgStore) read(p uint64, n int) []byte {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, int64(p)*int64(s.bs)); err != nil {
		s.t.Fatal(err)
	}
	return b
}

func (s *imgStore) writeAt(b []byte, off int64) {
	if _, err := s.f.WriteAt(b, off); err != nil {
		s.t.Fatal(err)
	}
}

func (s *imgStore) ReadNode(p uint64) ([]byte, error) { return s.read(p, s.bs), nil }

func (s *imgStore) WriteNode(p uint64, b []byte) error {
	if s.free[p] {
		return fmt.Errorf("write of free block %d", p)
	}
	s.writeAt(b, int64(p)*int64(s.bs))
	return nil
}

func (s *imgStore) take(p uint64) {
	if !s.free[p] {
		s.t.Fatalf("block %d taken twice", p)
	}
	s.free[p] = false
	s.changed[p] = true
}

func (s *imgStore) release(p uint64) {
	if s.free[p] {
		s.t.Fatalf("block %d freed twice", p)
	}
	s.free[p] = true
	s.changed[p] = false
}

func (s *imgStore) AllocNode(goal uint64) (uint64, error) {
	n := uint64(len(s.free))
	for i := range n {
		if p := (goal + i) % n; s.free[p] {
			s.take(p)
			s.nodes++
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free block")
}

func (s *imgStore) FreeNode(p uint64) error {
	s.release(p)
	s.nodes--
	return nil
}

func (s *imgStore) FreeData(p uint64, n uint32) error {
	for i := range uint64(n) {
		s.release(p + i)
	}
	return nil
}

// allocData takes up to n free blocks in a row from the cursor on, and
// skips the next block so that extents do not merge physically.
func (s *imgStore) allocData(n uint32) (uint64, uint32) {
	for s.cursor < uint64(len(s.free)) && !s.free[s.cursor] {
		s.cursor++
	}
	if s.cursor >= uint64(len(s.free)) {
		s.t.Fatal("image full")
	}
	p, got := s.cursor, uint32(0)
	for got < n && p+uint64(got) < uint64(len(s.free)) && s.free[p+uint64(got)] {
		s.take(p + uint64(got))
		got++
	}
	s.cursor = p + uint64(got) + 1
	return p, got
}

// flush writes the changed bitmap bits, the groups' free counts and
// checksums, and the superblock's free count.
func (s *imgStore) flush() {
	sb := s.sb
	type grp struct {
		gd     *super.GroupDesc
		bitmap []byte
	}
	groups := map[uint32]*grp{}
	delta := int64(0)
	for p, used := range s.changed {
		g, off := sb.GroupOfBlock(p)
		gr := groups[g]
		if gr == nil {
			gr = &grp{gd: s.groupDesc(g)}
			gr.bitmap = s.read(gr.gd.BlockBitmap, s.bs)
			groups[g] = gr
		}
		was := gr.bitmap[off/8]&(1<<(off%8)) != 0
		if used == was {
			continue
		}
		gr.bitmap[off/8] ^= 1 << (off % 8)
		if used {
			delta--
		} else {
			delta++
		}
	}
	for g, gr := range groups {
		free := uint32(0)
		for i := range sb.GroupBlocks(g) {
			if gr.bitmap[i/8]&(1<<(i%8)) == 0 {
				free++
			}
		}
		gr.gd.FreeBlocksCount = free
		super.SetBlockBitmapChecksum(sb, gr.gd, gr.bitmap)
		s.writeAt(gr.bitmap, int64(gr.gd.BlockBitmap)*int64(s.bs))
		blk, off := sb.GroupDescLocation(g)
		s.writeAt(super.EncodeGroupDesc(sb, gr.gd, g), int64(blk)*int64(s.bs)+int64(off))
	}
	sb.SetFreeBlocksCount(uint64(int64(sb.FreeBlocksCount()) + delta))
	s.writeAt(sb.Encode(), 1024)
	s.changed = map[uint64]bool{}
}

func (s *imgStore) groupDesc(g uint32) *super.GroupDesc {
	blk, off := s.sb.GroupDescLocation(g)
	b := s.read(blk, s.bs)
	gd, err := super.DecodeGroupDesc(s.sb, b[off:], g)
	if err != nil {
		s.t.Fatal(err)
	}
	return gd
}

func openImgStore(t *testing.T, path string) *imgStore {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	b := make([]byte, 1024)
	if _, err := f.ReadAt(b, 1024); err != nil {
		t.Fatal(err)
	}
	sb, err := super.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	s := &imgStore{t: t, f: f, sb: sb, bs: int(sb.BlockSize()), changed: map[uint64]bool{},
		free: make([]bool, sb.BlocksCount())}
	usable := 0
	for g := range sb.GroupCount() {
		gd := s.groupDesc(g)
		if sb.HasGroupDescCsum() && gd.Flags&super.BGBlockUninit != 0 {
			continue // its bitmap is not on disk yet: leave the group alone
		}
		bm := s.read(gd.BlockBitmap, s.bs)
		first := sb.GroupFirstBlock(g)
		for i := range sb.GroupBlocks(g) {
			if bm[i/8]&(1<<(i%8)) == 0 {
				s.free[first+uint64(i)] = true
				usable++
			}
		}
	}
	t.Logf("%d usable free blocks", usable)
	return s
}

// pattern is the content of file block l written in generation gen: no
// two blocks the test writes are equal.
func pattern(bs int, l uint32, gen uint32) []byte {
	b := make([]byte, bs)
	for i := 0; i < bs; i += 8 {
		binary.LittleEndian.PutUint32(b[i:], l)
		binary.LittleEndian.PutUint32(b[i+4:], gen^uint32(i)<<16)
	}
	return b
}

// imgBlock is the model of one mapped file block.
type imgBlock struct {
	phys uint64
	unw  bool
	gen  uint32
}

func TestEditorOnImage(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "dumpe2fs")
	for _, c := range []struct {
		name   string
		args   []string
		size   string
		filler int64 // bytes of a file made with the image and removed, so that its groups' bitmaps are initialised
		n      int   // extents appended
	}{
		{"1k-csum", []string{"-b", "1024", "-O", "metadata_csum"}, "64M", 40 << 20, 2000},
		{"1k-nocsum", []string{"-b", "1024", "-O", "^metadata_csum"}, "64M", 0, 2000},
		{"4k-csum", []string{"-b", "4096", "-O", "metadata_csum,64bit"}, "128M", 0, 2000},
		{"4k-nocsum", []string{"-b", "4096", "-O", "^metadata_csum,^64bit"}, "128M", 0, 1500},
	} {
		t.Run(c.name, func(t *testing.T) {
			// In parallel: most of the time goes to waiting for the
			// kernel to unmount.
			t.Parallel()
			editImage(t, c.args, c.size, c.filler, c.n)
		})
	}
}

func editImage(t *testing.T, args []string, size string, filler int64, nExt int) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	bs, _ := strconv.Atoi(args[1])
	var initial []byte
	for l := range uint32(8) {
		initial = append(initial, pattern(bs, l, 0)...)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), initial, 0o644); err != nil {
		t.Fatal(err)
	}
	if filler > 0 {
		if err := os.WriteFile(filepath.Join(src, "filler"), bytes.Repeat([]byte{0xEE}, int(filler)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(dir, "img")
	testutil.Run(t, "mke2fs", append(append([]string{"-q", "-F", "-t", "ext4"}, args...), "-d", src, img, size)...)
	if filler > 0 {
		testutil.Run(t, "debugfs", "-w", "-R", "rm /filler", img)
	}

	im := openImage(t, img)
	out := testutil.DebugfsBatch(t, img, []string{"imap /f", "stat /f"})
	in := im.inode(t, out["imap /f"])
	m := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(out["stat /f"])
	ino64, _ := strconv.ParseUint(m[1], 10, 32)
	ino := uint32(ino64)
	loc := imapRE.FindStringSubmatch(out["imap /f"])
	inoBlk, _ := strconv.ParseInt(loc[1], 10, 64)
	inoOff, _ := strconv.ParseInt(loc[2], 16, 64)

	st := openImgStore(t, img)
	root := in.Block
	ed := &Editor{Root: &root, Store: st, BlockSize: bs, Csum: im.csum, Seed: inode.Seed(im.seed, ino, in.Generation),
		Ino: ino, FirstDataBlock: im.firstData, BlocksCount: im.blocks}

	model := map[uint32]imgBlock{}
	exts, err := ed.Tree().Extents()
	if err != nil || len(exts) != 1 || exts[0].Len != 8 {
		t.Fatalf("initial extents %+v %v", exts, err)
	}
	for i := range uint32(8) {
		model[i] = imgBlock{phys: exts[0].Start + uint64(i)}
	}
	gen := uint32(1)
	writeData := func(l uint32, p uint64, n uint32, unw bool) {
		for i := range n {
			b := pattern(bs, l+i, gen)
			if unw {
				// An unwritten block must read as zeros whatever it holds.
				b = bytes.Repeat([]byte{0x5A}, bs)
			}
			st.writeAt(b, int64(p+uint64(i))*int64(bs))
			model[l+i] = imgBlock{phys: p + uint64(i), unw: unw, gen: gen}
		}
	}
	insert := func(l, n uint32, unw bool) {
		p, got := st.allocData(n)
		writeData(l, p, got, unw)
		if err := ed.Insert(Extent{Logical: l, Len: got, Start: p, Unwritten: unw}); err != nil {
			t.Fatalf("insert %d+%d: %v", l, got, err)
		}
	}
	remove := func(from, to uint32) {
		if err := ed.Remove(from, to); err != nil {
			t.Fatalf("remove [%d, %d): %v", from, to, err)
		}
		for l := range model {
			if l >= from && l < to {
				delete(model, l)
			}
		}
	}
	r := rand.New(rand.NewPCG(uint64(bs), uint64(nExt)))

	// Thousands of fragmented extents, appended with holes between some.
	next := uint32(8)
	for range nExt {
		next += uint32(r.IntN(3))
		n := 1 + r.Uint32N(3)
		insert(next, n, r.IntN(5) == 0)
		next += n
	}
	depth := func() int {
		n, err := ed.Tree().RootNode()
		if err != nil {
			t.Fatal(err)
		}
		return int(n.Depth)
	}
	if d := depth(); d < 2 {
		t.Fatalf("depth %d after %d appends", d, nExt)
	}
	// Fill some holes, punch, convert both ways, truncate.
	for range 300 {
		l := r.Uint32N(next)
		if _, ok := model[l]; !ok {
			insert(l, 1, r.IntN(3) == 0)
		}
	}
	for range 60 {
		l := r.Uint32N(next)
		remove(l, l+1+r.Uint32N(40))
	}
	for range 80 {
		l, n := r.Uint32N(next), 1+r.Uint32N(30)
		written := r.IntN(2) == 0
		if written {
			// A write into fallocated space: data first, then the state.
			gen++
			for i := range n {
				if b, ok := model[l+i]; ok && b.unw {
					writeData(l+i, b.phys, 1, false)
				}
			}
		}
		if err := ed.Convert(l, n, written); err != nil {
			t.Fatalf("convert %d+%d: %v", l, n, err)
		}
		for i := range n {
			if b, ok := model[l+i]; ok {
				b.unw = !written
				model[l+i] = b
			}
		}
	}
	remove(next*7/8, MaxLogical)
	t.Logf("depth %d, %d blocks mapped, %d tree blocks", depth(), len(model), st.nodes)

	// Write back bitmaps and counts, then the inode.
	st.flush()
	exts, err = ed.Tree().Extents()
	if err != nil {
		t.Fatal(err)
	}
	last := exts[len(exts)-1].End()
	in.Block = root
	in.Size = last * uint64(bs)
	if err := in.SetSectors((uint64(len(model))+uint64(st.nodes))*uint64(bs)/512, uint32(bs), true); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, im.inodeSize)
	encode := in.Encode
	if im.csum {
		encode = func(b []byte) error { return in.EncodeChecksum(b, im.seed, ino) }
	}
	if err := encode(raw); err != nil {
		t.Fatal(err)
	}
	st.writeAt(raw, inoBlk*int64(bs)+inoOff)
	if err := st.f.Sync(); err != nil {
		t.Fatal(err)
	}

	if code, out := testutil.E2fsckFN(t, img); code != 0 {
		t.Fatalf("e2fsck -fn exit %d:\n%s", code, out)
	}
	// debugfs lists exactly our extents.
	dump := parseEx(t, testutil.DebugfsBatch(t, img, []string{"ex /f"})["ex /f"])
	var leaves []dumpEntry
	for _, d := range dump {
		if d.level == d.maxLevel {
			leaves = append(leaves, d)
		}
	}
	if len(leaves) != len(exts) {
		t.Fatalf("debugfs lists %d extents, we have %d", len(leaves), len(exts))
	}
	for i, e := range exts {
		d := leaves[i]
		if uint64(e.Logical) != d.logical || uint64(e.Len) != d.length || e.Start != d.phys || e.Unwritten != d.uninit {
			t.Fatalf("extent %d: ours %+v, debugfs %+v", i, e, d)
		}
		for j := range e.Len {
			if b := model[e.Logical+j]; b.phys != e.Start+uint64(j) || b.unw != e.Unwritten {
				t.Fatalf("block %d: tree %d/%v, model %+v", e.Logical+j, e.Start+uint64(j), e.Unwritten, b)
			}
		}
	}
	// The kernel reads the data of every block where we put it.
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("no mount checks: %s", why)
		return
	}
	t.Run("kernel-read", func(t *testing.T) {
		mnt := testutil.Mount(t, img, true)
		data, err := os.ReadFile(filepath.Join(mnt, "f"))
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(data)) != in.Size {
			t.Fatalf("read %d bytes, size %d", len(data), in.Size)
		}
		zero := make([]byte, bs)
		for l := range uint32(last) {
			got := data[int(l)*bs : int(l+1)*bs]
			want := zero
			if b, ok := model[l]; ok && !b.unw {
				want = pattern(bs, l, b.gen)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file block %d (model %+v): kernel reads %x...", l, model[l], got[:16])
			}
		}
	})
	// The kernel changes our tree in its turn: it appends, punches a
	// hole and writes into an unwritten extent.
	var touched [][2]uint32
	t.Run("kernel-write", func(t *testing.T) {
		mnt := testutil.Mount(t, img, false)
		f, err := os.OpenFile(filepath.Join(mnt, "f"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(bytes.Repeat([]byte{7}, 64*bs), int64(last)*int64(bs)); err != nil {
			t.Fatal(err)
		}
		touched = append(touched, [2]uint32{uint32(last), MaxLogical})
		mid := exts[len(exts)/2]
		const punchHole, keepSize = 2, 1
		if err := syscall.Fallocate(int(f.Fd()), punchHole|keepSize, int64(mid.Logical)*int64(bs), int64(mid.Len+5)*int64(bs)); err != nil {
			t.Fatal(err)
		}
		touched = append(touched, [2]uint32{mid.Logical, mid.Logical + mid.Len + 5})
		for _, e := range exts {
			if e.Unwritten && e.Len >= 3 {
				if _, err := f.WriteAt(bytes.Repeat([]byte{9}, bs), int64(e.Logical+1)*int64(bs)); err != nil {
					t.Fatal(err)
				}
				touched = append(touched, [2]uint32{e.Logical, uint32(e.End())})
				break
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	})
	if code, out := testutil.E2fsckFN(t, img); code != 0 {
		t.Fatalf("after the kernel's changes: e2fsck -fn exit %d:\n%s", code, out)
	}
	// Our reader agrees with debugfs on the kernel's tree, and the blocks
	// the kernel did not touch map as before.
	im = openImage(t, img)
	out = testutil.DebugfsBatch(t, img, []string{"imap /f", "ex /f"})
	in = im.inode(t, out["imap /f"])
	tr := im.tree(in, ino)
	kexts, err := tr.Extents()
	if err != nil {
		t.Fatalf("reading the kernel's tree: %v", err)
	}
	leaves = leaves[:0]
	for _, d := range parseEx(t, out["ex /f"]) {
		if d.level == d.maxLevel {
			leaves = append(leaves, d)
		}
	}
	if len(leaves) != len(kexts) {
		t.Fatalf("kernel's tree: debugfs lists %d extents, we read %d", len(leaves), len(kexts))
	}
	for i, e := range kexts {
		if d := leaves[i]; uint64(e.Logical) != d.logical || uint64(e.Len) != d.length || e.Start != d.phys || e.Unwritten != d.uninit {
			t.Fatalf("kernel's extent %d: we read %+v, debugfs %+v", i, e, d)
		}
	}
	for l, b := range model {
		if slices.ContainsFunc(touched, func(r [2]uint32) bool { return l >= r[0] && l < r[1] }) {
			continue
		}
		m, err := tr.Lookup(l)
		if err != nil || m.Physical != b.phys || m.Unwritten != b.unw {
			t.Fatalf("block %d after the kernel's changes: %+v %v, model %+v", l, m, err, b)
		}
	}
}
