//go:build linux

package ext4go_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestCorruptChangeLeavesNoTrace: changes that meet a corruption half way
// (the hostile-image harness found each of these) fail before they change
// anything, with and without the journal: a remove or truncate of a file
// whose blocks its bitmap has free, that names a block twice, or whose
// i_blocks is smaller than what it maps; a create in an inline
// directory whose entry cannot move to a block, in an htree whose root is
// corrupt or in a directory with an entry past the inodes (an inode made
// before the entry failed left its trace); and a writable open of a
// filesystem whose groups share a bitmap (read-only, it opens).
func TestCorruptChangeLeavesNoTrace(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "e2fsck")
	src := t.TempDir()
	f, err := os.Create(filepath.Join(src, "three")) // three one-block extents: (0), (8), (16)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		f.WriteAt(pattern(int64(i), 0, 1024), int64(i)*8192)
	}
	f.Close()
	os.Mkdir(filepath.Join(src, "idir"), 0o755)
	os.WriteFile(filepath.Join(src, "idir", "a"), []byte("a\n"), 0o644) // idir stays inline
	for _, d := range []string{"htree", "lin"} {
		os.Mkdir(filepath.Join(src, d), 0o755)
	}
	for i := range 200 { // an htree once e2fsck -D indexes it
		os.WriteFile(filepath.Join(src, "htree", fmt.Sprintf("entry-%03d", i)), nil, 0o644)
	}
	for i := range 8 { // more than inline data holds: a linear directory in a block
		os.WriteFile(filepath.Join(src, "lin", fmt.Sprintf("file-number-%d", i)), nil, 0o644)
	}
	base := filepath.Join(t.TempDir(), "base.img")
	testutil.Mke2fs(t, base, 16<<20, "-t", "ext4", "-b", "1024", "-O", "^metadata_csum,inline_data", "-d", src)
	testutil.E2fsckFyD(t, base)
	testutil.RequireFsckClean(t, base)
	var blocks []uint64
	for _, m := range regexp.MustCompile(`\((?:\d+)\):(\d+)`).FindAllStringSubmatch(testutil.Debugfs(t, base, "stat three"), -1) {
		b, _ := strconv.ParseUint(m[1], 10, 64)
		blocks = append(blocks, b)
	}
	if len(blocks) != 3 {
		t.Fatalf("three maps %v, want three blocks", blocks)
	}
	truncateTo := func(size int64) func(*ext4go.FS) error {
		return func(fsys *ext4go.FS) error {
			f, err := fsys.OpenFile("three", os.O_RDWR, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(size)
		}
	}
	remove := func(fsys *ext4go.FS) error { return fsys.Remove("three") }
	for _, c := range []struct {
		name  string
		edits []string
		edit  func(t *testing.T, image string) // byte edits
		ops   map[string]func(*ext4go.FS) error
		// openRefused: the writable open itself is refused (and the
		// read-only one is not).
		openRefused bool
	}{
		{name: "block free in the bitmap", edit: func(t *testing.T, image string) {
			// Free in the bitmap and in the group's count alike, so that
			// the group reads as consistent.
			m := regexp.MustCompile(`(?s)Group 0:.*?(\d+) free blocks,`).FindStringSubmatch(testutil.Dumpe2fs(t, image))
			if m == nil {
				t.Fatal("dumpe2fs: no free count of group 0")
			}
			free, _ := strconv.Atoi(m[1])
			testutil.DebugfsWrite(t, image, fmt.Sprintf("freeb %d", blocks[1]), fmt.Sprintf("set_bg 0 free_blocks_count %d", free+1))
		}, ops: map[string]func(*ext4go.FS) error{"remove": remove, "truncate": truncateTo(100)}},
		{name: "block mapped twice", edits: []string{fmt.Sprintf("sif three block[8] %d", blocks[0])}, // extent 1's start
			ops: map[string]func(*ext4go.FS) error{"remove": remove, "truncate": truncateTo(0)}},
		{name: "i_blocks too small", edits: []string{"sif three blocks 2"}, // one block's 512-byte sectors of three
			ops: map[string]func(*ext4go.FS) error{"remove": remove, "truncate": truncateTo(0)}},
		{name: "inline directory entry without a name", edit: func(t *testing.T, image string) {
			// The first entry of the inline directory: i_block holds the
			// parent (4 bytes), then the entries; name_len is byte 6 of one.
			m := regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`).FindStringSubmatch(testutil.Debugfs(t, image, "imap idir"))
			if m == nil {
				t.Fatal("debugfs imap idir: no location")
			}
			blk, _ := strconv.ParseInt(m[1], 10, 64)
			off, _ := strconv.ParseInt(m[2], 16, 64)
			f, err := os.OpenFile(image, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0}, blk*1024+off+0x28+4+6); err != nil {
				t.Fatal(err)
			}
		}, ops: map[string]func(*ext4go.FS) error{
			"create in": func(fsys *ext4go.FS) error { return fsys.WriteFile("idir/new", []byte("n"), 0o644) },
		}},
		{name: "htree root with an unknown hash", edit: func(t *testing.T, image string) {
			root, err := strconv.ParseInt(strings.TrimSpace(testutil.Debugfs(t, image, "bmap htree 0")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(image, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte{0x81}, root*1024+0x1C); err != nil { // dx_root_info.hash_version
				t.Fatal(err)
			}
		}, ops: map[string]func(*ext4go.FS) error{
			"create in": func(fsys *ext4go.FS) error { return fsys.WriteFile("htree/new", []byte("n"), 0o644) },
			"mkdir in":  func(fsys *ext4go.FS) error { return fsys.Mkdir("htree/newdir", 0o755) },
		}},
		{name: "linear directory entry past the inodes", edit: func(t *testing.T, image string) {
			testutil.SetDirEntryInode(t, image, "lin", "file-number-3", 1<<30)
		}, ops: map[string]func(*ext4go.FS) error{
			"create in":  func(fsys *ext4go.FS) error { return fsys.WriteFile("lin/new", []byte("n"), 0o644) },
			"symlink in": func(fsys *ext4go.FS) error { return fsys.Symlink("x", "lin/newlink") },
		}},
		{name: "groups sharing an inode bitmap", openRefused: true, edit: func(t *testing.T, image string) {
			m := regexp.MustCompile(`(?s)Group 0:.*?Inode bitmap at (\d+)`).FindStringSubmatch(testutil.Dumpe2fs(t, image))
			if m == nil {
				t.Fatal("dumpe2fs: no inode bitmap of group 0")
			}
			testutil.DebugfsWrite(t, image, "set_bg 1 inode_bitmap "+m[1], "set_bg 1 checksum calc")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			image := copyImage(t, base)
			if len(c.edits) > 0 {
				testutil.DebugfsWrite(t, image, c.edits...)
			}
			if c.edit != nil {
				c.edit(t, image)
			}
			fsckExit, fsckOut := testutil.E2fsckFN(t, image)
			if fsckExit == 0 && !strings.Contains(fsckOut, "Corrupt group descriptor") {
				// (With bad primary descriptors e2fsck -fn checks the
				// backups and may exit 0.)
				t.Fatalf("e2fsck -fn finds the corruption clean:\n%s", fsckOut)
			}
			if ro, err := ext4go.Open(image, nil); err != nil {
				t.Errorf("read-only open: %v", err)
			} else {
				ro.Close()
			}
			for _, noJournal := range []bool{true, false} {
				work := copyImage(t, image)
				before, err := os.ReadFile(work)
				if err != nil {
					t.Fatal(err)
				}
				fsys, err := ext4go.Open(work, &ext4go.Options{Writable: true, NoJournal: noJournal})
				switch {
				case c.openRefused && !errors.Is(err, ext4go.ErrCorrupt):
					t.Errorf("NoJournal=%v: writable open: %v, want ErrCorrupt", noJournal, err)
				case !c.openRefused && err != nil:
					t.Fatalf("NoJournal=%v: writable open: %v", noJournal, err)
				case err == nil:
					for what, op := range c.ops {
						if err := op(fsys); !errors.Is(err, ext4go.ErrCorrupt) {
							t.Errorf("NoJournal=%v: %s: %v, want ErrCorrupt", noJournal, what, err)
						} else {
							t.Logf("%s: %v", what, err)
						}
					}
					if err := fsys.Close(); err != nil {
						t.Logf("close: %v", err)
					}
				}
				after, err := os.ReadFile(work)
				if err != nil {
					t.Fatal(err)
				}
				allowed := [][2]int64{{1024, 2048}}
				if !noJournal {
					allowed = append(allowed, journalBytes(t, work)...)
				}
				if d := diffOutside(before, after, allowed); d != "" {
					t.Errorf("NoJournal=%v: the failed changes wrote to the image: %s", noJournal, d)
				}
				if exit, out := testutil.E2fsckFN(t, work); exit != fsckExit || fsckProblems(out, work) != fsckProblems(fsckOut, image) {
					t.Errorf("NoJournal=%v: e2fsck -fn changed its verdict: exit %d, was %d\n%s\nwas:\n%s", noJournal, exit, fsckExit, out, fsckOut)
				}
			}
		})
	}
}

// TestRemoveAllOfSecondName: RemoveAll of a name that is a second name of
// the root directory (a corrupt image: a directory entry naming inode 2)
// fails as corruption and removes nothing, where it emptied the root
// before (found by the hostile-image harness). The kernel refuses to
// enter such a directory too (d_splice_alias: ELOOP).
func TestRemoveAllOfSecondName(t *testing.T) {
	img := filepath.Join(t.TempDir(), "loop.img")
	testutil.Mke2fs(t, img, 8<<20, "-t", "ext4")
	testutil.DebugfsWrite(t, img, "mkdir nest", "mkdir nest/a", "write /dev/null keep", "ln <2> /nest/a/root-again")
	before, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nest/a/root-again", "nest/a/root-again/nest"} {
		err := fsys.RemoveAll(name)
		if !errors.Is(err, ext4go.ErrCorrupt) {
			t.Errorf("RemoveAll(%q) = %v, want a corruption", name, err)
		}
	}
	if _, err := fsys.Stat("keep"); err != nil {
		t.Errorf("the root's file is gone: %v", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	// The superblock (mount time and count) and the journal may change.
	allowed := append([][2]int64{{1024, 2048}}, journalBytes(t, img)...)
	if d := diffOutside(before, after, allowed); d != "" {
		t.Errorf("the failed removals wrote to the image: %s", d)
	}
}
