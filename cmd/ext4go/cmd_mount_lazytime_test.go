//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMountLazytimeOption: -o lazytime sets Options.Lazytime, nolazytime
// (the default) clears it, the last one given wins.
func TestMountLazytimeOption(t *testing.T) {
	for _, c := range []struct {
		opts []string
		want bool
	}{
		{nil, false},
		{[]string{"lazytime"}, true},
		{[]string{"nolazytime"}, false},
		{[]string{"lazytime", "relatime", "nolazytime"}, false},
		{[]string{"nolazytime", "lazytime", "noatime"}, true},
	} {
		cfg, err := parseMountOptions(c.opts)
		if err != nil {
			t.Fatalf("%v: %v", c.opts, err)
		}
		if cfg.fs.Lazytime != c.want {
			t.Errorf("%v: Lazytime %v, want %v", c.opts, cfg.fs.Lazytime, c.want)
		}
	}
}

// TestMountLazytime: through a FUSE mount with -o lazytime, an overwrite's
// mtime shows at once in stat(2) but the image gets it only with the
// file's fsync, not with a commit the directory's fsync makes (the periodic
// commit is a minute away); a later overwrite reaches the image at the
// unmount. e2fsck stays clean.
func TestMountLazytime(t *testing.T) {
	requireFUSE(t)
	img := filepath.Join(t.TempDir(), "disk.img")
	mustCLI(t, "mkfs", "-q", "--size", "64M", img)
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseMountOptions([]string{"lazytime", "commit=60"})
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &cfg.fs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fusefs.Mount(fsys, dir, &cfg.fuse)
	if err != nil {
		fsys.Close()
		t.Fatal(err)
	}
	unmounted := false
	unmount := func() {
		if unmounted {
			return
		}
		unmounted = true
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
		if err := fsys.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}
	defer unmount()

	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := imageMtime(t, img, "f")
	time.Sleep(5 * time.Millisecond)
	if _, err := f.WriteAt([]byte("overwrite"), 4096); err != nil {
		t.Fatal(err)
	}
	mem := hostMtime(t, path)
	if !mem.After(synced) {
		t.Fatalf("stat after an overwrite: mtime %s, synced %s", mem, synced)
	}
	// A commit (the directory's fsync) does not carry the file's lazy
	// time.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := imageMtime(t, img, "f"); !got.Equal(synced) {
		t.Errorf("the image has mtime %s after a commit (lazytime keeps it in memory), want %s", got, synced)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := imageMtime(t, img, "f"); !got.Equal(mem) {
		t.Errorf("after fsync the image has mtime %s, stat showed %s", got, mem)
	}
	time.Sleep(5 * time.Millisecond)
	if _, err := f.WriteAt([]byte("again"), 8192); err != nil {
		t.Fatal(err)
	}
	last := hostMtime(t, path)
	f.Close()
	unmount()
	testutil.RequireFsckClean(t, img)
	if got := imageMtime(t, img, "f"); !got.Equal(last) {
		t.Errorf("after the unmount the image has mtime %s, stat showed %s", got, last)
	}
}

func hostMtime(t *testing.T, path string) time.Time {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return time.Unix(st.Mtim.Unix())
}

// imageMtime reads name's mtime from the image as it is now (with what
// its journal committed), beside the mount that writes it.
func imageMtime(t *testing.T, image, name string) time.Time {
	t.Helper()
	r, err := os.Open(image)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fi, err := r.Stat()
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.NewFS(r, fi.Size(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	st, err := fsys.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*ext4go.Stat).Mtime
}

// TestMountReadaheadOption: max_readahead=BYTES reaches fusefs.Options; a
// missing, negative or zero size is an error naming the option.
func TestMountReadaheadOption(t *testing.T) {
	cfg, err := parseMountOptions([]string{"max_readahead=262144"})
	if err != nil || cfg.fuse.MaxReadahead != 262144 {
		t.Fatalf("max_readahead=262144: %+v, %v", cfg, err)
	}
	if cfg, err := parseMountOptions(nil); err != nil || cfg.fuse.MaxReadahead != 0 {
		t.Fatalf("no option: MaxReadahead %d, %v", cfg.fuse.MaxReadahead, err)
	}
	for _, o := range []string{"max_readahead", "max_readahead=-1", "max_readahead=0", "max_readahead=1M"} {
		if _, err := parseMountOptions([]string{o}); err == nil || !strings.Contains(err.Error(), "max_readahead") {
			t.Errorf("%s: %v", o, err)
		}
	}
}
