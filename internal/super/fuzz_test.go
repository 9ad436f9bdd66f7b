package super

import (
	"bytes"
	"os"
	"reflect"
	"testing"
)

// seedSupers returns superblocks of several shapes: hand-made ones, and the
// real ones of a few mke2fs images when mke2fs is there.
func seedSupers(f *testing.F) [][]byte {
	var seeds [][]byte
	sb := goodSuper()
	seeds = append(seeds, sb.Encode())
	sb.FeatureIncompat = sb.FeatureIncompat&^Incompat64Bit | IncompatMetaBG
	sb.FeatureROCompat = sb.FeatureROCompat&^ROCompatMetadataCsum | ROCompatGDTCsum
	seeds = append(seeds, sb.Encode())
	sb = goodSuper()
	sb.FeatureCompat |= CompatSparseSuper2
	sb.BackupBGs = [2]uint32{1, 3}
	sb.FeatureIncompat |= IncompatCsumSeed
	seeds = append(seeds, sb.Encode())
	for _, args := range [][]string{
		{"-t", "ext4", "-b", "1024", "-g", "1024", "-O", "meta_bg,^resize_inode"},
		{"-t", "ext4", "-b", "1024", "-O", "bigalloc", "-C", "16384"},
		{"-t", "ext2", "-r", "0"},
	} {
		if testing.Short() {
			break
		}
		path := mkfs(f, 16<<20, args...)
		img, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, readAt(f, img, Offset, Size))
		img.Close()
	}
	return seeds
}

// exercise calls every layout method over a bounded set of groups; none
// may panic on a validated superblock.
func exercise(sb *Superblock) {
	n := sb.GroupCount()
	for _, g := range []uint32{0, 1, 2, n / 2, n - 1, n} {
		sb.GroupFirstBlock(g)
		sb.GroupBlocks(g)
		sb.HasSuperBackup(g)
		sb.SuperBlockLocation(g)
		sb.SuperBlockByteOffset(g)
		sb.GroupOverhead(g)
		sb.GroupDescLocation(g)
		for _, i := range []uint32{0, 1, sb.GDTBlocks() - 1} {
			sb.GDTBlockLocationIn(i, g)
			sb.GDTBlockLocation(i)
		}
	}
	sb.GroupOfBlock(sb.BlocksCount() - 1)
	sb.GroupOfInode(sb.InodesCount)
	sb.FeatureNames()
	sb.FlexGroupSize()
	sb.ChecksumSeed()
	sb.InodeTableBlocks()
	sb.ClusterSize()
	sb.WriteTime()
}

func FuzzDecode(f *testing.F) {
	for _, s := range seedSupers(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := Decode(b)
		if err != nil {
			if sb, err = DecodeNoVerify(b); err != nil {
				return
			}
		}
		exercise(sb)
		enc := sb.Encode()
		sb2, err := Decode(enc)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(sb, sb2) {
			t.Fatal("round trip differs")
		}
		if !sb.HasMetadataCsum() && !bytes.Equal(enc, b[:Size]) {
			t.Fatal("encode differs from input")
		}
	})
}

func FuzzDecodeGroupDesc(f *testing.F) {
	supers := []*Superblock{goodSuper()}
	for _, mod := range []func(*Superblock){
		func(s *Superblock) { s.FeatureIncompat &^= Incompat64Bit },
		func(s *Superblock) {
			s.FeatureROCompat = s.FeatureROCompat&^ROCompatMetadataCsum | ROCompatGDTCsum
			s.DescSizeRaw = 128
		},
		func(s *Superblock) { s.FeatureIncompat &^= IncompatFlexBG },
	} {
		s := goodSuper()
		mod(s)
		supers = append(supers, s)
	}
	for i, sb := range supers {
		g := &GroupDesc{BlockBitmap: 100, InodeBitmap: 116, InodeTable: 132, FreeBlocksCount: 10, Flags: BGItableZeroed}
		f.Add(EncodeGroupDesc(sb, g, 0), uint32(0), uint8(i))
		g = &GroupDesc{BlockBitmap: 32768 + 33, InodeBitmap: 32768 + 34, InodeTable: 32768 + 35, FreeInodesCount: 2048}
		f.Add(EncodeGroupDesc(sb, g, 1), uint32(1), uint8(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, group uint32, which uint8) {
		sb := supers[int(which)%len(supers)]
		raw, rawErr := DecodeGroupDescNoVerify(sb, b)
		g, err := DecodeGroupDesc(sb, b, group)
		if err != nil {
			return
		}
		if rawErr != nil || !reflect.DeepEqual(raw, g) {
			t.Fatal("DecodeGroupDesc and DecodeGroupDescNoVerify disagree")
		}
		enc := EncodeGroupDesc(sb, g, group)
		if sb.HasGroupDescCsum() && !bytes.Equal(enc, b[:sb.DescSize()]) {
			t.Fatalf("encode differs from a verified input")
		}
		g2, err := DecodeGroupDesc(sb, enc, group)
		if err != nil || !reflect.DeepEqual(g, g2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
