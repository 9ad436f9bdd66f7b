package mkfs

import (
	"bytes"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/super"
)

// featureWords are the -O words FuzzPlan picks from.
var featureWords = []string{"^has_journal", "^metadata_csum", "^64bit", "^flex_bg", "meta_bg",
	"^resize_inode", "orphan_file", "metadata_csum_seed", "inline_data", "sparse_super2",
	"uninit_bg", "^extent", "^sparse_super", "^filetype", "^huge_file", "^dir_index"}

// FuzzPlan throws option combinations at the planner and, when it accepts
// them, at the builder: neither may panic, an accepted plan must build, and
// the resulting superblock must decode with the planned geometry. Seeded
// with the configurations of the mke2fs comparison tests.
func FuzzPlan(f *testing.F) {
	f.Add(uint32(64<<10), uint8(0), uint8(0), uint16(0), uint16(0), uint8(0), uint32(0), uint8(0))
	f.Add(uint32(8<<10), uint8(1), uint8(1), uint16(1), uint16(0), uint8(3), uint32(0), uint8(1))
	f.Add(uint32(300<<10), uint8(1), uint8(0), uint16(0x0030), uint16(0), uint8(0), uint32(1000), uint8(0))
	f.Add(uint32(1<<20), uint8(3), uint8(2), uint16(0x0180), uint16(4096), uint8(2), uint32(0), uint8(2))
	f.Add(uint32(5<<20), uint8(1), uint8(0), uint16(0x000a), uint16(0), uint8(6), uint32(0), uint8(0))
	f.Add(uint32(128), uint8(0), uint8(0), uint16(0), uint16(0), uint8(0), uint32(0), uint8(0))
	f.Fuzz(func(t *testing.T, kib uint32, bsSel, isSel uint8, feat, ratio uint16, flexLog uint8, inodes uint32, fsSel uint8) {
		size := int64(kib%(64<<20)) << 10 // up to 64 GiB
		o := Options{
			FsType:        []string{"ext4", "ext3", "ext2"}[fsSel%3],
			Size:          size,
			BlockSize:     []int{0, 1024, 2048, 4096}[bsSel%4],
			InodeSize:     []int{0, 128, 256, 512, 1024}[isSel%5],
			BytesPerInode: int(ratio),
			InodeCount:    uint64(inodes % (1 << 22)),
			UUID:          fixedUUID,
			HashSeed:      fixedSeed,
			CreationTime:  time.Unix(1700000000, 0),
		}
		if flexLog%8 != 0 {
			o.FlexBGSize = 1 << (flexLog % 8)
		}
		var words []string
		for i, w := range featureWords {
			if feat&(1<<i) != 0 {
				words = append(words, w)
			}
		}
		o.Features = joinComma(words)
		p, err := newPlan(o, 0)
		if err != nil {
			return
		}
		b, err := build(p, true)
		if err != nil {
			return // out of space or inodes while creating files, as mke2fs
		}
		img, err := b.finish()
		if err != nil {
			t.Fatalf("finish: %v", err)
		}
		primary := img.supers[len(img.supers)-1]
		sb, err := super.Decode(primary.b)
		if err != nil {
			t.Fatalf("our superblock does not decode: %v (options %+v)", err, o)
		}
		if sb.BlocksCount() != p.blocks || sb.InodesCount != p.inodes || sb.GroupCount() != p.groups {
			t.Fatalf("superblock geometry %d blocks %d inodes %d groups, planned %d %d %d",
				sb.BlocksCount(), sb.InodesCount, sb.GroupCount(), p.blocks, p.inodes, p.groups)
		}
		if sb.FreeBlocksCount() > p.blocks || sb.FreeInodesCount > p.inodes {
			t.Fatalf("free counts above totals")
		}
		for g := uint32(0); g < p.groups; g++ {
			gd := &b.gd[g]
			raw := super.EncodeGroupDesc(sb, gd, g)
			if err := super.VerifyGroupDesc(sb, raw, g); err != nil {
				t.Fatalf("group %d: %v", g, err)
			}
			if err := super.CheckGroupDesc(sb, gd, g); err != nil {
				t.Fatalf("group %d: %v", g, err)
			}
		}
		if !bytes.Equal(primary.b[0x38:0x3A], []byte{0x53, 0xEF}) {
			t.Fatal("no magic")
		}
	})
}

func joinComma(w []string) string {
	var b bytes.Buffer
	for i, s := range w {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s)
	}
	return b.String()
}
