package mkfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/testutil"
)

// fillGarbage writes size bytes of deterministic pseudo-random data to path,
// standing in for a disk that held an old filesystem.
func fillGarbage(t *testing.T, path string, size int64) {
	t.Helper()
	r := rand.NewChaCha8([32]byte{1, 2, 3})
	buf := make([]byte, 1<<20)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for off := int64(0); off < size; off += int64(len(buf)) {
		r.Read(buf)
		if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnzeroedDeviceMatchesMke2fs formats a device full of old data through
// a plain dev.Device (no Zeroer), which must zero exactly what mke2fs zeroes
// when it cannot rely on discard (-E nodiscard; with NoLazyInit also
// lazy_itable_init=0): both images, old data included, must be identical,
// and e2fsck must accept ours.
func TestUnzeroedDeviceMatchesMke2fs(t *testing.T) {
	type tc struct {
		v      variant
		bs     int
		noLazy bool
	}
	var cases []tc
	for _, v := range []variant{variants[0], variants[1], variants[4], variants[5], variants[7], variants[9]} {
		for _, bs := range []int{1024, 4096} {
			cases = append(cases, tc{v, bs, false})
		}
	}
	cases = append(cases, tc{variants[0], 4096, true}, tc{variants[5], 1024, true})
	for _, c := range cases {
		v, bs := c.v, c.bs
		{
			t.Run(fmt.Sprintf("%s/%d/nolazy=%v", v.name, bs, c.noLazy), func(t *testing.T) {
				t.Parallel()
				const size = 64 << 20
				dir := t.TempDir()
				ours, theirs := filepath.Join(dir, "ours.img"), filepath.Join(dir, "mke2fs.img")
				fillGarbage(t, ours, size)
				fillGarbage(t, theirs, size)
				d, err := dev.Open(ours, true)
				if err != nil {
					t.Fatal(err)
				}
				o := v.options(0, bs)
				o.NoLazyInit = c.noLazy
				if err := Mkfs(d, o); err != nil {
					t.Fatalf("Mkfs: %v", err)
				}
				d.Close()
				args := v.mke2fsArgs(bs)
				for i := range args {
					if args[i] == "hash_seed="+testutil.FixedHashSeed {
						args[i] += ",nodiscard"
						if c.noLazy {
							args[i] += ",lazy_itable_init=0"
						}
					}
				}
				cmd := exec.Command("mke2fs", append(append([]string{"-F", "-q"}, args...), theirs)...)
				cmd.Env = append(os.Environ(), fmt.Sprintf("E2FSPROGS_FAKE_TIME=%d", testutil.FixedTime))
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("mke2fs: %v\n%s", err, out)
				}
				if d := diffBlocks(t, ours, theirs, 10); len(d) > 0 {
					t.Errorf("images differ:\n%s", join(d))
				}
				if exit, out := testutil.E2fsckFN(t, ours); exit != 0 {
					t.Errorf("e2fsck -fn exit %d:\n%s", exit, out)
				}
			})
		}
	}
}

// TestDeterministic requires two runs with the same options to give
// byte-identical images, s_kbytes_written included.
func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	o := variants[0].options(300<<20, 0)
	o.Features = "orphan_file"
	var paths [3]string
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprint(i))
		if i == 2 {
			// A different time must change the image: the check is not vacuous.
			o.CreationTime = o.CreationTime.Add(time.Second)
		}
		if err := Format(paths[i], o); err != nil {
			t.Fatal(err)
		}
	}
	if d := diffImages(t, paths[0], paths[1], 5, false); len(d) > 0 {
		t.Fatalf("two runs with the same options differ:\n%s", join(d))
	}
	if d := diffImages(t, paths[0], paths[2], 5, false); len(d) == 0 {
		t.Fatal("changing the time changed nothing")
	}
}
