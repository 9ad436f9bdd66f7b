package blockmap

import (
	"bytes"
	"github.com/ext4go/ext4go/internal/testutil"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/inode"
)

// This file checks Map against block maps mke2fs -d writes for ext2 and
// ext3, comparing with debugfs's stat listing and the source files' data.

// writeSparse writes a chunk of non-zero random bytes at each offset.
func writeSparse(t *testing.T, path string, total int64, chunk int, offsets []int64, r *rand.Rand) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, chunk)
	for _, off := range offsets {
		for i := range buf {
			buf[i] = byte(r.Uint32()) | 1
		}
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(total); err != nil {
		t.Fatal(err)
	}
}

var (
	dataRE  = regexp.MustCompile(`^\((\d+)(?:-(\d+))?\):(\d+)(?:-(\d+))?$`)
	metaRE  = regexp.MustCompile(`^\((IND|DIND|TIND)\):(\d+)$`)
	imapRE  = regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`)
	levelOf = map[string]int{"IND": 1, "DIND": 2, "TIND": 3}
)

// parseBlocks turns the BLOCKS: section of debugfs's stat into Runs.
func parseBlocks(t *testing.T, stat string) []Run {
	_, list, ok := strings.Cut(stat, "BLOCKS:\n")
	if !ok {
		t.Fatalf("no BLOCKS in %q", stat)
	}
	list, _, _ = strings.Cut(list, "\n")
	var out []Run
	for _, tok := range strings.Split(list, ", ") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		n := func(s string) uint64 { v, _ := strconv.ParseUint(s, 10, 64); return v }
		if m := metaRE.FindStringSubmatch(tok); m != nil {
			out = append(out, Run{Level: levelOf[m[1]], Physical: n(m[2]), Len: 1})
			continue
		}
		m := dataRE.FindStringSubmatch(tok)
		if m == nil {
			t.Fatalf("unparsed BLOCKS entry %q", tok)
		}
		first, last := n(m[1]), n(m[1])
		if m[2] != "" {
			last = n(m[2])
		}
		out = append(out, Run{Logical: uint32(first), Physical: n(m[3]), Len: uint32(last - first + 1)})
	}
	return out
}

type fsInfo struct {
	bs, inodeSize     int
	firstData, blocks uint64
	f                 *os.File
}

func openImage(t *testing.T, img string) *fsInfo {
	out := testutil.Run(t, "dumpe2fs", "-h", img)
	field := func(name string) uint64 {
		m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no %q in dumpe2fs output", name)
		}
		v, _ := strconv.ParseUint(m[1], 10, 64)
		return v
	}
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &fsInfo{bs: int(field("Block size")), inodeSize: int(field("Inode size")),
		firstData: field("First block"), blocks: field("Block count"), f: f}
}

func (fi *fsInfo) read(p uint64) ([]byte, error) {
	b := make([]byte, fi.bs)
	_, err := fi.f.ReadAt(b, int64(p)*int64(fi.bs))
	return b, err
}

func (fi *fsInfo) inode(t *testing.T, imap string) *inode.Inode {
	m := imapRE.FindStringSubmatch(imap)
	if m == nil {
		t.Fatalf("bad imap output %q", imap)
	}
	blk, _ := strconv.ParseInt(m[1], 10, 64)
	off, _ := strconv.ParseInt(m[2], 16, 64)
	b := make([]byte, fi.inodeSize)
	if _, err := fi.f.ReadAt(b, blk*int64(fi.bs)+off); err != nil {
		t.Fatal(err)
	}
	in, err := inode.Decode(b, fi.inodeSize)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func TestAgainstImages(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "dumpe2fs")
	src := filepath.Join(t.TempDir(), "src")
	os.MkdirAll(src, 0o755)
	r := rand.New(rand.NewPCG(1, 2))
	// 1 KiB blocks: direct, single (12..267), double (268..65803) and triple
	// indirect (from 65804, i.e. 64.3 MiB).
	writeSparse(t, filepath.Join(src, "big"), 72<<20, 5000,
		[]int64{0, 100 << 10, 1 << 20, 10 << 20, 60 << 20, 65 << 20, 70 << 20, 72<<20 - 5000}, r)
	writeSparse(t, filepath.Join(src, "dense"), 5<<20, 5<<20, []int64{0}, r)
	writeSparse(t, filepath.Join(src, "small"), 3000, 3000, []int64{0}, r)
	writeSparse(t, filepath.Join(src, "empty"), 0, 0, nil, r)
	// 4 KiB blocks reach the triple indirect range at 4 GiB + 4 MiB.
	writeSparse(t, filepath.Join(src, "far"), 5<<30, 8192, []int64{0, 5 << 20, 5<<30 - 8192}, r)
	files := []string{"big", "dense", "small", "empty", "far"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"ext2-1k", []string{"-t", "ext2", "-b", "1024"}},
		{"ext3-4k", []string{"-t", "ext3", "-b", "4096"}},
		{"ext2-2k", []string{"-t", "ext2", "-b", "2048"}},
		{"ext2-64k", []string{"-t", "ext2", "-b", "65536"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			testutil.Run(t, "mke2fs", append(append([]string{"-q", "-F"}, c.args...), "-d", src, img, "256M")...)
			fi := openImage(t, img)
			var cmds []string
			names := append([]string(nil), files...)
			for _, f := range files {
				cmds = append(cmds, "stat /"+f, "imap /"+f)
			}
			for _, n := range []string{"<7>", "<8>"} {
				cmds = append(cmds, "stat "+n, "imap "+n)
				names = append(names, n)
			}
			out := testutil.DebugfsBatch(t, img, cmds)
			for i, name := range names {
				stat := out[cmds[2*i]]
				if !strings.Contains(stat, "BLOCKS:") {
					if name == "<8>" || name == "<7>" {
						continue // no journal or no resize inode
					}
					t.Fatalf("%s: stat %q", name, stat)
				}
				in := fi.inode(t, out[cmds[2*i+1]])
				if in.HasFlag(inode.FlagExtents) {
					t.Fatalf("%s: uses extents", name)
				}
				mp := &Map{Root: in.Block[:], Read: fi.read, BlockSize: fi.bs,
					FirstDataBlock: fi.firstData, BlocksCount: fi.blocks, Ino: 12}
				checkFile(t, fi, mp, name, filepath.Join(src, name), in.Size, parseBlocks(t, stat))
			}
		})
	}
}

func checkFile(t *testing.T, fi *fsInfo, mp *Map, name, srcPath string, size uint64, want []Run) {
	var got []Run
	if err := mp.Walk(func(r Run) error { got = append(got, r); return nil }); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := range got {
		if got[i].Level > 0 {
			got[i].Logical = 0 // debugfs does not print it
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d runs, debugfs %d:\n%v\n%v", name, len(got), len(want), got, want)
	}
	levels := map[int]int{}
	for i := range got {
		levels[got[i].Level]++
		if got[i] != want[i] {
			t.Errorf("%s: run %d is %+v, debugfs %+v", name, i, got[i], want[i])
		}
	}
	t.Logf("%s: %d runs, indirect blocks by level %v", name, len(got), levels)
	if strings.HasPrefix(name, "<") {
		return
	}
	// Read the file back through Lookup and compare with the source.
	src, err := os.Open(srcPath)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bs := uint64(fi.bs)
	nblocks := (size + bs - 1) / bs
	buf := make([]byte, bs)
	for l := uint64(0); l < nblocks; {
		m, err := mp.Lookup(uint32(l))
		if err != nil {
			t.Fatalf("%s: lookup %d: %v", name, l, err)
		}
		n := min(m.Len, nblocks-l)
		if m.Hole() {
			// The source must have no data there; SEEK_DATA avoids reading
			// gigabytes of zeros.
			const seekData = 3
			if off, err := src.Seek(int64(l*bs), seekData); err == nil && uint64(off) < (l+n)*bs {
				clear(buf)
				src.ReadAt(buf[:min(bs, size-uint64(off))], off)
				if !bytes.Equal(buf, make([]byte, bs)) {
					t.Fatalf("%s: hole at block %d but the source has data at byte %d", name, l, off)
				}
			}
		} else {
			for i := range n {
				got, _ := fi.read(m.Physical + i)
				clear(buf)
				if _, err := src.ReadAt(buf, int64((l+i)*bs)); err != nil && err != io.EOF {
					t.Fatal(err)
				}
				if !bytes.Equal(got, buf) {
					t.Fatalf("%s: block %d differs from the source", name, l+i)
				}
			}
		}
		l += n
	}
}
