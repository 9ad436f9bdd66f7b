//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// benchJSON runs an ext4go bench with -json and decodes its one object.
func benchJSON(t *testing.T, into any, args ...string) {
	t.Helper()
	code, out, errs := cli("", append(append([]string{"bench"}, args...), "-json")...)
	if code != 0 {
		t.Fatalf("ext4go bench %q: exit %d\n%s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), into); err != nil {
		t.Fatalf("ext4go bench %q: output %q: %v", args, out, err)
	}
}

// checkAge checks the shape of an age result: the plan ran to the fill
// level, the free space adds up, the layout was measured.
func checkAge(t *testing.T, r *ageResult, config string) {
	t.Helper()
	if r.Bench != "age" || r.Config != config || r.Ops == 0 || r.OpCounts["creates"] == 0 || r.OpCounts["removes"] == 0 ||
		r.OpCounts["appends"] == 0 || r.OpCounts["truncates"] == 0 || len(r.Digest) != 16 {
		t.Fatalf("age result %+v", r)
	}
	if want := int64(float64(r.StartFree) * r.FillPct / 100 * float64(r.Free.BlockSize)); r.LiveBytes < want {
		t.Errorf("the files hold %d bytes, want the fill level's %d", r.LiveBytes, want)
	}
	f := r.Free
	var ext, blocks uint64
	for i, b := range f.Histogram {
		if b.MinBytes < uint64(f.BlockSize) || b.MinBytes&(b.MinBytes-1) != 0 || (i > 0 && b.MinBytes <= f.Histogram[i-1].MinBytes) {
			t.Errorf("histogram bucket %d: %+v", i, b)
		}
		if b.Blocks < b.Extents*(b.MinBytes/uint64(f.BlockSize)) || b.Blocks >= 2*b.Extents*(b.MinBytes/uint64(f.BlockSize)) {
			t.Errorf("bucket %+v: its blocks do not fit its extents' size range", b)
		}
		ext += b.Extents
		blocks += b.Blocks
	}
	if f.FreeExtents == 0 || ext != f.FreeExtents || blocks != f.FreeBlocks || f.FreeBlocks >= f.Blocks {
		t.Errorf("free space %+v: histogram sums to %d extents, %d blocks", f, ext, blocks)
	}
	if m := float64(f.FreeBlocks) * float64(f.BlockSize) / float64(f.FreeExtents); m != f.MeanFreeExtent {
		t.Errorf("mean free extent %v, want %v", f.MeanFreeExtent, m)
	}
	l := r.Layout
	if l.Files == 0 || l.Files > r.LiveFiles || l.MeanExtents < 1 || float64(l.MaxExtents) < l.MeanExtents ||
		l.NonContiguous < 0 || l.NonContiguous > 100 || l.GroupsTouched == 0 {
		t.Errorf("layout %+v of %d files", l, r.LiveFiles)
	}
}

func checkAppenders(t *testing.T, r *appendersResult, config, mode string, p int) {
	t.Helper()
	l := r.Layout
	if r.Bench != "appenders" || r.Config != config || r.Mode != mode || r.P != p || r.MiBPerSec <= 0 ||
		l.Files != p || l.MeanExtents < 1 || float64(l.MaxExtents) < l.MeanExtents || l.GroupsTouched == 0 {
		t.Fatalf("appenders result %+v", r)
	}
}

// TestBenchAgeLibrary: a short aging run through ext4go reports the free
// space and layout, leaves an image e2fsck finds clean, and the same seed
// plans the same operations again.
func TestBenchAgeLibrary(t *testing.T) {
	img := filepath.Join(t.TempDir(), "age.img")
	var r, again ageResult
	benchJSON(t, &r, "age", "-size", "24M", "-fill", "70", "-seed", "3", "-sync-every", "200", "-keep", img)
	checkAge(t, &r, "ext4go")
	if r.KeptImage != img {
		t.Errorf("image %q, want %q", r.KeptImage, img)
	}
	testutil.RequireFsckClean(t, img)
	checkE2freefrag(t, img, r.Free)
	if code, _, errs := cli("", "bench", "age", "-size", "24M", "-keep", img); code == 0 || !strings.Contains(errs, "exists") {
		t.Errorf("-keep over an existing file: exit %d: %s", code, errs)
	}
	benchJSON(t, &again, "age", "-size", "24M", "-fill", "70", "-seed", "3")
	if again.Digest != r.Digest || again.Ops != r.Ops {
		t.Errorf("seed 3 planned %d ops (%s), then %d (%s)", r.Ops, r.Digest, again.Ops, again.Digest)
	}
	code, out, errs := cli("", "bench", "age", "-size", "24M", "-fill", "30")
	if code != 0 || !strings.Contains(out, "free extent size") || !strings.Contains(out, "groups touched") {
		t.Errorf("text output: exit %d\n%s%s", code, out, errs)
	}
}

// TestBenchAppendersLibrary runs the three appender modes through ext4go,
// each leaving an image e2fsck finds clean.
func TestBenchAppendersLibrary(t *testing.T) {
	for _, m := range []struct {
		mode string
		args []string
	}{{"plain", nil}, {"fsync", []string{"-fsync-every", "256K"}}, {"fallocate", []string{"-fallocate"}}} {
		img := filepath.Join(t.TempDir(), m.mode+".img")
		var r appendersResult
		benchJSON(t, &r, append([]string{"appenders", "-p", "3", "-size", "2M", "-write", "16K", "-fs-size", "32M", "-keep", img}, m.args...)...)
		checkAppenders(t, &r, "ext4go", m.mode, 3)
		if m.mode == "fallocate" && r.Layout.MaxExtents != 1 {
			t.Errorf("fallocate appends: %+v, want one extent a file", r.Layout)
		}
		testutil.RequireFsckClean(t, img)
	}
	// -ceiling writes the same bytes straight into an image file of the
	// same size beside the kept image, and leaves nothing there.
	dir := t.TempDir()
	var r appendersResult
	benchJSON(t, &r, "appenders", "-p", "2", "-size", "1M", "-write", "64K", "-fs-size", "16M", "-keep", filepath.Join(dir, "img"), "-ceiling")
	checkAppenders(t, &r, "ext4go", "plain", 2)
	if r.Ceiling == nil || r.Ceiling.MiBPerSec <= 0 || r.Ceiling.Seconds <= 0 {
		t.Errorf("-ceiling: %+v", r.Ceiling)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("-ceiling left %d files beside the image", len(ents))
	}
	// -device runs on a filesystem mke2fs made (here in an image file;
	// scripts/bench-appenders.sh -d gives a loop device), which it leaves
	// e2fsck-clean and in place.
	dev := filepath.Join(t.TempDir(), "dev.img")
	testutil.Mke2fs(t, dev, 32<<20, "-t", "ext4")
	var d appendersResult
	benchJSON(t, &d, "appenders", "-p", "2", "-size", "2M", "-write", "64K", "-device", dev)
	checkAppenders(t, &d, "ext4go", "plain", 2)
	testutil.RequireFsckClean(t, dev)
	// A filesystem with files in it is refused, and left as it was.
	before, err := os.ReadFile(dev)
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs := cli("", "bench", "appenders", "-p", "1", "-size", "1M", "-device", dev, "-ceiling")
	if code == 0 || !strings.Contains(errs, "not a fresh filesystem") {
		t.Errorf("-device of a used filesystem: exit %d\n%s", code, errs)
	}
	if after, _ := os.ReadFile(dev); !bytes.Equal(before, after) {
		t.Error("-device of a used filesystem changed it")
	}
	// -memory runs on an image in memory, written out at the end with
	// -keep; -ceiling then copies into memory.
	memImg := filepath.Join(t.TempDir(), "mem.img")
	var m appendersResult
	benchJSON(t, &m, "appenders", "-p", "2", "-size", "2M", "-write", "4K", "-fs-size", "32M", "-memory", "-keep", memImg, "-ceiling")
	checkAppenders(t, &m, "ext4go", "plain", 2)
	if m.Ceiling == nil || m.Ceiling.MiBPerSec <= 0 {
		t.Errorf("-memory -ceiling: %+v", m.Ceiling)
	}
	testutil.RequireFsckClean(t, memImg)
}

// TestBenchWorkloadUsage: bad arguments are usage errors, not panics.
func TestBenchWorkloadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"age", "-fill", "120"}, {"age", "-fill", "0"}, {"age", "-size", "0"}, {"age", "-size", "1M"},
		{"age", "-sync-every", "-1"}, {"age", "extra"}, {"age", "-dir", "/x", "-keep", "/y"},
		{"appenders", "-p", "0"}, {"appenders", "-size", "0"}, {"appenders", "-write", "x"},
		{"appenders", "-fsync-every", "1M", "-fallocate"}, {"appenders", "-p", "64", "-fs-size", "64M"},
		{"appenders", "-dir", "/x", "-ceiling"}, {"appenders", "-device", "/x", "-dir", "/y"}, {"appenders", "-device", "/x", "-keep", "/y"},
		{"appenders", "-memory", "-dir", "/x"}, {"appenders", "-memory", "-device", "/x"},
	} {
		code, _, errs := cli("", append([]string{"bench"}, args...)...)
		if code == 0 || !strings.Contains(errs, "usage:") {
			t.Errorf("bench %q: exit %d, want a usage error:\n%s", args, code, errs)
		}
	}
	if code, _, errs := cli("", "bench", "age", "-dir", t.TempDir()); code == 0 || !strings.Contains(errs, "not the root of a mounted") {
		t.Errorf("age -dir on a plain directory: exit %d: %s", code, errs)
	}
}

// TestBenchWorkloadKernel runs both benches with -dir on the kernel's ext4
// (a loop mount of an image of ext4go's mkfs geometry): the same seed
// plans the same operations as through ext4go, and the kernel's image is
// clean afterwards.
func TestBenchWorkloadKernel(t *testing.T) {
	testutil.RequireMount(t)
	dir := t.TempDir()
	var lib ageResult
	benchJSON(t, &lib, "age", "-size", "24M", "-fill", "70", "-seed", "5", "-keep", filepath.Join(dir, "lib.img"))

	img := filepath.Join(dir, "kernel.img")
	testutil.Mke2fs(t, img, 24<<20, "-t", "ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0")
	mnt := testutil.Mount(t, img, false)
	var kern ageResult
	benchJSON(t, &kern, "age", "-dir", mnt, "-fill", "70", "-seed", "5")
	checkAge(t, &kern, "kernel")
	t.Logf("free blocks at the start: ext4go %d, kernel %d; plans %s, %s", lib.StartFree, kern.StartFree, lib.Digest, kern.Digest)
	if kern.StartFree == lib.StartFree && kern.Digest != lib.Digest {
		t.Errorf("the kernel ran plan %s, ext4go %s, from the same %d free blocks", kern.Digest, lib.Digest, lib.StartFree)
	}
	testutil.Unmount(t, mnt)
	testutil.RequireFsckClean(t, img)
	checkE2freefrag(t, img, kern.Free)

	testutil.Mke2fs(t, img, 32<<20, "-t", "ext4", "-E", "lazy_itable_init=0,lazy_journal_init=0")
	mnt = testutil.Mount(t, img, false)
	var app appendersResult
	benchJSON(t, &app, "appenders", "-dir", mnt, "-p", "3", "-size", "2M", "-write", "16K", "-fsync-every", "256K")
	checkAppenders(t, &app, "kernel", "fsync", 3)
	testutil.Unmount(t, mnt)
	testutil.RequireFsckClean(t, img)
}

// checkE2freefrag compares the free space the bench measured with what
// e2freefrag reports of the image: free extents and the blocks in them.
func checkE2freefrag(t *testing.T, img string, f *freeSpace) {
	t.Helper()
	out, err := exec.Command("e2freefrag", img).CombinedOutput()
	if err != nil {
		t.Skipf("e2freefrag: %v: %s", err, out)
	}
	num := func(re string) uint64 {
		m := regexp.MustCompile(re).FindSubmatch(out)
		if m == nil {
			t.Fatalf("e2freefrag output lacks %q:\n%s", re, out)
		}
		n, _ := strconv.ParseUint(string(m[1]), 10, 64)
		return n
	}
	if ext, free := num(`Num\. free extent: (\d+)`), num(`Free blocks: (\d+)`); ext != f.FreeExtents || free != f.FreeBlocks {
		t.Errorf("e2freefrag: %d free extents, %d free blocks; the bench: %d, %d", ext, free, f.FreeExtents, f.FreeBlocks)
	}
}
