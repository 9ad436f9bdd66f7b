package testutil

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// BadEntry is a directory entry of BadEntriesImage whose inode cannot be
// read.
type BadEntry struct {
	Dir, Name string
	Ino       uint32 // the inode number the entry names
	// Listed says a listing shows it: its entry has a file type, so the
	// kernel's readdir and ext4go's list it without reading the inode
	// (a stat of it fails). Entries without a type, or naming an inode
	// number past the filesystem's, are left out (and reported) by ext4go.
	Listed bool
}

// BadEntriesFixture is what BadEntriesImage made.
type BadEntriesFixture struct {
	Image string
	Good  map[string][]string // directory -> names of the good entries, sorted
	Bad   []BadEntry
}

// BadEntriesImage makes an image (without metadata_csum, so that bytes of
// directory blocks can be edited) with two directories whose entries
// name inodes that cannot be read: d, a linear directory (files a, b, c;
// "unused", an entry without a file type naming inode 999, which is not
// in use, made by debugfs ln; "cleared", a regular file whose inode was
// cleared by debugfs clri; "oob", whose inode number was set past
// s_inodes_count), and h, an htree directory of 300 files with one
// entry, "oob", past s_inodes_count.
func BadEntriesImage(t testing.TB) BadEntriesFixture {
	t.Helper()
	RequireTools(t, "mke2fs", "debugfs", "e2fsck")
	src := t.TempDir()
	fx := BadEntriesFixture{Good: map[string][]string{}}
	write := func(p string) {
		if err := os.WriteFile(filepath.Join(src, p), []byte(p+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"d", "h"} {
		if err := os.Mkdir(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"a", "b", "c", "cleared", "oob"} {
		write("d/" + n)
	}
	fx.Good["d"] = []string{"a", "b", "c"}
	for i := range 300 {
		n := fmt.Sprintf("file-%03d", i)
		write("h/" + n)
		fx.Good["h"] = append(fx.Good["h"], n)
	}
	write("h/oob")
	image := filepath.Join(t.TempDir(), "bad.img")
	Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "1024", "-O", "^metadata_csum", "-N", "1024", "-d", src)
	E2fsckFyD(t, image) // h becomes an htree
	if out := Debugfs(t, image, "stat h"); !strings.Contains(out, "Flags: 0x81000") && !strings.Contains(out, "Flags: 0x1000") {
		t.Fatalf("h is not indexed:\n%s", out)
	}
	inodes := inodesCount(t, image)
	DebugfsWrite(t, image, "ln <999> d/unused", "clri d/cleared")
	fx.Bad = append(fx.Bad,
		BadEntry{Dir: "d", Name: "unused", Ino: 999},
		BadEntry{Dir: "d", Name: "cleared", Ino: inodeOf(t, image, "d/cleared"), Listed: true})
	for _, d := range []string{"d", "h"} {
		SetDirEntryInode(t, image, d, "oob", inodes+5)
		fx.Bad = append(fx.Bad, BadEntry{Dir: d, Name: "oob", Ino: inodes + 5})
	}
	fx.Image = image
	return fx
}

func inodesCount(t testing.TB, image string) uint32 {
	t.Helper()
	m := regexp.MustCompile(`Inode count:\s+(\d+)`).FindStringSubmatch(Dumpe2fs(t, image, "-h"))
	if m == nil {
		t.Fatal("dumpe2fs -h shows no inode count")
	}
	n, _ := strconv.ParseUint(m[1], 10, 32)
	return uint32(n)
}

func inodeOf(t testing.TB, image, p string) uint32 {
	t.Helper()
	m := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(Debugfs(t, image, "stat "+p))
	if m == nil {
		t.Fatalf("no inode number for %s", p)
	}
	n, _ := strconv.ParseUint(m[1], 10, 32)
	return uint32(n)
}

// SetDirEntryInode rewrites the inode number of the entry name in
// directory dir of image (1 KiB blocks, no metadata_csum) to ino.
func SetDirEntryInode(t testing.TB, image, dir, name string, ino uint32) {
	t.Helper()
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const bs = 1024
	for _, field := range strings.Fields(Debugfs(t, image, "blocks "+dir)) {
		blk, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			t.Fatalf("debugfs blocks %s: %q", dir, field)
		}
		b := make([]byte, bs)
		if _, err := f.ReadAt(b, blk*bs); err != nil {
			t.Fatal(err)
		}
		for off := 0; off+8 <= bs; {
			recLen := int(binary.LittleEndian.Uint16(b[off+4:]))
			nameLen := int(b[off+6])
			if recLen < 8 || off+recLen > bs {
				break // an htree index block: not dirents past the dots
			}
			if binary.LittleEndian.Uint32(b[off:]) != 0 && off+8+nameLen <= bs && string(b[off+8:off+8+nameLen]) == name {
				binary.LittleEndian.PutUint32(b[off:], ino)
				if _, err := f.WriteAt(b, blk*bs); err != nil {
					t.Fatal(err)
				}
				return
			}
			off += recLen
		}
	}
	t.Fatalf("no entry %s in %s", name, dir)
}
