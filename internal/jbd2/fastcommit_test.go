package jbd2

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestScanFastCommits: the fast commits of e2fsprogs' j_recover_fast_commit
// image are the records debugfs's logdump lists, in order, accepted by
// their TAIL checksum; a stale area (another transaction) is ignored.
func TestScanFastCommits(t *testing.T) {
	needTool(t, "debugfs")
	path := gunzip(t, filepath.Join(sharedDir, "j_recover_fast_commit.img.gz"))
	j, err := exec.Command("debugfs", "-R", "cat <8>", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Decode(j)
	if err != nil {
		t.Fatal(err)
	}
	bs := int(sb.BlockSize)
	read := func(nr uint32) ([]byte, error) { return j[int(nr)*bs : (int(nr)+1)*bs], nil }
	rec, err := Recover(sb, read)
	if err != nil || rec.FastCommits == nil || rec.EndSeq != 6 {
		t.Fatalf("recovery: %v, %v (want the fast commits of transaction 6)", rec, err)
	}
	fc, err := ScanFastCommits(sb, read, 6)
	if err != nil || fc == nil || len(fc.Tags) != len(rec.FastCommits.Tags) {
		t.Fatalf("scan: %v, %v", fc, err)
	}
	for i, tg := range fc.Tags {
		var err error
		switch tg.Tag {
		case FCTagAddRange:
			_, err = DecodeFCRange(tg.Value)
		case FCTagDelRange:
			_, err = DecodeFCDelRange(tg.Value)
		case FCTagCreat, FCTagLink, FCTagUnlink:
			_, err = DecodeFCDentry(tg.Tag, tg.Value)
		case FCTagInode:
			_, err = DecodeFCInode(tg.Value)
		}
		if err != nil {
			t.Errorf("record %d (%s): %v", i, FCTagName(tg.Tag), err)
		}
	}
	out, err := exec.Command("debugfs", "-R", "logdump", path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^tag (\S+),`).FindAllStringSubmatch(string(out), -1) {
		if m[1] != "HEAD" && m[1] != "TAIL" && m[1] != "PAD" {
			want = append(want, m[1])
		}
	}
	var got []string
	for _, tg := range fc.Tags {
		got = append(got, FCTagName(tg.Tag))
	}
	if len(got) != len(want) {
		t.Fatalf("records %v, logdump lists %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("record %d: %s, logdump says %s", i, got[i], want[i])
		}
	}
	if stale, err := ScanFastCommits(sb, read, 7); err != nil || stale != nil {
		t.Errorf("the area as seen for transaction 7: %+v, %v (want stale: nil)", stale, err)
	}
}

func FuzzScanFastCommits(f *testing.F) {
	head := []byte{9, 0, 8, 0, 0, 0, 0, 0, 6, 0, 0, 0, 6, 0, 4, 0, 14, 0, 0, 0, 8, 0, 8, 0, 6, 0, 0, 0, 1, 2, 3, 4}
	f.Add(head, uint32(6))
	f.Add([]byte{}, uint32(0))
	f.Fuzz(func(t *testing.T, area []byte, expected uint32) {
		sb := &Superblock{Header: Header{Magic: Magic, BlockType: BlockSuperV2}, BlockSize: 1024, MaxLen: 1024 + 4, First: 1,
			FeatureIncompat: IncompatFastCommit, NumFCBlocks: 4}
		first, end := sb.FastCommitArea()
		read := func(nr uint32) ([]byte, error) {
			b := make([]byte, 1024)
			if nr >= first && nr < end {
				off := int(nr-first) * 1024
				if off < len(area) {
					copy(b, area[off:])
				}
			}
			return b, nil
		}
		fc, _ := ScanFastCommits(sb, read, expected)
		if fc != nil && fc.Tid != expected {
			t.Fatalf("fast commits of transaction %d for %d", fc.Tid, expected)
		}
		if fc == nil {
			return
		}
		for _, tg := range fc.Tags {
			// Decoding any record value must not panic.
			DecodeFCRange(tg.Value)
			DecodeFCDelRange(tg.Value)
			DecodeFCDentry(tg.Tag, tg.Value)
			DecodeFCInode(tg.Value)
		}
	})
}
