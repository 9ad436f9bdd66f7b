package super

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

const sharedDir = "../../../shared/testdata/e2fsprogs"

// sharedImages lists the e2fsprogs test images, skipping if they are absent.
func sharedImages(t *testing.T) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(sharedDir, "*.img.gz"))
	if len(paths) == 0 {
		t.Skipf("no e2fsprogs test images in %s", sharedDir)
	}
	return paths
}

// kernelMountable reads CATALOG.tsv: which images Linux mounts read-only.
func kernelMountable(t *testing.T) map[string]bool {
	b, err := os.ReadFile(filepath.Join(sharedDir, "CATALOG.tsv"))
	if err != nil {
		t.Logf("no catalog: %v", err)
		return nil
	}
	m := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		f := strings.Split(line, "\t")
		if len(f) > 4 && f[4] == "yes" {
			m[f[0]] = true
		}
	}
	return m
}

// gunzip decompresses src into a sparse file in a temporary directory.
func gunzip(t *testing.T, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".gz"))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := io.ReadFull(zr, buf)
		if n > 0 && !allZero(buf[:n]) {
			if _, werr := out.WriteAt(buf[:n], off); werr != nil {
				t.Fatal(werr)
			}
		}
		off += int64(n)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := out.Truncate(off); err != nil {
		t.Fatal(err)
	}
	return dst
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// TestSharedImages decodes the superblock and every group descriptor of the
// (mostly corrupted) e2fsprogs test images: nothing may panic, and where
// both we and dumpe2fs read the image, we must agree — including on which
// descriptor checksums are bad.
func TestSharedImages(t *testing.T) {
	needTool(t, "dumpe2fs")
	paths := sharedImages(t)
	mounts := kernelMountable(t)
	for _, src := range paths {
		name := strings.TrimSuffix(filepath.Base(src), ".img.gz")
		// What the kernel mounts, we must decode without complaint.
		strict := mounts[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := gunzip(t, src)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			raw := make([]byte, Size)
			if _, err := f.ReadAt(raw, Offset); err != nil {
				t.Skipf("image too short: %v", err)
			}
			sb, err := Decode(raw)
			if err != nil && strict {
				t.Errorf("Decode of a kernel-mountable image: %v", err)
			}
			if err != nil {
				t.Logf("Decode: %v", err)
				if sb, err = DecodeNoVerify(raw); err != nil {
					return
				}
			}
			if !bytes.Equal(sb.Encode(), raw) && !sb.HasMetadataCsum() {
				t.Errorf("Encode does not reproduce the superblock")
			}
			out, err := exec.Command("dumpe2fs", path).Output()
			if err != nil {
				t.Logf("dumpe2fs fails: %v", err)
				return
			}
			compareHeader(t, sb, dumpHeader(string(out)))
			groups := dumpGroups(string(out))
			if len(groups) != int(sb.GroupCount()) {
				t.Errorf("dumpe2fs lists %d groups, we count %d", len(groups), sb.GroupCount())
				return
			}
			bs := int64(sb.BlockSize())
			for gi, dg := range groups {
				g := uint32(gi)
				blk, off := sb.GroupDescLocation(g)
				d := make([]byte, sb.DescSize())
				if _, err := f.ReadAt(d, int64(blk)*bs+int64(off)); err != nil {
					t.Errorf("group %d: reading descriptor: %v", g, err)
					continue
				}
				gd, err := DecodeGroupDescNoVerify(sb, d)
				if err != nil {
					t.Fatalf("group %d: %v", g, err)
				}
				bad := VerifyGroupDesc(sb, d, g) != nil
				if bad != (dg.expected >= 0) {
					t.Errorf("group %d: checksum bad=%v, dumpe2fs expected %#x", g, bad, dg.expected)
				}
				if _, err := DecodeGroupDesc(sb, d, g); err != nil {
					// The kernel mounts read-only despite bad descriptor checksums.
					if strict && !errors.Is(err, fserr.ErrChecksum) {
						t.Errorf("group %d of a kernel-mountable image: %v", g, err)
					} else {
						t.Logf("group %d: %v", g, err)
					}
				}
				if gd.BlockBitmap != dg.blockBitmap || gd.InodeBitmap != dg.inodeBitmap || gd.InodeTable != dg.itFirst ||
					gd.FreeBlocksCount != dg.freeBlocks || gd.FreeInodesCount != dg.freeInodes || gd.UsedDirsCount != dg.dirs {
					t.Errorf("group %d: %+v, dumpe2fs %+v", g, gd, dg)
				}
				if dg.csum >= 0 && uint16(dg.csum) != gd.Checksum {
					t.Errorf("group %d: checksum %#x, dumpe2fs %#x", g, gd.Checksum, dg.csum)
				}
				if !bytes.Equal(EncodeGroupDesc(sb, gd, g), d) && !bad {
					t.Errorf("group %d: EncodeGroupDesc does not reproduce the descriptor", g)
				}
				o := sb.GroupOverhead(g)
				if o.HasSuper != (dg.super >= 0) || (o.HasSuper && int64(o.SuperBlock) != dg.super) {
					t.Errorf("group %d: superblock %v at %d, dumpe2fs %d", g, o.HasSuper, o.SuperBlock, dg.super)
				}
			}
		})
	}
}
