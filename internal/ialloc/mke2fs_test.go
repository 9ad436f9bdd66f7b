package ialloc

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/mballoc"
)

// TestAgainstMke2fs loads the inode bitmaps and counts of a filesystem made
// by mke2fs (through dumpe2fs), with mballoc's counts for the blocks, and
// allocates every free inode: each must be one dumpe2fs lists as free.
func TestAgainstMke2fs(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("mke2fs not installed:", err)
	}
	img := filepath.Join(t.TempDir(), "fs.img")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-N", "4000", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v: %s", err, out)
	}
	out, err := exec.Command("dumpe2fs", img).Output()
	if err != nil {
		t.Fatalf("dumpe2fs: %v", err)
	}
	var geo Geometry
	var bs, bpg, blocks uint64
	var freeCounts, dirCounts []uint32
	freeInodes := map[uint32]bool{}
	reCounts := regexp.MustCompile(`^\s+\d+ free blocks, (\d+) free inodes, (\d+) directories`)
	num := func(s string) uint64 { v, _ := strconv.ParseUint(strings.TrimSpace(s), 10, 64); return v }
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Inodes per group":
			geo.InodesPerGroup = uint32(num(v))
		case "Blocks per group":
			bpg = num(v)
		case "Block size":
			bs = num(v)
		case "Block count":
			blocks = num(v)
		case "First inode":
			geo.FirstIno = uint32(num(v))
		case "Flex block group size":
			for n := num(v); n > 1; n >>= 1 {
				geo.LogGroupsPerFlex++
			}
		}
		if m := reCounts.FindStringSubmatch(l); m != nil {
			freeCounts = append(freeCounts, uint32(num(m[1])))
			dirCounts = append(dirCounts, uint32(num(m[2])))
		}
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "Free inodes:"); ok {
			for _, r := range strings.Split(s, ",") {
				if r = strings.TrimSpace(r); r == "" {
					continue
				}
				a, b, found := strings.Cut(r, "-")
				if !found {
					b = a
				}
				for i := num(a); i <= num(b); i++ {
					freeInodes[uint32(i)] = true
				}
			}
		}
	}
	geo.Groups = uint32(len(freeCounts))
	geo.ClustersPerGroup = uint32(bpg)
	s := NewMemStore(geo)
	for gi := range s.groups {
		mg := &s.groups[gi]
		for i := uint32(0); i < geo.InodesPerGroup; i++ {
			ino := uint32(gi)*geo.InodesPerGroup + i + 1
			if freeInodes[ino] {
				mg.bitmap[i/8] &^= 1 << (i % 8)
			} else {
				mg.bitmap[i/8] |= 1 << (i % 8)
			}
		}
		mg.free, mg.dirs = freeCounts[gi], dirCounts[gi]
	}
	gm := mballoc.GeometryFor(blocks*bs, uint32(bs))
	ms, err := mballoc.NewMemStore(gm, mballoc.MemStoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocksAlloc, err := mballoc.New(gm, ms, mballoc.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(geo, s, blocksAlloc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Dirs() != 2 { // root and lost+found
		t.Fatalf("%d directories, want 2", a.Dirs())
	}
	root := NewDir(2, 0, true, false)
	n := len(freeInodes)
	for i := 0; i < n; i++ {
		ino, err := a.Allocate(nil, root, i%7 == 0, []byte{byte(i), byte(i >> 8)})
		if err != nil {
			t.Fatalf("inode %d of %d: %v", i, n, err)
		}
		if !freeInodes[ino] {
			t.Fatalf("inode %d handed out but mke2fs uses it (or twice)", ino)
		}
		delete(freeInodes, ino)
	}
	if _, err := a.Allocate(nil, root, false, nil); err != ErrNoSpace || a.FreeInodes() != 0 {
		t.Fatalf("after all: %v, %d free", err, a.FreeInodes())
	}
}
