package mkfs

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/testutil"
)

// fixedIDs are testutil's deterministic UUID and hash seed, parsed.
var fixedUUID, fixedSeed = mustUUID(testutil.FixedUUID), mustUUID(testutil.FixedHashSeed)

func mustUUID(s string) [16]byte {
	var u [16]byte
	h := strings.ReplaceAll(s, "-", "")
	for i := range u {
		fmt.Sscanf(h[2*i:2*i+2], "%02x", &u[i])
	}
	return u
}

// variant is one configuration of the comparison matrix: our Options and
// the mke2fs arguments meaning the same.
type variant struct {
	name     string
	fsType   string
	features string // -O
}

var variants = []variant{
	{"ext4", "ext4", ""},
	{"nocsum", "ext4", "^metadata_csum"},
	{"no64bit", "ext4", "^64bit"},
	{"noflex", "ext4", "^flex_bg"},
	{"ext2", "ext2", ""},
	{"ext3", "ext3", ""},
	{"metabg", "ext4", "meta_bg,^resize_inode"},
	{"orphan", "ext4", "orphan_file"},
	{"csumseed", "ext4", "metadata_csum_seed"},
	{"inline", "ext4", "inline_data"},
	{"sparse2", "ext4", "sparse_super2"},
	{"uninit3", "ext3", "uninit_bg"},
	{"nojournal", "ext4", "^has_journal"},
}

// options returns our Options for a variant.
func (v variant) options(size int64, bs int) Options {
	return Options{
		FsType:       v.fsType,
		Size:         size,
		BlockSize:    bs,
		Features:     v.features,
		UUID:         fixedUUID,
		HashSeed:     fixedSeed,
		CreationTime: time.Unix(testutil.FixedTime, 0),
	}
}

// mke2fsArgs returns the mke2fs arguments for a variant.
func (v variant) mke2fsArgs(bs int) []string {
	args := []string{"-t", v.fsType, "-U", testutil.FixedUUID, "-E", "hash_seed=" + testutil.FixedHashSeed}
	if bs != 0 {
		args = append(args, "-b", fmt.Sprint(bs))
	}
	if v.features != "" {
		args = append(args, "-O", v.features)
	}
	return args
}

// makePair makes our image and mke2fs's of the same variant in dir.
func makePair(t *testing.T, dir string, v variant, size int64, bs int) (ours, theirs string) {
	t.Helper()
	ours = filepath.Join(dir, "ours.img")
	theirs = filepath.Join(dir, "mke2fs.img")
	if err := Format(ours, v.options(size, bs)); err != nil {
		t.Fatalf("Format: %v", err)
	}
	testutil.Mke2fs(t, theirs, size, v.mke2fsArgs(bs)...)
	return ours, theirs
}

// Superblock fields that legitimately differ from mke2fs's (see
// knownDifferences in the package tests): s_kbytes_written counts what each
// program wrote, and the superblock checksum covers it.
var sbIgnore = []struct{ off, n int }{
	{0x178, 8}, // s_kbytes_written
	{0x3FC, 4}, // s_checksum
}

// diffBlocks compares two images block by block and returns a description
// of the differing blocks (at most max), ignoring sbIgnore in every
// superblock copy. Only the data regions of either file (SEEK_DATA) are
// read: holes read as zeros in both.
func diffBlocks(t *testing.T, a, b string, max int) []string {
	t.Helper()
	return diffImages(t, a, b, max, true)
}

// diffImages is diffBlocks, masking the superblock fields only if mask.
func diffImages(t *testing.T, a, b string, max int, mask bool) []string {
	t.Helper()
	fa, err := os.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	sbBuf := make([]byte, super.Size)
	if _, err := fb.ReadAt(sbBuf, super.Offset); err != nil {
		t.Fatal(err)
	}
	sb, err := super.Decode(sbBuf)
	if err != nil {
		t.Fatalf("mke2fs superblock: %v", err)
	}
	bs := int64(sb.BlockSize())
	sa, _ := fa.Stat()
	sbs, _ := fb.Stat()
	if sa.Size() != sbs.Size() {
		return []string{fmt.Sprintf("sizes differ: ours %d, mke2fs %d", sa.Size(), sbs.Size())}
	}
	var diffs []string
	ba, bb := make([]byte, bs), make([]byte, bs)
	for _, r := range unionData(t, fa, fb, sa.Size(), bs) {
		for off := r[0]; off < r[1]; off += bs {
			if _, err := fa.ReadAt(ba, off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if _, err := fb.ReadAt(bb, off); err != nil && err != io.EOF {
				t.Fatal(err)
			}
			if bytes.Equal(ba, bb) {
				continue
			}
			x, y := bytes.Clone(ba), bytes.Clone(bb)
			if mask {
				maskSupers(x, y, off, sb)
			}
			if bytes.Equal(x, y) {
				continue
			}
			j := 0
			for x[j] == y[j] {
				j++
			}
			diffs = append(diffs, fmt.Sprintf("block %d differs from byte %d: ours % x, mke2fs % x", off/bs, j, x[j:min(j+16, len(x))], y[j:min(j+16, len(y))]))
			if len(diffs) >= max {
				return diffs
			}
		}
	}
	return diffs
}

// maskSupers blanks the ignored superblock fields in x and y, two copies of
// the block at byte offset off, if it holds a superblock copy.
func maskSupers(x, y []byte, off int64, sb *super.Superblock) {
	bs := int64(len(x))
	for g := uint32(0); g < sb.GroupCount(); g++ {
		if !sb.HasSuperBackup(g) {
			continue
		}
		so := int64(sb.SuperBlockByteOffset(g))
		if so < off || so >= off+bs {
			continue
		}
		for _, f := range sbIgnore {
			s := so - off + int64(f.off)
			clear(x[s : s+int64(f.n)])
			clear(y[s : s+int64(f.n)])
		}
	}
}

// dumpe2fsDiff returns the lines of dumpe2fs output that differ between
// the two images, except those starting with an ignored prefix.
func dumpe2fsDiff(t *testing.T, a, b string, args ...string) []string {
	t.Helper()
	la := strings.Split(testutil.Dumpe2fs(t, a, args...), "\n")
	lb := strings.Split(testutil.Dumpe2fs(t, b, args...), "\n")
	ignore := []string{"Lifetime writes:", "Checksum:"}
	var d []string
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x == y {
			continue
		}
		skip := false
		for _, p := range ignore {
			if strings.HasPrefix(x, p) && strings.HasPrefix(y, p) {
				skip = true
			}
		}
		if !skip {
			d = append(d, fmt.Sprintf("line %d: ours %q, mke2fs %q", i+1, x, y))
		}
	}
	return d
}

// readSuper decodes the primary superblock of an image.
func readSuper(t *testing.T, path string) *super.Superblock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, super.Size)
	if _, err := f.ReadAt(b, super.Offset); err != nil {
		t.Fatal(err)
	}
	sb, err := super.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}
