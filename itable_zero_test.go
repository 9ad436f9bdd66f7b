//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
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
// anything: here they hold garbage, the blocks are never read, e2fsck is
// clean after and the kernel reads every file back.
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
	mp := testutil.Mount(t, image, true)
	for i := 0; i < 130; i++ {
		name := fmt.Sprintf("f%d", i)
		if got, err := os.ReadFile(filepath.Join(mp, name)); err != nil || string(got) != name {
			t.Errorf("kernel: %s: %q, %v", name, got, err)
		}
	}
}

// TestNewInodesRacingInOneBlock: new inodes share itable blocks with
// inodes being unlinked, renamed and truncated at the same time, and with
// bystanders nothing touches; whichever writes a block first may start it
// zeroed, and no in-use inode of the block may be lost to that. Each
// worker churns its own names (create, truncate, rename, unlink, in a
// seeded order) against a model, with commits every millisecond; after,
// every model file and every bystander has its content through the
// library and through the kernel, and e2fsck is clean.
func TestNewInodesRacingInOneBlock(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "1024", "-I", "256", "-E", "lazy_itable_init=1")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, CommitInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < 40; i++ { // bystanders, in the blocks the workers' inodes come to share
		name := fmt.Sprintf("by%d", i)
		want[name] = strings.Repeat(name, 50)
		if err := fsys.WriteFile(name, []byte(want[name]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const workers, steps = 6, 300
	models := make([]map[string]string, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		models[w] = map[string]string{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := models[w]
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := 0; i < steps; i++ {
				a := fmt.Sprintf("w%d-%d", w, rng.IntN(12))
				b := fmt.Sprintf("w%d-%d", w, rng.IntN(12))
				var err error
				switch op := rng.IntN(4); {
				case op == 0 || m[a] == "" && op != 3:
					content := fmt.Sprintf("%s@%d", a, i)
					if err = fsys.WriteFile(a, []byte(content), 0o644); err == nil {
						m[a] = content
					}
				case op == 1:
					var f *ext4go.File
					if f, err = fsys.OpenFile(a, os.O_WRONLY, 0); err == nil {
						err = errors.Join(f.Truncate(3), f.Close())
					}
					if err == nil {
						m[a] = m[a][:3]
					}
				case op == 2:
					if err = fsys.Rename(a, b); err == nil && a != b {
						m[b] = m[a]
						delete(m, a)
					}
				default:
					err = fsys.Remove(a)
					if err == nil {
						delete(m, a)
					} else if _, ok := m[a]; !ok && errors.Is(err, fs.ErrNotExist) {
						err = nil
					}
				}
				if err != nil {
					errs <- fmt.Errorf("worker %d step %d: %w", w, i, err)
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
	for _, m := range models {
		for name, content := range m {
			want[name] = content
		}
	}
	testutil.RequireFsckClean(t, image)
	check := func(who string, read func(string) ([]byte, error), list func() ([]string, error)) {
		t.Helper()
		for name, content := range want {
			got, err := read(name)
			if err != nil || string(got) != content {
				t.Errorf("%s: %s: %q, %v; want %q", who, name, got, err, content)
			}
		}
		names, err := list()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, ok := want[name]; !ok && name != "lost+found" {
				t.Errorf("%s: %s is there, the model has no such file", who, name)
			}
		}
	}
	ro := openImage(t, image)
	check("ext4go", ro.ReadFile, func() ([]string, error) { return dirNames(ro.ReadDir(".")) })
	mp := testutil.Mount(t, image, true)
	check("kernel", func(n string) ([]byte, error) { return os.ReadFile(filepath.Join(mp, n)) },
		func() ([]string, error) { return dirNames(os.ReadDir(mp)) })
}

func dirNames(ents []fs.DirEntry, err error) ([]string, error) {
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}
