package ext4go_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// readRecordingDev records the blocks read through it.
type readRecordingDev struct {
	ext4go.Device
	bs   int64
	mu   sync.Mutex
	read map[int64]bool
}

func (d *readRecordingDev) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	for b := off / d.bs; b*d.bs < off+int64(len(p)); b++ {
		d.read[b] = true
	}
	d.mu.Unlock()
	return d.Device.ReadAt(p, off)
}

// TestNewInodeAloneNotRead: a new inode whose inode-table block holds no
// other inode in use starts that block zeroed instead of reading it, as
// the kernel does. The free slots of a lazily initialised table may hold
// anything: here they hold garbage, the blocks are never read, and e2fsck
// is clean after.
func TestNewInodeAloneNotRead(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 32<<20, "-t", "ext4", "-b", "4096", "-I", "256", "-E", "lazy_itable_init=1")
	fsys, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Inodes 33-128 fill itable blocks of their own (16 a block) in
	// group 0, none of them in use yet.
	first, last := ext4go.InodeTableBlock(fsys, 33), ext4go.InodeTableBlock(fsys, 128)
	fsys.Close()
	if last-first != 5 {
		t.Fatalf("inodes 33-128 in blocks %d-%d, want 6 blocks", first, last)
	}
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	garbage := bytes.Repeat([]byte{0xa5, 0x01, 0x00, 0x10}, 1024)
	for b := first; b <= last; b++ {
		if _, err := img.WriteAt(garbage, int64(b)*4096); err != nil {
			t.Fatal(err)
		}
	}
	if err := img.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := ext4go.OpenImageDevice(image, true)
	if err != nil {
		t.Fatal(err)
	}
	rd := &readRecordingDev{Device: d, bs: 4096, read: map[int64]bool{}}
	fsys, err = ext4go.OpenDevice(rd, &ext4go.Options{Writable: true, CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	made := map[uint32]bool{}
	for i := 0; i < 130; i++ {
		name := fmt.Sprintf("f%d", i)
		if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := fsys.Lstat(name)
		if err != nil {
			t.Fatal(err)
		}
		made[fi.Sys().(*ext4go.Stat).Ino] = true
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	for ino := uint32(33); ino <= 128; ino++ {
		if !made[ino] {
			t.Fatalf("inode %d was not given to a new file: the test's premise is off", ino)
		}
	}
	for b := first; b <= last; b++ {
		if rd.read[int64(b)] {
			t.Errorf("inode table block %d was read for inodes nothing else used", b)
		}
	}
	testutil.RequireFsckClean(t, image)
}

// TestNewInodesRacingInOneBlock: goroutines creating files at once get
// inodes that share itable blocks; whichever writes a block first may
// start it zeroed, and no other new inode of the block may be lost to
// that. Every file is there with its content after a reopen, and e2fsck
// is clean.
func TestNewInodesRacingInOneBlock(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-I", "256", "-E", "lazy_itable_init=1")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				if err := fsys.WriteFile(name, []byte(name), 0o644); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	fsys, err = ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for w := 0; w < workers; w++ {
		for i := 0; i < each; i++ {
			name := fmt.Sprintf("w%d-%d", w, i)
			got, err := fsys.ReadFile(name)
			if err != nil || string(got) != name {
				t.Fatalf("%s: %q, %v", name, got, err)
			}
		}
	}
	testutil.RequireFsckClean(t, image)
}
