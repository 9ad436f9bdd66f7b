//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
	"github.com/ext4go/ext4go/internal/testutil/ext4meta"
)

// expectedRace are the errors a racing call may get on Linux: the name
// went away, came back, or changed kind under it.
func expectedRace(err error) bool {
	for _, e := range []error{syscall.ENOENT, syscall.EEXIST, syscall.ENOTEMPTY, syscall.ENOTDIR, syscall.EISDIR, syscall.EINVAL} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// TestMountRaces: goroutines race every kind of call on a few shared
// names through the mount (create, write, rename over, link, unlink,
// mkdir, rmdir, readdir), and on files each holds open while the others
// remove or rename over their names, while bystander files in the same
// directories are left alone. No call fails but as Linux allows a racing
// one to; a held file keeps the bytes its holder wrote; the bystanders
// keep their content;
// the image is e2fsck-clean after the unmount and ext4go reads it as the
// kernel does.
func TestMountRaces(t *testing.T) {
	requireFUSE(t)
	testutil.RequireMount(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 128<<20, "-t", "ext4")
	dir, fsys, srv := mount(t, image)
	p := func(name string) string { return filepath.Join(dir, name) }
	if err := os.Mkdir(p("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	bystander := func(i int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("bystander %d ", i)), 500*(i+1)) }
	for i := range 8 {
		for _, d := range []string{"", "d/"} {
			if err := os.WriteFile(p(fmt.Sprintf("%sby%d", d, i)), bystander(i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	names := []string{"a", "b", "c", "d/a", "d/b", "d/c"}
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			pick := func() string { return p(names[rng.IntN(len(names))]) }
			// Held files: created and written only by their holder;
			// the others may remove their names or rename over them,
			// but reach their inodes by no name.
			held := func(w int) string { return p(fmt.Sprintf("%sh%d", []string{"", "d/"}[rng.IntN(2)], w)) }
			target := func() string {
				if rng.IntN(3) == 0 {
					return held(rng.IntN(6))
				}
				return pick()
			}
			fail := func(op string, err error) {
				if err != nil && !expectedRace(err) {
					select {
					case errs <- fmt.Errorf("worker %d: %s: %w", w, op, err):
					default:
					}
				}
			}
			for n := 0; time.Now().Before(deadline); n++ {
				switch rng.IntN(9) {
				case 0:
					fail("write", os.WriteFile(pick(), bytes.Repeat([]byte{byte(w)}, rng.IntN(20000)), 0o644))
				case 1:
					fail("rename", os.Rename(pick(), target()))
				case 2:
					if err := os.Link(pick(), pick()); !errors.Is(err, syscall.EPERM) { // EPERM: a directory
						fail("link", err)
					}
				case 3:
					fail("remove", os.Remove(target()))
				case 4:
					fail("mkdir", os.Mkdir(pick(), 0o755))
				case 5:
					fail("rmdir", syscall.Rmdir(pick()))
				case 6: // hold a file open across whatever happens to its name
					name := held(w)
					f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
					if err != nil {
						fail("create", err)
						continue
					}
					mine := bytes.Repeat([]byte{byte(0x80 | w)}, 3000+rng.IntN(5000))
					if _, err := f.Write(mine); err != nil {
						fail("write held", err)
					}
					time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
					got := make([]byte, len(mine))
					if _, err := f.ReadAt(got, 0); err != nil || !bytes.Equal(got, mine) {
						select {
						case errs <- fmt.Errorf("worker %d: a held file lost its bytes (%v)", w, err):
						default:
						}
					}
					f.Close()
				case 7:
					_, err := os.ReadDir(p("d"))
					fail("readdir", err)
				case 8:
					_, err := os.ReadFile(pick())
					fail("read", err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range 8 {
		for _, d := range []string{"", "d/"} {
			name := fmt.Sprintf("%sby%d", d, i)
			if got, err := os.ReadFile(p(name)); err != nil || !bytes.Equal(got, bystander(i)) {
				t.Errorf("bystander %s: %d bytes, %v", name, len(got), err)
			}
		}
	}
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
	ours, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	opts := testutil.MountCompareOptions()
	opts.Meta = ext4meta.Meta
	opts.Checks |= testutil.CheckNlink
	testutil.CompareFS(t, ours, testutil.Mount(t, image, true), opts)
}
