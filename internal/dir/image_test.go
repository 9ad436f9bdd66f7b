package dir

// Checks against real directories made by mke2fs -d, by the kernel (loop
// mount) and re-indexed by e2fsck -fyD, cross-checked with debugfs.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/testutil"
)

const (
	testUUID     = "e4e4e4e4-0123-4567-89ab-cdef01234567"
	testHashSeed = "5eed5eed-7654-3210-fedc-ba9876543210"
)

func needTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"mke2fs", "e2fsck", "debugfs", "dumpe2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
}

// run runs a tool and returns its stdout; okCodes are accepted exit codes
// besides 0.
func run(t testing.TB, okCodes []int, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME=1700000000")
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		for _, c := range okCodes {
			if ee.ExitCode() == c {
				return out.Bytes()
			}
		}
	}
	if err != nil {
		t.Fatalf("%s %q: %v\n%s%s", name, args, err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

// image is an ext4 image file with the superblock facts the walkers need.
type image struct {
	path   string
	data   []byte
	f      Format
	fsSeed uint32 // metadata_csum seed (s_checksum_seed or crc32c(~0, uuid))
	sb     map[string]string
}

func loadImage(t testing.TB, path string) *image {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	im := &image{path: path, data: data, sb: map[string]string{}}
	for _, line := range strings.Split(string(run(t, nil, "dumpe2fs", "-h", path)), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			im.sb[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	bs, _ := strconv.Atoi(im.sb["Block size"])
	ic, _ := strconv.Atoi(im.sb["Inode count"])
	feat := " " + im.sb["Filesystem features"] + " "
	im.f = Format{
		BlockSize:    bs,
		FileType:     strings.Contains(feat, " filetype "),
		Csum:         strings.Contains(feat, " metadata_csum "),
		LargeDir:     strings.Contains(feat, " large_dir "),
		HashSeed:     uuidSeed(im.sb["Directory Hash Seed"]), // absent when null
		HashUnsigned: strings.Contains(im.sb["Filesystem flags"], "unsigned_directory_hash"),
		InodesCount:  uint32(ic),
	}
	if s, ok := im.sb["Checksum seed"]; ok {
		v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
		im.fsSeed = uint32(v)
	} else {
		u := uuidSeed(im.sb["Filesystem UUID"])
		var raw [16]byte
		for i, w := range u {
			binary.LittleEndian.PutUint32(raw[4*i:], w)
		}
		im.fsSeed = csum.CRC32C(0xFFFFFFFF, raw[:])
	}
	return im
}

func (im *image) debugfs(t testing.TB, cmd string) []byte {
	t.Helper()
	return run(t, nil, "debugfs", "-R", cmd, im.path)
}

var (
	reIno   = regexp.MustCompile(`Inode: (\d+)`)
	reGen   = regexp.MustCompile(`Generation: (\d+)`)
	reFlags = regexp.MustCompile(`Flags: 0x([0-9a-f]+)`)
	reSize  = regexp.MustCompile(`Size: (\d+)`)
	reImap  = regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`)
)

func atoiMatch(t testing.TB, re *regexp.Regexp, s []byte, base int) uint64 {
	t.Helper()
	m := re.FindSubmatch(s)
	if m == nil {
		t.Fatalf("%v not found in %s", re, s)
	}
	v, err := strconv.ParseUint(string(m[1]), base, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type dirInode struct {
	ino, gen uint32
	flags    uint32
	size     uint64
}

func (im *image) stat(t testing.TB, path string) dirInode {
	out := im.debugfs(t, "stat "+path)
	return dirInode{
		ino:   uint32(atoiMatch(t, reIno, out, 10)),
		gen:   uint32(atoiMatch(t, reGen, out, 10)),
		flags: uint32(atoiMatch(t, reFlags, out, 16)),
		size:  atoiMatch(t, reSize, out, 10),
	}
}

// dir returns a Dir reading path's blocks from the image.
func (im *image) dir(t testing.TB, path string) *Dir {
	t.Helper()
	st := im.stat(t, path)
	var phys []uint64
	for _, w := range strings.Fields(string(im.debugfs(t, "blocks "+path))) {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			t.Fatalf("blocks %s: %q", path, w)
		}
		phys = append(phys, v)
	}
	bs := uint64(im.f.BlockSize)
	if uint64(len(phys)) != st.size/bs {
		t.Fatalf("%s: %d blocks for size %d", path, len(phys), st.size)
	}
	return &Dir{
		Format:   im.f,
		NBlocks:  uint32(len(phys)),
		Indexed:  st.flags&0x1000 != 0,
		CsumSeed: inode.Seed(im.fsSeed, st.ino, st.gen),
		Ino:      st.ino,
		Read: func(lblk uint32) ([]byte, error) {
			p := phys[lblk] * bs
			return im.data[p : p+bs], nil
		},
	}
}

// oddNames are names exercising every byte-level corner: all lengths up to
// 255, non-ASCII UTF-8, invalid UTF-8 with bytes ≥ 0x80 (signed and unsigned
// hashing differ on them), spaces, quotes and control bytes.
func oddNames(n int) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	add := func(b []byte) {
		if len(b) == 0 || len(b) > 255 || bytes.ContainsAny(b, "/\x00") || string(b) == "." || string(b) == ".." || seen[string(b)] {
			return
		}
		seen[string(b)] = true
		out = append(out, b)
	}
	for l := 1; l <= 255; l++ {
		add(bytes.Repeat([]byte{'a' + byte(l%26)}, l))
	}
	pieces := []string{"é", "日本語", "\U0001F600", "\xff", "\x80", "\xfe\xfd", "ü", " ", "'", "\"", "#", "\t", "-", "\x7f", "\xc0\xaf"}
	for i := 0; len(out) < n; i++ {
		var b []byte
		b = fmt.Appendf(b, "%d", i)
		for j := 0; j < i%7; j++ {
			b = append(b, pieces[(i*7+j)%len(pieces)]...)
		}
		if i%13 == 0 {
			b = append(b, bytes.Repeat([]byte{0x80 + byte(i%128)}, 255-len(b))...)
		}
		add(b)
	}
	return out
}

func bigNames(n int) [][]byte {
	var out [][]byte
	for i := range n {
		b := fmt.Appendf(nil, "n%05d_", i)
		b = append(b, bytes.Repeat([]byte{0xc3, 0xa9, 0xff}, i%7)...)
		b = append(b, bytes.Repeat([]byte{'x'}, i%200)...)
		out = append(out, b)
	}
	return out
}

func touchAll(t testing.TB, dir string, names [][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		f, err := os.Create(filepath.Join(dir, string(n)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// mountAndFill loop-mounts the image and creates names in a new directory
// rel with the kernel. It reports false if mounting is not possible here.
func mountAndFill(t testing.TB, img, rel string, names [][]byte) bool {
	t.Helper()
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("no loop mount (%s); skipping kernel-made directories", why)
		return false
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Logf("loop mount unavailable (%v: %s); skipping kernel-made directories", err, out)
		return false
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v %s", err, out)
		}
	}()
	touchAll(t, filepath.Join(mnt, rel), names)
	return true
}

// verifyDir checks a directory read from the image against the names it
// must hold: iteration, lookups of every name and of absent ones, the leaf
// each name's hash selects, checksums, and debugfs's htree dump.
func verifyDir(t *testing.T, im *image, path string, want [][]byte) {
	t.Helper()
	d := im.dir(t, path)
	got := map[string]Entry{}
	err := d.Iterate(func(_ uint32, _ int, e Entry) error {
		if _, dup := got[string(e.Name)]; dup {
			return fmt.Errorf("duplicate %q", e.Name)
		}
		got[string(e.Name)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("%s: Iterate: %v", path, err)
	}
	if len(got) != len(want)+2 || got["."].Inode != d.Ino {
		t.Fatalf("%s: Iterate found %d names (. = %d), want %d", path, len(got), got["."].Inode, len(want)+2)
	}
	for _, n := range append(want, []byte("."), []byte("..")) {
		e, ok := got[string(n)]
		if !ok {
			t.Fatalf("%s: %q missing from Iterate", path, n)
		}
		r, err := d.Lookup(n)
		if err != nil || r.Inode != e.Inode || !bytes.Equal(r.Name, n) {
			t.Fatalf("%s: Lookup(%q) = %+v, %v; want inode %d", path, n, r, err, e.Inode)
		}
		if im.f.FileType && e.FileType == FTUnknown {
			t.Fatalf("%s: %q has no file type", path, n)
		}
	}
	for _, n := range []string{"absent", "n00001_", "a", string(want[0]) + "x"} {
		if _, ok := got[n]; ok {
			continue
		}
		if _, err := d.Lookup([]byte(n)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: Lookup(%q) of an absent name: %v", path, n, err)
		}
	}
	if !d.Indexed {
		return
	}
	root, leaves, err := d.DxLeaves()
	if err != nil {
		t.Fatalf("%s: DxLeaves: %v", path, err)
	}
	eff := EffectiveVersion(root.HashVersion, im.f.HashUnsigned)
	ours := map[string][2]uint32{}
	n := 0
	for _, l := range leaves {
		b, _ := d.Read(l.Block)
		if err := VerifyLeafChecksum(b, im.f, d.CsumSeed); err != nil {
			t.Fatalf("%s: leaf %d: %v", path, l.Block, err)
		}
		blk, err := ParseBlock(b, im.f)
		if err != nil {
			t.Fatalf("%s: leaf %d: %v", path, l.Block, err)
		}
		for _, e := range blk.Entries() {
			h, m := MustHash(e.Name, eff, im.f.HashSeed)
			if !l.Holds(h) {
				t.Fatalf("%s: %q hash %#x is outside leaf %+v", path, e.Name, h, l)
			}
			ours[string(e.Name)] = [2]uint32{h, m}
			n++
		}
	}
	if n != len(want) {
		t.Fatalf("%s: leaves hold %d names, want %d", path, n, len(want))
	}

	// debugfs's dump: root info and the hash of every listed name.
	dump := im.debugfs(t, "htree "+path)
	for _, kv := range [][2]string{
		{"Hash Version", fmt.Sprint(root.HashVersion)},
		{"Indirect levels", fmt.Sprint(root.IndirectLevels)},
		{"Number of entries (count)", fmt.Sprint(len(root.Entries))},
		{"Number of entries (limit)", fmt.Sprint(root.Limit)},
	} {
		if !bytes.Contains(dump, []byte(kv[0]+": "+kv[1]+"\n")) {
			t.Errorf("%s: debugfs htree lacks %q", path, kv[0]+": "+kv[1])
		}
	}
	if im.f.Csum && !bytes.Contains(dump, fmt.Appendf(nil, "Checksum: %#08x\n", root.Checksum)) {
		t.Errorf("%s: debugfs htree root checksum differs from %#08x", path, root.Checksum)
	}
	matched := 0
	for _, m := range reLeafEntry.FindAllSubmatchIndex(dump, -1) {
		rest := dump[m[1]:]
		end := bytes.Index(rest, []byte("   "))
		if end < 0 {
			continue
		}
		name := rest[:end]
		hm, ok := ours[string(name)]
		if !ok {
			continue // a name the dump format cannot delimit
		}
		h, _ := strconv.ParseUint(string(dump[m[2]:m[3]]), 16, 32)
		mi, _ := strconv.ParseUint(string(dump[m[4]:m[5]]), 16, 32)
		if uint32(h) != hm[0] || uint32(mi) != hm[1] {
			t.Fatalf("%s: %q: debugfs hash %#x-%#x, ours %#x-%#x", path, name, h, mi, hm[0], hm[1])
		}
		matched++
	}
	if matched < len(want)*9/10 {
		t.Errorf("%s: only %d of %d names matched in debugfs htree output", path, matched, len(want))
	}
	t.Logf("%s: %d names, %d leaves, %d levels, hash %d (effective %d), %d debugfs hashes matched",
		path, len(want), len(leaves), root.IndirectLevels+1, root.HashVersion, eff, matched)
}

var reLeafEntry = regexp.MustCompile(`(?m)\d+ 0x([0-9a-f]{8})-([0-9a-f]{8}) \(\d+\) `)

func TestImageHtree(t *testing.T) {
	needTools(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	odd := oddNames(1000)
	touchAll(t, filepath.Join(src, "odd"), odd)
	small := [][]byte{[]byte("one"), []byte("two"), []byte("\xff\xfe")}
	touchAll(t, filepath.Join(src, "small"), small)
	img := filepath.Join(tmp, "img")
	run(t, nil, "mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-N", "16384", "-O", "large_dir",
		"-U", testUUID, "-E", "hash_seed="+testHashSeed, "-d", src, img, "48M")

	dirs := map[string][][]byte{"/odd": odd, "/small": small}
	big := bigNames(10000)
	if mountAndFill(t, img, "big", big) {
		dirs["/big"] = big
		// The kernel built this htree itself: check it before e2fsck.
		im := loadImage(t, img)
		t.Run("kernel", func(t *testing.T) { verifyDir(t, im, "/big", big) })
	}

	variants := []struct {
		name, alg string
		flags     int
		zeroSeed  bool
	}{
		{"half_md4", "half_md4", 1, false},
		{"half_md4_unsigned", "half_md4", 2, false},
		{"tea", "tea", 1, false},
		{"tea_unsigned", "tea", 2, false},
		{"legacy", "legacy", 1, false},
		{"legacy_unsigned", "legacy", 2, false},
		{"half_md4_zero_seed", "half_md4", 1, true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			cmds := fmt.Sprintf("ssv def_hash_version %s\nssv flags %d\n", v.alg, v.flags)
			if v.zeroSeed {
				cmds += "ssv hash_seed null\n"
			}
			cf := filepath.Join(tmp, "cmds")
			os.WriteFile(cf, []byte(cmds), 0o644)
			run(t, nil, "debugfs", "-w", "-f", cf, img)
			run(t, []int{1}, "e2fsck", "-fyD", img)
			run(t, nil, "e2fsck", "-fn", img)
			im := loadImage(t, img)
			if v.zeroSeed != (im.f.HashSeed == [4]uint32{}) || im.f.HashUnsigned != (v.flags == 2) {
				t.Fatalf("superblock not as set: %+v", im.f)
			}
			for path, want := range dirs {
				verifyDir(t, im, path, want)
			}
			if !im.f.Csum {
				t.Fatal("expected metadata_csum")
			}
		})
	}
}

// TestImageDxHash compares Hash with debugfs's dx_hash for many names, all
// six versions, a zero and a set seed.
func TestImageDxHash(t *testing.T) {
	needTools(t)
	tmp := t.TempDir()
	img := filepath.Join(tmp, "img")
	run(t, nil, "mke2fs", "-q", "-F", "-t", "ext4", img, "4M")
	var sample [][]byte
	for _, n := range append(oddNames(600), bigNames(300)...) {
		// dx_hash takes the name as one command-line word.
		if bytes.ContainsAny(n, " \t\"'#\\\x7f") || n[0] == '-' {
			continue
		}
		sample = append(sample, n)
	}
	type job struct {
		name    []byte
		version int
		seed    string
	}
	var jobs []job
	var cmds bytes.Buffer
	for _, seed := range []string{"", testHashSeed} {
		for v := HashLegacy; v <= HashTeaUnsigned; v++ {
			for _, n := range sample {
				jobs = append(jobs, job{n, v, seed})
				// -h takes the number: debugfs 1.47 does not know the
				// *_unsigned names and would silently use legacy.
				fmt.Fprintf(&cmds, "dx_hash -h %d", v)
				if seed != "" {
					fmt.Fprintf(&cmds, " -s %s", seed)
				}
				fmt.Fprintf(&cmds, " %s\n", n)
			}
		}
	}
	cf := filepath.Join(tmp, "cmds")
	os.WriteFile(cf, cmds.Bytes(), 0o644)
	out := run(t, nil, "debugfs", "-f", cf, img)
	re := regexp.MustCompile(`Hash of .* is 0x([0-9a-f]+) \(minor 0x([0-9a-f]+)\)\n`)
	ms := re.FindAllSubmatch(out, -1)
	if len(ms) != len(jobs) {
		t.Fatalf("%d dx_hash results for %d commands", len(ms), len(jobs))
	}
	for i, j := range jobs {
		var seed [4]uint32
		if j.seed != "" {
			seed = uuidSeed(j.seed)
		}
		h, m := MustHash(j.name, j.version, seed)
		wh, _ := strconv.ParseUint(string(ms[i][1]), 16, 32)
		wm, _ := strconv.ParseUint(string(ms[i][2]), 16, 32)
		if h != uint32(wh) || m != uint32(wm) {
			t.Fatalf("Hash(%q, %d, %q) = %#x-%#x, debugfs %#x-%#x", j.name, j.version, j.seed, h, m, wh, wm)
		}
	}
	t.Logf("%d hashes match debugfs", len(jobs))
}

// TestImageNoFiletype reads old-style dirents (no file type) without
// metadata_csum.
func TestImageNoFiletype(t *testing.T) {
	needTools(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	odd := oddNames(500)
	touchAll(t, filepath.Join(src, "odd"), odd)
	img := filepath.Join(tmp, "img")
	run(t, nil, "mke2fs", "-q", "-F", "-t", "ext4", "-O", "^metadata_csum,^filetype", "-b", "1024", "-d", src, img, "8M")
	run(t, []int{1}, "e2fsck", "-fyD", img)
	im := loadImage(t, img)
	if im.f.FileType || im.f.Csum {
		t.Fatalf("features: %+v", im.f)
	}
	verifyDir(t, im, "/odd", odd)
	d := im.dir(t, "/odd")
	d.Iterate(func(_ uint32, _ int, e Entry) error {
		if e.FileType != 0 {
			t.Fatalf("%q: file type %d without the feature", e.Name, e.FileType)
		}
		return nil
	})
}

// TestImageInline reads inline-data directories: one mke2fs -d made (all in
// i_block) and one the kernel spilled into system.data.
func TestImageInline(t *testing.T) {
	needTools(t)
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	tiny := [][]byte{[]byte("a"), []byte("\xe9")}
	touchAll(t, filepath.Join(src, "tiny"), tiny)
	img := filepath.Join(tmp, "img")
	run(t, nil, "mke2fs", "-q", "-F", "-t", "ext4", "-O", "inline_data", "-I", "256", "-b", "1024", "-d", src, img, "8M")
	dirs := map[string][][]byte{"/tiny": tiny}
	spill := [][]byte{[]byte("aa"), []byte("bbbbbbbb"), []byte("cccccccccccccccc"), []byte("dd"), []byte("ee"), []byte("ffffffffffff"), []byte("g\xff")}
	if mountAndFill(t, img, "spill", spill) {
		dirs["/spill"] = spill
	}
	im := loadImage(t, img)
	sawEA := false
	for path, want := range dirs {
		st := im.stat(t, path)
		if st.flags&0x10000000 == 0 {
			t.Fatalf("%s is not inline (flags %#x)", path, st.flags)
		}
		m := reImap.FindSubmatch(im.debugfs(t, "imap "+path))
		blk, _ := strconv.ParseUint(string(m[1]), 10, 64)
		off, _ := strconv.ParseUint(string(m[2]), 16, 64)
		raw := im.data[blk*uint64(im.f.BlockSize)+off:]
		iblock := raw[40:100]
		eaFile := filepath.Join(tmp, "ea")
		os.Remove(eaFile)
		run(t, nil, "debugfs", "-R", "ea_get -f "+eaFile+" "+path+" system.data", img)
		ea, _ := os.ReadFile(eaFile)
		in, err := ParseInline(iblock, ea, im.f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if in.Parent != 2 {
			t.Errorf("%s: parent %d", path, in.Parent)
		}
		if len(in.EA) > 0 {
			sawEA = true
		}
		got := map[string]bool{}
		for _, e := range in.Entries() {
			got[string(e.Name)] = true
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries, want %d", path, len(got), len(want))
		}
		for _, n := range want {
			if !got[string(n)] {
				t.Fatalf("%s: %q missing", path, n)
			}
		}
		t.Logf("%s: %d entries in i_block, %d slots in system.data (%d bytes)", path, len(Used(in.IBody)), len(in.EA), len(ea))
	}
	if _, ok := dirs["/spill"]; ok && !sawEA {
		t.Error("the kernel-made directory did not spill into system.data")
	}
}

type realSeed struct {
	csum bool
	data []byte
}

var (
	realSeedsOnce sync.Once
	realSeeds     []realSeed
)

// realDirSeeds returns the blocks of a small real htree directory (1 KiB
// blocks, with and without metadata_csum) as fuzz seeds, or nothing if the
// tools are missing.
func realDirSeeds(t testing.TB) []realSeed {
	realSeedsOnce.Do(func() {
		for _, tool := range []string{"mke2fs", "e2fsck", "debugfs", "dumpe2fs"} {
			if _, err := exec.LookPath(tool); err != nil {
				return
			}
		}
		tmp, err := os.MkdirTemp("", "dirseed")
		if err != nil {
			return
		}
		defer os.RemoveAll(tmp)
		var names [][]byte
		for i := range 120 {
			names = append(names, fmt.Appendf(nil, "seed-%d-%s", i, bytes.Repeat([]byte{0xe9}, i%9)))
		}
		touchAll(t, filepath.Join(tmp, "src", "d"), names)
		for _, feat := range []string{"metadata_csum", "^metadata_csum"} {
			img := filepath.Join(tmp, "img")
			os.Remove(img)
			run(t, nil, "mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-O", feat, "-d", filepath.Join(tmp, "src"), img, "4M")
			run(t, []int{1}, "e2fsck", "-fyD", img)
			im := loadImage(t, img)
			d := im.dir(t, "/d")
			var all []byte
			for i := range d.NBlocks {
				b, _ := d.Read(i)
				all = append(all, b...)
			}
			realSeeds = append(realSeeds, realSeed{im.f.Csum, all})
		}
	})
	return realSeeds
}
