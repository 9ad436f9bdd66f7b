//go:build linux

package ext4go_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestAtime: reads update access times as Options.Atime says, with the
// kernel's rules: never; relatime (when the access time is not after the
// modification or change time, or is a day old); strictatime (every
// read); never for a chattr +A file. Directories' listings count as
// reads. With Options.Lazytime the same, and Close writes them. The
// image stays e2fsck-clean and reopened shows the times Stat showed.
func TestAtime(t *testing.T) {
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		mode ext4go.AtimeMode
		// Whether a read updates an access time before the modification
		// time (stale), and one after it and the change time, recent
		// (fresh).
		wantStale, wantFresh bool
		lazytime             bool // Options.Lazytime: the same, in memory until Close
	}{
		{"noatime", ext4go.AtimeNever, false, false, false},
		{"relatime", ext4go.AtimeRelative, true, false, false},
		{"strictatime", ext4go.AtimeStrict, true, true, false},
		{"relatime-lazytime", ext4go.AtimeRelative, true, false, true},
		{"strictatime-lazytime", ext4go.AtimeStrict, true, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
			fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, Atime: c.mode, Lazytime: c.lazytime})
			if err != nil {
				t.Fatal(err)
			}
			if err := fsys.WriteFile("f", []byte("data"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := fsys.Mkdir("d", 0o755); err != nil {
				t.Fatal(err)
			}
			atime := func(name string) time.Time {
				fi, err := fsys.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				return fi.Sys().(*ext4go.Stat).Atime
			}
			read := func(name string) {
				f, err := fsys.Open(name)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if name == "d" {
					if _, err := f.(interface {
						ReadDir(int) ([]fs.DirEntry, error)
					}).ReadDir(-1); err != nil {
						t.Fatal(err)
					}
					return
				}
				if _, err := io.ReadAll(f); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range []string{"f", "d"} {
				// (a) an access time before the modification time.
				if err := fsys.Chtimes(name, old, time.Time{}); err != nil {
					t.Fatal(err)
				}
				read(name)
				if got := !atime(name).Equal(old); got != c.wantStale {
					t.Errorf("%s: stale access time updated: %v, want %v", name, got, c.wantStale)
				}
				// (b) a recent access time after the others.
				fresh := time.Now().Add(time.Hour)
				if err := fsys.Chtimes(name, fresh, time.Time{}); err != nil {
					t.Fatal(err)
				}
				read(name)
				if got := !atime(name).Equal(fresh); got != c.wantFresh {
					t.Errorf("%s: fresh access time updated: %v, want %v", name, got, c.wantFresh)
				}
			}
			// chattr +A: never.
			h, err := fsys.OpenFile("f", os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.SetFlags(0x80 | 0x80000); err != nil { // noatime, extents
				t.Fatal(err)
			}
			h.Close()
			if err := fsys.Chtimes("f", old, time.Time{}); err != nil {
				t.Fatal(err)
			}
			read("f")
			if !atime("f").Equal(old) {
				t.Error("the access time of a chattr +A file was updated")
			}
			final := map[string]time.Time{"f": atime("f"), "d": atime("d")}
			if err := fsys.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
			// What Stat showed is what Close left on disk.
			ro := openImage(t, image)
			for name, want := range final {
				fi, err := ro.Stat(name)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Sys().(*ext4go.Stat).Atime; !got.Equal(want) {
					t.Errorf("%s reopened: atime %s, Stat showed %s", name, got, want)
				}
			}
		})
	}
}
