package xattr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

func TestNames(t *testing.T) {
	tests := []struct {
		full   string
		index  uint8
		suffix string
	}{
		{"user.foo", IndexUser, "foo"},
		{"trusted.x.y", IndexTrusted, "x.y"},
		{"security.selinux", IndexSecurity, "selinux"},
		{"system.posix_acl_access", IndexPosixACLAccess, ""},
		{"system.posix_acl_default", IndexPosixACLDefault, ""},
		{"system.richacl", IndexRichACL, ""},
		{"system.data", IndexSystem, "data"},
		{"gnu.translator", IndexHurd, "translator"},
		{"user.\xe9\xff", IndexUser, "\xe9\xff"},
	}
	for _, tt := range tests {
		idx, suf, err := SplitName(tt.full)
		if err != nil || idx != tt.index || string(suf) != tt.suffix {
			t.Errorf("SplitName(%q) = %d, %q, %v", tt.full, idx, suf, err)
		}
		if full, ok := FullName(tt.index, []byte(tt.suffix)); !ok || full != tt.full {
			t.Errorf("FullName(%d, %q) = %q, %v", tt.index, tt.suffix, full, ok)
		}
	}
	for _, bad := range []string{"user.", "foo.bar", "", "trusted", "user.a\x00b", "user." + strings.Repeat("x", 256)} {
		if _, _, err := SplitName(bad); err == nil {
			t.Errorf("SplitName(%q) accepted", bad)
		}
	}
	if _, ok := FullName(9, nil); ok {
		t.Error("index 9 has a name")
	}
}

func sampleEntries() []Entry {
	return []Entry{
		{Index: IndexUser, Name: []byte("zeta"), Value: []byte("z")},
		{Index: IndexUser, Name: []byte("a"), Value: bytes.Repeat([]byte{0xab}, 37)},
		{Index: IndexTrusted, Name: []byte("t"), Value: []byte{}},
		{Index: IndexPosixACLAccess, Name: []byte{}, Value: []byte{1, 0, 0, 0, 1, 0, 6, 0}},
		{Index: IndexSecurity, Name: []byte("\xe9t\xe9"), Value: []byte("high bytes")},
		{Index: IndexUser, Name: []byte("big"), ValueInum: 77, ValueSize: 100000, Hash: 0x1234},
	}
}

func sameEntries(t *testing.T, got, want []Entry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Index != w.Index || !bytes.Equal(g.Name, w.Name) || !bytes.Equal(g.Value, w.Value) || g.ValueInum != w.ValueInum {
			t.Errorf("entry %d: got %+v, want %+v", i, g, w)
		}
		if w.ValueInum != 0 && (g.ValueSize != w.ValueSize || g.Hash != w.Hash) {
			t.Errorf("entry %d: EA inode size/hash %d/%#x, want %d/%#x", i, g.ValueSize, g.Hash, w.ValueSize, w.Hash)
		}
	}
}

func TestIBodyRoundTrip(t *testing.T) {
	es := sampleEntries()
	opt := Options{EAInode: true, InodesCount: 1000}
	area, err := EncodeIBody(1024-128-32, es)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeIBody(area, opt)
	if err != nil {
		t.Fatal(err)
	}
	sameEntries(t, got, es) // in-inode order is kept
	for _, e := range got {
		if e.ValueInum == 0 && e.Hash != 0 {
			t.Errorf("%q: in-inode hash %#x, want 0", e.Name, e.Hash)
		}
	}
	// Through a whole raw inode.
	var raw []byte
	raw = make([]byte, 1024)
	copy(raw[128+32:], area)
	if got, err := DecodeInode(raw, 32, opt); err != nil || len(got) != len(es) {
		t.Fatalf("DecodeInode: %d, %v", len(got), err)
	}
	if _, err := EncodeIBody(64, es); !errors.Is(err, ErrNoSpace) {
		t.Errorf("64-byte area: %v", err)
	}
	if IBodyFree(96, es) >= 0 {
		t.Errorf("IBodyFree(96) = %d", IBodyFree(96, es))
	}
	empty, _ := EncodeIBody(96, nil)
	if got, err := DecodeIBody(empty, opt); got != nil || err != nil {
		t.Errorf("empty area: %v %v", got, err)
	}
	// Without ea_inode the EA inode reference is refused.
	if _, err := DecodeIBody(area, Options{}); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("ea_inode without feature: %v", err)
	}
}

func TestBlockRoundTrip(t *testing.T) {
	es := sampleEntries()
	p := BlockParams{Size: 1024, Csum: true, Seed: 0xfeedbeef, BlockNr: 1234}
	b, err := EncodeBlock(es, p)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{EAInode: true}
	h, got, err := DecodeBlock(b, opt)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(es)
	slices.SortStableFunc(want, compare)
	sameEntries(t, got, want)
	if h.RefCount != 1 || h.Blocks != 1 || h.Magic != Magic || h.Hash != BlockHash(got) || h.Hash == 0 {
		t.Errorf("header %+v, block hash %#x", h, BlockHash(got))
	}
	for i := 1; i < len(got); i++ {
		if Less(got[i], got[i-1]) {
			t.Errorf("entries %d and %d out of order", i-1, i)
		}
	}
	for _, e := range got {
		if !EntryHashOK(e) {
			t.Errorf("%q: hash %#x", e.Name, e.Hash)
		}
		if e.ValueInum == 0 && e.Hash != HashEntry(e.Name, e.Value) {
			t.Errorf("%q: hash %#x not the unsigned one", e.Name, e.Hash)
		}
	}
	if err := VerifyBlockChecksum(b, 1234, 0xfeedbeef); err != nil {
		t.Fatal(err)
	}
	if err := VerifyBlockChecksum(b, 1235, 0xfeedbeef); !errors.Is(err, fserr.ErrChecksum) {
		t.Errorf("moved block: %v", err)
	}
	// Re-encoding the decoded entries gives the same bytes.
	b2, err := EncodeBlock(got, p)
	if err != nil || !bytes.Equal(b, b2) {
		t.Errorf("re-encode differs: %v", err)
	}
	big := []Entry{{Index: IndexUser, Name: []byte("x"), Value: make([]byte, 1000)}}
	if _, err := EncodeBlock(big, p); !errors.Is(err, ErrNoSpace) {
		t.Errorf("1000-byte value in 1K block: %v", err)
	}
}

func TestHashes(t *testing.T) {
	// Signedness only matters for name bytes ≥ 0x80.
	if HashEntry([]byte("abc"), []byte("v")) != HashEntrySigned([]byte("abc"), []byte("v")) {
		t.Error("ASCII names hash differently signed")
	}
	if HashEntry([]byte("\xe9"), nil) == HashEntrySigned([]byte("\xe9"), nil) {
		t.Error("high-byte names hash the same signed")
	}
	// Hand-computed: name "a" → 0x61; one value word 0x00000062 ("b" padded).
	if h := HashEntry([]byte("a"), []byte("b")); h != (0x61<<16 ^ 0x62) {
		t.Errorf("HashEntry(a, b) = %#x", h)
	}
	var w [4]byte
	binary.LittleEndian.PutUint32(w[:], 0xdeadbeef)
	if HashEntryEAInode([]byte("n"), 0xdeadbeef) != HashEntry([]byte("n"), w[:]) {
		t.Error("EA inode hash is not the name hash mixed with the value hash")
	}
	if BlockHash([]Entry{{Hash: 1}, {Hash: 0}}) != 0 {
		t.Error("a zero entry hash must zero the block hash")
	}
	if BlockHash([]Entry{{Hash: 1}, {Hash: 2}}) != (1<<16 ^ 2) {
		t.Error("block hash mixing")
	}
}

func TestDecodeErrors(t *testing.T) {
	good, err := EncodeBlock([]Entry{
		{Index: IndexUser, Name: []byte("one"), Value: []byte("1111")},
		{Index: IndexUser, Name: []byte("two"), Value: []byte("22")},
	}, BlockParams{Size: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const e1 = HeaderSize // first entry
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
		{"magic", mod(func(b []byte) { b[3] = 0 }), "invalid header"},
		{"blocks", mod(func(b []byte) { b[8] = 2 }), "invalid header"},
		{"no terminator", mod(func(b []byte) {
			for i := e1; i < len(b); i++ {
				b[i] = 1
			}
		}), "out of bounds"},
		{"nul in name", mod(func(b []byte) { b[e1+EntrySize+1] = 0 }), "NUL"},
		{"value past end", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[e1+2:], 1022) }), "overlaps"},
		{"value offset out", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[e1+2:], 2000) }), "out of bounds"},
		{"value over entries", mod(func(b []byte) { binary.LittleEndian.PutUint16(b[e1+2:], e1) }), "overlaps"},
		{"size huge", mod(func(b []byte) { binary.LittleEndian.PutUint32(b[e1+8:], SizeMax+1) }), "too large"},
		{"ea inode no feature", mod(func(b []byte) { binary.LittleEndian.PutUint32(b[e1+4:], 20) }), "without the ea_inode feature"},
	}
	for _, tt := range tests {
		_, _, err := DecodeBlock(tt.b, Options{})
		if !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	eaRoot := mod(func(b []byte) { binary.LittleEndian.PutUint32(b[e1+4:], 2) })
	if _, _, err := DecodeBlock(eaRoot, Options{EAInode: true}); err == nil {
		t.Error("root inode as EA inode accepted")
	}
	eaBig := mod(func(b []byte) { binary.LittleEndian.PutUint32(b[e1+4:], 500) })
	if _, _, err := DecodeBlock(eaBig, Options{EAInode: true, InodesCount: 100}); err == nil {
		t.Error("EA inode past the inode count accepted")
	}
	if _, _, err := DecodeBlock(eaBig, Options{EAInode: true}); err != nil {
		t.Errorf("EA inode reference: %v", err)
	}
	if _, err := DecodeIBody([]byte{0, 0, 0x02, 0xea, 0, 0}, Options{}); err == nil {
		t.Error("6-byte area with magic accepted")
	}
	if _, err := IBodyArea(make([]byte, 256), 30); err == nil {
		t.Error("unaligned i_extra_isize accepted")
	}
	if a, err := IBodyArea(make([]byte, 256), 128); a != nil || err != nil {
		t.Errorf("full i_extra_isize: %v %v", a, err)
	}
}

func TestACL(t *testing.T) {
	es := []ACLEntry{
		{Tag: ACLUserObj, Perm: 6, ID: ACLUndefinedID},
		{Tag: ACLUser, Perm: 4, ID: 1000},
		{Tag: ACLGroupObj, Perm: 4, ID: ACLUndefinedID},
		{Tag: ACLGroup, Perm: 5, ID: 50},
		{Tag: ACLMask, Perm: 7, ID: ACLUndefinedID},
		{Tag: ACLOther, Perm: 0, ID: ACLUndefinedID},
	}
	disk, err := EncodeACL(es)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != 4+4*4+2*8 {
		t.Errorf("disk ACL of %d bytes", len(disk))
	}
	got, err := DecodeACL(disk)
	if err != nil || !slices.Equal(got, es) {
		t.Fatalf("DecodeACL: %v %v", got, err)
	}
	vfs, err := ACLToXattr(disk)
	if err != nil || len(vfs) != 4+6*8 || binary.LittleEndian.Uint32(vfs) != ACLXattrVersion {
		t.Fatalf("ACLToXattr: %x %v", vfs, err)
	}
	if binary.LittleEndian.Uint32(vfs[8:]) != ACLUndefinedID {
		t.Errorf("USER_OBJ id in VFS form %#x", binary.LittleEndian.Uint32(vfs[8:]))
	}
	back, err := ACLFromXattr(vfs)
	if err != nil || !bytes.Equal(back, disk) {
		t.Fatalf("ACLFromXattr: %x %v", back, err)
	}
	minimal := []byte{1, 0, 0, 0, 1, 0, 6, 0, 4, 0, 4, 0, 0x20, 0, 4, 0}
	if got, err := DecodeACL(minimal); err != nil || len(got) != 3 {
		t.Errorf("minimal ACL: %v %v", got, err)
	}
	if got, err := DecodeACL([]byte{1, 0, 0, 0}); err != nil || got != nil {
		t.Errorf("empty ACL: %v %v", got, err)
	}
	for name, bad := range map[string][]byte{
		"short":       {1, 0},
		"version":     {2, 0, 0, 0},
		"tag":         {1, 0, 0, 0, 0x40, 0, 0, 0},
		"truncated":   {1, 0, 0, 0, 2, 0, 4, 0},
		"count":       {1, 0, 0, 0, 1, 0, 6, 0, 2, 0, 4, 0, 1, 0, 0, 0, 4, 0, 4, 0},
		"long tail":   append(slices.Clone(minimal), 2, 0, 4, 0, 1, 0, 0),
		"xattr as it": vfs,
	} {
		if _, err := DecodeACL(bad); !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := DecodeXattrACL(disk); err == nil {
		t.Error("disk form accepted as VFS form")
	}
	if _, err := DecodeXattrACL(vfs[:len(vfs)-1]); err == nil {
		t.Error("ragged VFS form accepted")
	}
}

func FuzzDecodeBlock(f *testing.F) {
	b, _ := EncodeBlock(sampleEntries(), BlockParams{Size: 1024})
	f.Add(b)
	for _, s := range realSeeds(f) {
		if s.block != nil {
			f.Add(s.block)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		opt := Options{EAInode: true, InodesCount: 5000}
		h, es, err := DecodeBlock(b, opt)
		BlockChecksum(b, 1, 2)
		if err != nil {
			return
		}
		for _, e := range es {
			EntryHashOK(e)
			e.FullName()
		}
		// What decodes re-encodes (if it fits once packed) and decodes
		// to the same entries.
		out, err := EncodeBlock(es, BlockParams{Size: len(b), RefCount: h.RefCount})
		if err != nil {
			return
		}
		_, es2, err := DecodeBlock(out, opt)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		want := slices.Clone(es)
		slices.SortStableFunc(want, compare)
		if len(es2) != len(want) {
			t.Fatalf("%d entries after round trip, want %d", len(es2), len(want))
		}
	})
}

func FuzzDecodeIBody(f *testing.F) {
	a, _ := EncodeIBody(96, sampleEntries())
	f.Add(a)
	for _, s := range realSeeds(f) {
		f.Add(s.ibody)
	}
	f.Fuzz(func(t *testing.T, a []byte) {
		es, err := DecodeIBody(a, Options{EAInode: true})
		if err != nil || es == nil {
			return
		}
		out, err := EncodeIBody(len(a), es)
		if err != nil {
			return
		}
		es2, err := DecodeIBody(out, Options{EAInode: true})
		if err != nil || len(es2) != len(es) {
			t.Fatalf("round trip: %d vs %d, %v", len(es2), len(es), err)
		}
		for _, e := range es {
			if e.Index == IndexPosixACLAccess {
				ACLToXattr(e.Value)
			}
		}
	})
}

func FuzzACL(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 1, 0, 6, 0, 2, 0, 4, 0, 0xe8, 3, 0, 0, 4, 0, 4, 0, 0x10, 0, 6, 0, 0x20, 0, 4, 0})
	f.Add([]byte{2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, v []byte) {
		if x, err := ACLToXattr(v); err == nil {
			back, err := ACLFromXattr(x)
			if err != nil || !bytes.Equal(back, v) {
				t.Fatalf("disk→xattr→disk: %x → %x, %v", v, back, err)
			}
		}
		if d, err := ACLFromXattr(v); err == nil {
			if _, err := ACLToXattr(d); err != nil {
				t.Fatalf("xattr→disk→xattr: %v", err)
			}
		}
	})
}

// realSeed is an in-inode area and an xattr block of a real image
// (realSeeds).
type realSeed struct{ ibody, block []byte }
