package dir

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

func fmt4k(csum bool) Format {
	return Format{BlockSize: 4096, FileType: true, Csum: csum, HashSeed: [4]uint32{1, 2, 3, 4}}
}

func TestRecLenDisk(t *testing.T) {
	tests := []struct {
		bs   int
		n    int
		disk uint16
	}{
		{4096, 12, 12},
		{4096, 4096, 4096},
		{1024, 1012, 1012},
		{65536, 65536, 0xFFFF},
		{65536, 65532, 65532},
		{65536, 12, 12},
		{1 << 17, 1 << 17, 0},
		{1 << 17, 65536, 1},
		{1 << 17, 65540, 4 | 1},
		{1 << 18, 3 << 16, 3},
	}
	for _, tt := range tests {
		if got := RecLenToDisk(tt.n, tt.bs); got != tt.disk {
			t.Errorf("RecLenToDisk(%d, %d) = %#x, want %#x", tt.n, tt.bs, got, tt.disk)
		}
		if got := RecLenFromDisk(tt.disk, tt.bs); got != tt.n {
			t.Errorf("RecLenFromDisk(%#x, %d) = %d, want %d", tt.disk, tt.bs, got, tt.n)
		}
	}
	if got := RecLenFromDisk(0, 65536); got != 65536 {
		t.Errorf("RecLenFromDisk(0, 64K) = %d", got)
	}
	if got := RecLenFromDisk(0, 4096); got != 0 {
		t.Errorf("RecLenFromDisk(0, 4K) = %d", got)
	}
}

func TestRecLen(t *testing.T) {
	for n, want := range map[int]int{0: 8, 1: 12, 2: 12, 4: 12, 5: 16, 255: 264} {
		if got := RecLen(n); got != want {
			t.Errorf("RecLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, string(e.Name))
	}
	return out
}

func TestEncodeParseRoundTrip(t *testing.T) {
	for _, f := range []Format{
		fmt4k(false), fmt4k(true),
		{BlockSize: 1024, FileType: false},
		{BlockSize: 65536, FileType: true},
		{BlockSize: 65536, FileType: true, Csum: true},
	} {
		t.Run(fmt.Sprintf("bs%d_ft%v_csum%v", f.BlockSize, f.FileType, f.Csum), func(t *testing.T) {
			in := []Entry{
				{Inode: 2, Name: []byte("."), FileType: FTDir},
				{Inode: 2, Name: []byte(".."), FileType: FTDir},
				{Inode: 12, Name: []byte("hello"), FileType: FTRegFile},
				{Inode: 13, Name: bytes.Repeat([]byte{0xff}, 255), FileType: FTSymlink},
			}
			b, err := EncodeBlock(f, in, 0xabcdef)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyLeafChecksum(b, f, 0xabcdef); err != nil {
				t.Fatal(err)
			}
			blk, err := ParseBlock(b, f)
			if err != nil {
				t.Fatal(err)
			}
			got := blk.Entries()
			if len(got) != len(in) {
				t.Fatalf("got %d entries", len(got))
			}
			for i := range in {
				want := in[i]
				if !f.FileType {
					want.FileType = 0
				}
				if got[i].Inode != want.Inode || !bytes.Equal(got[i].Name, want.Name) || got[i].FileType != want.FileType {
					t.Errorf("entry %d: got %+v want %+v", i, got[i], want)
				}
			}
			last := blk.Slots[len(blk.Slots)-1]
			end := f.BlockSize
			if f.Csum {
				end -= TailSize
			}
			if last.Off+last.RecLen != end {
				t.Errorf("last slot ends at %d, want %d", last.Off+last.RecLen, end)
			}
			// Empty block: one unused dirent spanning everything.
			b, err = EncodeBlock(f, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			blk, err = ParseBlock(b, f)
			if err != nil || len(blk.Slots) != 1 || blk.Slots[0].Inode != 0 || len(blk.Entries()) != 0 {
				t.Fatalf("empty block: %+v, %v", blk, err)
			}
			if !f.Csum && binary.LittleEndian.Uint16(b[4:]) != RecLenToDisk(f.BlockSize, f.BlockSize) {
				t.Errorf("empty block rec_len on disk %#x", binary.LittleEndian.Uint16(b[4:]))
			}
		})
	}
}

func TestEncodeNoSpace(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true}
	var es []Entry
	for i := range 4 {
		es = append(es, Entry{Inode: uint32(i + 1), Name: bytes.Repeat([]byte{'a' + byte(i)}, 255)})
	}
	if _, err := EncodeBlock(f, es, 0); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("4x255 names in 1K: %v", err)
	}
	if _, err := EncodeBlock(f, es[:3], 0); err != nil {
		t.Fatalf("3x255 names in 1K: %v", err)
	}
	if _, err := EncodeBlock(f, []Entry{{Inode: 1}}, 0); err == nil {
		t.Fatal("empty name accepted")
	}
}

func TestParseErrors(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, InodesCount: 100}
	good, err := EncodeBlock(f, []Entry{{Inode: 2, Name: []byte("a")}, {Inode: 3, Name: []byte("bb")}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(fn func(b []byte)) []byte {
		b := slices.Clone(good)
		fn(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"reclen small", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 8) }), "smaller than minimal"},
		{"reclen unaligned", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 14) }), "% 4"},
		{"namelen big", mod(func(b []byte) { b[6] = 9 }), "too small for name_len"},
		{"overrun", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[16:], 1016) }), "overrun"},
		{"too close", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[16:], 1004) }), "too close"},
		{"inode", mod(func(b []byte) { binary.LittleEndian.PutUint32(b[12:], 101) }), "inode out of bounds"},
		{"short", good[:1020], "want block size"},
	}
	for _, tt := range tests {
		_, err := ParseBlock(tt.b, f)
		if err == nil || !errors.Is(err, fserr.ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte(tt.want)) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	// A csum format needs the tail.
	fc := f
	fc.Csum = true
	if _, err := ParseBlock(good, fc); err == nil {
		t.Error("block without tail accepted under metadata_csum")
	}
}

func TestChecksumTail(t *testing.T) {
	f := fmt4k(true)
	b, err := EncodeBlock(f, []Entry{{Inode: 5, Name: []byte("x"), FileType: 1}}, 42)
	if err != nil {
		t.Fatal(err)
	}
	if !HasTail(b, f) {
		t.Fatal("no tail")
	}
	if err := VerifyLeafChecksum(b, f, 42); err != nil {
		t.Fatal(err)
	}
	if err := VerifyLeafChecksum(b, f, 43); !errors.Is(err, fserr.ErrChecksum) {
		t.Fatalf("wrong seed: %v", err)
	}
	b[100] ^= 1
	var ce *fserr.ChecksumError
	if err := VerifyLeafChecksum(b, f, 42); !errors.As(err, &ce) || ce.Stored == ce.Computed {
		t.Fatalf("flipped byte: %v", err)
	}
}

func TestInsertDelete(t *testing.T) {
	for _, f := range []Format{fmt4k(false), fmt4k(true), {BlockSize: 65536, FileType: true}} {
		b, err := EncodeBlock(f, []Entry{{Inode: 2, Name: []byte(".")}, {Inode: 1, Name: []byte("..")}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{".", ".."}
		n := 0
		for ; ; n++ {
			name := []byte(fmt.Sprintf("file-%04d-%s", n, bytes.Repeat([]byte("z"), n%40)))
			ok, err := Insert(b, f, Entry{Inode: uint32(100 + n), Name: name, FileType: FTRegFile}, 7)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			want = append(want, string(name))
		}
		if n < 10 {
			t.Fatalf("only %d inserts fit", n)
		}
		if ok, err := Insert(b, f, Entry{Inode: 9, Name: []byte("..")}, 7); !errors.Is(err, fs.ErrExist) || ok {
			t.Fatalf("duplicate insert: %v %v", ok, err)
		}
		check := func() {
			t.Helper()
			if err := VerifyLeafChecksum(b, f, 7); err != nil {
				t.Fatal(err)
			}
			blk, err := ParseBlock(b, f)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(blk.Entries()); !slices.Equal(got, want) {
				t.Fatalf("entries %q, want %q", got, want)
			}
		}
		check()
		// Delete every third entry, the first one included.
		var kept []string
		for i, name := range want {
			if i%3 == 0 {
				e, ok, err := Delete(b, f, []byte(name), 7)
				if err != nil || !ok || string(e.Name) != name {
					t.Fatalf("delete %q: %v %v %v", name, e, ok, err)
				}
			} else {
				kept = append(kept, name)
			}
		}
		want = kept
		check()
		if _, ok, err := Delete(b, f, []byte("nope"), 7); ok || err != nil {
			t.Fatalf("delete missing: %v %v", ok, err)
		}
		// The freed space is reused: the first slot (unused now) and merges.
		ok, err := Insert(b, f, Entry{Inode: 3, Name: []byte("a")}, 7)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		blk, _ := ParseBlock(b, f)
		if blk.Slots[0].Inode != 3 {
			t.Errorf("first free slot not reused: %+v", blk.Slots[0])
		}
		want = append([]string{"a"}, want...)
		check()
	}
}

func TestHashKnown(t *testing.T) {
	// Values from debugfs 1.47 dx_hash.
	seed := [4]uint32{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}
	tests := []struct {
		name      string
		version   int
		seed      [4]uint32
		hash, min uint32
	}{
		{"hello", HashHalfMD4, [4]uint32{}, 0x1746da32, 0x420013b5},
		{"hello", HashHalfMD4, seed, 0x1746da32, 0x420013b5}, // the default seed explicitly
		{"hello", HashTea, uuidSeed("01234567-89ab-cdef-0123-456789abcdef"), 0x6f5bb1a8, 0x231917c2},
		{`h\xe9llo`, HashLegacy, uuidSeed("1bfef3f8-f9d0-4fa3-9aeb-12aba18bb444"), 0x23eef2fc, 0},
		{"h\xe9llo", HashHalfMD4, [4]uint32{}, 0x8d1edade, 0x44492c83},
		{"h\xe9llo", HashHalfMD4Unsigned, [4]uint32{}, 0x3c66c074, 0x07465d2b},
	}
	for _, tt := range tests {
		h, m, err := Hash([]byte(tt.name), tt.version, tt.seed)
		if err != nil || h != tt.hash || m != tt.min {
			t.Errorf("Hash(%q, %d) = %#x, %#x, %v; want %#x, %#x", tt.name, tt.version, h, m, err, tt.hash, tt.min)
		}
	}
	if _, _, err := Hash([]byte("x"), HashSiphash, seed); !errors.Is(err, fserr.ErrUnsupported) {
		t.Errorf("siphash: %v", err)
	}
	if _, _, err := Hash([]byte("x"), 7, seed); err == nil {
		t.Error("version 7 accepted")
	}
	// ASCII names hash the same signed and unsigned; high bytes do not.
	for v := HashLegacy; v <= HashTea; v++ {
		a, _ := MustHash([]byte("plain"), v, seed)
		b, _ := MustHash([]byte("plain"), v+3, seed)
		c, _ := MustHash([]byte("\xe9t\xe9"), v, seed)
		d, _ := MustHash([]byte("\xe9t\xe9"), v+3, seed)
		if a != b || c == d {
			t.Errorf("version %d: signed/unsigned %#x %#x %#x %#x", v, a, b, c, d)
		}
	}
}

// uuidSeed turns a UUID string (as debugfs and dumpe2fs print s_hash_seed)
// into the four little-endian words of the superblock field.
func uuidSeed(s string) [4]uint32 {
	var raw []byte
	for i := 0; i < len(s); i++ {
		if s[i] == '-' {
			continue
		}
		var v byte
		fmt.Sscanf(s[i:i+2], "%02x", &v)
		raw = append(raw, v)
		i++
	}
	var seed [4]uint32
	if len(raw) != 16 {
		return seed
	}
	for i := range seed {
		seed[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	return seed
}

func TestHashEOF(t *testing.T) {
	// The major hash never has its low bit set and is never 0xFFFFFFFE.
	for i := range 20000 {
		name := []byte(fmt.Sprintf("n%d", i))
		for v := HashLegacy; v <= HashTeaUnsigned; v++ {
			h, _ := MustHash(name, v, [4]uint32{})
			if h&1 != 0 || h == 0xFFFFFFFE {
				t.Fatalf("Hash(%q, %d) = %#x", name, v, h)
			}
		}
	}
}

func TestInline(t *testing.T) {
	f := Format{BlockSize: 4096, FileType: true}
	ib, err := EncodeInline(f, 2, []Entry{{Inode: 12, Name: []byte("a"), FileType: 1}, {Inode: 13, Name: []byte("bcd"), FileType: 2}})
	if err != nil {
		t.Fatal(err)
	}
	ea, err := EncodeRegion(f, 40, []Entry{{Inode: 14, Name: []byte("in-ea"), FileType: 1}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := ParseInline(ib, ea, f)
	if err != nil {
		t.Fatal(err)
	}
	if in.Parent != 2 || !slices.Equal(names(in.Entries()), []string{"a", "bcd", "in-ea"}) {
		t.Fatalf("%+v", in)
	}
	if ok, err := InsertRegion(ib[InlineDotDotSize:], f, Entry{Inode: 15, Name: []byte("new")}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := InsertRegion(ib[InlineDotDotSize:], f, Entry{Inode: 16, Name: bytes.Repeat([]byte("x"), 40)}); ok || err != nil {
		t.Fatal("oversized insert", ok, err)
	}
	if in, err = ParseInline(ib, nil, f); err != nil || len(in.Entries()) != 3 || len(in.EA) != 0 {
		t.Fatal(in, err)
	}
	if _, err := ParseInline(ib[:59], nil, f); err == nil {
		t.Fatal("short i_block accepted")
	}
	if _, err := EncodeInline(f, 2, []Entry{{Inode: 1, Name: bytes.Repeat([]byte("y"), 50)}}); !errors.Is(err, ErrNoSpace) {
		t.Fatal(err)
	}
}

func TestDxEncodeParse(t *testing.T) {
	for _, f := range []Format{fmt4k(false), fmt4k(true), {BlockSize: 1024, LargeDir: true, Csum: true}, {BlockSize: 65536, FileType: true}} {
		r := &DxRoot{DotInode: 11, DotDotInode: 2, HashVersion: HashTea, IndirectLevels: 1,
			Entries: []DxEntry{{0, 1}, {0x100, 2}, {0x101, 3}, {0x8000, 4}}}
		b, err := EncodeDxRoot(f, r, 99)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyDxChecksum(b, f, 99); err != nil {
			t.Fatal(err)
		}
		got, err := ParseDxRoot(b, f)
		if err != nil {
			t.Fatal(err)
		}
		if got.DotInode != 11 || got.DotDotInode != 2 || got.HashVersion != HashTea || got.IndirectLevels != 1 ||
			int(got.Limit) != DxRootLimit(f) || !slices.Equal(got.Entries, r.Entries) {
			t.Fatalf("root %+v", got)
		}
		// The root is also a valid linear block: "." and "..".
		if slots, err := ParseRegion(b, f); err != nil || len(slots) != 2 {
			t.Fatalf("root as dirents: %v %v", slots, err)
		}
		n := &DxNode{Entries: []DxEntry{{0, 5}, {0x10, 6}}}
		nb, err := EncodeDxNode(f, n, 99)
		if err != nil {
			t.Fatal(err)
		}
		if !IsDxNode(nb, f) {
			t.Fatal("not a node")
		}
		if err := VerifyDxChecksum(nb, f, 99); err != nil {
			t.Fatal(err)
		}
		gn, err := ParseDxNode(nb, f)
		if err != nil || int(gn.Limit) != DxNodeLimit(f) || !slices.Equal(gn.Entries, n.Entries) {
			t.Fatalf("node %+v %v", gn, err)
		}
		if f.Csum {
			nb[20] ^= 1
			if err := VerifyDxChecksum(nb, f, 99); !errors.Is(err, fserr.ErrChecksum) {
				t.Fatalf("corrupt node checksum: %v", err)
			}
		}
	}
	f := fmt4k(true)
	good, _ := EncodeDxRoot(f, &DxRoot{DotInode: 1, DotDotInode: 1, HashVersion: 1, Entries: []DxEntry{{0, 1}, {10, 2}}}, 0)
	bad := []struct {
		name string
		fn   func(b []byte)
	}{
		{"hash version", func(b []byte) { b[28] = 3 }},
		{"info length", func(b []byte) { b[29] = 9 }},
		{"levels", func(b []byte) { b[30] = 2 }},
		{"flags", func(b []byte) { b[31] = 1 }},
		{"limit", func(b []byte) { binary.LittleEndian.PutUint16(b[32:], 10) }},
		{"count 0", func(b []byte) { binary.LittleEndian.PutUint16(b[34:], 0) }},
		{"count > limit", func(b []byte) { binary.LittleEndian.PutUint16(b[34:], 600) }},
		{"unsorted", func(b []byte) {
			binary.LittleEndian.PutUint16(b[34:], 3)
			binary.LittleEndian.PutUint32(b[48:], 5)
		}},
		{"dot", func(b []byte) { binary.LittleEndian.PutUint16(b[4:], 16) }},
	}
	for _, tt := range bad {
		b := slices.Clone(good)
		tt.fn(b)
		if _, err := ParseDxRoot(b, f); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
	b := slices.Clone(good)
	b[28] = HashSiphash
	if _, err := ParseDxRoot(b, f); !errors.Is(err, fserr.ErrUnsupported) {
		t.Errorf("siphash root: %v", err)
	}
	fl := f
	fl.LargeDir = true
	b = slices.Clone(good)
	b[30] = 2
	if _, err := ParseDxRoot(b, fl); err != nil {
		t.Errorf("largedir level 2: %v", err)
	}
}
