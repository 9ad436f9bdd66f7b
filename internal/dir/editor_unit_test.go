package dir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"syscall"
	"testing"
)

func TestEditorBadArgs(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, Csum: true}
	e, _ := newEditor(t, f, HashHalfMD4)
	for _, tc := range []struct {
		x    Entry
		want error
	}{
		{Entry{Inode: 5, Name: nil}, fs.ErrInvalid},
		{Entry{Inode: 5, Name: bytes.Repeat([]byte{'a'}, 256)}, fs.ErrInvalid},
		{Entry{Inode: 5, Name: []byte("a/b")}, fs.ErrInvalid},
		{Entry{Inode: 5, Name: []byte("a\x00b")}, fs.ErrInvalid},
		{Entry{Inode: 0, Name: []byte("zero")}, fs.ErrInvalid},
		{Entry{Inode: 5, Name: []byte(".")}, fs.ErrExist},
		{Entry{Inode: 5, Name: []byte("..")}, fs.ErrExist},
	} {
		if err := e.Add(tc.x); !errors.Is(err, tc.want) {
			t.Errorf("Add(%q, ino %d) = %v, want %v", tc.x.Name, tc.x.Inode, err, tc.want)
		}
	}
	for _, n := range []string{".", ".."} {
		if _, err := e.Remove([]byte(n)); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Remove(%q) = %v", n, err)
		}
		if _, err := e.Replace([]byte(n), 7, FTDir); !errors.Is(err, fs.ErrInvalid) {
			t.Errorf("Replace(%q) = %v", n, err)
		}
	}
	if err := e.Add(Entry{Inode: 5, Name: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Replace([]byte("x"), 0, 1); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("Replace to inode 0: %v", err)
	}
	if err := e.SetDotDot(0); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("SetDotDot(0): %v", err)
	}
	quickCheck(t, e, e.Store.(*MemStore))
}

// fillUntil adds names name-0, name-1, ... until the directory has n
// blocks or becomes indexed.
func fillUntil(t *testing.T, e *Editor, m model, prefix string, stop func() bool) {
	t.Helper()
	for i := 0; !stop(); i++ {
		x := Entry{Inode: uint32(100 + i), Name: fmt.Appendf(nil, "%s-%d-%s", prefix, i, bytes.Repeat([]byte{'p'}, i%40)), FileType: FTRegFile}
		if err := e.Add(x); err != nil {
			t.Fatal(err)
		}
		m[string(x.Name)] = x
	}
}

func TestEditorMakeIndexed(t *testing.T) {
	for _, csum := range []bool{false, true} {
		t.Run(fmt.Sprint("csum=", csum), func(t *testing.T) {
			f := Format{BlockSize: 1024, FileType: true, Csum: csum, HashSeed: [4]uint32{9, 8, 7, 6}}
			e, st := newEditor(t, f, HashTea)
			m := model{}
			rng := rand.New(rand.NewPCG(1, 1))
			fillUntil(t, e, m, "mk", func() bool { return e.Indexed })
			strictCheck(t, e, st, m, rng)
			if e.NBlocks != 3 {
				t.Fatalf("indexed with %d blocks, want 3", e.NBlocks)
			}
			r, err := ParseDxRoot(st.Blocks[0], f)
			if err != nil {
				t.Fatal(err)
			}
			if r.HashVersion != HashTea || r.IndirectLevels != 0 || len(r.Entries) != 2 ||
				r.Entries[0].Block != 1 || r.Entries[1].Block != 2 || r.DotInode != edIno || r.DotDotInode != 2 {
				t.Fatalf("root %+v", r)
			}
			// Both leaves got a share of the names.
			for _, b := range st.Blocks[1:] {
				blk, err := ParseBlock(b, f)
				if err != nil || len(blk.Entries()) < len(m)/4 {
					t.Fatalf("leaf with %d of %d names: %v", len(blk.Entries()), len(m), err)
				}
			}
			if err := e.SetDotDot(77); err != nil {
				t.Fatal(err)
			}
			if r, err := e.Dir().Lookup([]byte("..")); err != nil || r.Inode != 77 {
				t.Fatalf(`".." = %+v, %v`, r, err)
			}
			quickCheck(t, e, st)
		})
	}
}

func TestEditorSetDotDotLinear(t *testing.T) {
	f := Format{BlockSize: 4096, FileType: true, Csum: true}
	e, st := newEditor(t, f, HashHalfMD4)
	if empty, err := e.IsEmpty(); err != nil || !empty {
		t.Fatalf("new dir: IsEmpty = %v, %v", empty, err)
	}
	if err := e.Add(Entry{Inode: 30, Name: []byte("a"), FileType: FTDir}); err != nil {
		t.Fatal(err)
	}
	if empty, err := e.IsEmpty(); err != nil || empty {
		t.Fatalf("IsEmpty = %v, %v", empty, err)
	}
	if err := e.SetDotDot(31); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"..", "a"} {
		r, err := e.Dir().Lookup([]byte(n))
		if err != nil || r.Inode != map[string]uint32{"..": 31, "a": 30}[n] {
			t.Fatalf("%q: %+v, %v", n, r, err)
		}
	}
	quickCheck(t, e, st)
	if _, err := e.Remove([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if empty, err := e.IsEmpty(); err != nil || !empty {
		t.Fatalf("IsEmpty after remove = %v, %v", empty, err)
	}
}

// TestEditorAppendFails checks that a failing AppendBlock leaves a valid
// directory that still takes names where they fit.
func TestEditorAppendFails(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, Csum: true}
	rng := rand.New(rand.NewPCG(2, 2))

	// make_indexed_dir needs two new blocks; only one is there.
	e, st := newEditor(t, f, HashHalfMD4)
	st.MaxBlocks = 2
	m := model{}
	var err error
	for i := 0; err == nil; i++ {
		x := Entry{Inode: uint32(50 + i), Name: fmt.Appendf(nil, "append-fail-%d", i), FileType: FTRegFile}
		if err = e.Add(x); err == nil {
			m[string(x.Name)] = x
		}
	}
	if !errors.Is(err, syscall.ENOSPC) || e.Indexed || e.NBlocks != 2 {
		t.Fatalf("err %v, indexed %v, %d blocks", err, e.Indexed, e.NBlocks)
	}
	strictCheck(t, e, st, m, rng)

	// An htree leaf split with no block to spare changes nothing.
	e, st = newEditor(t, f, HashHalfMD4)
	m = model{}
	fillUntil(t, e, m, "split", func() bool { return e.NBlocks == 6 })
	st.MaxBlocks = 6
	before := bytes.Join(st.Blocks, nil)
	err = nil
	for i := 0; err == nil; i++ {
		x := Entry{Inode: uint32(5000 + i), Name: fmt.Appendf(nil, "more-%d", i), FileType: FTRegFile}
		before = bytes.Join(st.Blocks, nil)
		if err = e.Add(x); err == nil {
			m[string(x.Name)] = x
		}
	}
	if !errors.Is(err, syscall.ENOSPC) || e.NBlocks != 6 || !bytes.Equal(before, bytes.Join(st.Blocks, nil)) {
		t.Fatalf("err %v, %d blocks, changed %v", err, e.NBlocks, !bytes.Equal(before, bytes.Join(st.Blocks, nil)))
	}
	strictCheck(t, e, st, m, rng)
}

func TestEditorBadHashVersion(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true}
	e, _ := newEditor(t, f, HashSiphash)
	var err error
	for i := 0; err == nil && !e.Indexed; i++ {
		err = e.Add(Entry{Inode: 9, Name: fmt.Appendf(nil, "siphash-%d", i)})
	}
	if err == nil || e.Indexed || e.NBlocks != 1 {
		t.Fatalf("err %v, indexed %v, blocks %d", err, e.Indexed, e.NBlocks)
	}
}

// TestEditorCorruptInput checks that edits of broken directories fail
// cleanly: checksum errors, a bad root, holes.
func TestEditorCorruptInput(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, Csum: true}
	e, st := newEditor(t, f, HashHalfMD4)
	m := model{}
	fillUntil(t, e, m, "c", func() bool { return e.NBlocks == 4 })
	st.Blocks[2][100] ^= 0xff
	var ce interface{ Error() string }
	for _, op := range []func() error{
		func() error {
			for k := range m {
				if _, err := e.Remove([]byte(k)); err != nil {
					return err
				}
			}
			return nil
		},
		func() error {
			// Some of these hash into the corrupt leaf.
			for i := range 200 {
				if err := e.Add(Entry{Inode: 9, Name: fmt.Appendf(nil, "new-%d", i)}); err != nil {
					return err
				}
			}
			return nil
		},
		func() error { return e.Dir().Iterate(func(uint32, int, Entry) error { return nil }) },
	} {
		if err := op(); err == nil {
			t.Fatal("edit of a corrupt leaf succeeded")
		} else {
			ce = err
		}
	}
	t.Logf("last error: %v", ce)

	e, st = newEditor(t, f, HashHalfMD4)
	fillUntil(t, e, model{}, "r", func() bool { return e.NBlocks == 4 })
	st.Blocks[0][30] = 9 // indirect_levels beyond the limit
	if err := e.Add(Entry{Inode: 9, Name: []byte("new-one")}); err == nil {
		t.Fatal("Add under a corrupt root succeeded")
	}
	if err := e.SetDotDot(5); err == nil {
		t.Fatal("SetDotDot on a corrupt root succeeded")
	}
}

func TestNewDirBlock(t *testing.T) {
	for _, f := range []Format{{BlockSize: 1024, FileType: true, Csum: true}, {BlockSize: 4096}} {
		b, err := NewDirBlock(f, 12, 2, 0x1234)
		if err != nil {
			t.Fatal(err)
		}
		if err := VerifyLeafChecksum(b, f, 0x1234); err != nil {
			t.Fatal(err)
		}
		blk, err := ParseBlock(b, f)
		if err != nil || len(blk.Slots) != 2 || blk.Slots[0].RecLen != 12 || string(blk.Slots[1].Name) != ".." || blk.Slots[1].Inode != 2 {
			t.Fatalf("%+v %v", blk, err)
		}
		wantFT := uint8(0)
		if f.FileType {
			wantFT = FTDir
		}
		if blk.Slots[0].FileType != wantFT || blk.Slots[1].FileType != wantFT {
			t.Fatalf("file types %d %d", blk.Slots[0].FileType, blk.Slots[1].FileType)
		}
	}
}

func TestInlineEdit(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, Csum: true}
	iblock, err := EncodeInline(f, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ea []byte
	m := model{}
	add := func(i int) bool {
		x := Entry{Inode: uint32(20 + i), Name: fmt.Appendf(nil, "inl%d", i), FileType: FTRegFile}
		ok, err := InlineAdd(iblock, ea, f, x)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			m[string(x.Name)] = x
		}
		return ok
	}
	check := func() {
		t.Helper()
		in, err := ParseInline(iblock, ea, f)
		if err != nil {
			t.Fatal(err)
		}
		es := in.Entries()
		if len(es) != len(m) {
			t.Fatalf("%d entries, want %d", len(es), len(m))
		}
		for _, x := range es {
			if w := m[string(x.Name)]; w.Inode != x.Inode || w.FileType != x.FileType {
				t.Fatalf("%q: %+v, want %+v", x.Name, x, w)
			}
		}
	}
	i := 0
	for add(i) {
		i++
	}
	if i == 0 {
		t.Fatal("nothing fits in i_block")
	}
	check()
	if ok, err := InlineAdd(iblock, ea, f, Entry{Inode: 3, Name: []byte("inl0")}); ok || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("duplicate: %v %v", ok, err)
	}
	// Spill into system.data, grown in two steps.
	if ea, err = GrowRegion(ea, 12, f); err != nil {
		t.Fatal(err)
	}
	check()
	if !add(i) {
		t.Fatal("no room in a 12-byte system.data for a 4-byte name")
	}
	i++
	if ea, err = GrowRegion(ea, 96, f); err != nil {
		t.Fatal(err)
	}
	for add(i) {
		i++
	}
	check()
	if ok, err := InlineAdd(iblock, ea, f, Entry{Inode: 3, Name: []byte(fmt.Sprint("inl", i-1))}); ok || !errors.Is(err, fs.ErrExist) {
		t.Fatalf("duplicate in system.data: %v %v", ok, err)
	}
	if _, err := GrowRegion(ea, 95, f); err == nil {
		t.Fatal("GrowRegion to an unaligned size")
	}
	// Remove one from each part, replace one, move the parent.
	for _, n := range []string{"inl0", fmt.Sprint("inl", i-1)} {
		old, err := InlineRemove(iblock, ea, f, []byte(n))
		if err != nil || old.Inode != m[n].Inode {
			t.Fatalf("remove %q: %+v %v", n, old, err)
		}
		delete(m, n)
		if _, err := InlineRemove(iblock, ea, f, []byte(n)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("second remove: %v", err)
		}
	}
	old, err := InlineReplace(iblock, ea, f, []byte("inl1"), 99, FTDir)
	if err != nil || old.Inode != m["inl1"].Inode {
		t.Fatal(old, err)
	}
	m["inl1"] = Entry{Inode: 99, Name: []byte("inl1"), FileType: FTDir}
	if err := SetInlineParent(iblock, 44); err != nil {
		t.Fatal(err)
	}
	check()
	// Empty a copy of it.
	iblock2, ea2 := bytes.Clone(iblock), bytes.Clone(ea)
	for k := range m {
		if _, err := InlineRemove(iblock2, ea2, f, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if empty, err := InlineIsEmpty(iblock2, ea2, f); err != nil || !empty {
		t.Fatalf("InlineIsEmpty = %v %v", empty, err)
	}
	if empty, err := InlineIsEmpty(iblock, ea, f); err != nil || empty {
		t.Fatalf("InlineIsEmpty = %v %v", empty, err)
	}
	// Move to a block; the editor takes it from there.
	b0, err := InlineToBlock(f, edIno, iblock, ea, edSeed)
	if err != nil {
		t.Fatal(err)
	}
	st := &MemStore{BlockSize: 1024, Blocks: [][]byte{b0}}
	e := &Editor{Format: f, Store: st, NBlocks: 1, CsumSeed: edSeed, Ino: edIno, DirIndex: true, DefHashVersion: HashHalfMD4}
	if r, err := e.Dir().Lookup([]byte("..")); err != nil || r.Inode != 44 {
		t.Fatalf(`"..": %+v %v`, r, err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	strictCheck(t, e, st, m, rng)
	randomOps(t, e, st, m, rng, 300, 50, nil)
}
