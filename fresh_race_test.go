//go:build linux

package ext4go_test

// Same-transaction reuse of freed file data (mballoc.FreeReuseFresh) raced
// like an adversary. The invariant under test: a block freed by the
// running transaction goes back to the allocator at once only if that same
// transaction allocated it; a block some committed state still gives to a
// file waits for the commit that frees it. Broken, a crash between the
// free and the commit finds the committed file holding another file's
// bytes, which e2fsck cannot see: only the content check below does.
//
// Goroutines fight over a few shared names with the fallocate2 pattern
// (fallocate in steps, truncate, again), writes, truncates, removes and
// renames, with a commit every millisecond, while each also keeps a file
// of its own against a model. Every round, committed victim files are
// removed or truncated in the middle of the churn. Bystanders are never
// touched. Crash images cut from the recorded device must replay clean
// and hold every bystander exactly, and every victim exactly or as its
// change left it, never with other bytes. After Close e2fsck -fn is
// clean, and ext4go and the kernel read the bystanders, the survivors
// and the model files back exactly.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// victim is a file committed before a round whose churn removes or
// truncates it.
type victim struct {
	name string
	data []byte
	// changedAt is the log position before the change began (-1: not
	// changed); from there on a crash may find the change.
	changedAt int
	// half: the change was a truncate to len(data)/2 (else to 0 or a
	// remove, both of which may leave it absent or empty).
	half bool
}

func TestFreshReuseRacing(t *testing.T) {
	for _, cfg := range []struct {
		name string
		size int64
		mkfs []string
	}{
		{"4k", 64 << 20, []string{"-t", "ext4", "-b", "4096"}},
		{"1k", 32 << 20, []string{"-t", "ext4", "-b", "1024"}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			freshReuseRacing(t, cfg.size, cfg.mkfs)
		})
	}
}

func freshReuseRacing(t *testing.T, size int64, mkfs []string) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, size, mkfs...)
	base, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	fsys, rd := openRecordedWith(t, image, &ext4go.Options{Writable: true, CommitInterval: time.Millisecond})

	bystanders := map[string][]byte{}
	for i := range 12 {
		name := fmt.Sprintf("by%d", i)
		bystanders[name] = pattern(int64(500+i), 0, 1+i*9000)
		if err := fsys.WriteFile(name, bystanders[name], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	start := rd.mark()

	const racers, rounds = 4, 6
	shared := []string{"s0", "s1", "s2", "s3"}
	owned := make([][]byte, racers) // racer i's model of o<i>
	var victims []*victim
	var roundMarks []int // log position when round r's victims were committed
	var failures atomic.Int64
	fail := func(format string, args ...any) {
		if failures.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	for round := range rounds {
		var these []*victim
		for i := range 6 {
			v := &victim{name: fmt.Sprintf("v%d-%d", round, i), data: pattern(int64(round*100+i), 0, 20000+i*30000), changedAt: -1}
			if err := fsys.WriteFile(v.name, v.data, 0o644); err != nil {
				t.Fatal(err)
			}
			these = append(these, v)
		}
		if err := fsys.Sync(); err != nil {
			t.Fatal(err)
		}
		roundMarks = append(roundMarks, rd.mark())
		victims = append(victims, these...)

		var stop atomic.Bool
		var wg sync.WaitGroup
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(round), uint64(r)))
				own := fmt.Sprintf("o%d", r)
				for step := 0; !stop.Load(); step++ {
					switch {
					case step == 3 || step == 8 && r+racers < len(these):
						// A victim's turn, in the middle of the churn: its
						// blocks were committed, so they must wait for the
						// commit of this change.
						v := these[r]
						if step == 8 {
							v = these[r+racers]
						}
						changeVictim(fsys, rd, v, rng, fail)
					case rng.IntN(3) == 0:
						owned[r] = ownStep(fsys, own, owned[r], rng, fail)
					default:
						churnStep(fsys, shared[rng.IntN(len(shared))], shared[rng.IntN(len(shared))], rng, fail)
					}
				}
			}()
		}
		time.Sleep(60 * time.Millisecond)
		stop.Store(true)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	log := rd.log
	t.Logf("%d writes and flushes recorded over %d rounds, %d commits", len(log), rounds, ext4go.Commits(fsys))

	// Read back through ext4go and the kernel: bystanders and model files
	// exact, victims as their change left them.
	readBack := func(who string, read func(string) ([]byte, error)) {
		for name, want := range bystanders {
			if got, err := read(name); err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: bystander %s: %d bytes, %v; want its %d bytes", who, name, len(got), err, len(want))
			}
		}
		for r, want := range owned {
			got, err := read(fmt.Sprintf("o%d", r))
			if want == nil && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: o%d: %d bytes, %v; want %d bytes of the model", who, r, len(got), err, len(want))
			}
		}
		for _, v := range victims {
			got, err := read(v.name)
			if msg := v.check(got, err, true); msg != "" {
				t.Errorf("%s: %s", who, msg)
			}
		}
	}
	ro, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	readBack("ext4go", ro.ReadFile)
	ro.Close()
	mp := testutil.Mount(t, image, true)
	readBack("kernel", func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(mp, name)) })

	// Crash points after the first round's victims were committed.
	points := 12
	if v, err := strconv.Atoi(os.Getenv("EXT4GO_CRASH")); err == nil && v > 0 {
		points = v
	}
	rng := rand.New(rand.NewPCG(uint64(size), 5))
	var cuts []int
	for range points {
		cuts = append(cuts, roundMarks[0]+rng.IntN(len(log)-roundMarks[0]+1))
	}
	// And as many just after a victim's change, where a block it gave back
	// too early would already hold another file's data.
	var changed []*victim
	for _, v := range victims {
		if v.changedAt >= 0 {
			changed = append(changed, v)
		}
	}
	rng.Shuffle(len(changed), func(i, j int) { changed[i], changed[j] = changed[j], changed[i] })
	for _, v := range changed[:min(points, len(changed))] {
		cuts = append(cuts, v.changedAt+1+rng.IntN(min(100, len(log)-v.changedAt)))
	}
	slices.Sort(cuts)
	for _, cut := range cuts {
		img := crashImage(t, dir, base, log[:cut], rng)
		checkFreshCrash(t, img, cut, start, bystanders, victims, roundMarks)
		if t.Failed() {
			t.Fatalf("crash at record %d of %d failed; image kept at %s", cut, len(log), img)
		}
		os.Remove(img)
	}
}

// check says what is wrong with got (read with err) for v, "" if nothing:
// before its change v must be exact; after, it may be gone, empty, cut to
// half (its last block's tail zeroed or not), or whole with the tail past
// half zeroed in place by a truncate that did not commit.
func (v *victim) check(got []byte, err error, changed bool) string {
	if !changed {
		if err != nil || !bytes.Equal(got, v.data) {
			return fmt.Sprintf("%s, committed and not yet changed: %d bytes, %v; want its %d bytes", v.name, len(got), err, len(v.data))
		}
		return ""
	}
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		return fmt.Sprintf("%s: %v", v.name, err)
	}
	half := len(v.data) / 2
	switch {
	case bytes.Equal(got, v.data), len(got) == 0:
		return ""
	case v.half && len(got) == half && bytes.Equal(got, v.data[:half]):
		return ""
	case v.half && zeroedTail(got, v.data, half):
		return ""
	}
	return fmt.Sprintf("%s: %d bytes that are neither its committed %d bytes nor what its change leaves (another file's data in its blocks?)", v.name, len(got), len(v.data))
}

// changeVictim removes v or truncates it to 0 or to half.
func changeVictim(fsys *ext4go.FS, rd *recDev, v *victim, rng *rand.Rand, fail func(string, ...any)) {
	kind := rng.IntN(3)
	v.half = kind == 2
	v.changedAt = rd.mark()
	if kind == 0 {
		if err := fsys.Remove(v.name); err != nil {
			fail("remove %s: %v", v.name, err)
		}
		return
	}
	f, err := fsys.OpenFile(v.name, os.O_RDWR, 0)
	if err != nil {
		fail("open %s: %v", v.name, err)
		return
	}
	size := int64(0)
	if v.half {
		size = int64(len(v.data) / 2)
	}
	if err := f.Truncate(size); err != nil {
		fail("truncate %s: %v", v.name, err)
	}
	f.Close()
}

// churnStep is one racing change to the shared names a and b: the
// fallocate2 pattern, a write, a truncate, a remove or a rename. Losing a
// race (the name is gone) is fine; anything else is a failure.
func churnStep(fsys *ext4go.FS, a, b string, rng *rand.Rand, fail func(string, ...any)) {
	lost := func(err error) bool { return err == nil || errors.Is(err, fs.ErrNotExist) }
	// open opens a for writing, nil if it lost the name to a racer.
	open := func(flag int) *ext4go.File {
		f, err := fsys.OpenFile(a, os.O_RDWR|flag, 0o644)
		if err != nil && !lost(err) {
			fail("open %s: %v", a, err)
		}
		return f
	}
	switch rng.IntN(6) {
	case 0, 1:
		f := open(os.O_CREATE)
		if f == nil {
			return
		}
		defer f.Close()
		step := int64(8 << 10)
		for off := int64(0); off < 256<<10; off += step {
			if err := f.Fallocate(0, off, step); err != nil {
				fail("fallocate %s: %v", a, err)
				return
			}
		}
		if err := f.Truncate(0); err != nil {
			fail("truncate %s: %v", a, err)
		}
	case 2:
		f := open(os.O_CREATE)
		if f == nil {
			return
		}
		defer f.Close()
		if _, err := f.WriteAt(pattern(rng.Int64N(1000), 0, 1+rng.IntN(100<<10)), rng.Int64N(64<<10)); err != nil {
			fail("write %s: %v", a, err)
		}
	case 3:
		f := open(0)
		if f == nil {
			return
		}
		defer f.Close()
		if err := f.Truncate(rng.Int64N(64 << 10)); err != nil {
			fail("truncate %s: %v", a, err)
		}
	case 4:
		if err := fsys.Remove(a); !lost(err) {
			fail("remove %s: %v", a, err)
		}
	case 5:
		if err := fsys.Rename(a, b); !lost(err) {
			fail("rename %s %s: %v", a, b, err)
		}
	}
}

// ownStep changes the racer's own file and returns its model: truncate
// and refill, a write, or a truncate.
func ownStep(fsys *ext4go.FS, name string, model []byte, rng *rand.Rand, fail func(string, ...any)) []byte {
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		fail("open %s: %v", name, err)
		return model
	}
	defer f.Close()
	if model == nil {
		model = []byte{}
	}
	switch rng.IntN(3) {
	case 0:
		if err := f.Truncate(0); err != nil {
			fail("truncate %s: %v", name, err)
			return model
		}
		model = model[:0]
		fallthrough
	case 1:
		off := rng.IntN(len(model) + 1)
		p := pattern(rng.Int64N(1000), 0, 1+rng.IntN(80<<10))
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			fail("write %s: %v", name, err)
			return model
		}
		if end := off + len(p); end > len(model) {
			model = append(model, make([]byte, end-len(model))...)
		}
		copy(model[off:], p)
	case 2:
		n := rng.IntN(len(model) + 1)
		if err := f.Truncate(int64(n)); err != nil {
			fail("truncate %s: %v", name, err)
			return model
		}
		model = model[:n]
	}
	return slices.Clone(model)
}

// checkFreshCrash replays crash image img (cut records long) through
// e2fsck and checks bystanders and the victims committed before cut.
func checkFreshCrash(t *testing.T, img string, cut, start int, bystanders map[string][]byte, victims []*victim, roundMarks []int) {
	t.Helper()
	if out, err := exec.Command("e2fsck", "-fy", img).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Fatalf("crash at %d: e2fsck -fy: %v\n%s", cut, err, out)
		}
	}
	testutil.RequireFsckClean(t, img)
	fsys, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatalf("crash at %d: open: %v", cut, err)
	}
	defer fsys.Close()
	if cut >= start {
		for name, want := range bystanders {
			if got, err := fsys.ReadFile(name); err != nil || !bytes.Equal(got, want) {
				t.Errorf("crash at %d: bystander %s: %d bytes, %v; want its %d bytes", cut, name, len(got), err, len(want))
			}
		}
	}
	for i, v := range victims {
		if cut < roundMarks[i/6] {
			continue // not committed yet at the cut
		}
		changed := v.changedAt >= 0 && cut > v.changedAt
		got, err := fsys.ReadFile(v.name)
		if msg := v.check(got, err, changed); msg != "" {
			t.Errorf("crash at %d: %s", cut, msg)
		}
	}
}
