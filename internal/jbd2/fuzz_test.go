package jbd2

import (
	"os/exec"
	"reflect"
	"testing"
)

// fuzzFormats is the fixed list of journal formats the block fuzzers pick
// from (1 KiB blocks).
var fuzzFormats = func() []*Superblock {
	var out []*Superblock
	for _, name := range []string{"plain", "64bit", "csum2", "csum2-64", "csum3", "csum3-64"} {
		out = append(out, formats()[name])
	}
	return out
}()

func pick(which uint8) *Superblock { return fuzzFormats[int(which)%len(fuzzFormats)] }

// block copies in into a block of sb's size (truncating or zero-padding),
// so that mutations reach the decoders past the length check.
func block(sb *Superblock, in []byte) []byte {
	b := make([]byte, sb.BlockSize)
	copy(b, in)
	return b
}

func FuzzDecode(f *testing.F) {
	sb := goodSB()
	f.Add(sb.Encode())
	sb.FeatureIncompat = IncompatFastCommit | IncompatCsumV2
	sb.NumFCBlocks = 64
	f.Add(sb.Encode())
	sb.Header.BlockType = BlockSuperV1
	f.Add(sb.Encode())
	if _, err := exec.LookPath("debugfs"); err == nil && !testing.Short() {
		f.Add(journalOf(f, mkfs(f, 16<<20, "-t", "ext4", "-O", "fast_commit"))[:SuperblockSize])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sb, err := Decode(b)
		if err != nil {
			if sb, err = DecodeNoVerify(b); err != nil {
				return
			}
		}
		sb.TagBytes()
		sb.FastCommitArea()
		sb.NextLogBlock(sb.LogEnd() - 1)
		sb.FeatureNames()
		sb.UserUUIDs()
		sb2, err := Decode(sb.Encode())
		if err != nil || !reflect.DeepEqual(sb, sb2) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeDescriptor(f *testing.F) {
	for i, sb := range fuzzFormats {
		high := uint64(9)
		if sb.Is64Bit() {
			high = 1 << 33
		}
		tags := []Tag{{Block: 7, UUID: sb.UUID}, {Block: 8, Flags: FlagSameUUID | FlagEscape}, {Block: high, Flags: FlagSameUUID | FlagLastTag, Checksum: 0xabcdef}}
		b, err := EncodeDescriptor(sb, 3, tags)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, which uint8) {
		sb := pick(which)
		DecodeDescriptor(sb, in)
		b := block(sb, in)
		VerifyBlockTail(sb, b)
		d, err := DecodeDescriptor(sb, b)
		if err != nil {
			return
		}
		if len(d.Tags) > int(sb.BlockSize)/sb.TagBytes() {
			t.Fatalf("%d tags in one block", len(d.Tags))
		}
		enc, err := EncodeDescriptor(sb, d.Header.Sequence, d.Tags)
		if err != nil {
			return // a UUID overran the tag area
		}
		d2, err := DecodeDescriptor(sb, enc)
		if err != nil || !reflect.DeepEqual(d, d2) {
			t.Fatalf("round trip: %v\n%+v\n%+v", err, d, d2)
		}
	})
}

func FuzzDecodeCommit(f *testing.F) {
	for i, sb := range fuzzFormats {
		f.Add(EncodeCommit(sb, &Commit{Header: Header{Magic, BlockCommit, 5}, CommitSec: 99, CommitNsec: 1}), uint8(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, which uint8) {
		sb := pick(which)
		DecodeCommit(sb, in)
		b := block(sb, in)
		VerifyCommit(sb, b)
		c, err := DecodeCommit(sb, b)
		if err != nil {
			return
		}
		want := *c
		enc := EncodeCommit(sb, c)
		if err := VerifyCommit(sb, enc); err != nil {
			t.Fatal(err)
		}
		c2, err := DecodeCommit(sb, enc)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip: %v", err)
		}
		if !sb.HasCsumV2or3() && !reflect.DeepEqual(&want, c2) {
			t.Fatal("encode changed a commit without block checksums")
		}
	})
}

func FuzzDecodeRevoke(f *testing.F) {
	for i, sb := range fuzzFormats {
		b, err := EncodeRevoke(sb, 4, []uint64{1, 2, 3})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint8(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, which uint8) {
		sb := pick(which)
		DecodeRevoke(sb, in)
		b := block(sb, in)
		VerifyBlockTail(sb, b)
		r, err := DecodeRevoke(sb, b)
		if err != nil {
			return
		}
		if len(r.Blocks) > RevokeCapacity(sb) {
			t.Fatalf("%d records, capacity %d", len(r.Blocks), RevokeCapacity(sb))
		}
		enc, err := EncodeRevoke(sb, r.Header.Sequence, r.Blocks)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := DecodeRevoke(sb, enc)
		if err != nil || !reflect.DeepEqual(r.Blocks, r2.Blocks) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzDecodeHeader(f *testing.F) {
	f.Add([]byte{0xC0, 0x3B, 0x39, 0x98, 0, 0, 0, 1, 0, 0, 0, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err == nil {
			out := make([]byte, HeaderSize)
			h.put(out)
			if h2, err := DecodeHeader(out); err != nil || h2 != h {
				t.Fatal("round trip")
			}
		}
	})
}
