package super

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

func uuidString(u [16]byte) string {
	if u == [16]byte{} {
		return "<none>"
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func ctime(sb *Superblock, lo uint32, hi uint8) string {
	if lo == 0 && hi == 0 {
		return "n/a"
	}
	return stamp(lo, hi).Local().Format("Mon Jan _2 15:04:05 2006")
}

// headerWant renders sb the way `dumpe2fs -h` prints the fields we check.
func headerWant(sb *Superblock) map[string]string {
	orNone := func(s, none string) string {
		if s == "" {
			return none
		}
		return s
	}
	feats := strings.Join(sb.FeatureNames(), " ")
	w := map[string]string{
		"Filesystem volume name":  orNone(sb.Label(), "<none>"),
		"Last mounted on":         orNone(sb.LastMountedDir(), "<not available>"),
		"Filesystem UUID":         uuidString(sb.UUID),
		"Filesystem magic number": fmt.Sprintf("0x%04X", sb.Magic),
		"Filesystem features":     orNone(feats, "(none)"),
		"Inode count":             fmt.Sprint(sb.InodesCount),
		"Block count":             fmt.Sprint(sb.BlocksCount()),
		"Reserved block count":    fmt.Sprint(sb.RBlocksCount()),
		"Free blocks":             fmt.Sprint(sb.FreeBlocksCount()),
		"Free inodes":             fmt.Sprint(sb.FreeInodesCount),
		"First block":             fmt.Sprint(sb.FirstDataBlock),
		"Block size":              fmt.Sprint(sb.BlockSize()),
		"Blocks per group":        fmt.Sprint(sb.BlocksPerGroup),
		"Inodes per group":        fmt.Sprint(sb.InodesPerGroup),
		"Inode blocks per group":  fmt.Sprint(sb.InodeTableBlocks()),
		"Mount count":             fmt.Sprint(sb.MntCount),
		"Maximum mount count":     fmt.Sprint(sb.MaxMntCount),
		"Filesystem created":      ctime(sb, sb.MkfsTime, sb.MkfsTimeHi),
		"Last write time":         ctime(sb, sb.Wtime, sb.WtimeHi),
		"Last mount time":         ctime(sb, sb.Mtime, sb.MtimeHi),
		"Overhead clusters":       fmt.Sprint(sb.OverheadClusters),
		"Reserved GDT blocks":     fmt.Sprint(sb.ReservedGDTBlocks),
		"Journal inode":           fmt.Sprint(sb.JournalInum),
		"Required extra isize":    fmt.Sprint(sb.MinExtraIsize),
		"Desired extra isize":     fmt.Sprint(sb.WantExtraIsize),
		"First meta block group":  fmt.Sprint(sb.FirstMetaBG),
		"Checksum":                fmt.Sprintf("0x%08x", sb.Checksum),
		"Checksum seed":           fmt.Sprintf("0x%08x", sb.ChecksumSeed()),
	}
	if sb.IsBigalloc() {
		w["Cluster size"] = fmt.Sprint(sb.ClusterSize())
		w["Clusters per group"] = fmt.Sprint(sb.ClustersPerGroup)
	} else {
		w["Fragment size"] = fmt.Sprint(sb.ClusterSize())
		w["Fragments per group"] = fmt.Sprint(sb.ClustersPerGroup)
	}
	if sb.RevLevel >= DynamicRev {
		w["First inode"] = fmt.Sprint(sb.FirstInode())
		w["Inode size"] = fmt.Sprint(sb.InodeSize())
	}
	if sb.Is64Bit() {
		w["Group descriptor size"] = fmt.Sprint(sb.DescSize())
	}
	if sb.HasIncompat(IncompatFlexBG) {
		w["Flex block group size"] = fmt.Sprint(sb.FlexGroupSize())
	}
	if sb.HasCompat(CompatSparseSuper2) {
		var bgs []string
		for _, g := range sb.BackupBGs {
			if g != 0 {
				bgs = append(bgs, fmt.Sprint(g))
			}
		}
		w["Backup block groups"] = strings.Join(bgs, " ")
	}
	return w
}

func compareHeader(t *testing.T, sb *Superblock, h map[string]string) {
	t.Helper()
	for _, k := range []string{"Filesystem UUID", "Filesystem features", "Block count", "Inode count", "Block size", "Blocks per group", "Inodes per group"} {
		if _, ok := h[k]; !ok {
			t.Errorf("dumpe2fs printed no %q", k)
		}
	}
	for k, want := range headerWant(sb) {
		if got, ok := h[k]; ok && got != want {
			t.Errorf("%s: dumpe2fs says %q, we say %q", k, got, want)
		}
	}
}

// checkImage compares everything this package computes about the image at
// path with dumpe2fs and with the image's own bytes.
func checkImage(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw := readAt(t, f, Offset, Size)
	sb, err := Decode(raw)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if enc := sb.Encode(); !bytes.Equal(enc, raw) {
		t.Errorf("Encode does not reproduce the superblock")
	}
	compareHeader(t, sb, dumpHeader(run(t, "dumpe2fs", "-h", path)))

	bs := int64(sb.BlockSize())
	groups := dumpGroups(run(t, "dumpe2fs", path))
	if uint32(len(groups)) != sb.GroupCount() {
		t.Fatalf("dumpe2fs lists %d groups, GroupCount = %d", len(groups), sb.GroupCount())
	}
	for gi, dg := range groups {
		g := uint32(gi)
		blk, off := sb.GroupDescLocation(g)
		draw := readAt(t, f, int64(blk)*bs+int64(off), int(sb.DescSize()))
		gd, err := DecodeGroupDesc(sb, draw, g)
		if err != nil {
			t.Errorf("group %d: %v", g, err)
			continue
		}
		if enc := EncodeGroupDesc(sb, gd, g); !bytes.Equal(enc, draw) {
			t.Errorf("group %d: EncodeGroupDesc does not reproduce the descriptor", g)
		}
		checkGroup(t, f, sb, g, gd, dg)
	}

	// Superblock backups carry their group number; descriptor copies are
	// byte-identical to the primary table.
	for g := uint32(1); g < sb.GroupCount(); g++ {
		if !sb.HasSuperBackup(g) {
			continue
		}
		b, err := Decode(readAt(t, f, int64(sb.SuperBlockByteOffset(g)), Size))
		if err != nil {
			t.Errorf("backup superblock of group %d: %v", g, err)
		} else if b.BlockGroupNr != uint16(g) || b.UUID != sb.UUID || b.BlocksCount() != sb.BlocksCount() {
			t.Errorf("backup superblock of group %d: group nr %d", g, b.BlockGroupNr)
		}
	}
	for i := range sb.GDTBlocks() {
		primary := readAt(t, f, int64(sb.GDTBlockLocation(i))*bs, int(bs))
		copies := 0
		for g := range sb.GroupCount() {
			loc, ok := sb.GDTBlockLocationIn(i, g)
			if !ok {
				continue
			}
			copies++
			if g == 0 || (sb.metaBG(g) && g == i*sb.DescPerBlock()) {
				if loc != sb.GDTBlockLocation(i) {
					t.Errorf("GDT block %d: primary copy in group %d at %d, GDTBlockLocation says %d", i, g, loc, sb.GDTBlockLocation(i))
				}
				continue
			}
			if c := readAt(t, f, int64(loc)*bs, int(bs)); !bytes.Equal(c, primary) {
				t.Errorf("GDT block %d: copy in group %d at block %d differs from the primary", i, g, loc)
			}
		}
		if copies == 0 {
			t.Errorf("GDT block %d has no copy at all", i)
		}
	}
}

func checkGroup(t *testing.T, f *os.File, sb *Superblock, g uint32, gd *GroupDesc, dg *dumpGroup) {
	t.Helper()
	errorf := func(format string, a ...any) { t.Errorf("group %d: "+format, append([]any{g}, a...)...) }
	first := sb.GroupFirstBlock(g)
	if g == 0 && sb.FirstDataBlock == 0 && sb.BlockSize() == 1024 {
		first = 0
	}
	if dg.first != first || dg.last != first+uint64(sb.GroupBlocks(g))-1 {
		errorf("blocks %d-%d, we say %d+%d", dg.first, dg.last, first, sb.GroupBlocks(g))
	}
	if dg.expected >= 0 {
		errorf("dumpe2fs says the checksum is bad")
	}
	if sb.HasGroupDescCsum() != (dg.csum >= 0) || (dg.csum >= 0 && uint16(dg.csum) != gd.Checksum) {
		errorf("checksum %#x, dumpe2fs %#x", gd.Checksum, dg.csum)
	}
	var flags []string
	for _, fl := range []struct {
		bit  uint16
		name string
	}{{BGInodeUninit, "INODE_UNINIT"}, {BGBlockUninit, "BLOCK_UNINIT"}, {BGItableZeroed, "ITABLE_ZEROED"}} {
		if gd.Flags&fl.bit != 0 {
			flags = append(flags, fl.name)
		}
	}
	if want := strings.Join(flags, ", "); sb.HasGroupDescCsum() && want != dg.flags {
		errorf("flags %q, dumpe2fs %q", want, dg.flags)
	}

	o := sb.GroupOverhead(g)
	if o.HasSuper != (dg.super >= 0) || (o.HasSuper && int64(o.SuperBlock) != dg.super) {
		errorf("superblock %v at %d, dumpe2fs %d", o.HasSuper, o.SuperBlock, dg.super)
	}
	if sb.metaBG(g) {
		if (o.GDTBlocks == 1) != (dg.metaGDT >= 0) || (o.GDTBlocks == 1 && int64(o.GDT) != dg.metaGDT) || dg.gdtFirst >= 0 {
			errorf("meta_bg descriptor %d at %d, dumpe2fs %d", o.GDTBlocks, o.GDT, dg.metaGDT)
		}
	} else {
		wantFirst, wantEnd := int64(-1), int64(-1)
		if o.GDTBlocks > 0 {
			wantFirst, wantEnd = int64(o.GDT), int64(o.GDT)+int64(o.GDTBlocks)-1
		}
		if wantFirst != dg.gdtFirst || wantEnd != dg.gdtEnd || dg.metaGDT >= 0 {
			errorf("descriptors at %d-%d, dumpe2fs %d-%d", wantFirst, wantEnd, dg.gdtFirst, dg.gdtEnd)
		}
		if o.ReservedGDT > 0 && o.GDTBlocks > 0 {
			if int64(o.GDT)+int64(o.GDTBlocks) != dg.reservedFirst || int64(o.GDT)+int64(o.GDTBlocks+o.ReservedGDT)-1 != dg.reservedLast {
				errorf("reserved GDT %d blocks, dumpe2fs %d-%d", o.ReservedGDT, dg.reservedFirst, dg.reservedLast)
			}
		} else if dg.reservedFirst >= 0 {
			errorf("no reserved GDT, dumpe2fs %d-%d", dg.reservedFirst, dg.reservedLast)
		}
	}

	if gd.BlockBitmap != dg.blockBitmap || gd.InodeBitmap != dg.inodeBitmap {
		errorf("bitmaps at %d/%d, dumpe2fs %d/%d", gd.BlockBitmap, gd.InodeBitmap, dg.blockBitmap, dg.inodeBitmap)
	}
	if gd.InodeTable != dg.itFirst || gd.InodeTable+uint64(sb.InodeTableBlocks())-1 != dg.itLast {
		errorf("inode table at %d+%d, dumpe2fs %d-%d", gd.InodeTable, sb.InodeTableBlocks(), dg.itFirst, dg.itLast)
	}
	if gd.FreeBlocksCount != dg.freeBlocks || gd.FreeInodesCount != dg.freeInodes || gd.UsedDirsCount != dg.dirs {
		errorf("counts %d/%d/%d, dumpe2fs %d/%d/%d", gd.FreeBlocksCount, gd.FreeInodesCount, gd.UsedDirsCount, dg.freeBlocks, dg.freeInodes, dg.dirs)
	}
	if dg.unused >= 0 && int64(gd.ItableUnused) != dg.unused {
		errorf("itable unused %d, dumpe2fs %d", gd.ItableUnused, dg.unused)
	}
	if sb.HasMetadataCsum() {
		if int64(gd.BlockBitmapCsum) != dg.bbCsum || int64(gd.InodeBitmapCsum) != dg.ibCsum {
			errorf("bitmap checksums %#x/%#x, dumpe2fs %#x/%#x", gd.BlockBitmapCsum, gd.InodeBitmapCsum, dg.bbCsum, dg.ibCsum)
		}
	}
	bs := int64(sb.BlockSize())
	if gd.Flags&BGBlockUninit == 0 || !sb.HasGroupDescCsum() {
		if err := VerifyBlockBitmap(sb, gd, g, readAt(t, f, int64(gd.BlockBitmap)*bs, int(bs))); err != nil {
			errorf("%v", err)
		}
	}
	if gd.Flags&BGInodeUninit == 0 || !sb.HasGroupDescCsum() {
		if err := VerifyInodeBitmap(sb, gd, g, readAt(t, f, int64(gd.InodeBitmap)*bs, int(bs))); err != nil {
			errorf("%v", err)
		}
	}
}

var mkfsConfigs = []struct {
	name string
	size int64
	args []string
}{
	{"ext4-4k", 64 << 20, []string{"-t", "ext4", "-b", "4096"}},
	{"ext4-4k-groups", 64 << 20, []string{"-t", "ext4", "-b", "4096", "-g", "2048"}},
	{"ext4-1k", 64 << 20, []string{"-t", "ext4", "-b", "1024"}},
	{"ext4-1k-groups", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024"}},
	{"ext4-2k", 32 << 20, []string{"-t", "ext4", "-b", "2048", "-g", "1024"}},
	{"no64bit", 64 << 20, []string{"-t", "ext4", "-b", "4096", "-g", "2048", "-O", "^64bit"}},
	{"no64bit-1k", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "512", "-O", "^64bit"}},
	{"nocsum", 32 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "^metadata_csum"}},
	{"uninit_bg", 32 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "^metadata_csum,uninit_bg"}},
	{"uninit_bg-32", 32 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "^metadata_csum,uninit_bg,^64bit"}},
	{"noflex", 32 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "^flex_bg"}},
	{"meta_bg", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "meta_bg,^resize_inode"}},
	{"meta_bg-32", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "256", "-O", "meta_bg,^resize_inode,^64bit"}},
	{"meta_bg-4k", 128 << 20, []string{"-t", "ext4", "-b", "4096", "-g", "256", "-O", "meta_bg,^resize_inode"}},
	{"sparse_super2", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "sparse_super2"}},
	{"sparse_super2-one", 64 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "sparse_super2", "-E", "num_backup_sb=1"}},
	{"nosparse", 32 << 20, []string{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "^sparse_super,^resize_inode"}},
	{"bigalloc-1k", 128 << 20, []string{"-t", "ext4", "-b", "1024", "-O", "bigalloc", "-C", "16384"}},
	{"bigalloc-4k", 256 << 20, []string{"-t", "ext4", "-b", "4096", "-O", "bigalloc", "-C", "65536"}},
	{"small", 32 << 20, []string{"-t", "ext4", "-T", "small"}},
	{"lots-of-inodes", 64 << 20, []string{"-t", "ext4", "-N", "60000"}},
	{"inode128", 32 << 20, []string{"-t", "ext4", "-I", "128"}},
	{"csum_seed", 32 << 20, []string{"-t", "ext4", "-O", "metadata_csum_seed", "-U", "random"}},
	{"ext2", 32 << 20, []string{"-t", "ext2", "-b", "1024", "-g", "2048"}},
	{"ext2-rev0", 16 << 20, []string{"-t", "ext2", "-r", "0"}},
	{"ext3", 32 << 20, []string{"-t", "ext3", "-L", "label-x", "-M", "/mnt/where"}},
	{"64k", 256 << 20, []string{"-t", "ext4", "-b", "65536"}},
	{"fast_commit", 64 << 20, []string{"-t", "ext4", "-O", "fast_commit,orphan_file"}},
}

func TestMkfsImages(t *testing.T) {
	needTool(t, "dumpe2fs")
	for _, c := range mkfsConfigs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			checkImage(t, mkfs(t, c.size, c.args...))
		})
	}
}

// TestChecksumSeedAfterUUIDChange changes the UUID of a metadata_csum_seed
// filesystem: checksums stay valid only if they use s_checksum_seed.
func TestChecksumSeedAfterUUIDChange(t *testing.T) {
	path := mkfs(t, 32<<20, "-t", "ext4", "-O", "metadata_csum_seed")
	run(t, "tune2fs", "-U", "random", path)
	checkImage(t, path)
	f, _ := os.Open(path)
	defer f.Close()
	sb, err := Decode(readAt(t, f, Offset, Size))
	if err != nil {
		t.Fatal(err)
	}
	sb2 := *sb
	sb2.FeatureIncompat &^= IncompatCsumSeed
	if sb.ChecksumSeed() == sb2.ChecksumSeed() {
		t.Fatal("seed does not depend on metadata_csum_seed after a UUID change")
	}
}

// TestCorruptedImageBytes flips bytes of real structures and expects the
// checksums to notice.
func TestCorruptedImageBytes(t *testing.T) {
	path := mkfs(t, 32<<20, "-t", "ext4", "-b", "1024", "-g", "1024")
	f, _ := os.Open(path)
	defer f.Close()
	raw := readAt(t, f, Offset, Size)
	bad := bytes.Clone(raw)
	bad[0x1F0] ^= 1 // inside s_last_error_func, covered by the checksum only
	_, err := Decode(bad)
	var ce *fserr.ChecksumError
	if !errors.As(err, &ce) || !errors.Is(err, fserr.ErrChecksum) {
		t.Fatalf("Decode of flipped superblock: %v", err)
	}
	if _, err := DecodeNoVerify(bad); err != nil {
		t.Fatalf("DecodeNoVerify: %v", err)
	}
	sb, _ := Decode(raw)
	blk, off := sb.GroupDescLocation(3)
	d := readAt(t, f, int64(blk)*int64(sb.BlockSize())+int64(off), int(sb.DescSize()))
	d[0x3C] ^= 0x80 // bg_reserved
	if _, err := DecodeGroupDesc(sb, d, 3); !errors.Is(err, fserr.ErrChecksum) {
		t.Fatalf("DecodeGroupDesc of flipped descriptor: %v", err)
	}
	d[0x3C] ^= 0x80
	if _, err := DecodeGroupDesc(sb, d, 4); !errors.Is(err, fserr.ErrChecksum) {
		t.Fatalf("descriptor checksum does not cover the group number: %v", err)
	}
}
