package mkfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/testutil"
)

// TestRandomAgainstMke2fs is a differential test: random option
// combinations (fixed seed) run through Format and mke2fs. When both
// succeed the images must match as in TestMatchesMke2fs and ours must pass
// e2fsck; when mke2fs refuses the options, so must Format. MKFS_RANDOM=n
// runs n combinations instead of the default 24, MKFS_SEED=s another seed.
func TestRandomAgainstMke2fs(t *testing.T) {
	n := 24
	if s := os.Getenv("MKFS_RANDOM"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	if testing.Short() {
		n = 6
	}
	seed := uint64(42)
	if s := os.Getenv("MKFS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < n; i++ {
		o, args := randomOptions(r)
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ours, theirs := filepath.Join(dir, "ours.img"), filepath.Join(dir, "mke2fs.img")
			err := Format(ours, o)
			f, ferr := os.Create(theirs)
			if ferr != nil {
				t.Fatal(ferr)
			}
			f.Truncate(o.Size)
			f.Close()
			cmd := exec.Command("mke2fs", append(append([]string{"-F", "-q"}, args...), theirs)...)
			cmd.Env = append(os.Environ(), fmt.Sprintf("E2FSPROGS_FAKE_TIME=%d", testutil.FixedTime))
			out, merr := cmd.CombinedOutput()
			switch {
			case err != nil && merr != nil:
				t.Logf("both refuse: %v", err)
				return
			case err != nil:
				t.Fatalf("mke2fs %s accepts what Format refuses: %v", strings.Join(args, " "), err)
			case merr != nil:
				t.Fatalf("Format accepts what mke2fs %s refuses: %s", strings.Join(args, " "), out)
			}
			t.Logf("mke2fs %s", strings.Join(args, " "))
			checkSame(t, ours, theirs, false)
		})
	}
}

// randomOptions returns random Options and the equivalent mke2fs arguments.
func randomOptions(r *rand.Rand) (Options, []string) {
	o := Options{UUID: fixedUUID, HashSeed: fixedSeed, CreationTime: time.Unix(testutil.FixedTime, 0)}
	o.FsType = []string{"ext4", "ext4", "ext3", "ext2"}[r.IntN(4)]
	args := []string{"-t", o.FsType, "-U", testutil.FixedUUID}
	ext := []string{"hash_seed=" + testutil.FixedHashSeed}
	switch r.IntN(4) {
	case 0:
		o.Size = int64(r.IntN(16<<10)+64) << 10 // up to 16 MiB: tiny layouts
	case 1, 2:
		o.Size = int64(r.IntN(2<<20)+64) << 12 // up to 8 GiB
	default:
		o.Size = int64(r.IntN(64<<10)+1) << 20 // up to 64 GiB
	}
	if r.IntN(2) == 0 {
		o.BlockSize = []int{1024, 2048, 4096}[r.IntN(3)]
		args = append(args, "-b", fmt.Sprint(o.BlockSize))
	}
	if r.IntN(4) == 0 {
		o.InodeSize = []int{128, 256, 512, 1024}[r.IntN(4)]
		args = append(args, "-I", fmt.Sprint(o.InodeSize))
	}
	switch r.IntN(6) {
	case 0:
		o.InodeCount = uint64(r.IntN(200000) + 1)
		args = append(args, "-N", fmt.Sprint(o.InodeCount))
	case 1:
		o.BytesPerInode = 1024 << r.IntN(8)
		args = append(args, "-i", fmt.Sprint(o.BytesPerInode))
	}
	if r.IntN(4) == 0 {
		pct := float64(r.IntN(200)) / 10
		o.ReservedPercent = &pct
		args = append(args, "-m", fmt.Sprint(pct))
	}
	var feats []string
	for _, w := range featureWords {
		if r.IntN(8) == 0 {
			feats = append(feats, w)
		}
	}
	if len(feats) > 0 {
		o.Features = strings.Join(feats, ",")
		args = append(args, "-O", o.Features)
	}
	if o.FsType == "ext4" && r.IntN(4) == 0 {
		o.FlexBGSize = 1 << r.IntN(7)
		args = append(args, "-G", fmt.Sprint(o.FlexBGSize))
	}
	if r.IntN(6) == 0 {
		o.JournalMiB = 4 << r.IntN(6)
		args = append(args, "-J", fmt.Sprintf("size=%d", o.JournalMiB))
	}
	return o, append(args, "-E", strings.Join(ext, ","))
}
