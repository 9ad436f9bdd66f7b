//go:build linux

package ext4go_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestTruncateRefillReusesOwnBlocks: space a file was given and loses
// within one transaction (will-it-scale's fallocate2: fallocate to 1 MiB in
// 8 KiB steps, truncate, again) is reusable at once, so every refill takes
// the same blocks and nothing waits for a commit (mballoc.FreeReuseFresh).
// A crash in the middle finds the committed state: e2fsck replays it
// clean, and the file is as it was committed. Space allocated by a
// committed transaction still waits for the commit that frees it.
func TestTruncateRefillReusesOwnBlocks(t *testing.T) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096")
	fsys, _ := openRecorded(t, image)
	kept := pattern(7, 0, 20000)
	if err := fsys.WriteFile("kept", kept, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Create("churn")
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	fill := func() []ext4go.Extent {
		t.Helper()
		for off := int64(0); off < 1<<20; off += 8 << 10 {
			if err := f.Fallocate(0, off, 8<<10); err != nil {
				t.Fatal(err)
			}
		}
		exts, err := f.Extents()
		if err != nil {
			t.Fatal(err)
		}
		return exts
	}
	physical := func(exts []ext4go.Extent) (blocks []uint64) {
		for _, e := range exts {
			for i := range e.Length {
				blocks = append(blocks, e.Physical+i)
			}
		}
		return blocks
	}
	first := physical(fill())
	if _, err := f.WriteAt(pattern(9, 0, 64<<10), 0); err != nil {
		t.Fatal(err)
	}
	commits := ext4go.Commits(fsys)
	for round := 0; round < 20; round++ {
		if err := f.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if _, pending := ext4go.FreeClusters(fsys); pending != 0 {
			t.Fatalf("round %d: %d clusters wait for a commit after truncating blocks the same transaction allocated", round, pending)
		}
		if got := physical(fill()); !slices.Equal(got, first) {
			t.Fatalf("round %d: refill took %d blocks from %d, want the %d from %d freed by this transaction",
				round, len(got), got[0], len(first), first[0])
		}
	}
	if n := ext4go.Commits(fsys) - commits; n != 0 {
		t.Errorf("%d commits during the truncates and refills, want none", n)
	}

	// A crash now: every write landed, the running transaction did not
	// commit. The replay gives the committed state: an empty churn.
	crash := filepath.Join(dir, "crash")
	copyFile(t, image, crash)
	if out, err := exec.Command("e2fsck", "-fy", crash).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Fatalf("e2fsck -fy of the crash image: %v\n%s", err, out)
		}
	}
	testutil.RequireFsckClean(t, crash)
	replayed, err := ext4go.Open(crash, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := fs.Stat(replayed, "churn"); err != nil || fi.Size() != 0 {
		t.Errorf("churn after the crash: %v, %v; want it empty as committed", fi, err)
	}
	if got, err := fs.ReadFile(replayed, "kept"); err != nil || !bytes.Equal(got, kept) {
		t.Errorf("kept after the crash: %d bytes, %v", len(got), err)
	}
	replayed.Close()

	// Allocated by a committed transaction: freed, the blocks wait.
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, pending := ext4go.FreeClusters(fsys); pending != int64(len(first)) {
		t.Fatalf("%d clusters wait for the commit, want the %d the committed file held", pending, len(first))
	}
	for _, b := range physical(fill()) {
		if slices.Contains(first, b) {
			t.Fatalf("block %d, freed by the running transaction from a committed file, given out before the commit", b)
		}
	}
	f.Close()
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	// The kernel reads the same: kept intact, churn 1 MiB of zeros.
	mp := testutil.Mount(t, image, true)
	if got, err := os.ReadFile(filepath.Join(mp, "kept")); err != nil || !bytes.Equal(got, kept) {
		t.Errorf("kernel: kept: %d bytes, %v", len(got), err)
	}
	if got, err := os.ReadFile(filepath.Join(mp, "churn")); err != nil || len(got) != 1<<20 || slices.ContainsFunc(got, func(b byte) bool { return b != 0 }) {
		t.Errorf("kernel: churn: %d bytes, %v; want 1 MiB of zeros", len(got), err)
	}
}
