package mkfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/fserr"
)

// TestBadOptions requires every bad option to be refused with an error
// naming it (an *OptionError, or an *fserr.UnsupportedError for features
// mkfs does not create) and the device to be left exactly as it was.
func TestBadOptions(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	cases := []struct {
		name   string
		o      Options
		option string // "" for an unsupported feature
	}{
		{"block size", Options{BlockSize: 3000}, "BlockSize"},
		{"block size 8k", Options{BlockSize: 8192}, "BlockSize"},
		{"inode size small", Options{InodeSize: 100}, "InodeSize"},
		{"inode size not pow2", Options{InodeSize: 300}, "InodeSize"},
		{"inode size above block", Options{BlockSize: 1024, InodeSize: 2048}, "InodeSize"},
		{"inline with 128-byte inodes", Options{InodeSize: 128, Features: "inline_data"}, "InodeSize"},
		{"unknown feature", Options{Features: "has_journal,turbo"}, "Features"},
		{"unknown usage type", Options{UsageTypes: "small,tiny"}, "UsageTypes"},
		{"empty usage type", Options{UsageTypes: "small,"}, "UsageTypes"},
		{"meta_bg with resize_inode", Options{Features: "meta_bg"}, "Features"},
		{"64bit without extents", Options{Features: "^extent"}, "Features"},
		{"csum seed without csum", Options{Features: "metadata_csum_seed,^metadata_csum"}, "Features"},
		{"resize_inode without sparse_super", Options{Features: "^sparse_super"}, "Features"},
		{"orphan file without journal", Options{Features: "orphan_file", NoJournal: true}, "Features"},
		{"fs type", Options{FsType: "xfs"}, "FsType"},
		{"size too small", Options{Size: 32 << 10}, "Size"},
		{"reserved", Options{ReservedPercent: pct(60)}, "ReservedPercent"},
		{"label", Options{Label: "a label longer than 16"}, "Label"},
		{"journal too small", Options{JournalBlocks: 100}, "JournalBlocks"},
		{"journal too large", Options{JournalBlocks: 20_000_000, Size: 200 << 30}, "JournalBlocks"},
		{"journal too big", Options{JournalMiB: 60}, "JournalBlocks"},
		{"journal both", Options{JournalBlocks: 2048, JournalMiB: 8}, "JournalBlocks"},
		{"journal and none", Options{JournalMiB: 8, NoJournal: true}, "NoJournal"},
		{"flex not pow2", Options{FlexBGSize: 3}, "FlexBGSize"},
		{"flex without flex_bg", Options{FlexBGSize: 4, Features: "^flex_bg"}, "FlexBGSize"},
		{"inode count huge", Options{InodeCount: 1 << 33}, "InodeCount"},
		{"inode count too many", Options{InodeCount: 1_000_000}, "InodeCount"},
		{"inode ratio", Options{BytesPerInode: 512}, "BytesPerInode"},
		{"too few inodes", Options{InodeCount: 8, Size: 1 << 20}, "InodeCount"},
		{"resize max", Options{ResizeMax: 1000}, "ResizeMax"},
		{"orphan size without feature", Options{OrphanFileBlocks: 64}, "OrphanFileBlocks"},
		{"quota", Options{Features: "quota"}, ""},
		{"bigalloc", Options{Features: "bigalloc"}, ""},
		{"mmp", Options{Features: "mmp"}, ""},
		{"casefold", Options{Features: "casefold"}, ""},
	}
	dir := t.TempDir()
	orig := bytes.Repeat([]byte("old data "), 1<<20/9)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			o := c.o
			if o.Size == 0 {
				o.Size = 64 << 20 // would grow the file if anything were done
			}
			err := Format(p, o)
			if err == nil {
				t.Fatal("accepted")
			}
			if c.option == "" {
				var ue *fserr.UnsupportedError
				if !errors.As(err, &ue) || !errors.Is(err, fserr.ErrUnsupported) {
					t.Fatalf("error %v (%T), want an *fserr.UnsupportedError", err, err)
				}
			} else {
				var oe *OptionError
				if !errors.As(err, &oe) || oe.Option != c.option {
					t.Fatalf("error %q (%T), want an OptionError for %s", err, err, c.option)
				}
				if !strings.Contains(err.Error(), c.option) {
					t.Errorf("message %q does not name %s", err, c.option)
				}
			}
			t.Logf("%v", err)
			if got, _ := os.ReadFile(p); !bytes.Equal(got, orig) {
				t.Errorf("the device changed (size %d, want %d)", len(got), len(orig))
			}
		})
	}
	t.Run("17TiB without 64bit", func(t *testing.T) {
		var oe *OptionError
		if err := Validate(Options{Features: "^64bit"}, 17<<40); !errors.As(err, &oe) || oe.Option != "Size" {
			t.Fatalf("error %v, want an OptionError for Size", err)
		}
	})
}

// TestDeviceSize checks how the filesystem size follows the device: the
// device size by default, a file grown to Size when shorter, and a device
// too small refused when it cannot grow.
func TestDeviceSize(t *testing.T) {
	dir := t.TempDir()
	o := variants[0].options(0, 0)

	p := filepath.Join(dir, "fixed")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 48<<20); err != nil {
		t.Fatal(err)
	}
	if err := Format(p, o); err != nil {
		t.Fatal(err)
	}
	if sb := readSuper(t, p); sb.BlocksCount()*uint64(sb.BlockSize()) != 48<<20 {
		t.Errorf("filesystem of %d blocks on a 48 MiB file", sb.BlocksCount())
	}

	o.Size = 32 << 20 // smaller than the file: the file keeps its size
	if err := Format(p, o); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 48<<20 {
		t.Errorf("file resized to %d", fi.Size())
	}
	if sb := readSuper(t, p); sb.BlocksCount()*uint64(sb.BlockSize()) != 32<<20 {
		t.Errorf("filesystem of %d blocks, want 32 MiB", sb.BlocksCount())
	}

	o.Size = 96 << 20 // larger: grown, sparsely
	if err := Format(p, o); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Size() != 96<<20 {
		t.Errorf("file not grown: %d bytes", fi.Size())
	}

	// A missing file is created when a size is given.
	q := filepath.Join(dir, "new")
	if err := Format(q, o); err != nil {
		t.Fatal(err)
	}
	if err := Format(filepath.Join(dir, "missing"), variants[0].options(0, 0)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file without a size: %v", err)
	}

	// A failure while building (the orphan file does not fit) leaves no
	// file behind either.
	o = variants[0].options(64<<20, 0)
	o.Features, o.OrphanFileBlocks = "orphan_file", 100000
	r := filepath.Join(dir, "nofit")
	if err := Format(r, o); err == nil || !strings.Contains(err.Error(), "orphan file") {
		t.Errorf("oversized orphan file: %v", err)
	}
	if _, err := os.Stat(r); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed Format left %s behind", r)
	}

	// An image held open for writing is busy.
	d, err := dev.Open(p, true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := Format(p, variants[0].options(0, 0)); !errors.Is(err, dev.ErrBusy) {
		t.Errorf("Format of an image in use: %v, want dev.ErrBusy", err)
	}
}
