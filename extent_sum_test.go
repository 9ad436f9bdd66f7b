//go:build linux

package ext4go_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestExtentLeafSumDeferred: the tail checksum of an extent block that
// every append of a transaction changes is left to the commit (Editor.
// DeferSum, txn.Handle.ModifyDeferred), so it must be right wherever the
// block is seen: through the same filesystem before the commit, on disk
// after it (e2fsck checks extent-block checksums), and through a fresh
// open, which verifies every block it reads. Appends, a hole fill in the
// middle of the leaf and a punch make the leaf change in each way.
func TestExtentLeafSumDeferred(t *testing.T) {
	img, fsys := formatRW(t, 128<<20)
	if !slices.Contains(fsys.Info().Features, "metadata_csum") {
		t.Fatalf("mkfs made no metadata_csum filesystem: %v", fsys.Info().Features)
	}
	const bs = 4096
	want := make([]byte, 0, 1<<20)
	put := func(f *ext4go.File, off int64, n int) {
		t.Helper()
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(off/bs) + byte(i)
		}
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatal(err)
		}
		if end := int(off) + n; end > len(want) {
			want = want[:end]
		}
		copy(want[off:], b)
	}
	f, err := fsys.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	// Blocks with holes between them: more extents than the inode holds,
	// so the tree has a leaf block.
	for i := range 12 {
		put(f, int64(i)*3*bs, bs)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}
	// One transaction: appends (the last extent grows), a hole filled
	// (an entry inserted mid-leaf), a punch (entries split).
	for i := range 64 {
		put(f, int64(len(want)), 1000+i)
	}
	put(f, 4*bs, bs)
	if err := f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, 7*bs+100, 2*bs); err != nil {
		t.Fatal(err)
	}
	clear(want[7*bs+100 : 9*bs+100])
	ex, err := f.Extents()
	if err != nil || len(ex) <= 4 {
		t.Fatalf("extents %d (%v): the tree has no leaf block", len(ex), err)
	}
	check := func(how string, fsys *ext4go.FS) {
		t.Helper()
		g, err := fsys.Open("f")
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		defer g.Close()
		got, err := io.ReadAll(g)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes (%v), want %d equal", how, len(got), err, len(want))
		}
	}
	check("before the commit", fsys)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
	again, err := ext4go.Open(img, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check("opened again", again)
	// The kernel reads the same bytes (its extent walk checks each leaf's
	// tail checksum and entries).
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("no kernel read-back: %s", why)
		return
	}
	mp := testutil.Mount(t, img, true)
	got, err := os.ReadFile(filepath.Join(mp, "f"))
	testutil.Unmount(t, mp)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the kernel read %d bytes (%v), want %d equal", len(got), err, len(want))
	}
}
