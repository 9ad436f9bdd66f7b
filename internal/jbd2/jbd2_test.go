package jbd2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

func TestSuperblockLayout(t *testing.T) {
	want := map[string]int{
		"Header": 0x0, "BlockSize": 0xC, "Sequence": 0x18, "Errno": 0x20, "FeatureCompat": 0x24,
		"UUID": 0x30, "NrUsers": 0x40, "MaxTransaction": 0x48, "ChecksumType": 0x50,
		"NumFCBlocks": 0x54, "Head": 0x58, "Padding": 0x5C, "Checksum": 0xFC, "Users": 0x100,
	}
	typ := reflect.TypeFor[Superblock]()
	off := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		if w, ok := want[f.Name]; ok && w != off {
			t.Errorf("%s at %#x, want %#x", f.Name, off, w)
		}
		off += binary.Size(reflect.Zero(f.Type).Interface())
	}
	if off != SuperblockSize {
		t.Errorf("size %d", off)
	}
}

// goodSB returns a v2 journal superblock of 4 KiB blocks with csum v3.
func goodSB() *Superblock {
	return &Superblock{
		Header:    Header{Magic, BlockSuperV2, 0},
		BlockSize: 4096, MaxLen: 4096, First: 1, Sequence: 7, Start: 0,
		FeatureIncompat: IncompatRevoke | Incompat64Bit | IncompatCsumV3,
		UUID:            [16]byte{9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6},
		NrUsers:         1, ChecksumType: ChecksumCRC32C,
	}
}

func TestSuperblockRoundTrip(t *testing.T) {
	sb := goodSB()
	sb.Errno = -5
	sb.Users[20] = 1
	b := sb.Encode()
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sb) {
		t.Fatalf("round trip:\n%+v\n%+v", got, sb)
	}
	if !bytes.Equal(got.Encode(), b) {
		t.Fatal("re-encode differs")
	}
	b[0x200] ^= 1 // s_users is covered by the checksum
	if _, err := Decode(b); !errors.Is(err, fserr.ErrChecksum) {
		t.Fatalf("flipped byte: %v", err)
	}
	if _, err := DecodeNoVerify(b); err != nil {
		t.Fatal(err)
	}
	// v1: features are ignored.
	v1 := goodSB()
	v1.Header.BlockType = BlockSuperV1
	v1.FeatureIncompat = 0xFFFF
	v1.MaxLen = 100
	got, err = Decode(v1.Encode())
	if err != nil || got.Version() != 1 || got.Is64Bit() || got.UnknownIncompat() != 0 || got.TagBytes() != 8 {
		t.Fatalf("v1: %v", err)
	}
}

func TestSuperblockRejects(t *testing.T) {
	for name, mod := range map[string]func(*Superblock){
		"magic":          func(s *Superblock) { s.Header.Magic++ },
		"type":           func(s *Superblock) { s.Header.BlockType = BlockCommit },
		"block size":     func(s *Superblock) { s.BlockSize = 3000 },
		"block size big": func(s *Superblock) { s.BlockSize = 1 << 17 },
		"first zero":     func(s *Superblock) { s.First = 0 },
		"first past end": func(s *Superblock) { s.First = s.MaxLen },
		"start":          func(s *Superblock) { s.Start = s.MaxLen },
		"too short":      func(s *Superblock) { s.MaxLen = 1000 },
		"fc too big": func(s *Superblock) {
			s.FeatureIncompat |= IncompatFastCommit
			s.NumFCBlocks = 4096 - 1023
		},
		"start in fc": func(s *Superblock) {
			s.FeatureIncompat |= IncompatFastCommit
			s.Start = 4096 - 10
		},
		"v2 and v3":     func(s *Superblock) { s.FeatureIncompat |= IncompatCsumV2 },
		"v1 and v3":     func(s *Superblock) { s.FeatureCompat |= CompatChecksum },
		"checksum type": func(s *Superblock) { s.ChecksumType = ChecksumCRC32 },
	} {
		sb := goodSB()
		mod(sb)
		_, err := Decode(sb.Encode())
		var ce *fserr.CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Decode(make([]byte, 100)); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("short: %v", err)
	}
}

func TestGeometry(t *testing.T) {
	sb := goodSB()
	cases := []struct {
		incompat uint32
		want     int
	}{
		{0, 8}, {Incompat64Bit, 12}, {IncompatCsumV2, 10}, {IncompatCsumV2 | Incompat64Bit, 14},
		{IncompatCsumV3, 16}, {IncompatCsumV3 | Incompat64Bit, 16},
	}
	for _, c := range cases {
		sb.FeatureIncompat = c.incompat
		if got := sb.TagBytes(); got != c.want {
			t.Errorf("incompat %#x: tag bytes %d, want %d", c.incompat, got, c.want)
		}
	}
	sb = goodSB()
	if sb.LogEnd() != 4096 || sb.FastCommitBlocks() != 0 {
		t.Errorf("no fc: end %d", sb.LogEnd())
	}
	if f, e := sb.FastCommitArea(); f != e {
		t.Errorf("empty fc area %d-%d", f, e)
	}
	sb.FeatureIncompat |= IncompatFastCommit
	if sb.FastCommitBlocks() != DefaultFCBlocks || sb.LogEnd() != 4096-256 {
		t.Errorf("default fc: %d %d", sb.FastCommitBlocks(), sb.LogEnd())
	}
	sb.NumFCBlocks = 64
	if f, e := sb.FastCommitArea(); sb.LogEnd() != 4032 || f != 4033 || e != 4096 {
		t.Errorf("fc area %d-%d end %d", f, e, sb.LogEnd())
	}
	if sb.NextLogBlock(4031) != 1 || sb.NextLogBlock(5) != 6 {
		t.Errorf("wrap: %d", sb.NextLogBlock(4031))
	}
	if !SeqAfter(1, 0xFFFFFFFF) || SeqAfter(5, 5) || SeqAfter(4, 5) {
		t.Error("SeqAfter")
	}
	sb.NrUsers = 1000
	if len(sb.UserUUIDs()) != MaxUsers {
		t.Error("UserUUIDs not capped")
	}
	sb.FeatureCompat, sb.FeatureIncompat = CompatChecksum, IncompatRevoke|IncompatFastCommit|0x100
	if got := strings.Join(sb.FeatureNames(), " "); got != "journal_checksum journal_incompat_revoke FEATURE_I5 FEATURE_I8" {
		t.Errorf("names %q", got)
	}
	if sb.UnknownIncompat() != 0x100 {
		t.Errorf("unknown %#x", sb.UnknownIncompat())
	}
}

func TestCRC32BE(t *testing.T) {
	// CRC-32/BZIP2 of "123456789" is 0xFC891918: init ~0, final inversion.
	if got := ^TransactionCRC32(^uint32(0), []byte("123456789")); got != 0xFC891918 {
		t.Fatalf("crc32_be check %#x", got)
	}
}

// formats lists journal superblocks of every tag format.
func formats() map[string]*Superblock {
	m := map[string]*Superblock{}
	for name, inc := range map[string]uint32{
		"plain": IncompatRevoke, "64bit": IncompatRevoke | Incompat64Bit,
		"csum2": IncompatRevoke | IncompatCsumV2, "csum2-64": IncompatRevoke | IncompatCsumV2 | Incompat64Bit,
		"csum3": IncompatRevoke | IncompatCsumV3, "csum3-64": IncompatRevoke | IncompatCsumV3 | Incompat64Bit,
	} {
		sb := goodSB()
		sb.BlockSize = 1024
		sb.FeatureIncompat = inc
		m[name] = sb
	}
	return m
}

func TestDescriptorRoundTrip(t *testing.T) {
	for name, sb := range formats() {
		data := bytes.Repeat([]byte{0xAB}, int(sb.BlockSize))
		var tags []Tag
		for i := range 5 {
			tg := Tag{Block: uint64(1000 + i), Flags: FlagSameUUID}
			if sb.Is64Bit() {
				tg.Block |= uint64(i) << 32
			}
			if i == 0 {
				tg.Flags, tg.UUID = 0, sb.UUID
			}
			if i == 4 {
				tg.Flags |= FlagLastTag | FlagEscape
			}
			SetTagChecksum(sb, &tg, 42, data)
			tags = append(tags, tg)
		}
		b, err := EncodeDescriptor(sb, 42, tags)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyBlockTail(sb, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		d, err := DecodeDescriptor(sb, b)
		if err != nil {
			t.Fatal(err)
		}
		if d.Header != (Header{Magic, BlockDescriptor, 42}) || !reflect.DeepEqual(d.Tags, tags) {
			t.Errorf("%s: round trip\n%+v\n%+v", name, d.Tags, tags)
		}
		for i := range d.Tags {
			if err := VerifyTag(sb, &d.Tags[i], 42, data); err != nil {
				t.Errorf("%s: tag %d: %v", name, i, err)
			}
		}
		if sb.HasCsumV2or3() {
			if err := VerifyTag(sb, &d.Tags[0], 43, data); !errors.Is(err, fserr.ErrChecksum) {
				t.Errorf("%s: tag checksum ignores the sequence: %v", name, err)
			}
			b[20] ^= 1
			if err := VerifyBlockTail(sb, b); !errors.Is(err, fserr.ErrChecksum) {
				t.Errorf("%s: flipped descriptor: %v", name, err)
			}
		}
		// Without a last tag, decoding stops where the tag area ends.
		full := make([]Tag, 0, 200)
		for i := 0; ; i++ {
			full = append(full, Tag{Block: uint64(i), Flags: FlagSameUUID})
			if _, err := EncodeDescriptor(sb, 1, full); err != nil {
				full = full[:len(full)-1]
				break
			}
		}
		if len(full) != DescriptorSpace(sb)/sb.TagBytes() {
			t.Errorf("%s: %d tags fit, want %d", name, len(full), DescriptorSpace(sb)/sb.TagBytes())
		}
		b, _ = EncodeDescriptor(sb, 1, full)
		if d, err := DecodeDescriptor(sb, b); err != nil || len(d.Tags) != len(full) {
			t.Errorf("%s: full descriptor decodes %d tags: %v", name, len(d.Tags), err)
		}
	}
}

func TestRevokeRoundTrip(t *testing.T) {
	for name, sb := range formats() {
		blocks := []uint64{5, 6, 1 << 20}
		if sb.Is64Bit() {
			blocks = append(blocks, 1<<40)
		} else if _, err := EncodeRevoke(sb, 9, []uint64{1 << 40}); err == nil {
			t.Errorf("%s: 64-bit block in 32-bit revoke accepted", name)
		}
		b, err := EncodeRevoke(sb, 9, blocks)
		if err != nil {
			t.Fatal(err)
		}
		r, err := DecodeRevoke(sb, b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Blocks, blocks) || r.Header.Sequence != 9 || int(r.Count) != 16+len(blocks)*revokeRecordSize(sb) {
			t.Errorf("%s: %+v", name, r)
		}
		if err := VerifyBlockTail(sb, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		full := make([]uint64, RevokeCapacity(sb))
		if b, err = EncodeRevoke(sb, 1, full); err != nil {
			t.Fatal(err)
		}
		if r, err := DecodeRevoke(sb, b); err != nil || len(r.Blocks) != len(full) {
			t.Errorf("%s: full revoke: %v", name, err)
		}
		if _, err := EncodeRevoke(sb, 1, append(full, 1)); err == nil {
			t.Errorf("%s: overfull revoke accepted", name)
		}
		binary.BigEndian.PutUint32(b[12:], sb.BlockSize-uint32(sb.tail())+1)
		if _, err := DecodeRevoke(sb, b); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: r_count past the tail: %v", name, err)
		}
	}
}

func TestCommitRoundTrip(t *testing.T) {
	for name, sb := range formats() {
		c := &Commit{Header: Header{Magic, BlockCommit, 77}, CommitSec: 1700000000, CommitNsec: 123}
		if !sb.HasCsumV2or3() {
			c.ChecksumType, c.ChecksumSize, c.Checksums[0] = ChecksumCRC32, 4, 0xdeadbeef
		}
		b := EncodeCommit(sb, c)
		got, err := DecodeCommit(sb, b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: round trip\n%+v\n%+v", name, got, c)
		}
		if err := VerifyCommit(sb, b); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if sb.HasCsumV2or3() {
			b[len(b)-1] ^= 1 // the checksum covers the whole block
			if err := VerifyCommit(sb, b); !errors.Is(err, fserr.ErrChecksum) {
				t.Errorf("%s: flipped commit: %v", name, err)
			}
		}
	}
}

func TestBlockDecodeErrors(t *testing.T) {
	sb := formats()["csum3"]
	b, _ := EncodeRevoke(sb, 1, nil)
	if _, err := DecodeDescriptor(sb, b); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("revoke as descriptor: %v", err)
	}
	if _, err := DecodeCommit(sb, b[:512]); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("short block: %v", err)
	}
	if _, err := DecodeRevoke(sb, make([]byte, sb.BlockSize)); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("zero block: %v", err)
	}
	if _, err := DecodeHeader(nil); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("empty header: %v", err)
	}
}

func TestEscape(t *testing.T) {
	b := make([]byte, 64)
	if Escape(b) {
		t.Fatal("escaped a block without magic")
	}
	binary.BigEndian.PutUint32(b, Magic)
	b[10] = 7
	if !Escape(b) || binary.BigEndian.Uint32(b) != 0 || b[10] != 7 {
		t.Fatal("Escape")
	}
	Unescape(b)
	if binary.BigEndian.Uint32(b) != Magic {
		t.Fatal("Unescape")
	}
}
