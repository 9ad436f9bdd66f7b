package ext4go_test

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestReadDirSkipsBadEntries: an entry naming an inode that is not in use,
// was cleared or lies past s_inodes_count does not hide its directory
// (linear or htree): ReadDir lists the other entries (and a typed entry
// whose inode is bad, as the kernel's readdir does) and names the ones it
// left out in a *SkippedEntriesError; a lookup of a bad name fails as
// corruption, the good ones are found; File.ReadDir, in one call or in
// pieces, and WalkDir give the same.
func TestReadDirSkipsBadEntries(t *testing.T) {
	fx := testutil.BadEntriesImage(t)
	fsys, err := ext4go.Open(fx.Image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	for _, dir := range []string{"d", "h"} {
		t.Run(dir, func(t *testing.T) {
			want := slices.Clone(fx.Good[dir])
			wantSkipped := map[string]uint32{}
			for _, b := range fx.Bad {
				if b.Dir != dir {
					continue
				}
				if b.Listed {
					want = append(want, b.Name)
				} else {
					wantSkipped[b.Name] = b.Ino
				}
			}
			sort.Strings(want)
			ents, err := fsys.ReadDir(dir)
			checkSkipped(t, "FS.ReadDir", err, wantSkipped)
			if got := names(ents); !slices.Equal(got, want) {
				t.Errorf("FS.ReadDir lists %v, want %v", got, want)
			}

			f, err := fsys.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			d := f.(*ext4go.File)
			ents, err = d.ReadDir(-1)
			checkSkipped(t, "File.ReadDir(-1)", err, wantSkipped)
			if got := names(ents); !slices.Equal(got, want) {
				t.Errorf("File.ReadDir(-1) lists %v, want %v", got, want)
			}
			if ents, err := d.ReadDir(-1); len(ents) != 0 || err != nil {
				t.Errorf("File.ReadDir(-1) again: %d entries, %v; want none, nil", len(ents), err)
			}
			// In pieces: the entries, then the error once, then io.EOF.
			if _, err := d.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			var all []fs.DirEntry
			var skippedErr error
			for {
				ents, err := d.ReadDir(7)
				all = append(all, ents...)
				if err == io.EOF {
					break
				}
				if err != nil {
					if skippedErr != nil {
						t.Fatalf("File.ReadDir(7) returned the skipped entries twice: %v", err)
					}
					skippedErr = err
				}
			}
			checkSkipped(t, "File.ReadDir(7)", skippedErr, wantSkipped)
			if got := names(all); !slices.Equal(got, want) {
				t.Errorf("File.ReadDir(7) lists %v, want %v", got, want)
			}
			d.Close()

			for _, b := range fx.Bad {
				if b.Dir != dir {
					continue
				}
				if _, err := fsys.Lstat(dir + "/" + b.Name); !errors.Is(err, ext4go.ErrCorrupt) {
					t.Errorf("lstat %s/%s: %v, want ErrCorrupt", dir, b.Name, err)
				}
			}
			for _, n := range fx.Good[dir] {
				if _, err := fsys.Lstat(dir + "/" + n); err != nil {
					t.Errorf("lstat %s/%s: %v", dir, n, err)
				}
			}
			if f, err := fsys.Open(dir); err != nil {
				t.Error(err)
			} else {
				if p, err := f.(*ext4go.File).Parent(); err != nil || p != 2 {
					t.Errorf("%s's parent (its \"..\" entry): %d, %v; want 2", dir, p, err)
				}
				f.Close()
			}

			var walked []string
			var walkErrs int
			err = fsys.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
				if err != nil {
					walkErrs++
					checkSkipped(t, "WalkDir", err, wantSkipped)
					return nil
				}
				if p != dir {
					walked = append(walked, strings.TrimPrefix(p, dir+"/"))
				}
				return nil
			})
			if err != nil || walkErrs != 1 {
				t.Errorf("WalkDir: %v, %d errors reported; want nil, 1", err, walkErrs)
			}
			if !slices.Equal(walked, want) {
				t.Errorf("WalkDir visits %v, want %v", walked, want)
			}
		})
	}
}

// checkSkipped checks that err is a *SkippedEntriesError naming exactly
// the entries of want (name -> inode), each as a corruption.
func checkSkipped(t *testing.T, what string, err error, want map[string]uint32) {
	t.Helper()
	var se *ext4go.SkippedEntriesError
	if !errors.As(err, &se) {
		t.Errorf("%s: %v, want a *SkippedEntriesError", what, err)
		return
	}
	if !errors.Is(err, ext4go.ErrCorrupt) {
		t.Errorf("%s: %v does not match ErrCorrupt", what, err)
	}
	got := map[string]uint32{}
	for _, e := range se.Entries {
		got[e.Name] = e.Ino
		if !errors.Is(e.Err, ext4go.ErrCorrupt) {
			t.Errorf("%s: %s left out for %v, want a corruption", what, e, e.Err)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: left out %v, want %v", what, got, want)
	}
	for n, ino := range want {
		if got[n] != ino {
			t.Errorf("%s: left out %v, want %v", what, got, want)
			break
		}
	}
}

func names(ents []fs.DirEntry) []string {
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Name()
	}
	return out
}
