package mkfs

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

const (
	miB = int64(1) << 20
	giB = int64(1) << 30
)

// TestMatchesMke2fs makes each variant of the matrix (sizes 8 MiB to 20 GiB,
// sparse, × block sizes 1 KiB and 4 KiB × feature variants) with Format and
// with mke2fs 1.47.0, given the same size, options, UUID, hash seed and time
// (-U, -E hash_seed=, E2FSPROGS_FAKE_TIME), and requires:
//
//   - e2fsck -fn to find our image clean;
//   - the two images to be byte-identical except, in every superblock copy,
//     s_kbytes_written and s_checksum (see sbIgnore). This compares every
//     field there is: the group layout (each group's superblock, descriptor,
//     reserved GDT, bitmap and inode table locations), features, block and
//     inode counts, free counts and flags of every group, inode size, flex
//     size, reserved blocks, first inode, overhead, the journal's size,
//     location, extent tree and jbd2 superblock, the root, lost+found,
//     resize and orphan inodes and their blocks, bitmaps and all checksums;
//   - the dumpe2fs output to be identical line by line except "Lifetime
//     writes:" and the superblock "Checksum:" line — the whole output up to
//     1 GiB, the superblock part (-h) above, where the per-group lines add
//     nothing to the byte comparison but time.
//
// The 5 and 20 GiB sizes run for the ext4, ext3, ext2 and noflex variants
// only, unless MKFS_FULL=1 (all of them pass); -short keeps the sizes up to
// 300 MiB.
func TestMatchesMke2fs(t *testing.T) {
	sizes := []int64{8 * miB, 64 * miB, 300 * miB, 1 * giB, 5 * giB, 20 * giB}
	if testing.Short() {
		sizes = sizes[:3]
	}
	full := os.Getenv("MKFS_FULL") != ""
	for _, v := range variants {
		for _, size := range sizes {
			big := size > giB && !full && v.name != "ext4" && v.name != "ext3" && v.name != "ext2" && v.name != "noflex"
			for _, bs := range []int{1024, 4096} {
				if big {
					continue
				}
				name := fmt.Sprintf("%s/%dM/%d", v.name, size/miB, bs)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					ours, theirs := makePair(t, dir, v, size, bs)
					checkSame(t, ours, theirs, size <= giB)
				})
			}
		}
	}
}

// checkSame applies the checks of TestMatchesMke2fs to two images.
func checkSame(t *testing.T, ours, theirs string, fullDump bool) {
	t.Helper()
	if d := diffBlocks(t, ours, theirs, 10); len(d) > 0 {
		t.Errorf("images differ:\n%s", join(d))
	}
	var args []string
	if !fullDump {
		args = []string{"-h"}
	}
	if d := dumpe2fsDiff(t, ours, theirs, args...); len(d) > 0 {
		t.Errorf("dumpe2fs differs:\n%s", join(d[:min(len(d), 20)]))
	}
	if exit, out := testutil.E2fsckFN(t, ours); exit != 0 {
		t.Errorf("e2fsck -fn exit %d:\n%s", exit, out)
	}
}

func join(s []string) string {
	out := ""
	for _, l := range s {
		out += "  " + l + "\n"
	}
	return out
}

// optCase is a size plus Options and the equivalent mke2fs arguments.
type optCase struct {
	name string
	size int64
	opts Options
	args []string
}

// TestOptionsMatchMke2fs checks single options against mke2fs like
// TestMatchesMke2fs does for the feature matrix.
func TestOptionsMatchMke2fs(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	cases := []optCase{
		{"bs2048", 64 * miB, Options{BlockSize: 2048}, []string{"-b", "2048"}},
		{"inode128", 64 * miB, Options{InodeSize: 128}, []string{"-I", "128"}},
		{"inode512", 64 * miB, Options{InodeSize: 512}, []string{"-I", "512"}},
		{"inode1024-ext2", 64 * miB, Options{FsType: "ext2", InodeSize: 1024}, []string{"-t", "ext2", "-I", "1024"}},
		{"ratio", 300 * miB, Options{BytesPerInode: 65536}, []string{"-i", "65536"}},
		{"ninodes", 300 * miB, Options{InodeCount: 1000}, []string{"-N", "1000"}},
		{"ninodes-big", 64 * miB, Options{InodeCount: 60000}, []string{"-N", "60000"}},
		{"flex4", 1 * giB, Options{FlexBGSize: 4}, []string{"-G", "4"}},
		{"flex64", 5 * giB, Options{FlexBGSize: 64}, []string{"-G", "64"}},
		{"flex1", 1 * giB, Options{FlexBGSize: 1}, []string{"-G", "1"}},
		{"reserved0", 64 * miB, Options{ReservedPercent: pct(0)}, []string{"-m", "0"}},
		{"reserved1.5", 300 * miB, Options{ReservedPercent: pct(1.5)}, []string{"-m", "1.5"}},
		{"label", 64 * miB, Options{Label: "my-label"}, []string{"-L", "my-label"}},
		{"journal16M", 1 * giB, Options{JournalMiB: 16}, []string{"-J", "size=16"}},
		{"journal-ext3-big", 1 * giB, Options{FsType: "ext3", JournalMiB: 300}, []string{"-t", "ext3", "-J", "size=300"}},
		{"journal-1k-big", 1 * giB, Options{BlockSize: 1024, JournalMiB: 400}, []string{"-b", "1024", "-J", "size=400"}},
		{"ext2-journal", 64 * miB, Options{FsType: "ext2", JournalMiB: 4}, []string{"-t", "ext2", "-J", "size=4"}},
		{"rootowner", 64 * miB, Options{RootUID: 1000, RootGID: 100}, []string{"-E", "root_owner=1000:100"}},
		{"resize", 300 * miB, Options{ResizeMax: 10_000_000}, []string{"-E", "resize=10000000"}},
		{"orphan-size", 64 * miB, Options{Features: "orphan_file", OrphanFileBlocks: 64}, []string{"-O", "orphan_file", "-E", "orphan_file_size=64"}},
		{"tiny-1M", 1 * miB, Options{}, nil},
		{"tiny-2M", 2 * miB, Options{}, nil},
		{"tiny-3M", 3 * miB, Options{}, nil},
		{"tiny-512K", 512 << 10, Options{}, nil},
		{"floppy-ext2", 1440 << 10, Options{FsType: "ext2"}, []string{"-t", "ext2"}},
		{"odd-8M+4K", 8*miB + 4096, Options{}, nil},
		{"trim-last-group", 128*miB + 40<<10, Options{BlockSize: 1024}, []string{"-b", "1024"}},
		{"511M", 511 * miB, Options{}, nil},
		{"512M", 512 * miB, Options{}, nil},
		{"100G", 100 * giB, Options{}, nil},
		{"100G-ext3", 100 * giB, Options{FsType: "ext3"}, []string{"-t", "ext3"}},
		{"100G-noflex-1k", 100 * giB, Options{BlockSize: 1024, Features: "^flex_bg"}, []string{"-b", "1024", "-O", "^flex_bg"}},
		{"encrypt-largedir", 64 * miB, Options{Features: "encrypt,large_dir,ea_inode,stable_inodes"}, []string{"-O", "encrypt,large_dir,ea_inode,stable_inodes"}},
		{"none-features", 64 * miB, Options{FsType: "ext2", Features: "none"}, []string{"-t", "ext2", "-O", "none"}},
		{"sparse2-ext3", 1 * giB, Options{FsType: "ext3", Features: "sparse_super2"}, []string{"-t", "ext3", "-O", "sparse_super2"}},
		{"metabg-1k-5G", 5 * giB, Options{BlockSize: 1024, Features: "meta_bg,^resize_inode"}, []string{"-b", "1024", "-O", "meta_bg,^resize_inode"}},
		{"inline-1k-orphan", 300 * miB, Options{BlockSize: 1024, Features: "inline_data,orphan_file"}, []string{"-b", "1024", "-O", "inline_data,orphan_file"}},
		{"sparse2-2groups", 9 * miB, Options{BlockSize: 1024, Features: "sparse_super2"}, []string{"-b", "1024", "-O", "sparse_super2"}},
		{"sparse2-1group", 6 * miB, Options{BlockSize: 1024, Features: "sparse_super2"}, []string{"-b", "1024", "-O", "sparse_super2"}},
		{"sparse2-trim", 1048692 << 10, Options{BlockSize: 1024, Features: "^has_journal,^metadata_csum,sparse_super2", InodeCount: 63, FlexBGSize: 4},
			[]string{"-b", "1024", "-O", "^has_journal,^metadata_csum,sparse_super2", "-N", "63", "-G", "4"}},
		{"ext3-orphan", 64 * miB, Options{FsType: "ext3", Features: "orphan_file"}, []string{"-t", "ext3", "-O", "orphan_file"}},
		{"T-largefile", 300 * miB, Options{UsageTypes: "largefile"}, []string{"-T", "largefile"}},
		{"T-largefile4-1G", 1 * giB, Options{UsageTypes: "largefile4"}, []string{"-T", "largefile4"}},
		{"T-news", 64 * miB, Options{UsageTypes: "news"}, []string{"-T", "news"}},
		{"T-small-big", 1 * giB, Options{UsageTypes: "small"}, []string{"-T", "small"}},
		{"T-floppy", 64 * miB, Options{UsageTypes: "floppy"}, []string{"-T", "floppy"}},
		{"T-huge-small", 64 * miB, Options{UsageTypes: "huge"}, []string{"-T", "huge"}},
		{"T-hurd", 64 * miB, Options{UsageTypes: "hurd", FsType: "ext2"}, []string{"-T", "hurd", "-t", "ext2"}},
		{"T-small,largefile", 300 * miB, Options{UsageTypes: "small,largefile"}, []string{"-T", "small,largefile"}},
		{"T-largefile,small", 300 * miB, Options{UsageTypes: "largefile,small"}, []string{"-T", "largefile,small"}},
		{"T-default", 64 * miB, Options{UsageTypes: "default"}, []string{"-T", "default"}},
		{"T-news-i", 64 * miB, Options{UsageTypes: "news", BytesPerInode: 8192, BlockSize: 2048}, []string{"-T", "news", "-i", "8192", "-b", "2048"}},
	}
	for _, c := range cases {
		if testing.Short() && c.size > giB {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ours, theirs := dir+"/ours.img", dir+"/mke2fs.img"
			o := c.opts
			o.UUID, o.HashSeed, o.CreationTime = fixedUUID, fixedSeed, time.Unix(testutil.FixedTime, 0)
			if err := Format(ours, withSize(o, c.size)); err != nil {
				t.Fatalf("Format: %v", err)
			}
			args := []string{"-U", testutil.FixedUUID, "-E", "hash_seed=" + testutil.FixedHashSeed}
			if o.FsType == "" {
				args = append(args, "-t", "ext4") // mke2fs alone makes ext2
			}
			testutil.Mke2fs(t, theirs, c.size, mergeE(append(args, c.args...))...)
			checkSame(t, ours, theirs, c.size <= giB)
		})
	}
}

func withSize(o Options, size int64) Options { o.Size = size; return o }

// mergeE merges all -E options into one: mke2fs keeps only the last.
func mergeE(args []string) []string {
	var out, ext []string
	for i := 0; i < len(args); i++ {
		if args[i] == "-E" && i+1 < len(args) {
			ext = append(ext, args[i+1])
			i++
			continue
		}
		out = append(out, args[i])
	}
	if len(ext) > 0 {
		out = append(out, "-E", strings.Join(ext, ","))
	}
	return out
}
