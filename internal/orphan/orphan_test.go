package orphan

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMke2fsBlocks verifies the orphan blocks mke2fs writes, with and
// without metadata_csum, and that NewBlock makes the same bytes.
func TestMke2fsBlocks(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"4k-csum", []string{"-b", "4096", "-O", "orphan_file"}},
		{"1k-csum", []string{"-b", "1024", "-O", "orphan_file"}},
		{"4k-nocsum", []string{"-b", "4096", "-O", "orphan_file,^metadata_csum"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 64<<20, append([]string{"-t", "ext4"}, c.args...)...)
			raw, err := os.ReadFile(image)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := super.Decode(raw[super.Offset : super.Offset+super.Size])
			if err != nil {
				t.Fatal(err)
			}
			bs := int(sb.BlockSize())
			ino := sb.OrphanFileInum
			withCsum := sb.HasMetadataCsum()
			seed := inode.Seed(sb.ChecksumSeed(), ino, 0)
			blocks := strings.Fields(testutil.Debugfs(t, image, "blocks <"+strconv.Itoa(int(ino))+">"))
			if len(blocks) == 0 {
				t.Fatal("orphan file has no blocks")
			}
			for _, s := range blocks {
				blk, _ := strconv.ParseUint(s, 10, 64)
				b := raw[blk*uint64(bs) : (blk+1)*uint64(bs)]
				if err := Verify(b, bs, withCsum, seed, blk); err != nil {
					t.Fatalf("block %d: %v", blk, err)
				}
				if got := Used(b); len(got) != 0 {
					t.Fatalf("block %d: a new orphan file lists %v", blk, got)
				}
				if nb := NewBlock(bs, withCsum, seed, blk); !bytes.Equal(nb, b) {
					t.Fatalf("block %d: NewBlock differs from mke2fs's", blk)
				}
			}
		})
	}
}

func TestSlotsRoundTrip(t *testing.T) {
	const bs = 1024
	b := NewBlock(bs, true, 7, 99)
	if Slots(bs) != 254 {
		t.Fatalf("Slots(1024) = %d, want 254", Slots(bs))
	}
	SetSlot(b, 0, 12)
	SetSlot(b, 253, 40)
	if err := Verify(b, bs, true, 7, 99); err == nil {
		t.Fatal("a changed block kept a valid checksum")
	}
	SetChecksum(b, 7, 99)
	if err := Verify(b, bs, true, 7, 99); err != nil {
		t.Fatal(err)
	}
	if err := Verify(b, bs, true, 7, 100); err == nil {
		t.Fatal("the checksum does not cover the block number")
	}
	if got := Used(b); len(got) != 2 || got[0] != 12 || got[1] != 40 {
		t.Fatalf("Used = %v", got)
	}
	b[bs-8] ^= 1
	if err := Verify(b, bs, false, 0, 0); err == nil {
		t.Fatal("a bad magic passed")
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(NewBlock(1024, true, 1, 2), true)
	f.Add(NewBlock(4096, false, 0, 0), false)
	f.Add([]byte{1, 2, 3}, true)
	f.Fuzz(func(t *testing.T, b []byte, withCsum bool) {
		if err := Verify(b, len(b), withCsum, 5, 6); err != nil {
			return
		}
		if len(Used(b)) > Slots(len(b)) {
			t.Fatal("more used slots than slots")
		}
	})
}
