//go:build linux

package ext4go_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestFileDataNeverCached: a regular file's data blocks are freed without
// looking for their buffers (txn.Handle.RevokeUncached), which is right
// only while the metadata cache never holds one. Directories, extent-tree
// blocks and symlink targets, all cached, are made, grown and removed in
// the same transactions as files are written over the blocks they free,
// and after every round no data block of any file has a buffer; the files
// read back and e2fsck is clean.
func TestFileDataNeverCached(t *testing.T) {
	image, fsys := deferImage(t)
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string][]byte{}
	for round := 0; round < 30; round++ {
		for k := 0; k < 20; k++ {
			d := fmt.Sprintf("d%d", rng.IntN(6))
			switch rng.IntN(5) {
			case 0: // a directory with enough entries for blocks of its own
				if err := fsys.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				for e := 0; e < 150; e++ {
					if err := fsys.WriteFile(fmt.Sprintf("%s/entry-with-a-long-name-%03d", d, e), nil, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			case 1:
				if err := fsys.RemoveAll(d); err != nil {
					t.Fatal(err)
				}
			case 2: // a slow symlink (its target in a block)
				name := fmt.Sprintf("l%d", rng.IntN(4))
				fsys.Remove(name)
				if err := fsys.Symlink(string(bytes.Repeat([]byte("target/"), 10+rng.IntN(125))), name); err != nil {
					t.Fatal(err)
				}
			default: // file data over whatever was freed
				name := fmt.Sprintf("f%d", rng.IntN(8))
				data := make([]byte, rng.IntN(200_000))
				for i := range data {
					data[i] = byte(rng.Uint32())
				}
				f, err := fsys.Create(name)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(data); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(2) == 0 {
					cut := int64(len(data) / 2)
					if err := f.Truncate(cut); err != nil {
						t.Fatal(err)
					}
					data = data[:cut]
				}
				f.Close()
				model[name] = data
			}
		}
		for name := range model {
			f, err := fsys.Open(name)
			if err != nil {
				t.Fatal(err)
			}
			exts, err := f.(*ext4go.File).Extents()
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range exts {
				for b := e.Physical; b < e.Physical+e.Length; b++ {
					if ext4go.BlockCached(fsys, b) {
						t.Fatalf("round %d: data block %d of %s has a metadata buffer", round, b, name)
					}
				}
			}
		}
		if round%3 == 2 {
			if err := ext4go.Commit(fsys); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	fsys = openImage(t, image)
	for name, want := range model {
		got, err := fsys.ReadFile(name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s reads back wrong (%d bytes, want %d, %v)", name, len(got), len(want), err)
		}
	}
}
