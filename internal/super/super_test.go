package super

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/fserr"
)

// fieldOffsets returns the packed on-disk offset of every field.
func fieldOffsets() map[string]int {
	m := map[string]int{}
	typ := reflect.TypeFor[Superblock]()
	off := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		m[f.Name] = off
		off += binary.Size(reflect.Zero(f.Type).Interface())
	}
	m["END"] = off
	return m
}

func TestLayoutMatchesKernel(t *testing.T) {
	// Offsets from the comments of struct ext4_super_block and
	// Documentation/filesystems/ext4/super.rst.
	want := map[string]int{
		"InodesCount": 0x0, "FreeInodesCount": 0x10, "BlocksPerGroup": 0x20, "Wtime": 0x30,
		"Magic": 0x38, "Lastcheck": 0x40, "DefResuid": 0x50, "InodeSizeRaw": 0x58,
		"FeatureIncompat": 0x60, "UUID": 0x68, "VolumeName": 0x78, "LastMounted": 0x88,
		"AlgorithmUsageBitmap": 0xC8, "ReservedGDTBlocks": 0xCE, "JournalUUID": 0xD0,
		"JournalInum": 0xE0, "HashSeed": 0xEC, "DefHashVersion": 0xFC, "DescSizeRaw": 0xFE,
		"DefaultMountOpts": 0x100, "FirstMetaBG": 0x104, "MkfsTime": 0x108, "JnlBlocks": 0x10C,
		"BlocksCountHi": 0x150, "MinExtraIsize": 0x15C, "Flags": 0x160, "MMPBlock": 0x168,
		"RaidStripeWidth": 0x170, "LogGroupsPerFlex": 0x174, "ChecksumType": 0x175,
		"KbytesWritten": 0x178, "SnapshotInum": 0x180, "SnapshotRBlocksCount": 0x188,
		"ErrorCount": 0x194, "FirstErrorBlock": 0x1A0, "FirstErrorFunc": 0x1A8,
		"FirstErrorLine": 0x1C8, "LastErrorBlock": 0x1D8, "LastErrorFunc": 0x1E0,
		"MountOpts": 0x200, "UsrQuotaInum": 0x240, "OverheadClusters": 0x248, "BackupBGs": 0x24C,
		"EncryptAlgos": 0x254, "EncryptPwSalt": 0x258, "LpfIno": 0x268, "PrjQuotaInum": 0x26C,
		"ChecksumSeedRaw": 0x270, "WtimeHi": 0x274, "LastErrorErrcode": 0x27B,
		"Encoding": 0x27C, "EncodingFlags": 0x27E, "OrphanFileInum": 0x280,
		"Reserved": 0x284, "Checksum": 0x3FC, "END": Size,
	}
	got := fieldOffsets()
	for name, off := range want {
		if got[name] != off {
			t.Errorf("%s at %#x, want %#x", name, got[name], off)
		}
	}
	if binary.Size(Superblock{}) != Size {
		t.Errorf("binary size %d", binary.Size(Superblock{}))
	}
}

// goodSuper returns a small valid 4 KiB-block ext4 superblock.
func goodSuper() *Superblock {
	sb := &Superblock{
		InodesCount: 4 * 2048, BlocksCountLo: 4*32768 - 100, FirstDataBlock: 0,
		LogBlockSize: 2, LogClusterSize: 2, BlocksPerGroup: 32768, ClustersPerGroup: 32768,
		InodesPerGroup: 2048, Magic: Magic, State: StateValid, Errors: ErrorsContinue,
		RevLevel: DynamicRev, FirstIno: 11, InodeSizeRaw: 256, DescSizeRaw: 64,
		FeatureCompat:     CompatHasJournal | CompatExtAttr | CompatResizeInode | CompatDirIndex,
		FeatureIncompat:   IncompatFiletype | IncompatExtents | Incompat64Bit | IncompatFlexBG,
		FeatureROCompat:   ROCompatSparseSuper | ROCompatLargeFile | ROCompatMetadataCsum,
		UUID:              [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
		ReservedGDTBlocks: 31, LogGroupsPerFlex: 4, ChecksumType: ChecksumCRC32C,
	}
	sb.SetLabel("vol")
	return sb
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	sb := goodSuper()
	sb.SetWriteTime(time.Unix(1<<33+5, 0))
	sb.HashSeed = [4]uint32{1, 2, 3, 4}
	sb.Reserved[93] = 0xdeadbeef
	b := sb.Encode()
	if len(b) != Size {
		t.Fatalf("len %d", len(b))
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sb) {
		t.Fatalf("round trip differs:\n%+v\n%+v", got, sb)
	}
	if got.WriteTime().Unix() != 1<<33+5 || got.Label() != "vol" {
		t.Errorf("time %v label %q", got.WriteTime(), got.Label())
	}
	if !bytes.Equal(got.Encode(), b) {
		t.Error("second Encode differs")
	}
	// Without metadata_csum the checksum field is kept as is.
	sb.FeatureROCompat &^= ROCompatMetadataCsum
	sb.Checksum = 0x12345678
	got, err = Decode(sb.Encode())
	if err != nil || got.Checksum != 0x12345678 {
		t.Fatalf("no-csum round trip: %v %#x", err, got.Checksum)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Superblock)
	}{
		{"magic", func(s *Superblock) { s.Magic = 0xEF52 }},
		{"block size", func(s *Superblock) { s.LogBlockSize, s.LogClusterSize = 7, 7 }},
		{"cluster without bigalloc", func(s *Superblock) { s.LogClusterSize = 3 }},
		{"cluster below block", func(s *Superblock) { s.FeatureROCompat |= ROCompatBigalloc; s.LogClusterSize = 1 }},
		{"cluster too big", func(s *Superblock) { s.FeatureROCompat |= ROCompatBigalloc; s.LogClusterSize = 21 }},
		{"blocks per group", func(s *Superblock) { s.BlocksPerGroup = 32768 + 8 }},
		{"clusters per group zero", func(s *Superblock) { s.ClustersPerGroup, s.BlocksPerGroup = 0, 0 }},
		{"clusters per group", func(s *Superblock) { s.ClustersPerGroup, s.BlocksPerGroup = 32768+8, 32768+8 }},
		{"inode size small", func(s *Superblock) { s.InodeSizeRaw = 64 }},
		{"inode size odd", func(s *Superblock) { s.InodeSizeRaw = 384 }},
		{"inode size big", func(s *Superblock) { s.InodeSizeRaw = 8192 }},
		{"first ino", func(s *Superblock) { s.FirstIno = 3 }},
		{"first ino past end", func(s *Superblock) { s.FirstIno = s.InodesCount + 1 }},
		{"inodes per group", func(s *Superblock) { s.InodesPerGroup, s.InodesCount = 8, 32 }},
		{"inodes per group big", func(s *Superblock) { s.InodesPerGroup, s.InodesCount = 32769, 4*32769 }},
		{"inodes count", func(s *Superblock) { s.InodesCount++ }},
		{"desc size", func(s *Superblock) { s.DescSizeRaw = 48 }},
		{"desc size pow2", func(s *Superblock) { s.DescSizeRaw = 96 }},
		{"desc size big", func(s *Superblock) { s.DescSizeRaw = 2048 }},
		{"checksum type", func(s *Superblock) { s.ChecksumType = 2 }},
		{"first data block", func(s *Superblock) { s.FirstDataBlock = 1 }},
		{"first data block 1k", func(s *Superblock) {
			s.LogBlockSize, s.LogClusterSize = 0, 0
			s.BlocksPerGroup, s.ClustersPerGroup = 8192, 8192
			s.SetBlocksCount(4 * 8192)
		}},
		{"first data block beyond", func(s *Superblock) { s.SetBlocksCount(0) }},
		{"reserved gdt", func(s *Superblock) { s.ReservedGDTBlocks = 1025 }},
		{"first meta bg", func(s *Superblock) { s.FeatureIncompat |= IncompatMetaBG; s.FirstMetaBG = 2 }},
		{"too many groups", func(s *Superblock) {
			s.BlocksPerGroup, s.ClustersPerGroup = 8, 8
			s.SetBlocksCount(8 << 32)
			s.InodesPerGroup, s.InodesCount = 16, 0
		}},
	}
	for _, c := range cases {
		sb := goodSuper()
		c.mod(sb)
		_, err := Decode(sb.Encode())
		var ce *fserr.CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: got %v, want CorruptError", c.name, err)
		}
	}
	if _, err := Decode(make([]byte, 1023)); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("short buffer: %v", err)
	}
	// Checksum mismatch.
	b := goodSuper().Encode()
	b[0x3FC] ^= 1
	if _, err := Decode(b); !errors.Is(err, fserr.ErrChecksum) {
		t.Errorf("bad checksum: %v", err)
	}
	if _, err := DecodeNoVerify(b); err != nil {
		t.Errorf("DecodeNoVerify: %v", err)
	}
}

func TestCounts64(t *testing.T) {
	sb := goodSuper()
	sb.SetBlocksCount(1<<33 + 7)
	sb.SetFreeBlocksCount(1<<32 + 1)
	sb.SetRBlocksCount(1<<34 + 2)
	if sb.BlocksCount() != 1<<33+7 || sb.BlocksCountHi != 2 || sb.FreeBlocksCount() != 1<<32+1 || sb.RBlocksCount() != 1<<34+2 {
		t.Fatalf("64-bit counts: %d %d %d", sb.BlocksCount(), sb.FreeBlocksCount(), sb.RBlocksCount())
	}
	// Without 64bit the high halves are not part of the value.
	sb.FeatureIncompat &^= Incompat64Bit
	sb.BlocksCountHi = 9
	if sb.BlocksCount() != 7 || sb.DescSize() != 32 {
		t.Fatalf("32-bit: %d %d", sb.BlocksCount(), sb.DescSize())
	}
}

func TestFeatureNames(t *testing.T) {
	sb := &Superblock{
		FeatureCompat:   CompatHasJournal | CompatExtAttr | 0x80000000,
		FeatureIncompat: IncompatFiletype | IncompatExtents | IncompatCasefold,
		FeatureROCompat: ROCompatGDTCsum | ROCompatReadonly | ROCompatBtreeDir,
	}
	want := "has_journal ext_attr FEATURE_C31 filetype extent casefold FEATURE_R2 uninit_bg read-only"
	if got := strings.Join(sb.FeatureNames(), " "); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	saved := KnownIncompat
	defer func() { KnownIncompat = saved }()
	KnownIncompat = IncompatFiletype | IncompatExtents
	if sb.UnknownIncompat() != IncompatCasefold || sb.UnknownCompat() != 0x80000000 || sb.UnknownROCompat() != 0 {
		t.Errorf("unknown: %#x %#x %#x", sb.UnknownIncompat(), sb.UnknownCompat(), sb.UnknownROCompat())
	}
}

func TestHasSuperBackup(t *testing.T) {
	sb := goodSuper()
	var got []uint32
	for g := range uint32(400) {
		if sb.HasSuperBackup(g) {
			got = append(got, g)
		}
	}
	want := []uint32{0, 1, 3, 5, 7, 9, 25, 27, 49, 81, 125, 243, 343}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sparse_super: %v", got)
	}
	sb.FeatureROCompat &^= ROCompatSparseSuper
	if !sb.HasSuperBackup(2) || !sb.HasSuperBackup(100) {
		t.Error("without sparse_super every group has a backup")
	}
	sb.FeatureCompat |= CompatSparseSuper2
	sb.BackupBGs = [2]uint32{1, 77}
	if !sb.HasSuperBackup(0) || !sb.HasSuperBackup(77) || sb.HasSuperBackup(3) || sb.HasSuperBackup(2) {
		t.Error("sparse_super2")
	}
	if !isPower(1<<31, 2) || isPower(0xFFFFFFFF, 3) || !isPower(3486784401, 3) || isPower(3486784400, 3) {
		t.Error("isPower")
	}
}

func TestGroupArithmetic(t *testing.T) {
	sb := goodSuper()
	if sb.GroupCount() != 4 || sb.GroupBlocks(3) != 32768-100 || sb.GroupBlocks(0) != 32768 {
		t.Fatalf("groups %d last %d", sb.GroupCount(), sb.GroupBlocks(3))
	}
	if g, off := sb.GroupOfBlock(32768*2 + 5); g != 2 || off != 5 {
		t.Errorf("GroupOfBlock: %d %d", g, off)
	}
	if g, idx, ok := sb.GroupOfInode(2049); !ok || g != 1 || idx != 0 {
		t.Errorf("GroupOfInode(2049): %d %d %v", g, idx, ok)
	}
	if _, _, ok := sb.GroupOfInode(0); ok {
		t.Error("inode 0")
	}
	if _, _, ok := sb.GroupOfInode(sb.InodesCount + 1); ok {
		t.Error("inode past end")
	}
	if sb.FlexGroupSize() != 16 || sb.InodesPerBlock() != 16 || sb.InodeTableBlocks() != 128 || sb.DescPerBlock() != 64 {
		t.Errorf("flex %d ipb %d itb %d dpb %d", sb.FlexGroupSize(), sb.InodesPerBlock(), sb.InodeTableBlocks(), sb.DescPerBlock())
	}
	o := sb.GroupOverhead(1)
	if !o.HasSuper || o.SuperBlock != 32768 || o.GDT != 32769 || o.GDTBlocks != 1 || o.ReservedGDT != 31 || o.Blocks() != 33 {
		t.Errorf("overhead of group 1: %+v", o)
	}
	if o := sb.GroupOverhead(2); o.Blocks() != 0 {
		t.Errorf("overhead of group 2: %+v", o)
	}
	// 1 KiB blocks with bigalloc: group 0 starts at block 0, but the
	// superblock is still block 1 and the descriptors block 2.
	sb.LogBlockSize, sb.LogClusterSize = 0, 4
	sb.FeatureROCompat |= ROCompatBigalloc
	sb.ClustersPerGroup, sb.BlocksPerGroup = 8192, 8192*16
	sb.SetBlocksCount(4 * 8192 * 16)
	if err := sb.Validate(); err != nil {
		t.Fatal(err)
	}
	if sb.GDTBlockLocation(0) != 2 || sb.SuperBlockLocation(0) != 1 || sb.SuperBlockByteOffset(1) != 8192*16*1024 {
		t.Errorf("bigalloc 1k: gdt %d sb %d", sb.GDTBlockLocation(0), sb.SuperBlockLocation(0))
	}
	sb.FeatureIncompat |= IncompatMetaBG
	if sb.GDTBlockLocation(0) != 2 {
		t.Errorf("bigalloc 1k meta_bg: gdt %d", sb.GDTBlockLocation(0))
	}
}

func TestGroupDescRoundTrip(t *testing.T) {
	for _, ds := range []uint16{0, 64, 128} {
		for _, csumFeat := range []uint32{0, ROCompatGDTCsum, ROCompatMetadataCsum} {
			sb := goodSuper()
			sb.FeatureROCompat = sb.FeatureROCompat&^ROCompatMetadataCsum | csumFeat
			if ds == 0 {
				sb.FeatureIncompat &^= Incompat64Bit
			} else {
				sb.DescSizeRaw = ds
			}
			g := &GroupDesc{BlockBitmap: 100, InodeBitmap: 116, InodeTable: 132, FreeBlocksCount: 1000,
				FreeInodesCount: 2000, UsedDirsCount: 3, Flags: BGItableZeroed, BlockBitmapCsum: 0xabcd,
				InodeBitmapCsum: 0x1234, ItableUnused: 1990}
			if ds >= 64 {
				g.BlockBitmap |= 1 << 32
				g.BlockBitmapCsum |= 0x5a5a0000
				g.Reserved = 0xfeedface
			}
			if ds > 64 {
				g.Tail = bytes.Repeat([]byte{0x77}, int(ds)-64)
			}
			b := EncodeGroupDesc(sb, g, 3)
			if len(b) != int(sb.DescSize()) {
				t.Fatalf("len %d", len(b))
			}
			got, err := DecodeGroupDescNoVerify(sb, b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, g) {
				t.Errorf("ds %d csum %#x: round trip\n%+v\n%+v", ds, csumFeat, got, g)
			}
			if err := VerifyGroupDesc(sb, b, 3); err != nil {
				t.Errorf("ds %d csum %#x: %v", ds, csumFeat, err)
			}
			if csumFeat == 0 {
				continue
			}
			// Every byte but the checksum's own is covered; the crc16 covers
			// the second half only with 64bit.
			for i := range b {
				if i == gdChecksumOffset || i == gdChecksumOffset+1 {
					continue
				}
				c := bytes.Clone(b)
				c[i] ^= 0x10
				if err := VerifyGroupDesc(sb, c, 3); !errors.Is(err, fserr.ErrChecksum) {
					t.Errorf("ds %d csum %#x: flipping byte %d not detected", ds, csumFeat, i)
					break
				}
			}
		}
	}
}

func TestCheckGroupDesc(t *testing.T) {
	sb := goodSuper()
	sb.FeatureIncompat &^= IncompatFlexBG
	ok := &GroupDesc{BlockBitmap: 32768 + 33, InodeBitmap: 32768 + 34, InodeTable: 32768 + 35}
	if err := CheckGroupDesc(sb, ok, 1); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*GroupDesc){
		"bitmap in other group": func(g *GroupDesc) { g.BlockBitmap = 100 },
		"bitmap on superblock":  func(g *GroupDesc) { g.InodeBitmap = 0 },
		"table past group":      func(g *GroupDesc) { g.InodeTable = 65536 - 10 },
		"table overflow":        func(g *GroupDesc) { g.InodeTable = 1<<64 - 2 },
		"free blocks":           func(g *GroupDesc) { g.FreeBlocksCount = 32769 },
		"free inodes":           func(g *GroupDesc) { g.FreeInodesCount = 2049 },
		"dirs":                  func(g *GroupDesc) { g.UsedDirsCount = 2049 },
		"unused":                func(g *GroupDesc) { g.ItableUnused = 2049 },
	} {
		g := *ok
		mod(&g)
		if err := CheckGroupDesc(sb, &g, 1); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// With flex_bg metadata may live in another group, not on the GDT.
	sb.FeatureIncompat |= IncompatFlexBG
	g := *ok
	g.BlockBitmap = 100
	if err := CheckGroupDesc(sb, &g, 1); err != nil {
		t.Errorf("flex_bg: %v", err)
	}
	g.BlockBitmap = 2 // reserved GDT of group 0
	if err := CheckGroupDesc(sb, &g, 1); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("flex_bg on reserved GDT: %v", err)
	}
	if err := CheckGroupDesc(sb, ok, 4); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("group past end: %v", err)
	}
}

func TestBitmapChecksums(t *testing.T) {
	sb := goodSuper()
	sb.BlocksPerGroup, sb.ClustersPerGroup = 8192, 8192 // bitmap is 1024 of the 4096 bytes
	bm := make([]byte, 4096)
	bm[17] = 0xff
	g := &GroupDesc{}
	SetBlockBitmapChecksum(sb, g, bm)
	SetInodeBitmapChecksum(sb, g, bm)
	if err := VerifyBlockBitmap(sb, g, 0, bm); err != nil {
		t.Fatal(err)
	}
	if err := VerifyInodeBitmap(sb, g, 0, bm); err != nil {
		t.Fatal(err)
	}
	// Only ClustersPerGroup/8 bytes count, and a short buffer is zero-padded.
	bm[4095] = 1
	if err := VerifyBlockBitmap(sb, g, 0, bm); err != nil {
		t.Errorf("byte past the group's bits counted: %v", err)
	}
	if BlockBitmapChecksum(sb, bm[:18]) != BlockBitmapChecksum(sb, bm) {
		t.Error("short bitmap not zero-padded")
	}
	if InodeBitmapChecksum(sb, bm[:18]) != InodeBitmapChecksum(sb, bm) {
		t.Error("short inode bitmap not zero-padded")
	}
	bm[3] = 1
	if err := VerifyInodeBitmap(sb, g, 0, bm); !errors.Is(err, fserr.ErrChecksum) {
		t.Errorf("flip: %v", err)
	}
	// 32-byte descriptors store (and compare) the low 16 bits.
	sb.FeatureIncompat &^= Incompat64Bit
	SetBlockBitmapChecksum(sb, g, bm)
	if g.BlockBitmapCsum>>16 != 0 || VerifyBlockBitmap(sb, g, 0, bm) != nil {
		t.Errorf("32-byte descriptor bitmap checksum %#x", g.BlockBitmapCsum)
	}
}
