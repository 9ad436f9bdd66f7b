//go:build linux

package testutil

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
)

// genPresets builds the given presets into dir/<preset>, like "all" but
// for a subset.
func genPresets(t *testing.T, dir string, bs int, presets ...string) {
	t.Helper()
	for _, p := range presets {
		GenTree(t, filepath.Join(dir, p), TreeSpec{Preset: p, Seed: 42, BlockSize: bs})
	}
}

// allBut lists Presets without the named ones.
func allBut(skip ...string) []string {
	var out []string
	for _, p := range Presets {
		keep := true
		for _, s := range skip {
			keep = keep && p != s
		}
		if keep {
			out = append(out, p)
		}
	}
	return out
}

// TestPresetsKernelRoundTrip is the harness's proof: every preset, put into
// an image by mke2fs -d (+FixupTimes), e2fsck-clean, and the kernel's view
// of the image equals the source with all metadata but atime. So presets
// round-trip, and CompareDirs agrees with the kernel as judge.
func TestPresetsKernelRoundTrip(t *testing.T) {
	RequireMount(t)
	variants := []struct {
		name     string
		bs       int
		features string
		// all: the full "all" preset. Others leave out bigdir: mke2fs -d
		// links entries in O(n²) (5-10 s of CPU for 10 000 entries).
		all     bool
		indexed bool // also re-check after e2fsck -fyD indexes the directories
	}{
		{"4k-csum", 4096, "", true, true},
		{"4k-nocsum", 4096, "^metadata_csum", false, false},
		{"1k-csum", 1024, "", false, false},
		{"1k-nocsum", 1024, "^metadata_csum", false, false},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			src := SourceDir(t)
			if v.all {
				GenTree(t, src, TreeSpec{Preset: "all", Seed: 42, BlockSize: v.bs})
			} else {
				genPresets(t, src, v.bs, allBut("bigdir")...)
			}
			img := BuildImage(t, src, ImageOptions{BlockSize: v.bs, Features: v.features, Deterministic: true})
			RequireFsckClean(t, img)
			requireSparse(t, img)
			requireSparse(t, filepath.Join(src, "sparse", "big"))
			t.Run("mount", func(t *testing.T) {
				mp := Mount(t, img, true)
				CompareDirs(t, mp, src, MountCompareOptions())
				if v.name == "4k-csum" {
					compareViaDirFS(t, mp, src)
				}
			})
			if !v.indexed {
				return
			}
			E2fsckFyD(t, img)
			RequireFsckClean(t, img)
			stat := Debugfs(t, img, "stat /bigdir")
			m := regexp.MustCompile(`Flags: 0x([0-9a-f]+)`).FindStringSubmatch(stat)
			if m == nil {
				t.Fatalf("no flags in debugfs stat:\n%s", stat)
			}
			if f, _ := strconv.ParseUint(m[1], 16, 32); f&0x1000 == 0 { // EXT4_INDEX_FL
				t.Errorf("bigdir not indexed after e2fsck -fyD: flags %#x", f)
			}
			t.Run("mount-indexed", func(t *testing.T) {
				CompareDirs(t, Mount(t, img, true), src, MountCompareOptions())
			})
		})
	}
}

// compareViaDirFS runs CompareFS with the kernel mount as a plain fs.FS and
// a Meta extractor, as tests of the ext4go FS will: os.DirFS refuses paths
// that are not valid UTF-8 (fs.ValidPath), hence TolerateInvalidUTF8, and
// its FileInfo carries no xattrs.
func compareViaDirFS(t *testing.T, mp, src string) {
	opts := MountCompareOptions()
	opts.Checks &^= CheckXattrs
	opts.TolerateInvalidUTF8 = true
	opts.Meta = statMeta
	CompareFS(t, os.DirFS(mp), src, opts)
}

// requireSparse checks that a multi-GiB apparent-size file has few blocks.
func requireSparse(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	used := fi.Sys().(*syscall.Stat_t).Blocks * 512
	if fi.Size() > 1<<30 && used > 256<<20 {
		t.Errorf("%s: %d bytes allocated for %d apparent: not sparse", path, used, fi.Size())
	}
}

// TestRdumpRoundTrip finds out (and pins down) what debugfs rdump keeps:
// RdumpCompareOptions must hold for every preset rdump can handle. Not
// "sparse" (rdump writes holes out: 5 GiB), "times" (rdump reads only the
// low 32 bits of times, as unsigned: right for 1970..2106 only) or
// "bigdir" (slow).
func TestRdumpRoundTrip(t *testing.T) {
	requireTool(t, "debugfs")
	t.Parallel()
	src := SourceDir(t)
	genPresets(t, src, 4096, allBut("sparse", "times", "bigdir")...)
	img := BuildImage(t, src, ImageOptions{})
	out := SourceDir(t)
	DebugfsRdump(t, img, "/", out)
	CompareDirs(t, out, src, RdumpCompareOptions())

	// And what it drops is really dropped (else the options are too lax).
	diffs := DiffDirs(out, src, MountCompareOptions())
	for _, want := range []string{
		`"special/fifo": missing in got`,
		`"modes/suid": setuid/setgid/sticky`,
		`"xattrs/user-small": xattr "user.a" missing in got`,
		`"links/hard2": hard link`,
	} {
		if !containsPrefix(diffs, want) {
			t.Errorf("rdump kept what it should drop: no %s in\n%v", want, diffs)
		}
	}
}

func containsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// TestGenTreeDeterministic: the same seed gives the same tree, with all
// metadata, and a different seed a different one.
func TestGenTreeDeterministic(t *testing.T) {
	t.Parallel()
	a, b, c := SourceDir(t), SourceDir(t), SourceDir(t)
	ma := GenTree(t, a, TreeSpec{Preset: "all", Seed: 7})
	mb := GenTree(t, b, TreeSpec{Preset: "all", Seed: 7})
	opts := CompareOptions{Checks: CheckAll, CheckRoot: true}
	CompareDirs(t, b, a, opts)
	if len(ma.Entries) != len(mb.Entries) || ma.Bytes != mb.Bytes || ma.Written != mb.Written {
		t.Errorf("manifests differ: %d/%d/%d vs %d/%d/%d", len(ma.Entries), ma.Bytes, ma.Written,
			len(mb.Entries), mb.Bytes, mb.Written)
	}
	GenTree(t, c, TreeSpec{Preset: "small", Seed: 8})
	if d := DiffDirs(c, filepath.Join(a, "small"), opts); len(d) == 0 {
		t.Error("seed 8 made the same tree as seed 7")
	}
	// The manifest matches the tree.
	n := 0
	err := filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		n++
		return err
	})
	if err != nil || n != len(ma.Entries)+1 {
		t.Errorf("manifest lists %d entries, tree has %d (err %v)", len(ma.Entries), n-1, err)
	}
	for _, e := range ma.Entries {
		fi, err := os.Lstat(filepath.Join(a, e.Path))
		if err != nil {
			t.Errorf("manifest entry %q: %v", e.Path, err)
			continue
		}
		if fi.Mode().Type() != e.Type || (e.Type == 0 || e.Type == fs.ModeSymlink) && fi.Size() != e.Size {
			t.Errorf("manifest entry %q: %v %d, tree has %v %d", e.Path, e.Type, e.Size, fi.Mode().Type(), fi.Size())
		}
	}
}

func TestGenTreeEachPreset(t *testing.T) {
	for _, p := range allBut("large", "bigdir", "sparse") {
		m := GenTree(t, SourceDir(t), TreeSpec{Preset: p, Seed: 1, BlockSize: 1024})
		if p != "empty" && len(m.Entries) == 0 {
			t.Errorf("preset %s made nothing", p)
		}
	}
}
