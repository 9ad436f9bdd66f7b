//go:build linux

package dir

// The editor against the real oracles: directories it writes into ext4
// images must pass e2fsck -fn (whose pass 2 checks every htree block, hash
// range and checksum) and be listed and looked up by the kernel.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/testutil"
)

// imageStore is a Store over one directory of an image held in memory.
// The directory was grown beforehand (debugfs expand_dir) to len(phys)
// blocks; the store hands them out in order as the editor appends, and
// the test punches the unused rest afterwards.
type imageStore struct {
	data  []byte
	bs    int
	phys  []uint64 // physical block of each logical block
	n     uint32   // blocks the editor has
	dirty map[uint32]bool
}

func (s *imageStore) span(lblk uint32) []byte {
	p := int(s.phys[lblk]) * s.bs
	return s.data[p : p+s.bs]
}

func (s *imageStore) ReadBlock(lblk uint32) ([]byte, error) {
	if lblk >= s.n {
		return nil, fmt.Errorf("imagestore: read of block %d of %d", lblk, s.n)
	}
	return s.span(lblk), nil
}

func (s *imageStore) WriteBlock(lblk uint32, b []byte) error {
	if lblk >= s.n || len(b) != s.bs {
		return fmt.Errorf("imagestore: write of %d bytes to block %d of %d", len(b), lblk, s.n)
	}
	copy(s.span(lblk), b)
	s.dirty[lblk] = true
	return nil
}

func (s *imageStore) AppendBlock() (uint32, error) {
	if int(s.n) >= len(s.phys) {
		return 0, fmt.Errorf("imagestore: all %d preallocated blocks used: %w", len(s.phys), syscall.ENOSPC)
	}
	s.n++
	return s.n - 1, nil
}

// flush writes the changed blocks into the image file.
func (s *imageStore) flush(t testing.TB, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for l := range s.dirty {
		if _, err := f.WriteAt(s.span(l), int64(s.phys[l])*int64(s.bs)); err != nil {
			t.Fatal(err)
		}
	}
}

type imageCase struct {
	name      string
	blockSize int
	features  string // mke2fs -O
	hash      string // def_hash_version to set, or "" for mke2fs's
	prealloc  int    // blocks to grow the directory to beforehand
	adds      int    // names to add before the mixed phase (at least)
	mixed     int    // mixed add/remove/replace steps
	longNames bool   // mostly 200..255-byte names
	levels    int    // htree levels the directory must reach (0: linear)
	slow      bool   // skipped with -short
}

const imageFiles = 8 // regular files the entries point at

func TestEditorImage(t *testing.T) {
	needTools(t)
	cases := []imageCase{
		{name: "1k_csum_halfmd4", blockSize: 1024, prealloc: 600, adds: 7000, mixed: 3000, levels: 2},
		{name: "1k_nocsum_legacy", blockSize: 1024, features: "^metadata_csum", hash: "legacy", prealloc: 600, adds: 7000, mixed: 3000, levels: 2},
		{name: "4k_csum_tea", blockSize: 4096, hash: "tea", prealloc: 900, adds: 6000, mixed: 2000, longNames: true, levels: 2},
		{name: "4k_nocsum_halfmd4", blockSize: 4096, features: "^metadata_csum", prealloc: 300, adds: 2000, mixed: 2000, levels: 1},
		{name: "1k_linear_no_dir_index", blockSize: 1024, features: "^dir_index", prealloc: 400, adds: 2000, mixed: 1000},
		{name: "1k_largedir_3_levels", blockSize: 1024, features: "large_dir", prealloc: 14000, adds: 20000, mixed: 1000, longNames: true, levels: 3, slow: true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.slow && testing.Short() {
				t.Skip("-short")
			}
			runImageCase(t, c, uint64(i))
		})
	}
}

func imageName(rng *rand.Rand, long bool, i int) []byte {
	var b []byte
	if long {
		b = fmt.Appendf(nil, "%d~", i)
		n := 200 + rng.IntN(56) - len(b)
		for range n {
			b = append(b, "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)])
		}
		return b
	}
	b = randName(rng)
	if len(b) > 40 && rng.IntN(3) > 0 {
		b = b[:1+rng.IntN(40)]
	}
	if isDots(b) {
		b = append(b, 'x')
	}
	return b
}

func runImageCase(t *testing.T, c imageCase, seed uint64) {
	tmp := t.TempDir()
	img := filepath.Join(tmp, "img")
	args := []string{"-q", "-F", "-t", "ext4", "-b", fmt.Sprint(c.blockSize), "-U", testUUID, "-E", "hash_seed=" + testHashSeed}
	if c.features != "" {
		args = append(args, "-O", c.features)
	}
	size := "64M"
	run(t, nil, "mke2fs", append(args, img, size)...)

	// Make the directory, grow it, and make the files its entries name.
	var script strings.Builder
	if c.hash != "" {
		fmt.Fprintf(&script, "ssv def_hash_version %s\n", c.hash)
	}
	script.WriteString("mkdir /d\n")
	for range c.prealloc - 1 {
		script.WriteString("expand_dir /d\n")
	}
	for i := range imageFiles {
		fmt.Fprintf(&script, "write /dev/null /f%d\n", i)
	}
	debugfsScript(t, img, script.String())

	im := loadImage(t, img)
	st := im.stat(t, "/d")
	seedCsum := inode.Seed(im.fsSeed, st.ino, st.gen)
	var phys []uint64
	for _, w := range strings.Fields(string(im.debugfs(t, "blocks /d"))) {
		v, err := strconv.ParseUint(w, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		phys = append(phys, v)
	}
	if len(phys) != c.prealloc {
		t.Fatalf("/d has %d blocks, want %d", len(phys), c.prealloc)
	}
	var files [imageFiles]uint32
	for i := range files {
		files[i] = im.stat(t, fmt.Sprintf("/f%d", i)).ino
	}
	sb := im.sb
	def := map[string]uint8{"legacy": HashLegacy, "half_md4": HashHalfMD4, "tea": HashTea}[sb["Default directory hash"]]
	store := &imageStore{data: im.data, bs: im.f.BlockSize, phys: phys, n: 1, dirty: map[uint32]bool{}}

	// libext2fs's new directory block is ours, checksum included.
	want, err := NewDirBlock(im.f, st.ino, 2, seedCsum)
	if err != nil {
		t.Fatal(err)
	}
	if b0, _ := store.ReadBlock(0); !bytes.Equal(b0, want) {
		t.Fatalf("debugfs mkdir block 0 differs from NewDirBlock:\n% x\n% x", b0[:32], want[:32])
	}

	e := &Editor{Format: im.f, Store: store, NBlocks: 1, CsumSeed: seedCsum, Ino: st.ino,
		DirIndex: strings.Contains(" "+sb["Filesystem features"]+" ", " dir_index "), DefHashVersion: def}
	rng := rand.New(rand.NewPCG(seed, 99))
	m := model{}
	var names []string
	ft := uint8(0)
	if im.f.FileType {
		ft = FTRegFile
	}
	var extra [][]byte
	if c.hash == "legacy" {
		for _, p := range legacyCollisions(400000) {
			extra = append(extra, p[0], p[1])
		}
	}
	next := 0 // names are numbered so that long ones stay distinct
	add := func() {
		i := next
		next++
		name := imageName(rng, c.longNames, i)
		if len(extra) > 0 && i%5 == 0 {
			name, extra = extra[0], extra[1:]
		}
		if _, ok := m[string(name)]; ok {
			return
		}
		x := Entry{Inode: files[rng.IntN(imageFiles)], Name: name, FileType: ft}
		if err := e.Add(x); err != nil {
			t.Fatalf("Add #%d (%q): %v", i, name, err)
		}
		m[string(name)] = x
		names = append(names, string(name))
	}
	for range c.adds {
		add()
	}
	// Grow on until the tree is as deep as the case wants.
	for c.levels > 1 && levels(t, e) < c.levels {
		add()
	}
	for range c.mixed {
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			add()
		case 4, 5, 6, 7, 8:
			j := rng.IntN(len(names))
			k := names[j]
			names[j] = names[len(names)-1]
			names = names[:len(names)-1]
			if _, err := e.Remove([]byte(k)); err != nil {
				t.Fatalf("Remove(%q): %v", k, err)
			}
			delete(m, k)
		default:
			k := names[rng.IntN(len(names))]
			x := m[k]
			x.Inode = files[rng.IntN(imageFiles)]
			if _, err := e.Replace([]byte(k), x.Inode, ft); err != nil {
				t.Fatalf("Replace(%q): %v", k, err)
			}
			m[k] = x
		}
	}
	if got := levels(t, e); got != c.levels {
		t.Fatalf("directory has %d htree levels, want %d", got, c.levels)
	}
	if err := e.Dir().Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	store.flush(t, img)

	// The inode side: size, index flag, the unused preallocated blocks,
	// and the files' link counts.
	script.Reset()
	if int(e.NBlocks) < c.prealloc {
		fmt.Fprintf(&script, "punch /d %d\n", e.NBlocks)
	}
	fmt.Fprintf(&script, "sif /d size %d\n", int(e.NBlocks)*im.f.BlockSize)
	if e.Indexed {
		fmt.Fprintf(&script, "sif /d flags %#x\n", st.flags|0x1000)
	}
	links := map[uint32]int{}
	for _, x := range m {
		links[x.Inode]++
	}
	for i, ino := range files {
		fmt.Fprintf(&script, "sif /f%d links_count %d\n", i, 1+links[ino])
	}
	debugfsScript(t, img, script.String())
	testutil.RequireFsckClean(t, img)

	// Read back with the package's own walkers.
	im = loadImage(t, img)
	d := im.dir(t, "/d")
	if err := d.Check(); err != nil {
		t.Fatalf("Check after flush: %v", err)
	}
	for k, x := range m {
		if r, err := d.Lookup([]byte(k)); err != nil || r.Inode != x.Inode {
			t.Fatalf("Lookup(%q) = %+v, %v", k, r, err)
		}
	}
	t.Logf("%d names, %d blocks, %d levels, e2fsck clean", len(m), e.NBlocks, levels(t, e))

	// The kernel lists the directory (htree readdir) and finds every name
	// (htree lookup).
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("no kernel check: %s", why)
		return
	}
	mnt := testutil.Mount(t, img, true)
	ents, err := os.ReadDir(filepath.Join(mnt, "d"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(m) {
		t.Fatalf("kernel lists %d names, want %d", len(ents), len(m))
	}
	for _, de := range ents {
		if _, ok := m[de.Name()]; !ok {
			t.Fatalf("kernel lists unexpected %q", de.Name())
		}
	}
	for k, x := range m {
		fi, err := os.Lstat(filepath.Join(mnt, "d", k))
		if err != nil {
			t.Fatalf("kernel lookup of %q: %v", k, err)
		}
		if ino := fi.Sys().(*syscall.Stat_t).Ino; ino != uint64(x.Inode) {
			t.Fatalf("kernel: %q is inode %d, want %d", k, ino, x.Inode)
		}
	}
}

// debugfsScript runs debugfs -w with the requests in script and fails on
// any message besides the version banner (debugfs exits 0 regardless).
func debugfsScript(t testing.TB, img, script string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "cmds")
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("debugfs", "-w", "-f", f, img)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("debugfs: %v: %s", err, stderr.Bytes())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.HasPrefix(line, "debugfs ") {
			t.Fatalf("debugfs: %s", stderr.Bytes())
		}
	}
}
