package super

// Helpers that build images with mke2fs and read dumpe2fs output.

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
}

// mkfs makes an image of size bytes in a temporary directory with the given
// mke2fs arguments and returns its path.
func mkfs(t testing.TB, size int64, args ...string) string {
	t.Helper()
	needTool(t, "mke2fs")
	path := filepath.Join(t.TempDir(), "fs.img")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	all := append([]string{"-q", "-F", "-E", "lazy_itable_init=1,nodiscard"}, args...)
	all = append(all, path)
	cmd := exec.Command("mke2fs", all...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mke2fs %v: %v\n%s", args, err, out)
	}
	return path
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	needTool(t, name)
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out)
}

// dumpHeader parses `dumpe2fs -h` into key → value.
func dumpHeader(out string) map[string]string {
	m := map[string]string{}
	for line := range strings.Lines(out) {
		if reGroup.MatchString(line) {
			break // per-group part of a full dump
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		m[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return m
}

// dumpGroup is what dumpe2fs prints for one group.
type dumpGroup struct {
	first, last      uint64
	csum, expected   int64 // -1 if absent
	flags            string
	super            int64 // -1 if none
	gdtFirst, gdtEnd int64 // -1 if none; inclusive
	reservedFirst    int64 // -1 if none
	reservedLast     int64
	metaGDT          int64 // -1 if none
	blockBitmap      uint64
	inodeBitmap      uint64
	bbCsum, ibCsum   int64 // -1 if absent
	itFirst, itLast  uint64
	freeBlocks       uint32
	freeInodes       uint32
	dirs             uint32
	unused           int64 // -1 if absent
}

var (
	reGroup    = regexp.MustCompile(`^Group (\d+): \(Blocks (\d+)-(\d+)\)(?: csum 0x([0-9a-f]+))?(?: \(EXPECTED 0x([0-9a-f]+)\))?(?: \[(.*)\])?`)
	reSuper    = regexp.MustCompile(`^  (?:Primary|Backup) superblock at (\d+)`)
	reOldGDT   = regexp.MustCompile(`Group descriptors at (\d+)-(\d+)`)
	reMetaGDT  = regexp.MustCompile(`Group descriptor at (\d+)`)
	reReserved = regexp.MustCompile(`^  Reserved GDT blocks at (\d+)-(\d+)`)
	reBitmap   = regexp.MustCompile(`^  (Block|Inode) bitmap at (\d+)(?: \([^)]*\))?(?:, csum 0x([0-9a-f]+))?`)
	reItable   = regexp.MustCompile(`^  Inode table at (\d+)-(\d+)`)
	reCounts   = regexp.MustCompile(`^  (\d+) free (?:blocks|clusters), (\d+) free inodes, (\d+) directories(?:, (\d+) unused inodes)?`)
)

func atoi(s string) uint64 {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		panic(err)
	}
	return n
}

func hexOr(s string, def int64) int64 {
	if s == "" {
		return def
	}
	n, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		panic(err)
	}
	return int64(n)
}

// dumpGroups parses the per-group part of `dumpe2fs` output.
func dumpGroups(out string) []*dumpGroup {
	var gs []*dumpGroup
	var g *dumpGroup
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := reGroup.FindStringSubmatch(line); m != nil {
			g = &dumpGroup{first: atoi(m[2]), last: atoi(m[3]), csum: hexOr(m[4], -1), expected: hexOr(m[5], -1),
				flags: m[6], super: -1, gdtFirst: -1, gdtEnd: -1, reservedFirst: -1, reservedLast: -1, metaGDT: -1,
				bbCsum: -1, ibCsum: -1, unused: -1}
			gs = append(gs, g)
			continue
		}
		if g == nil {
			continue
		}
		if m := reSuper.FindStringSubmatch(line); m != nil {
			g.super = int64(atoi(m[1]))
		}
		if m := reOldGDT.FindStringSubmatch(line); m != nil {
			g.gdtFirst, g.gdtEnd = int64(atoi(m[1])), int64(atoi(m[2]))
		} else if m := reMetaGDT.FindStringSubmatch(line); m != nil {
			g.metaGDT = int64(atoi(m[1]))
		}
		if m := reReserved.FindStringSubmatch(line); m != nil {
			g.reservedFirst, g.reservedLast = int64(atoi(m[1])), int64(atoi(m[2]))
		}
		if m := reBitmap.FindStringSubmatch(line); m != nil {
			if m[1] == "Block" {
				g.blockBitmap, g.bbCsum = atoi(m[2]), hexOr(m[3], -1)
			} else {
				g.inodeBitmap, g.ibCsum = atoi(m[2]), hexOr(m[3], -1)
			}
		}
		if m := reItable.FindStringSubmatch(line); m != nil {
			g.itFirst, g.itLast = atoi(m[1]), atoi(m[2])
		}
		if m := reCounts.FindStringSubmatch(line); m != nil {
			g.freeBlocks, g.freeInodes, g.dirs = uint32(atoi(m[1])), uint32(atoi(m[2])), uint32(atoi(m[3]))
			if m[4] != "" {
				g.unused = int64(atoi(m[4]))
			}
		}
	}
	return gs
}

// readAt reads n bytes at off from the file at path.
func readAt(t testing.TB, f *os.File, off int64, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	return b
}
