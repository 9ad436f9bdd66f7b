package inode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// Cases from the kernel's KUnit test of ext4_decode_extra_time
// (fs/ext4/inode-test.c): base word, extra word, seconds.
var timeCases = []struct {
	name  string
	base  uint32
	extra uint32
	sec   int64
}{
	{"1901-12-13 lower bound, no extra", 0x80000000, 0, -0x80000000},
	{"1969-12-31 upper bound of <0, no extra", 0xffffffff, 0, -1},
	{"1970-01-01 lower bound of >=0, no extra", 0, 0, 0},
	{"2038-01-19 upper bound, no extra", 0x7fffffff, 0, 0x7fffffff},
	{"2038-01-19 lower bound of <0, epoch 1", 0x80000000, 1, 0x80000000},
	{"2106-02-07 upper bound of <0, epoch 1", 0xffffffff, 1, 0xffffffff},
	{"2106-02-07 lower bound of >=0, epoch 1", 0, 1, 0x100000000},
	{"2174-02-25 upper bound of >=0, epoch 1", 0x7fffffff, 1, 0x17fffffff},
	{"2174-02-25 lower bound of <0, epoch 2", 0x80000000, 2, 0x180000000},
	{"2242-03-16 upper bound of <0, epoch 2", 0xffffffff, 2, 0x1ffffffff},
	{"2242-03-16 lower bound of >=0, epoch 2", 0, 2, 0x200000000},
	{"2310-04-04 upper bound of >=0, epoch 2, 1 ns", 0x7fffffff, 2 | 1<<2, 0x27fffffff},
	{"2310-04-04 lower bound of <0, epoch 3, max ns", 0x80000000, 3 | 999999999<<2, 0x280000000},
	{"2378-04-22 upper bound of <0, epoch 3", 0xffffffff, 3, 0x2ffffffff},
	{"2378-04-22 lower bound of >=0, epoch 3", 0, 3, 0x300000000},
	{"2446-05-10 upper bound, epoch 3", 0x7fffffff, 3, 0x37fffffff},
}

func TestTimes(t *testing.T) {
	for _, c := range timeCases {
		var b [8]byte
		binary.LittleEndian.PutUint32(b[0:], c.base)
		binary.LittleEndian.PutUint32(b[4:], c.extra)
		got := decodeTime(b[:], 0, 4, true)
		want := Timestamp{Sec: c.sec, Nsec: c.extra >> 2}
		if got != want {
			t.Errorf("%s: decoded %+v, want %+v", c.name, got, want)
		}
		var e [8]byte
		encodeTime(e[:], 0, 4, true, got)
		if e != b {
			t.Errorf("%s: encoded %x, want %x", c.name, e, b)
		}
		// Without the extra word only the signed base counts, and encoding
		// clamps to it.
		got = decodeTime(b[:], 0, 4, false)
		if got.Sec != int64(int32(c.base)) || got.Nsec != 0 {
			t.Errorf("%s: no-extra decode %+v", c.name, got)
		}
		encodeTime(e[:], 0, 4, false, Timestamp{Sec: c.sec})
		clamped := min(max(c.sec, -1<<31), 1<<31-1)
		if int64(int32(binary.LittleEndian.Uint32(e[:]))) != clamped {
			t.Errorf("%s: no-extra encode gives %#x", c.name, binary.LittleEndian.Uint32(e[:]))
		}
	}
}

func randomInode(r *rand.Rand, size int) *Inode {
	ts := func() Timestamp {
		return Timestamp{Sec: r.Int64N(0x37fffffff+1<<31) - 1<<31, Nsec: r.Uint32N(1 << 30)}
	}
	in := &Inode{
		Mode: uint16(r.Uint32()), UID: r.Uint32(), GID: r.Uint32(), Size: r.Uint64(),
		Atime: ts(), Ctime: ts(), Mtime: ts(), Crtime: ts(), Dtime: r.Uint32(),
		LinksCount: uint16(r.Uint32()), Blocks: r.Uint64() >> 16, Flags: r.Uint32(),
		Version: r.Uint64(), Generation: r.Uint32(), FileACL: r.Uint64() >> 16,
		ChecksumLo: uint16(r.Uint32()), ChecksumHi: uint16(r.Uint32()), Projid: r.Uint32(),
	}
	for i := range in.Block {
		in.Block[i] = byte(r.Uint32())
	}
	if size > GoodOldSize {
		in.ExtraIsize = ExtraSize
	}
	return in
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{128, 256, 512, 1024} {
		for range 50 {
			in := randomInode(r, size)
			b := make([]byte, size)
			if err := in.Encode(b); err != nil {
				t.Fatal(err)
			}
			out, err := Decode(b, size)
			if err != nil {
				t.Fatal(err)
			}
			want := *in
			want.Raw = b
			if size == GoodOldSize {
				// Only the base words exist.
				want.Version &= 0xffffffff
				want.ChecksumHi, want.Projid, want.Crtime = 0, 0, Timestamp{}
				for _, p := range []*Timestamp{&want.Atime, &want.Ctime, &want.Mtime} {
					*p = Timestamp{Sec: min(max(p.Sec, -1<<31), 1<<31-1)}
				}
			}
			if !reflect.DeepEqual(*out, want) {
				t.Fatalf("size %d:\n got %+v\nwant %+v", size, *out, want)
			}
			b2 := make([]byte, size)
			if err := out.Encode(b2); err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("re-encode differs (%v)", err)
			}
		}
	}
}

// An extra_isize that covers only some extra fields: the rest are neither
// read nor written, and stay part of the raw bytes.
func TestPartialExtra(t *testing.T) {
	b := make([]byte, 256)
	for i := GoodOldSize; i < len(b); i++ {
		b[i] = 0xAA
	}
	for _, c := range []struct {
		extra                             uint16
		csumHi, ctimeX, crtime, crX, proj bool
	}{
		{0, false, false, false, false, false},
		{4, true, false, false, false, false},
		{8, true, true, false, false, false},
		{20, true, true, true, false, false},
		{24, true, true, true, true, false},
		{28, true, true, true, true, false},
		{32, true, true, true, true, true},
		{128, true, true, true, true, true},
	} {
		binary.LittleEndian.PutUint16(b[offExtraIsize:], c.extra)
		in, err := Decode(b, 256)
		if err != nil {
			t.Fatalf("extra %d: %v", c.extra, err)
		}
		if (in.ChecksumHi != 0) != c.csumHi || (in.Ctime.Nsec != 0) != c.ctimeX ||
			(in.Crtime.Sec != 0) != c.crtime || (in.Crtime.Nsec != 0) != c.crX || (in.Projid != 0) != c.proj {
			t.Errorf("extra %d: decoded %+v", c.extra, in)
		}
		if hasChecksumHi(b) != c.csumHi {
			t.Errorf("extra %d: hasChecksumHi wrong", c.extra)
		}
		if got := len(in.ExtraSpace()); got != 256-GoodOldSize-int(c.extra) {
			t.Errorf("extra %d: ExtraSpace %d bytes", c.extra, got)
		}
		out := make([]byte, 256)
		if err := in.Encode(out); err != nil || !bytes.Equal(out, b) {
			t.Errorf("extra %d: round trip differs (%v)", c.extra, err)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	b := make([]byte, 256)
	for _, c := range []struct {
		name  string
		b     []byte
		size  int
		extra uint16
	}{
		{"short buffer", b[:200], 256, 0},
		{"size below 128", b, 64, 0},
		{"size not a power of two", b, 192, 0},
		{"extra not a multiple of 4", b, 256, 6},
		{"extra past inode", b, 256, 132},
	} {
		buf := append([]byte(nil), c.b...)
		if len(buf) > offExtraIsize+1 {
			binary.LittleEndian.PutUint16(buf[offExtraIsize:], c.extra)
		}
		_, err := Decode(buf, c.size)
		var ce *fserr.CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err %v, want CorruptError", c.name, err)
		}
	}
	in := &Inode{ExtraIsize: 4}
	if err := in.Encode(make([]byte, 128)); err == nil {
		t.Error("Encode of extra fields into a 128-byte inode succeeded")
	}
	in.ExtraIsize = 6
	if err := in.Encode(make([]byte, 256)); err == nil {
		t.Error("Encode with bad extra_isize succeeded")
	}
}

func TestChecksum(t *testing.T) {
	const seed, ino = 0x12345678, 77
	r := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{128, 256} {
		for _, extra := range []uint16{0, 4, 32} {
			if size == GoodOldSize && extra != 0 {
				continue
			}
			in := randomInode(r, size)
			in.ExtraIsize = extra
			b := make([]byte, size)
			if err := in.EncodeChecksum(b, seed, ino); err != nil {
				t.Fatal(err)
			}
			if err := Verify(seed, ino, b); err != nil {
				t.Errorf("size %d extra %d: %v", size, extra, err)
			}
			c := Checksum(seed, ino, b)
			if extra < 4 && c > 0xffff {
				t.Errorf("size %d extra %d: 16-bit checksum expected, got %#x", size, extra, c)
			}
			// Checksum fields are excluded, everything else is covered.
			for i := range size {
				d := append([]byte(nil), b...)
				d[i] ^= 1
				covered := !(i == offChecksumLo || i == offChecksumLo+1 ||
					(extra >= 4 && (i == offChecksumHi || i == offChecksumHi+1)))
				if got := Checksum(seed, ino, d) != c; got != covered {
					t.Fatalf("size %d extra %d: byte %d covered=%v, want %v", size, extra, i, got, covered)
				}
			}
			err := Verify(seed, ino+1, b)
			var ke *fserr.ChecksumError
			if !errors.As(err, &ke) || !errors.Is(err, fserr.ErrChecksum) || ke.Ino != ino+1 {
				t.Errorf("wrong inode number: %v", err)
			}
		}
	}
	// A never-used all-zero inode is accepted.
	if err := Verify(seed, ino, make([]byte, 256)); err != nil {
		t.Errorf("all-zero inode: %v", err)
	}
	if err := Verify(seed, ino, make([]byte, 100)); err == nil {
		t.Error("short inode verified")
	}
	// Seed is crc32c over le32 ino, then le32 generation.
	if Seed(0, 0, 0) != 0 {
		t.Error("crc32c of zeros from 0 must be 0")
	}
}

func TestSectors(t *testing.T) {
	for _, c := range []struct {
		blocks   uint64
		flags    uint32
		bs       uint32
		huge     bool
		wantSect uint64
	}{
		{8, 0, 4096, false, 8},
		{1<<32 | 8, 0, 4096, false, 8},
		{1<<32 | 8, 0, 4096, true, 1<<32 | 8},
		{10, FlagHugeFile, 4096, true, 80},
		{10, FlagHugeFile, 1024, true, 20},
		{10, FlagHugeFile, 65536, true, 1280},
		{10, FlagHugeFile, 4096, false, 10},
	} {
		in := &Inode{Blocks: c.blocks, Flags: c.flags}
		if got := in.Sectors(c.bs, c.huge); got != c.wantSect {
			t.Errorf("%+v: sectors %d, want %d", c, got, c.wantSect)
		}
		if got := in.BlockBytes(c.bs, c.huge); got != c.wantSect*512 {
			t.Errorf("%+v: bytes %d", c, got)
		}
	}
	for _, c := range []struct {
		n      uint64
		huge   bool
		blocks uint64
		flag   bool
		err    bool
	}{
		{100, false, 100, false, false},
		{1 << 32, false, 0, false, true},
		{1 << 32, true, 1 << 32, false, false},
		{1 << 48, true, 1 << 45, true, false}, // 4 KiB blocks: >> 3
	} {
		in := &Inode{Flags: FlagHugeFile}
		err := in.SetSectors(c.n, 4096, c.huge)
		if (err != nil) != c.err {
			t.Errorf("SetSectors(%d): %v", c.n, err)
			continue
		}
		if err == nil && (in.Blocks != c.blocks || in.HasFlag(FlagHugeFile) != c.flag) {
			t.Errorf("SetSectors(%d): blocks %d flag %v", c.n, in.Blocks, in.HasFlag(FlagHugeFile))
		}
		if err == nil && in.Sectors(4096, c.huge) != c.n {
			t.Errorf("SetSectors(%d) reads back %d", c.n, in.Sectors(4096, c.huge))
		}
	}
}

func TestDevice(t *testing.T) {
	for _, c := range []struct {
		major, minor uint32
		w0, w1       uint32
	}{
		{4, 5, 0x0405, 0},
		{255, 255, 0xffff, 0},
		{256, 0, 0, 0x10000},
		{300, 70000, 0, 70000&0xff | 300<<8 | (70000&^0xff)<<12},
		{0, 0, 0, 0},
		{4095, 1<<20 - 1, 0, 0xff | 4095<<8 | (1<<20-1)&^0xff<<12},
	} {
		in := &Inode{Mode: uint16(TypeCharDev)}
		for i := range in.Block {
			in.Block[i] = 0xEE
		}
		in.SetDevice(c.major, c.minor)
		le := binary.LittleEndian
		if le.Uint32(in.Block[0:]) != c.w0 || le.Uint32(in.Block[4:]) != c.w1 {
			t.Errorf("%d:%d: words %#x %#x, want %#x %#x", c.major, c.minor,
				le.Uint32(in.Block[0:]), le.Uint32(in.Block[4:]), c.w0, c.w1)
		}
		if ma, mi := in.Device(); ma != c.major || mi != c.minor {
			t.Errorf("%d:%d decodes as %d:%d", c.major, c.minor, ma, mi)
		}
	}
	// old_decode_dev sees only the low 16 bits of i_block[0].
	in := &Inode{}
	binary.LittleEndian.PutUint32(in.Block[0:], 0x12340506)
	if ma, mi := in.Device(); ma != 5 || mi != 6 {
		t.Errorf("old encoding with high bits: %d:%d", ma, mi)
	}
}

func TestFastSymlink(t *testing.T) {
	lnk := uint16(TypeSymlink) | 0o777
	for _, c := range []struct {
		name    string
		in      Inode
		eaInode bool
		want    bool
	}{
		{"fast", Inode{Mode: lnk, Size: 10}, false, true},
		{"slow", Inode{Mode: lnk, Size: 100, Blocks: 8}, false, false},
		{"fast with xattr block", Inode{Mode: lnk, Size: 10, FileACL: 99, Blocks: 8}, false, true},
		{"slow with xattr block", Inode{Mode: lnk, Size: 100, FileACL: 99, Blocks: 16}, false, false},
		{"inline data", Inode{Mode: lnk, Size: 10, Flags: FlagInlineData}, false, false},
		{"not a symlink", Inode{Mode: uint16(TypeRegular), Size: 10}, false, false},
		{"ea_inode: short", Inode{Mode: lnk, Size: 59, Blocks: 8}, true, true},
		{"ea_inode: 60 bytes", Inode{Mode: lnk, Size: 60}, true, false},
		{"ea_inode: empty", Inode{Mode: lnk}, true, false},
	} {
		if got := c.in.IsFastSymlink(4096, 4096, true, c.eaInode); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

func TestFileType(t *testing.T) {
	in := &Inode{Mode: 0o41777}
	if !in.IsDir() || in.Perm() != 0o1777 || in.FileType().String() != "directory" || in.IsRegular() {
		t.Errorf("dir: %v %o", in.FileType(), in.Perm())
	}
	if FileType(0).String() != "unknown" {
		t.Error("type 0")
	}
	in.FileACL = 1<<32 | 5
	if in.ACLBlock(false) != 5 || in.ACLBlock(true) != 1<<32|5 {
		t.Error("ACLBlock")
	}
}

// fuzzSeeds returns inodes from a real image when mke2fs is available.
func fuzzSeeds(f *testing.F) [][]byte {
	if _, err := exec.LookPath("mke2fs"); err != nil {
		return nil
	}
	dir := f.TempDir()
	src := filepath.Join(dir, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "f"), []byte("hello"), 0o644)
	os.Symlink("target", filepath.Join(src, "l"))
	img := filepath.Join(dir, "img")
	if exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-b", "1024", "-N", "16", "-d", src, img, "1M").Run() != nil {
		return nil
	}
	out, err := exec.Command("debugfs", "-R", "imap <2>", img).Output()
	if err != nil {
		return nil
	}
	m := imapRE.FindSubmatch(out)
	if m == nil {
		return nil
	}
	blk, off := num(string(m[1])), num("0x"+string(m[2]))
	data, err := os.ReadFile(img)
	if err != nil {
		return nil
	}
	table := data[blk*1024+off:]
	var seeds [][]byte
	for i := range 14 { // inodes 2..15
		seeds = append(seeds, table[i*256:(i+1)*256])
	}
	return seeds
}

func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, size := range []int{128, 256} {
		b := make([]byte, size)
		randomInode(r, size).Encode(b)
		f.Add(b)
	}
	f.Add(make([]byte, 128))
	f.Fuzz(func(t *testing.T, b []byte) {
		size := GoodOldSize
		for size*2 <= len(b) {
			size *= 2
		}
		in, err := Decode(b, size)
		if len(b) < GoodOldSize {
			if err == nil {
				t.Fatal("short input decoded")
			}
			return
		}
		_ = Checksum(1, 2, b[:size])
		_ = Verify(1, 2, b[:size])
		if err != nil {
			return
		}
		in.Device()
		in.IsFastSymlink(1024, 4096, true, false)
		in.Sectors(1024, true)
		in.ExtraSpace()
		out := make([]byte, size)
		if err := in.Encode(out); err != nil {
			t.Fatalf("encode of decoded inode: %v", err)
		}
		if !bytes.Equal(out, b[:size]) {
			t.Fatalf("round trip differs")
		}
		if err := in.EncodeChecksum(out, 9, 10); err != nil {
			t.Fatal(err)
		}
		if err := Verify(9, 10, out); err != nil {
			t.Fatalf("own checksum: %v", err)
		}
	})
}

// EncodeTimes writes what Encode writes of the three times, and nothing
// else: an inode encoded whole, then given another inode's times by
// EncodeTimes, is byte for byte that inode encoded with those times.
func TestEncodeTimes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{128, 256, 512} {
		for range 50 {
			in := randomInode(r, size)
			other := randomInode(r, size)
			b := make([]byte, size)
			if err := in.Encode(b); err != nil {
				t.Fatal(err)
			}
			moved := *in
			moved.Atime, moved.Ctime, moved.Mtime = other.Atime, other.Ctime, other.Mtime
			if err := moved.EncodeTimes(b); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, size)
			if err := moved.Encode(want); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, want) {
				t.Fatalf("size %d: EncodeTimes differs from Encode with the new times", size)
			}
		}
	}
	if err := (&Inode{}).EncodeTimes(make([]byte, 100)); err == nil {
		t.Error("EncodeTimes into 100 bytes: no error")
	}
}

var imapRE = regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`)

func num(s string) uint64 {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		panic(fmt.Sprintf("number %q: %v", s, err))
	}
	return v
}
