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

const (
	edIno  = 12
	edSeed = 0x5eed
)

// newEditor returns an editor over a new one-block directory in memory.
func newEditor(t testing.TB, f Format, def uint8) (*Editor, *MemStore) {
	t.Helper()
	b0, err := NewDirBlock(f, edIno, 2, edSeed)
	if err != nil {
		t.Fatal(err)
	}
	st := &MemStore{BlockSize: f.BlockSize, Blocks: [][]byte{b0}}
	return &Editor{Format: f, Store: st, NBlocks: 1, CsumSeed: edSeed, Ino: edIno, DirIndex: true, DefHashVersion: def}, st
}

// model is what a directory must hold: name → entry.
type model map[string]Entry

// randName returns a name of 1..255 bytes, any byte but '/' and NUL; most
// are short so directories grow many entries cheaply.
func randName(rng *rand.Rand) []byte {
	var n int
	switch r := rng.IntN(10); {
	case r < 6:
		n = 1 + rng.IntN(12)
	case r < 9:
		n = 13 + rng.IntN(48)
	default:
		n = 61 + rng.IntN(195)
	}
	b := make([]byte, n)
	for i := range b {
		if rng.IntN(4) == 0 {
			b[i] = byte(1 + rng.IntN(255))
		} else {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789_-."[rng.IntN(39)]
		}
		if b[i] == '/' {
			b[i] = 'S'
		}
	}
	if isDots(b) {
		return randName(rng)
	}
	return b
}

// legacyCollisions returns pairs of distinct names with the same legacy
// hash, found by the birthday bound over a pool of generated names.
func legacyCollisions(pool int) [][2][]byte {
	seen := make(map[uint32][]byte, pool)
	var out [][2][]byte
	for i := range pool {
		n := fmt.Appendf(nil, "k%x", i)
		h, _ := MustHash(n, HashLegacy, [4]uint32{})
		if o, ok := seen[h]; ok {
			out = append(out, [2][]byte{o, n})
			continue
		}
		seen[h] = n
	}
	return out
}

// quickCheck verifies the directory's structure: Check, and the editor's
// own layout rule that an unused dirent only ever starts a leaf.
func quickCheck(t testing.TB, e *Editor, st *MemStore) {
	t.Helper()
	if int(e.NBlocks) != len(st.Blocks) {
		t.Fatalf("editor has %d blocks, store %d", e.NBlocks, len(st.Blocks))
	}
	d := e.Dir()
	if err := d.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	index := map[uint32]bool{}
	if e.Indexed {
		_, _, nodes, err := d.dxWalk()
		if err != nil {
			t.Fatal(err)
		}
		index = nodes
	}
	for lblk := uint32(0); lblk < e.NBlocks; lblk++ {
		if index[lblk] {
			continue
		}
		blk, err := ParseBlock(st.Blocks[lblk], e.Format)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range blk.Slots {
			if s.Inode == 0 && (s.Off != 0 || lblk == 0) {
				t.Fatalf("block %d: unused dirent at offset %d", lblk, s.Off)
			}
		}
	}
}

// strictCheck is quickCheck plus iteration and lookups of every name and
// of absent ones.
func strictCheck(t testing.TB, e *Editor, st *MemStore, m model, rng *rand.Rand) {
	t.Helper()
	quickCheck(t, e, st)
	d := e.Dir()
	got := model{}
	err := d.Iterate(func(_ uint32, _ int, x Entry) error {
		if _, dup := got[string(x.Name)]; dup {
			return fmt.Errorf("Iterate: %q twice", x.Name)
		}
		got[string(x.Name)] = x
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got["."].Inode != edIno || got[".."].Inode == 0 || len(got) != len(m)+2 {
		t.Fatalf("Iterate: %d names (. = %d, .. = %d), want %d", len(got), got["."].Inode, got[".."].Inode, len(m)+2)
	}
	for name, want := range m {
		x, ok := got[name]
		if !ok || x.Inode != want.Inode || x.FileType != want.FileType {
			t.Fatalf("Iterate: %q = %+v, want %+v", name, x, want)
		}
		checkFound(t, e, []byte(name), want)
	}
	for range 20 {
		n := randName(rng)
		if _, ok := m[string(n)]; !ok {
			checkAbsent(t, e, n)
		}
	}
}

func checkFound(t testing.TB, e *Editor, name []byte, want Entry) {
	t.Helper()
	d := e.Dir()
	r, err := d.Lookup(name)
	if err != nil || r.Inode != want.Inode || r.FileType != want.FileType {
		t.Fatalf("Lookup(%q) = %+v, %v; want %+v", name, r.Entry, err, want)
	}
	if e.Indexed {
		r, err := d.DxLookup(name)
		if err != nil || r.Inode != want.Inode {
			t.Fatalf("DxLookup(%q) = %+v, %v; want inode %d", name, r.Entry, err, want.Inode)
		}
	}
}

func checkAbsent(t testing.TB, e *Editor, name []byte) {
	t.Helper()
	d := e.Dir()
	if _, err := d.Lookup(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lookup(%q) of an absent name: %v", name, err)
	}
	if e.Indexed {
		if _, err := d.DxLookup(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("DxLookup(%q) of an absent name: %v", name, err)
		}
	}
}

// randomOps runs n random operations against e and m, checking each
// result, the touched names after each, and the whole directory whenever
// its shape changed (structure only) and every fullEvery steps (with
// fullEvery 0, only at the end).
func randomOps(t testing.TB, e *Editor, st *MemStore, m model, rng *rand.Rand, n, fullEvery int, extra [][]byte) {
	t.Helper()
	// ks lists m's names for picking at random; pos indexes it.
	var ks []string
	pos := map[string]int{}
	addKey := func(k string) {
		pos[k] = len(ks)
		ks = append(ks, k)
	}
	delKey := func(k string) {
		i := pos[k]
		last := ks[len(ks)-1]
		ks[i], pos[last] = last, i
		ks = ks[:len(ks)-1]
		delete(pos, k)
	}
	for k := range m {
		addKey(k)
	}
	for step := range n {
		blocks := e.NBlocks
		switch op := rng.IntN(100); {
		case op < 55 || len(m) == 0:
			var name []byte
			if len(extra) > 0 && rng.IntN(4) == 0 {
				name = extra[rng.IntN(len(extra))]
			} else {
				name = randName(rng)
			}
			x := Entry{Inode: uint32(20 + rng.IntN(1000)), Name: name, FileType: uint8(1 + rng.IntN(7))}
			if !e.FileType {
				x.FileType = 0
			}
			err := e.Add(x)
			if _, exists := m[string(name)]; exists {
				if !errors.Is(err, fs.ErrExist) {
					t.Fatalf("step %d: Add of existing %q: %v", step, name, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: Add(%q): %v", step, name, err)
			}
			m[string(name)] = x
			addKey(string(name))
			checkFound(t, e, name, x)
		case op < 85:
			name := []byte(ks[rng.IntN(len(ks))])
			old, err := e.Remove(name)
			if err != nil || old.Inode != m[string(name)].Inode {
				t.Fatalf("step %d: Remove(%q) = %+v, %v; want %+v", step, name, old, err, m[string(name)])
			}
			delete(m, string(name))
			delKey(string(name))
			checkAbsent(t, e, name)
			if _, err := e.Remove(name); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("step %d: second Remove(%q): %v", step, name, err)
			}
		case op < 95:
			name := []byte(ks[rng.IntN(len(ks))])
			x := Entry{Inode: uint32(2000 + rng.IntN(1000)), Name: name, FileType: uint8(1 + rng.IntN(7))}
			if !e.FileType {
				x.FileType = 0
			}
			old, err := e.Replace(name, x.Inode, x.FileType)
			if err != nil || old.Inode != m[string(name)].Inode {
				t.Fatalf("step %d: Replace(%q) = %+v, %v", step, name, old, err)
			}
			m[string(name)] = x
			checkFound(t, e, name, x)
		default:
			name := randName(rng)
			if _, ok := m[string(name)]; ok {
				break
			}
			if _, err := e.Remove(name); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("step %d: Remove of absent %q: %v", step, name, err)
			}
			if _, err := e.Replace(name, 5, 1); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("step %d: Replace of absent %q: %v", step, name, err)
			}
		}
		// A few present names, picked at random, must stay reachable.
		for range 2 {
			if len(ks) > 0 {
				k := ks[rng.IntN(len(ks))]
				if x, ok := m[k]; ok {
					checkFound(t, e, []byte(k), x)
				}
			}
		}
		if fullEvery > 0 && step%fullEvery == 0 {
			strictCheck(t, e, st, m, rng)
		} else if fullEvery > 0 && e.NBlocks != blocks {
			quickCheck(t, e, st)
		}
	}
	strictCheck(t, e, st, m, rng)
}

func levels(t testing.TB, e *Editor) int {
	t.Helper()
	if !e.Indexed {
		return 0
	}
	r, err := e.Dir().root()
	if err != nil {
		t.Fatal(err)
	}
	return int(r.IndirectLevels) + 1
}

func TestEditorModel(t *testing.T) {
	collisions := legacyCollisions(400000)
	var extra [][]byte
	for _, p := range collisions {
		extra = append(extra, p[0], p[1])
	}
	t.Logf("%d legacy hash collision pairs", len(collisions))
	tests := []struct {
		name     string
		f        Format
		def      uint8
		dirIndex bool
		steps    int
		extra    [][]byte
		prefill  bool // fill with 255-byte names until the directory has 4 blocks
	}{
		{"1k_csum_halfmd4", Format{BlockSize: 1024, FileType: true, Csum: true, HashSeed: [4]uint32{1, 2, 3, 4}}, HashHalfMD4, true, 5000, nil, false},
		{"1k_legacy_collisions", Format{BlockSize: 1024, FileType: true}, HashLegacy, true, 5000, extra, false},
		{"1k_legacy_unsigned_csum", Format{BlockSize: 1024, FileType: true, Csum: true, HashUnsigned: true}, HashLegacy, true, 2000, extra, false},
		{"4k_csum_tea", Format{BlockSize: 4096, FileType: true, Csum: true}, HashTea, true, 3000, nil, false},
		{"4k_nofiletype_tea_unsigned", Format{BlockSize: 4096, HashUnsigned: true}, HashTea, true, 2000, nil, false},
		{"1k_linear_no_dir_index", Format{BlockSize: 1024, FileType: true, Csum: true}, HashHalfMD4, false, 2000, nil, false},
		{"64k_csum", Format{BlockSize: 65536, FileType: true, Csum: true}, HashHalfMD4, true, 600, nil, true},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 42))
			e, st := newEditor(t, tc.f, tc.def)
			e.DirIndex = tc.dirIndex
			m := model{}
			if tc.prefill {
				long := func(i int) []byte {
					b := fmt.Appendf(nil, "%d-", i)
					return append(b, bytes.Repeat([]byte{'L'}, 255-len(b))...)
				}
				fill(t, e, m, long, func(error) bool { return e.NBlocks >= 4 })
			}
			randomOps(t, e, st, m, rng, tc.steps, 500, tc.extra)
			if e.Indexed != (tc.dirIndex && e.NBlocks > 1) {
				t.Fatalf("Indexed = %v with %d blocks", e.Indexed, e.NBlocks)
			}
			// Empty it again: the blocks stay, the tree stays valid.
			for k := range m {
				if _, err := e.Remove([]byte(k)); err != nil {
					t.Fatal(err)
				}
				delete(m, k)
			}
			strictCheck(t, e, st, m, rng)
			if empty, err := e.IsEmpty(); err != nil || !empty {
				t.Fatalf("IsEmpty = %v, %v", empty, err)
			}
			// And refill it through the emptied leaves.
			randomOps(t, e, st, m, rng, tc.steps/3, 500, tc.extra)
			t.Logf("%d names, %d blocks, %d levels", len(m), e.NBlocks, levels(t, e))
		})
	}
}

// TestEditorWeakHash forces long runs of equal hashes across many leaves
// and index blocks: every name hashes to one of three values.
func TestEditorWeakHash(t *testing.T) {
	saved := hashName
	defer func() { hashName = saved }()
	hashName = func(name []byte, version int, seed [4]uint32) (uint32, uint32, error) {
		return uint32(len(name)%3) << 30, 0, nil
	}
	f := Format{BlockSize: 1024, FileType: true, Csum: true, LargeDir: true}
	e, st := newEditor(t, f, HashHalfMD4)
	rng := rand.New(rand.NewPCG(7, 7))
	m := model{}
	randomOps(t, e, st, m, rng, 3000, 250, nil)
	t.Logf("%d names, %d blocks, %d levels", len(m), e.NBlocks, levels(t, e))
}

// fill adds names until stop says so; the caller checks the result.
func fill(t testing.TB, e *Editor, m model, mkName func(i int) []byte, stop func(err error) bool) error {
	t.Helper()
	for i := 0; ; i++ {
		x := Entry{Inode: uint32(20 + i%5000), Name: mkName(i), FileType: FTRegFile}
		err := e.Add(x)
		if err == nil {
			m[string(x.Name)] = x
		}
		if stop(err) {
			return err
		}
		if err != nil {
			t.Fatalf("Add #%d (%q): %v", i, x.Name, err)
		}
	}
}

// TestEditorLevels grows htrees of 1 KiB blocks until they have two levels
// and, with largedir, three, and fills a two-level tree until the index is
// full.
func TestEditorLevels(t *testing.T) {
	short := func(i int) []byte { return fmt.Appendf(nil, "%x", int64(i)*2654435761%1000003) }
	long := func(i int) []byte {
		b := fmt.Appendf(nil, "%d-", i)
		return append(b, bytes.Repeat([]byte{'L'}, 255-len(b))...)
	}
	t.Run("two_levels", func(t *testing.T) {
		f := Format{BlockSize: 1024, FileType: true, Csum: true}
		e, st := newEditor(t, f, HashHalfMD4)
		rng := rand.New(rand.NewPCG(1, 2))
		m := model{}
		fill(t, e, m, short, func(error) bool { return levels(t, e) == 2 })
		strictCheck(t, e, st, m, rng)
		t.Logf("two levels after %d names, %d blocks", len(m), e.NBlocks)
		randomOps(t, e, st, m, rng, 3000, 1000, nil)
		if levels(t, e) != 2 {
			t.Fatalf("levels = %d", levels(t, e))
		}
	})
	t.Run("index_full", func(t *testing.T) {
		variants := []bool{true}
		if !testing.Short() {
			variants = append(variants, false)
		}
		for _, csum := range variants {
			f := Format{BlockSize: 1024, FileType: true, Csum: csum}
			e, st := newEditor(t, f, HashTea)
			rng := rand.New(rand.NewPCG(3, 4))
			m := model{}
			err := fill(t, e, m, long, func(err error) bool { return err != nil })
			if !errors.Is(err, ErrIndexFull) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("full index: %v", err)
			}
			nb := e.NBlocks
			// A failed Add changes nothing; the tree is intact.
			quickCheck(t, e, st)
			if levels(t, e) != 2 || e.NBlocks != nb {
				t.Fatalf("levels %d, blocks %d → %d", levels(t, e), nb, e.NBlocks)
			}
			// Removing frees leaf space, so some names fit again.
			i := 0
			for k := range m {
				if i++; i%2 == 0 {
					if _, err := e.Remove([]byte(k)); err != nil {
						t.Fatal(err)
					}
					delete(m, k)
				}
			}
			added := 0
			for j := range 200 {
				x := Entry{Inode: 9, Name: fmt.Appendf(nil, "again-%d", j), FileType: FTRegFile}
				if err := e.Add(x); err == nil {
					m[string(x.Name)] = x
					added++
				} else if !errors.Is(err, ErrIndexFull) {
					t.Fatal(err)
				}
			}
			if added == 0 {
				t.Fatal("no name fits after removing half")
			}
			strictCheck(t, e, st, m, rng)
			t.Logf("csum %v: index full at %d blocks; %d added back", csum, nb, added)
		}
	})
	t.Run("three_levels_largedir", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short")
		}
		f := Format{BlockSize: 1024, FileType: true, Csum: true, LargeDir: true}
		e, st := newEditor(t, f, HashHalfMD4)
		rng := rand.New(rand.NewPCG(5, 6))
		m := model{}
		fill(t, e, m, long, func(error) bool { return levels(t, e) == 3 })
		strictCheck(t, e, st, m, rng)
		t.Logf("three levels after %d names, %d blocks", len(m), e.NBlocks)
		randomOps(t, e, st, m, rng, 1000, 0, nil)
		if levels(t, e) != 3 {
			t.Fatalf("levels = %d", levels(t, e))
		}
	})
}
