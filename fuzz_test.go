//go:build linux

package ext4go_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// FuzzOpenWalk mutates small real images and reads them with every API:
// whatever the bytes, opening and walking must end in data or typed errors,
// never a panic, a hang or an absurd allocation.
//
// The input is a base image selector followed by mutation records (see
// applyMutations). Mutations address only the image's non-zero blocks
// (superblock, group descriptors, bitmaps, inode tables, directories,
// extent and xattr blocks, file data), so random offsets mostly hit
// metadata. The bases are built deterministically (fixed UUID, hash seed,
// clock and inode times), so a saved input reproduces on any machine with
// the same e2fsprogs.
func FuzzOpenWalk(f *testing.F) {
	bases := seedFuzzBases(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if img := mutatedImage(bases, data); img != nil {
			fuzzOpenWalk(t, img)
		}
	})
}

// seedFuzzBases builds the base images and adds their seed inputs.
func seedFuzzBases(f *testing.F) []*fuzzBase {
	bases := fuzzBases(f)
	for i, b := range bases {
		f.Add([]byte{byte(i)})
		for _, s := range b.seeds {
			f.Add(append([]byte{byte(i)}, s...))
		}
	}
	return bases
}

// mutatedImage is the image a fuzz input stands for: a copy of the base its
// first byte selects, with the rest applied as mutations (nil for an empty
// input).
func mutatedImage(bases []*fuzzBase, data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	base := bases[int(data[0])%len(bases)]
	img := bytes.Clone(base.img)
	applyMutations(img, base, data[1:])
	return img
}

// Limits of one fuzz input.
const (
	fuzzTimeout = 10 * time.Second
	fuzzAllocs  = 256 << 20 // bytes allocated by one input
)

var fuzzWalkLimits = walkLimits{maxEntries: 5000, maxFileRead: 1 << 20, maxRead: 8 << 20,
	fullPerDir: 1000, sampleEvery: 50}

// fuzzOpenWalk opens img with the default options and with
// IgnoreChecksums (and IgnoreJournal), walks whatever opens, and fails t on
// an untyped error, a broken API rule, a hang or too much allocation.
func fuzzOpenWalk(t *testing.T, img []byte) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	done := make(chan []string, 1)
	var prog atomic.Int64
	go func() {
		// A panic here would kill the process (only the test's own
		// goroutine is guarded): report it as a failure instead.
		defer func() {
			if p := recover(); p != nil {
				done <- []string{fmt.Sprintf("panic: %v\n%s", p, debug.Stack())}
			}
		}()
		var fails []string
		// With the default options, then (if that met a bad checksum or
		// was refused) ignoring checksums and the journal, to reach what
		// lies behind.
		for _, opts := range []*ext4go.Options{nil, {IgnoreChecksums: true, IgnoreJournal: true}} {
			fsys, err := ext4go.NewFS(bytes.NewReader(img), int64(len(img)), opts)
			if err != nil {
				if !typedErr(err) {
					fails = append(fails, fmt.Sprintf("NewFS(%+v): untyped error %T: %v", opts, err, err))
				}
				continue
			}
			w := walkFS(fsys, fuzzWalkLimits, &prog)
			fsys.Close()
			fails = append(fails, w.fails...)
			if w.checksumErrs == 0 {
				break
			}
		}
		done <- fails
	}()
	var fails []string
	select {
	case fails = <-done:
	case <-time.After(fuzzTimeout):
		t.Fatalf("open and walk took over %v (a hang?) after %d entries", fuzzTimeout, prog.Load())
	}
	for _, f := range fails {
		t.Error(f)
	}
	metrics.Read(sample)
	if a := sample[0].Value.Uint64() - before; a > fuzzAllocs {
		t.Errorf("open and walk allocated %d MiB (limit %d MiB)", a>>20, fuzzAllocs>>20)
	}
	checkNoLeak(t)
}

// fuzzLiveHeap bounds the live heap of a fuzzing process. Inputs run one
// after another in a worker; memory a closed FS keeps would pile up until
// the machine runs out (a worker once reached 12 GiB).
const fuzzLiveHeap = 1 << 30

// checkNoLeak fails t if the live heap, after a collection, exceeds
// fuzzLiveHeap.
func checkNoLeak(t testing.TB) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Uint64() < fuzzLiveHeap {
		return
	}
	runtime.GC()
	metrics.Read(sample)
	if v := sample[0].Value.Uint64(); v >= fuzzLiveHeap {
		t.Fatalf("%d MiB live after a collection: closed filesystems are not freed", v>>20)
	}
}

// TestCloseFreesMemory opens, walks and closes a small image many times:
// nothing of a closed FS may stay reachable.
func TestCloseFreesMemory(t *testing.T) {
	b := fuzzBases(t)[0]
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // a second cycle runs the cleanups the first queued
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	before := heap()
	const rounds = 100
	for range rounds {
		fsys, err := ext4go.NewFS(bytes.NewReader(bytes.Clone(b.img)), int64(len(b.img)), nil)
		if err != nil {
			t.Fatal(err)
		}
		w := walkFS(fsys, fuzzWalkLimits, new(atomic.Int64))
		if len(w.fails)+len(w.errs) > 0 {
			t.Fatalf("walk: %v %v", w.fails, w.errs)
		}
		fsys.Close()
	}
	// Each round cloned the 1 MiB image; all of it must be garbage now.
	if after := heap(); after > before+rounds/4*uint64(len(b.img)) {
		t.Errorf("live heap grew from %d to %d MiB over %d open/walk/close rounds of a %d KiB image",
			before>>20, after>>20, rounds, len(b.img)>>10)
	}
}

// fuzzBase is an image mutations apply to.
type fuzzBase struct {
	name  string
	img   []byte
	hot   []int64  // offsets of the non-zero 1 KiB blocks: what mutations address
	seeds [][]byte // mutation lists aimed at its key structures
}

// hotOffset maps a mutation address to an image offset: addresses count
// the bytes of the hot blocks, in order, and wrap around.
func (b *fuzzBase) hotOffset(addr uint32) int64 {
	n := uint32(len(b.hot)) * 1024
	addr %= n
	return b.hot[addr/1024] + int64(addr%1024)
}

// hotAddr is the inverse of hotOffset, for seeds; ok is false if off is
// not in a hot block.
func (b *fuzzBase) hotAddr(off int64) (uint32, bool) {
	for i, h := range b.hot {
		if off >= h && off < h+1024 {
			return uint32(i)*1024 + uint32(off-h), true
		}
	}
	return 0, false
}

// Mutation records, after the base selector byte:
//
//	addr   3 bytes little endian: a hot-byte address (hotOffset)
//	op     1 byte: low 4 bits n-1 (1..16 bytes), high bits the operation:
//	       0 overwrite with the n payload bytes, 1 xor them in,
//	       2 add the payload (n ≤ 8) as a little-endian integer,
//	       3 fill n bytes with the one payload byte
//	payload
//
// At most maxMutations records apply; a truncated record is ignored.
const maxMutations = 64

func applyMutations(img []byte, b *fuzzBase, data []byte) {
	for k := 0; k < maxMutations && len(data) >= 4; k++ {
		addr := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16
		op := data[3]
		n := int(op&0x0f) + 1
		data = data[4:]
		off := b.hotOffset(addr)
		end := min(off+int64(n), int64(len(img)))
		dst := img[off:end]
		switch op >> 4 & 3 {
		case 0, 1:
			if len(data) < n {
				return
			}
			for i := range dst {
				if op>>4&3 == 0 {
					dst[i] = data[i]
				} else {
					dst[i] ^= data[i]
				}
			}
			data = data[n:]
		case 2:
			m := min(n, 8)
			if len(data) < m {
				return
			}
			var v, d [8]byte
			copy(v[:], dst)
			copy(d[:], data[:m])
			s := binary.LittleEndian.Uint64(v[:]) + binary.LittleEndian.Uint64(d[:])
			binary.LittleEndian.PutUint64(v[:], s)
			copy(dst, v[:])
			data = data[m:]
		case 3:
			if len(data) < 1 {
				return
			}
			for i := range dst {
				dst[i] = data[0]
			}
			data = data[1:]
		}
	}
}

// mutation encodes one overwrite record at image offset off for seeds.
func (b *fuzzBase) mutation(off int64, val []byte) []byte {
	addr, ok := b.hotAddr(off)
	if !ok || len(val) == 0 || len(val) > 16 {
		return nil
	}
	return append([]byte{byte(addr), byte(addr >> 8), byte(addr >> 16), byte(len(val) - 1)}, val...)
}

var fuzzBaseCache struct {
	once  sync.Once
	bases []*fuzzBase
	err   string
}

// fuzzBases builds the base images once per process: ext4 with
// metadata_csum (extent trees, an htree, xattrs in the inode and a block),
// ext4 without checksums but with inline_data, and ext2 (block maps with
// indirect blocks), all with 1 KiB blocks in 1 MiB.
func fuzzBases(tb testing.TB) []*fuzzBase {
	fuzzBaseCache.once.Do(func() {
		dir, err := os.MkdirTemp("", "ext4go-fuzzbase-")
		if err != nil {
			fuzzBaseCache.err = err.Error()
			return
		}
		defer os.RemoveAll(dir)
		for _, c := range []struct{ name, fstype, features string }{
			{"ext4-csum", "ext4", "metadata_csum,^has_journal"},
			{"ext4-nocsum-inline", "ext4", "^metadata_csum,^64bit,inline_data,^has_journal"},
			{"ext2", "ext2", "^dir_index"},
		} {
			b, err := buildFuzzBase(filepath.Join(dir, c.name), c.fstype, c.features)
			if err != nil {
				fuzzBaseCache.err = fmt.Sprintf("%s: %v", c.name, err)
				return
			}
			b.name = c.name
			fuzzBaseCache.bases = append(fuzzBaseCache.bases, b)
		}
	})
	if fuzzBaseCache.err != "" {
		if strings.Contains(fuzzBaseCache.err, "is not installed") {
			tb.Skipf("cannot build fuzz base images: %s", fuzzBaseCache.err)
		}
		tb.Fatalf("cannot build fuzz base images: %s", fuzzBaseCache.err)
	}
	for _, b := range fuzzBaseCache.bases {
		tb.Logf("fuzz base %s: %d bytes, %d hot blocks, sha256 %x", b.name, len(b.img), len(b.hot), sha256.Sum256(b.img))
	}
	return fuzzBaseCache.bases
}

// fuzzTime is the clock the base images are made with.
const fuzzTime = "1700000000"

func fuzzTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/sbin", "/usr/sbin", "/usr/local/sbin"} {
		if p := filepath.Join(d, name); fileExists(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed", name)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func runFuzzTool(name string, okExits []int, args ...string) error {
	p, err := fuzzTool(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(p, args...)
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME="+fuzzTime)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			for _, c := range okExits {
				if ee.ExitCode() == c {
					return nil
				}
			}
		}
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// buildFuzzBase makes one base image at path from a tiny fixed tree.
func buildFuzzBase(path, fstype, features string) (*fuzzBase, error) {
	src := path + ".src"
	entries, err := fuzzTree(src)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, err
	}
	if err := os.Truncate(path, 1<<20); err != nil {
		return nil, err
	}
	args := []string{"-F", "-q", "-t", fstype, "-b", "1024", "-O", features, "-N", "128", "-I", "256",
		"-U", testutil.FixedUUID, "-E", "hash_seed=" + testutil.FixedHashSeed, "-d", src, path}
	if err := runFuzzTool("mke2fs", nil, args...); err != nil {
		return nil, err
	}
	// Index the directories (mke2fs -d writes them linear).
	if err := runFuzzTool("e2fsck", []int{1, 2}, "-fyD", path); err != nil {
		return nil, err
	}
	// Fix the inode times mke2fs -d copied from the source tree (ctime
	// cannot be set there), so the image is the same on every run.
	var cmds []string
	for _, e := range append([]string{"/", "/lost+found"}, entries...) {
		for _, field := range []string{"atime", "ctime", "mtime", "crtime"} {
			cmds = append(cmds, fmt.Sprintf("sif %s %s @%s", e, field, fuzzTime))
		}
	}
	// e2fsck -D stamps s_lastcheck with the real clock.
	cmds = append(cmds, "ssv lastcheck @"+fuzzTime)
	cmdFile := path + ".cmds"
	if err := os.WriteFile(cmdFile, []byte(strings.Join(cmds, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := runFuzzTool("debugfs", nil, "-w", "-f", cmdFile, path); err != nil {
		return nil, err
	}
	if err := runFuzzTool("e2fsck", nil, "-fn", path); err != nil {
		return nil, err
	}
	img, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b := &fuzzBase{img: img}
	for off := int64(0); off < int64(len(img)); off += 1024 {
		if !isZeroBytes(img[off : off+1024]) {
			b.hot = append(b.hot, off)
		}
	}
	b.seeds = fuzzSeeds(b)
	return b, nil
}

func isZeroBytes(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// fuzzTree writes the base tree into dir and returns its entries as
// absolute image paths.
func fuzzTree(dir string) ([]string, error) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var entries []string
	var firstErr error
	check := func(rel string, err error) {
		if err != nil && firstErr == nil {
			firstErr = err
		}
		entries = append(entries, "/"+rel)
	}
	p := func(rel string) string { return filepath.Join(dir, rel) }
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	check("file", os.WriteFile(p("file"), data(3000), 0o644))
	check("empty", os.WriteFile(p("empty"), nil, 0o600))
	check("inline", os.WriteFile(p("inline"), []byte("small enough to live in the inode"), 0o644))
	// Six separate blocks: more extents than the inode holds (depth 1).
	sp, err := os.Create(p("sparse"))
	if err == nil {
		for i := int64(0); i < 6; i++ {
			if _, err = sp.WriteAt(data(1024), i*10240); err != nil {
				break
			}
		}
		sp.Close()
	}
	check("sparse", err)
	// Data past the 12 direct and 256 single-indirect blocks of a block
	// map (the rest a hole, so that few blocks are file data).
	big, err := os.Create(p("big"))
	if err == nil {
		for _, off := range []int64{0, 11 << 10, 12 << 10, 200 << 10, 280 << 10} {
			if _, err = big.WriteAt(data(1024), off); err != nil {
				break
			}
		}
		big.Close()
	}
	check("big", err)
	check("hard", os.Link(p("file"), p("hard")))
	check("link", os.Symlink("file", p("link")))
	check("slowlink", os.Symlink(strings.Repeat("target/", 15)+"end", p("slowlink")))
	check("fifo", unix.Mkfifo(p("fifo"), 0o644))
	if os.Geteuid() == 0 { // (the base then differs, and saved inputs may not reproduce)
		check("chr", unix.Mknod(p("chr"), unix.S_IFCHR|0o644, int(unix.Mkdev(4, 64))))
	}
	check("dir", os.Mkdir(p("dir"), 0o755))
	for i := 0; i < 60; i++ { // three blocks: an htree after e2fsck -D
		rel := fmt.Sprintf("dir/entry-%02d-%s", i, strings.Repeat("x", 20))
		var content []byte
		if i%20 == 0 {
			content = []byte{byte(i)}
		}
		check(rel, os.WriteFile(p(rel), content, 0o644))
	}
	check("sub", os.Mkdir(p("sub"), 0o700))
	check("sub/deeper", os.Mkdir(p("sub/deeper"), 0o700))
	check("sub/deeper/x", os.WriteFile(p("sub/deeper/x"), []byte("x"), 0o644))
	if firstErr != nil {
		return nil, firstErr
	}
	for _, x := range []struct {
		rel, name string
		val       []byte
	}{
		{"file", "user.small", []byte("1")},
		{"file", "user.big", data(600)}, // too big for the inode: the xattr block
		{"dir", "user.dir", []byte("on a directory")},
		{"sub/deeper/x", "trusted.t", data(40)},
	} {
		if err := unix.Lsetxattr(p(x.rel), x.name, x.val, 0); err != nil {
			return nil, fmt.Errorf("setxattr %s: %w", x.rel, err)
		}
	}
	return entries, nil
}

// fuzzSeeds aims mutations at the superblock, the first group descriptor,
// the root inode and block 0 of a directory of base b: the structures every
// open and walk reads.
func fuzzSeeds(b *fuzzBase) [][]byte {
	const sb = 1024
	var seeds [][]byte
	add := func(ms ...[]byte) {
		var s []byte
		for _, m := range ms {
			if m == nil {
				return
			}
			s = append(s, m...)
		}
		seeds = append(seeds, s)
	}
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	add(b.mutation(sb+0, u32(0xffffffff)))        // s_inodes_count
	add(b.mutation(sb+4, u32(1<<31)))             // s_blocks_count_lo
	add(b.mutation(sb+24, u32(6)))                // s_log_block_size
	add(b.mutation(sb+32, u32(1)))                // s_blocks_per_group
	add(b.mutation(sb+40, u32(1<<20)))            // s_inodes_per_group
	add(b.mutation(sb+88, []byte{0, 1}))          // s_inode_size 256 -> 256 (same) / odd
	add(b.mutation(sb+88, []byte{0x80, 0}))       // s_inode_size 128
	add(b.mutation(sb+0x60, u32(0xffffffff)))     // s_feature_incompat
	add(b.mutation(sb+0x64, u32(0xffffffff)))     // s_feature_ro_compat
	add(b.mutation(sb+0xFE, []byte{0xff, 0xff}))  // s_desc_size
	add(b.mutation(sb+0x15E, []byte{0xff, 0xff})) // s_min_extra_isize, s_want_extra_isize
	gd := int64(2048)                             // first group descriptor (1 KiB blocks)
	add(b.mutation(gd+8, u32(0)))                 // bg_inode_table_lo
	add(b.mutation(gd+8, u32(3)))                 // inode table over the descriptors
	add(b.mutation(gd+0, u32(0xfffffff0)))        // bg_block_bitmap_lo
	add(b.mutation(gd+12, []byte{0xff, 0xff}))    // free blocks
	add(b.mutation(gd+0x12, []byte{0x07, 0x00}))  // bg_flags: uninit everything
	for _, off := range rootInodeOffsets(b.img) { // the root inode
		add(b.mutation(off+4, u32(1<<30)))          // i_size
		add(b.mutation(off+40, []byte{0x0a, 0xf3})) // i_block: extent magic
		add(b.mutation(off+40+6, []byte{0xff, 0xff}))
		add(b.mutation(off+0x20, u32(0x10000000)))                              // i_flags: inline_data
		add(b.mutation(off+0x20, u32(0x1000)))                                  // i_flags: index
		add(b.mutation(off+0, []byte{0xff, 0xa1}))                              // i_mode: symlink
		add(b.mutation(off+108, u32(0x100)))                                    // i_size_high: a 1 TiB directory
		add(b.mutation(off+40+12, u32(1<<30)), b.mutation(off+108, u32(0x100))) // far-off first extent
	}
	return seeds
}

// rootInodeOffsets returns the image offset of the root inode (inode 2),
// from the superblock and first group descriptor of a 1 KiB-block image.
func rootInodeOffsets(img []byte) []int64 {
	if len(img) < 4096 {
		return nil
	}
	itable := int64(binary.LittleEndian.Uint32(img[2048+8:]))
	isize := int64(binary.LittleEndian.Uint16(img[1024+88:]))
	off := itable*1024 + isize // inode 2 is the second
	if off+isize > int64(len(img)) {
		return nil
	}
	return []int64{off}
}
