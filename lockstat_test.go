//go:build lockstat

package ext4go_test

import (
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/lockstat"
	"github.com/ext4go/ext4go/internal/mkfs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestLockstatFallocate2 checks, on a machine with few cores, that nothing
// many cores would share is taken: fallocate2's operations (fallocate 8 KiB at the end, truncate
// to 0 at 1 MiB) take no lock and write no counter that all files share,
// so nothing serialises them but the files' own locks and the sharded
// structures. Only a block joining the running transaction counts itself
// in the transaction (once per block per transaction), which the test
// bounds as amortised; commits, the only other global work, are kept out
// of the window by a long commit interval.
func TestLockstatFallocate2(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20}); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const workers, opsEach = 4, 3000
	const step, limit = 8 << 10, 1 << 20
	var files []*ext4go.File
	for i := range workers {
		f, err := fsys.Create(string(rune('a' + i)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	run := func(n int) {
		var wg sync.WaitGroup
		for _, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var off int64
				for range n {
					if off >= limit {
						if err := f.Truncate(0); err != nil {
							t.Error(err)
							return
						}
						off = 0
					}
					if err := f.Fallocate(0, off, step); err != nil {
						t.Error(err)
						return
					}
					off += step
				}
			}()
		}
		wg.Wait()
	}
	run(300) // warm: groups loaded, blocks cached, state made
	before := lockstat.Snapshot()
	run(opsEach)
	got := lockstat.Snapshot().Sub(before)
	requireNoGlobal(t, got, float64(workers*opsEach))
	for _, f := range files {
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
}

// requireNoGlobal fails t for every global site taken in ops operations,
// but those amortised over many: a block joining the running transaction
// and a sharded counter folding into its centre.
func requireNoGlobal(t *testing.T, got lockstat.Counts, ops float64) {
	t.Helper()
	for _, s := range lockstat.Sites() {
		if got[s] > 0 {
			t.Logf("%-44s %-10s %8d %8.4f/op", s.Name(), s.Scope(), got[s], float64(got[s])/ops)
		}
		if s.Scope() != lockstat.Global || got[s] == 0 {
			continue
		}
		if s == lockstat.TxnDirtyCount && float64(got[s])/ops < 0.01 {
			continue // amortised: once per block per transaction
		}
		if s == lockstat.AllocCounterFold && float64(got[s])/ops < 0.05 {
			// Amortised: once per counterBatch clusters allocated, and
			// a few times per truncate, whose 1 MiB frees exceed a batch.
			continue
		}
		t.Errorf("%s (global) taken %d times in %v operations", s.Name(), got[s], ops)
	}
}

// TestLockstatAppenders is the same claim for the appenders workload
// (the seeds' fio file_append=1, bs=4k, here written): appends to
// different files take no global lock and write no shared counter per
// append. Each file's extent tree outgrows the inode (a leaf block),
// since every other append leaves a hole first.
func TestLockstatAppenders(t *testing.T) {
	img := filepath.Join(t.TempDir(), "img")
	if err := mkfs.Format(img, mkfs.Options{Size: 512 << 20}); err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true, CommitInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const workers, appendsEach = 2, 8000
	buf := make([]byte, 4096)
	var files []*ext4go.File
	for i := range workers {
		f, err := fsys.Create(string(rune('a' + i)))
		if err != nil {
			t.Fatal(err)
		}
		// Ten extents with holes between them: a leaf block.
		for j := range 10 {
			if _, err := f.WriteAt(buf, int64(j)*2*4096); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, f)
	}
	run := func(n int) {
		var wg sync.WaitGroup
		for _, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range n {
					if _, err := f.Write(buf); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	for _, f := range files {
		if _, err := f.Seek(0, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
	}
	run(300) // warm
	before := lockstat.Snapshot()
	run(appendsEach)
	got := lockstat.Snapshot().Sub(before)
	requireNoGlobal(t, got, float64(workers*appendsEach))
	for _, f := range files {
		ex, err := f.Extents()
		if err != nil || len(ex) <= 4 {
			t.Errorf("%d extents (%v): no leaf block", len(ex), err)
		}
		f.Close()
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, img)
}
