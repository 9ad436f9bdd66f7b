//go:build linux

package ext4go_test

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
	"github.com/ext4go/ext4go/internal/testutil/ext4meta"
)

// meta extracts what the harness compares from our FileInfo.
var meta = ext4meta.Meta

func openImage(t testing.TB, image string) *ext4go.FS {
	t.Helper()
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("open %s: %v", image, err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

// imageConfigs are the mke2fs variants every tree is read back from.
var imageConfigs = []struct {
	name string
	opts testutil.ImageOptions
}{
	{"ext4-4k", testutil.ImageOptions{}},
	{"ext4-1k", testutil.ImageOptions{BlockSize: 1024}},
	{"ext4-nocsum-no64bit", testutil.ImageOptions{Features: "^metadata_csum,^64bit"}},
	{"ext4-noflexbg", testutil.ImageOptions{Features: "^flex_bg"}},
	{"ext4-inline", testutil.ImageOptions{Features: "inline_data"}},
	{"ext4-uninitbg-1k", testutil.ImageOptions{BlockSize: 1024, Features: "^metadata_csum,uninit_bg"}},
	{"ext3", testutil.ImageOptions{FsType: "ext3"}},
	{"ext2-1k", testutil.ImageOptions{FsType: "ext2", BlockSize: 1024}},
}

// TestReadTrees builds images of generated trees with mke2fs -d in every
// configuration and checks that everything we read equals the source.
func TestReadTrees(t *testing.T) {
	presets := []string{"small", "empty", "links", "special", "odd", "modes", "times", "xattrs", "deep", "sparse", "bigdir", "large"}
	for _, cfg := range imageConfigs {
		for _, preset := range presets {
			if testing.Short() && preset != "small" {
				continue
			}
			switch preset {
			case "bigdir", "large", "sparse", "deep":
				// The expensive trees on a subset of configurations.
				if cfg.name != "ext4-4k" && cfg.name != "ext4-1k" && cfg.name != "ext2-1k" {
					continue
				}
			}
			t.Run(cfg.name+"/"+preset, func(t *testing.T) {
				t.Parallel()
				src := t.TempDir()
				testutil.GenTree(t, src, testutil.TreeSpec{Preset: preset, Seed: 1, BlockSize: max(cfg.opts.BlockSize, 1024)})
				opts := cfg.opts
				image := testutil.BuildImage(t, src, opts)
				testutil.RequireFsckClean(t, image)
				fsys := openImage(t, image)
				co := testutil.MountCompareOptions()
				co.Meta = meta
				if cfg.opts.BlockSize == 0 || cfg.opts.BlockSize >= 256 {
					// 128-byte inodes hold no nanoseconds; all configs here use 256.
				}
				testutil.CompareFS(t, fsys, src, co)
			})
		}
	}
}

// TestFSTest runs testing/fstest on an image of a mixed tree.
func TestFSTest(t *testing.T) {
	src := t.TempDir()
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "small", Seed: 2})
	image := testutil.BuildImage(t, src, testutil.ImageOptions{})
	fsys := openImage(t, image)
	var want []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && d.Type().IsRegular() {
			want = append(want, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no files in the image")
	}
	if err := fstest.TestFS(fsys, want...); err != nil {
		t.Fatal(err)
	}
}

// TestErrorsAreTyped checks the error kinds of the public API.
func TestErrorsAreTyped(t *testing.T) {
	src := t.TempDir()
	testutil.GenTree(t, src, testutil.TreeSpec{Preset: "small", Seed: 3})
	image := testutil.BuildImage(t, src, testutil.ImageOptions{})
	fsys := openImage(t, image)
	for _, c := range []struct {
		name string
		want error
	}{
		{"no/such/file", fs.ErrNotExist},
		{"/abs", fs.ErrInvalid},
		{"a/../b", fs.ErrInvalid},
	} {
		_, err := fsys.Open(c.name)
		if !errors.Is(err, c.want) {
			t.Errorf("Open(%q) = %v, want %v", c.name, err, c.want)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			t.Errorf("Open(%q): %T is not a *fs.PathError", c.name, err)
		}
	}
	_ = fmt.Sprint
}
