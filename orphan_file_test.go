//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/orphan"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/testutil"
)

// orphanState reads an image's superblock and the inode numbers its orphan
// file lists.
func orphanState(t *testing.T, image string) (*super.Superblock, []uint32) {
	t.Helper()
	raw, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := super.Decode(raw[super.Offset : super.Offset+super.Size])
	if err != nil {
		t.Fatal(err)
	}
	bs := uint64(sb.BlockSize())
	var listed []uint32
	blocks := strings.Fields(testutil.Debugfs(t, image, "blocks <"+strconv.Itoa(int(sb.OrphanFileInum))+">"))
	for _, s := range blocks {
		blk, _ := strconv.ParseUint(s, 10, 64)
		b := raw[blk*bs : (blk+1)*bs]
		if err := orphan.Verify(b, int(bs), sb.HasMetadataCsum(), inode.Seed(sb.ChecksumSeed(), sb.OrphanFileInum, 0), blk); err != nil {
			t.Fatalf("orphan file block %d: %v", blk, err)
		}
		listed = append(listed, orphan.Used(b)...)
	}
	return sb, listed
}

// TestOrphanFile: files unlinked while open are recorded in the orphan file
// (and on the orphan list once its one block is full), so that after a
// crash e2fsck and the kernel free them; a clean close leaves both empty.
func TestOrphanFile(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck")
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "1024", "-O", "orphan_file", "-E", "orphan_file_size=1")
	fsys := openRW(t, image)
	slots := orphan.Slots(1024)
	const extra = 20
	var open []*ext4go.File
	for i := 0; i < slots+extra; i++ {
		name := fmt.Sprintf("f%d", i)
		f, err := fsys.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(bytes.Repeat([]byte{byte(i)}, 3000)); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(name); err != nil {
			t.Fatal(err)
		}
		open = append(open, f)
	}
	if err := fsys.Sync(); err != nil {
		t.Fatal(err)
	}

	// A copy now is the image a crash would leave.
	crash := filepath.Join(dir, "crash.img")
	testutil.Run(t, "cp", "--sparse=always", image, crash)
	sb, listed := orphanState(t, crash)
	if len(listed) != slots {
		t.Fatalf("the orphan file lists %d inodes, want all %d slots used", len(listed), slots)
	}
	if !sb.HasROCompat(super.ROCompatOrphanPresent) {
		t.Fatal("orphan_present is not set while open for writing")
	}
	if sb.LastOrphan == 0 {
		t.Fatalf("the %d orphans past the full orphan file are not on the orphan list", extra)
	}

	// Our writable open finishes the orphans (in the orphan file and on
	// the list) as the kernel does at mount.
	ours := filepath.Join(dir, "ours.img")
	testutil.Run(t, "cp", "--sparse=always", crash, ours)
	w, err := ext4go.Open(ours, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatalf("opening a crashed image with orphans for writing: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, ours)
	if sb, listed := orphanState(t, ours); len(listed) != 0 || sb.LastOrphan != 0 || sb.HasROCompat(super.ROCompatOrphanPresent) {
		t.Fatalf("after ext4go's orphan cleanup: %d in the orphan file, list head %d, orphan_present %v",
			len(listed), sb.LastOrphan, sb.HasROCompat(super.ROCompatOrphanPresent))
	}

	// The kernel finishes the orphans at mount; e2fsck the same.
	if ok, reason := testutil.CanMount(); ok {
		kcopy := filepath.Join(dir, "kernel.img")
		testutil.Run(t, "cp", "--sparse=always", crash, kcopy)
		t.Run("kernel", func(t *testing.T) { testutil.Mount(t, kcopy, false) })
		testutil.RequireFsckClean(t, kcopy)
		if _, listed := orphanState(t, kcopy); len(listed) != 0 {
			t.Fatalf("the kernel left %d inodes in the orphan file", len(listed))
		}
	} else {
		t.Logf("kernel part skipped: %s", reason)
	}
	testutil.E2fsckFyD(t, crash)
	testutil.RequireFsckClean(t, crash)

	// Our own close frees them all and clears the flags.
	for _, f := range open[:len(open)/2] {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	sb, listed = orphanState(t, image)
	if len(listed) != 0 || sb.LastOrphan != 0 || sb.HasROCompat(super.ROCompatOrphanPresent) {
		t.Fatalf("after close: orphan file lists %v, last orphan %d, orphan_present %v", listed, sb.LastOrphan, sb.HasROCompat(super.ROCompatOrphanPresent))
	}
}

// TestBadOrphanList: an orphan list naming a reserved inode, a free inode,
// or looping, is refused by the writable open before anything is written
// (the image stays byte for byte as it was, no goroutine is left behind),
// with or without a journal.
func TestBadOrphanList(t *testing.T) {
	for _, journal := range []string{"has_journal", "^has_journal"} {
		for _, c := range []struct {
			name string
			cmds []string
		}{
			{"reserved", []string{"ssv last_orphan 5"}},
			{"free", []string{"ssv last_orphan 40"}},
			{"loop", []string{"write /dev/null a", "write /dev/null b", "sif a dtime 13", "sif b dtime 12", "ssv last_orphan 12"}},
		} {
			t.Run(journal+"-"+c.name, func(t *testing.T) {
				image := filepath.Join(t.TempDir(), "img")
				testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-O", journal)
				testutil.DebugfsWrite(t, image, c.cmds...)
				before, _ := os.ReadFile(image)
				goroutines := runtime.NumGoroutine()
				_, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: 10 * time.Millisecond})
				if !errors.Is(err, ext4go.ErrCorrupt) {
					t.Fatalf("writable open: %v, want a corruption error", err)
				}
				t.Logf("refused: %v", err)
				time.Sleep(50 * time.Millisecond)
				if after, _ := os.ReadFile(image); !bytes.Equal(before, after) {
					t.Error("the refused open changed the image")
				}
				if n := runtime.NumGoroutine(); n > goroutines {
					t.Errorf("%d goroutines after the refused open, %d before", n, goroutines)
				}
			})
		}
	}
}

// TestLinkedOrphanTruncated: an orphan that still has links is a truncate
// a crash cut short (the kernel lists the inode while it truncates): the
// writable open frees its blocks past i_size, takes it off the list with
// i_dtime cleared, and e2fsck is clean.
func TestLinkedOrphanTruncated(t *testing.T) {
	for _, fsType := range []string{"ext4", "ext3"} {
		t.Run(fsType, func(t *testing.T) {
			dir := t.TempDir()
			image := filepath.Join(dir, "img")
			testutil.Mke2fs(t, image, 16<<20, "-t", fsType)
			src := filepath.Join(dir, "data")
			if err := os.WriteFile(src, pattern(3, 0, 200000), 0o644); err != nil {
				t.Fatal(err)
			}
			testutil.DebugfsWrite(t, image, "write "+src+" a", "write "+src+" b", "sif a size 1000", "sif a dtime 13", "ssv last_orphan 12")
			fsys := openRW(t, image)
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
			ro := openImage(t, image)
			if got, err := ro.ReadFile("a"); err != nil || !bytes.Equal(got, pattern(3, 0, 1000)) {
				t.Errorf("truncated orphan a: %d bytes, %v", len(got), err)
			}
			if got, err := ro.ReadFile("b"); err != nil || !bytes.Equal(got, pattern(3, 0, 200000)) {
				t.Errorf("orphan b: %d bytes, %v", len(got), err)
			}
			fi, _ := ro.Lstat("a")
			if st := fi.Sys().(*ext4go.Stat); st.Blocks > 8 {
				t.Errorf("a keeps %d sectors past its size", st.Blocks)
			}
		})
	}
}
