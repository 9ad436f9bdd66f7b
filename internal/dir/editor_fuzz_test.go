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

// fuzzName maps a byte to one of 64 names of lengths spread over 1..255,
// so that op sequences hit the same names again and leaves fill fast.
func fuzzName(b byte) []byte {
	i := int(b % 64)
	n := 1 + (i*37)%255
	name := bytes.Repeat([]byte{'a' + byte(i%26)}, n)
	name[0] = '0' + byte(i/26)
	return name
}

// FuzzEditorOps runs op sequences on a directory that starts empty: every
// result must match a model and the directory must stay valid throughout.
func FuzzEditorOps(fz *testing.F) {
	fz.Add(byte(0x43), []byte("\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00\x07\x01\x02\x02\x03"))
	fz.Add(byte(0x20), bytes.Repeat([]byte{0, 9, 0, 17, 0, 33, 0, 41, 1, 17}, 12))
	fz.Add(byte(0x01), []byte("\x00\x3f\x00\x3e\x00\x3d\x00\x3c\x00\x3b\x00\x3a\x00\x39\x00\x38\x00\x37\x00\x36\x00\x35\x00\x34"))
	fz.Add(byte(0x40), []byte("\x00\x10\x00\x11\x03\x12\x00\x13"))
	fz.Fuzz(func(t *testing.T, cfg byte, ops []byte) {
		f := Format{BlockSize: 1024, Csum: cfg&1 != 0, FileType: cfg&2 != 0, HashUnsigned: cfg&16 != 0, LargeDir: cfg&32 != 0}
		def := (cfg >> 2) & 3
		if def == 3 {
			def = HashHalfMD4
		}
		e, st := newEditor(t, f, def)
		e.DirIndex = cfg&64 == 0
		m := model{}
		rng := rand.New(rand.NewPCG(uint64(cfg), 1))
		for i := 0; i+1 < len(ops) && i < 600; i += 2 {
			name := fuzzName(ops[i+1])
			ino := uint32(ops[i+1]) + 11
			ft := uint8(1 + ops[i]%7)
			if !f.FileType {
				ft = 0
			}
			want, exists := m[string(name)]
			switch ops[i] % 4 {
			case 0, 3:
				x := Entry{Inode: ino, Name: name, FileType: ft}
				err := e.Add(x)
				if exists != errors.Is(err, fs.ErrExist) || (!exists && err != nil) {
					t.Fatalf("Add(%q) = %v (exists %v)", name, err, exists)
				}
				if !exists {
					m[string(name)] = x
				}
			case 1:
				old, err := e.Remove(name)
				if exists && (err != nil || old.Inode != want.Inode) || !exists && !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("Remove(%q) = %+v, %v (exists %v)", name, old, err, exists)
				}
				delete(m, string(name))
			case 2:
				old, err := e.Replace(name, ino+1000, ft)
				if exists && (err != nil || old.Inode != want.Inode) || !exists && !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("Replace(%q) = %+v, %v (exists %v)", name, old, err, exists)
				}
				if exists {
					m[string(name)] = Entry{Inode: ino + 1000, Name: name, FileType: ft}
				}
			}
			if x, ok := m[string(name)]; ok {
				checkFound(t, e, name, x)
			} else {
				checkAbsent(t, e, name)
			}
			quickCheck(t, e, st)
		}
		strictCheck(t, e, st, m, rng)
	})
}

// editorSeeds returns small directories as fuzz seeds: htrees of two and
// three levels built directly, and ones grown by the editor.
func editorSeeds(fz *testing.F) {
	var names [][]byte
	for i := range 24 {
		names = append(names, fmt.Appendf(nil, "fz%d", i))
	}
	for _, csum := range []bool{false, true} {
		f := Format{BlockSize: 1024, FileType: true, Csum: csum, LargeDir: true}
		for _, shape := range [][2]int{{4, 3}, {6, 2}} {
			st := buildSynth(fz, f, HashTea, names, shape[0], shape[1])
			fz.Add(csum, true, bytes.Join(st.blocks, nil))
		}
		e, st := newEditor(fz, f, HashHalfMD4)
		for i := 0; e.NBlocks < 5; i++ {
			if err := e.Add(Entry{Inode: 11, Name: fuzzName(byte(i)), FileType: 1}); err != nil {
				break
			}
		}
		fz.Add(csum, e.Indexed, bytes.Join(st.Blocks, nil))
		e, st = newEditor(fz, f, HashHalfMD4)
		e.Add(Entry{Inode: 11, Name: []byte("fz1"), FileType: 1})
		fz.Add(csum, false, bytes.Join(st.Blocks, nil))
	}
}

// FuzzEditorCorrupt edits arbitrary directory blocks: nothing may panic,
// and a directory that passes Check before an edit must pass it after.
func FuzzEditorCorrupt(fz *testing.F) {
	editorSeeds(fz)
	fz.Fuzz(func(t *testing.T, csum, indexed bool, data []byte) {
		f := Format{BlockSize: 1024, FileType: true, Csum: csum, LargeDir: true}
		st := &MemStore{BlockSize: 1024, MaxBlocks: 24}
		for len(data) >= 1024 && len(st.Blocks) < 16 {
			st.Blocks = append(st.Blocks, bytes.Clone(data[:1024]))
			data = data[1024:]
		}
		if len(st.Blocks) == 0 {
			return
		}
		e := &Editor{Format: f, Store: st, NBlocks: uint32(len(st.Blocks)), Indexed: indexed,
			CsumSeed: 0x5eed, Ino: 12, DirIndex: true, DefHashVersion: HashHalfMD4}
		ops := []func() error{
			func() error { return e.Add(Entry{Inode: 13, Name: []byte("fz1"), FileType: 1}) },
			func() error { return e.Add(Entry{Inode: 14, Name: bytes.Repeat([]byte("n"), 200), FileType: 1}) },
			func() error { _, err := e.Remove([]byte("fz1")); return err },
			func() error { _, err := e.Remove([]byte("fz7")); return err },
			func() error { _, err := e.Replace([]byte("fz3"), 15, 2); return err },
			func() error { return e.SetDotDot(16) },
			func() error { _, err := e.IsEmpty(); return err },
		}
		for i := range 40 {
			ops = append(ops, func() error { return e.Add(Entry{Inode: 17, Name: fmt.Appendf(nil, "more-%d", i), FileType: 1}) })
		}
		for i, op := range ops {
			valid := e.Dir().Check() == nil
			err := op()
			if !valid {
				continue
			}
			if err != nil && !errors.Is(err, fs.ErrExist) && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("op %d on a valid directory: %v", i, err)
			}
			if err := e.Dir().Check(); err != nil {
				t.Fatalf("op %d broke a valid directory: %v", i, err)
			}
		}
	})
}

// inPlaceStore is a MemStore that also shows and changes blocks in place
// (Viewer, Modifier), as the filesystem's directory store does.
type inPlaceStore struct{ MemStore }

func (s *inPlaceStore) ViewBlock(lblk uint32, fn func(b []byte) error) error {
	b, err := s.ReadBlock(lblk)
	if err != nil {
		return err
	}
	return fn(b)
}

func (s *inPlaceStore) ModifyBlock(lblk uint32, fn func(b []byte) error) error {
	b, err := s.ReadBlock(lblk)
	if err != nil {
		return err
	}
	if b == nil {
		return fmt.Errorf("inplace: block %d is a hole", lblk)
	}
	return fn(b)
}

// FuzzEditorInPlace: the editor's in-place paths (an insert into a leaf's
// own buffer, the htree root looked at without a copy) leave a directory
// exactly as its copying paths do, and fail on the same inputs, valid or
// not.
func FuzzEditorInPlace(fz *testing.F) {
	editorSeeds(fz)
	fz.Fuzz(func(t *testing.T, csum, indexed bool, data []byte) {
		f := Format{BlockSize: 1024, FileType: true, Csum: csum, LargeDir: true}
		copying := &MemStore{BlockSize: 1024, MaxBlocks: 24}
		inPlace := &inPlaceStore{MemStore{BlockSize: 1024, MaxBlocks: 24}}
		for len(data) >= 1024 && len(copying.Blocks) < 16 {
			copying.Blocks = append(copying.Blocks, bytes.Clone(data[:1024]))
			inPlace.Blocks = append(inPlace.Blocks, bytes.Clone(data[:1024]))
			data = data[1024:]
		}
		if len(copying.Blocks) == 0 {
			return
		}
		editor := func(st Store) *Editor {
			return &Editor{Format: f, Store: st, NBlocks: uint32(len(copying.Blocks)), Indexed: indexed,
				CsumSeed: 0x5eed, Ino: 12, DirIndex: true, DefHashVersion: HashHalfMD4}
		}
		ec, ei := editor(copying), editor(inPlace)
		for i := range 120 {
			name := fmt.Appendf(nil, "entry-%d-%s", i%90, bytes.Repeat([]byte("x"), i%37))
			var errC, errI error
			if i%5 == 4 {
				_, errC = ec.Remove(name)
				_, errI = ei.Remove(name)
			} else {
				errC = ec.Add(Entry{Inode: uint32(20 + i), Name: name, FileType: 1})
				errI = ei.Add(Entry{Inode: uint32(20 + i), Name: name, FileType: 1})
			}
			if (errC == nil) != (errI == nil) {
				t.Fatalf("op %d: copying store: %v; in-place store: %v", i, errC, errI)
			}
			if ec.NBlocks != ei.NBlocks || ec.Indexed != ei.Indexed {
				t.Fatalf("op %d: copying store has %d blocks (indexed %v), in-place %d (%v)", i, ec.NBlocks, ec.Indexed, ei.NBlocks, ei.Indexed)
			}
			for b := range copying.Blocks {
				if !bytes.Equal(copying.Blocks[b], inPlace.Blocks[b]) {
					t.Fatalf("op %d (%v): block %d differs between the copying and the in-place store", i, errC, b)
				}
			}
		}
	})
}
