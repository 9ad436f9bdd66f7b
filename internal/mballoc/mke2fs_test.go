package mballoc

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// dumpInfo is what dumpe2fs lists of a filesystem: geometry, per-group
// free counts and free block ranges.
type dumpInfo struct {
	gm     Geometry
	free   []uint32
	ranges [][][2]uint64 // per group, free block ranges (inclusive)
}

func parseDumpe2fs(t *testing.T, out []byte) dumpInfo {
	var d dumpInfo
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			t.Fatalf("dumpe2fs number %q: %v", s, err)
		}
		return v
	}
	reGroup := regexp.MustCompile(`^Group (\d+):`)
	reFree := regexp.MustCompile(`^\s+(\d+) free (blocks|clusters),`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	cur := -1
	for sc.Scan() {
		l := sc.Text()
		k, v, _ := strings.Cut(l, ":")
		switch k {
		case "Block count":
			d.gm.BlocksCount = num(v)
		case "Block size":
			d.gm.BlockSize = uint32(num(v))
		case "First block":
			d.gm.FirstDataBlock = uint32(num(v))
		case "Blocks per group":
			d.gm.BlocksPerGroup = uint32(num(v))
		case "Inodes per group":
			d.gm.InodesPerGroup = uint32(num(v))
		case "Flex block group size":
			n := num(v)
			for n > 1 {
				d.gm.LogGroupsPerFlex++
				n >>= 1
			}
		}
		if m := reGroup.FindStringSubmatch(l); m != nil {
			cur = int(num(m[1]))
			d.free = append(d.free, 0)
			d.ranges = append(d.ranges, nil)
		}
		if cur < 0 {
			continue
		}
		if m := reFree.FindStringSubmatch(l); m != nil {
			d.free[cur] = uint32(num(m[1]))
		}
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "Free blocks:"); ok {
			for _, r := range strings.Split(s, ",") {
				r = strings.TrimSpace(r)
				if r == "" {
					continue
				}
				a, b, found := strings.Cut(r, "-")
				if !found {
					b = a
				}
				d.ranges[cur] = append(d.ranges[cur], [2]uint64{num(a), num(b)})
			}
		}
	}
	return d
}

// TestAgainstMke2fs builds the allocator on the bitmaps of real
// filesystems made by mke2fs (read through dumpe2fs), checks the counters
// match, and allocates every free block: each must be one dumpe2fs lists as
// free, and all of them must be handed out.
func TestAgainstMke2fs(t *testing.T) {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		t.Skip("mke2fs not installed:", err)
	}
	for _, c := range []struct {
		bs   int
		size string
	}{{1024, "40M"}, {4096, "300M"}} {
		t.Run(fmt.Sprint(c.bs), func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "fs.img")
			if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", fmt.Sprint(c.bs), img, c.size).CombinedOutput(); err != nil {
				t.Fatalf("mke2fs: %v: %s", err, out)
			}
			out, err := exec.Command("dumpe2fs", img).Output()
			if err != nil {
				t.Fatalf("dumpe2fs: %v", err)
			}
			d := parseDumpe2fs(t, out)
			s, err := NewMemStore(d.gm, MemStoreOptions{Bare: true})
			if err != nil {
				t.Fatal(err)
			}
			free := map[uint64]bool{}
			var total uint64
			for gi, rs := range d.ranges {
				for _, r := range rs {
					for b := r[0]; b <= r[1]; b++ {
						free[b] = true
					}
				}
				total += uint64(d.free[gi])
			}
			// Mark everything dumpe2fs does not list as free.
			for b := uint64(d.gm.FirstDataBlock); b < d.gm.BlocksCount; b++ {
				if !free[b] {
					if err := s.MarkUsed(b, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			for gi, f := range d.free {
				if got, _ := s.GroupFree(uint32(gi)); got != f {
					t.Fatalf("group %d: %d free in the ranges, dumpe2fs counts %d", gi, got, f)
				}
			}
			a, err := New(d.gm, s, Config{CPUs: 2})
			if err != nil {
				t.Fatal(err)
			}
			if uint64(a.FreeClusters()) != total {
				t.Fatalf("free clusters %d, dumpe2fs %d", a.FreeClusters(), total)
			}
			var got uint64
			for ino := uint32(12); ; ino++ {
				e, err := a.Allocate(nil, Request{Inode: ino, Len: 100, Flags: FlagData, FileSize: 400 << 10})
				if err != nil {
					break
				}
				for b := e.Start; b < e.End(); b++ {
					if !free[b] {
						t.Fatalf("allocated block %d which mke2fs uses", b)
					}
					delete(free, b)
				}
				got += uint64(e.Len)
			}
			a.DiscardPreallocations()
			for {
				e, err := a.Allocate(nil, Request{Len: 1})
				if err != nil {
					break
				}
				if !free[e.Start] {
					t.Fatalf("allocated block %d twice or which mke2fs uses", e.Start)
				}
				delete(free, e.Start)
				got++
			}
			if got != total || len(free) != 0 {
				t.Fatalf("allocated %d of %d free blocks; %d never handed out", got, total, len(free))
			}
			if err := a.CheckConsistency(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
