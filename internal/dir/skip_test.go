package dir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// TestIterateSkipping: a listing leaves out an entry naming an inode past
// s_inodes_count and goes on in its block, leaves out the rest of a block
// from a bad dirent on, and a block failing its checksum, and goes on with
// the next blocks; a lookup checks the inode number of the entry it finds
// only, so the names around a bad one are still found.
func TestIterateSkipping(t *testing.T) {
	f := Format{BlockSize: 1024, FileType: true, Csum: true, InodesCount: 100}
	const seed = 7
	var blocks [][]byte
	for i := range 4 {
		var es []Entry
		for j := range 3 {
			es = append(es, Entry{Inode: uint32(10 + 3*i + j), Name: fmt.Appendf(nil, "n%d%d", i, j), FileType: FTRegFile})
		}
		b, err := EncodeBlock(f, es, seed)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	// Block 0: the middle entry names inode 1000 (each dirent of "nIJ"
	// takes 12 bytes).
	binary.LittleEndian.PutUint32(blocks[0][12:], 1000)
	// Block 1: the second dirent's rec_len is broken.
	binary.LittleEndian.PutUint16(blocks[1][12+4:], 6)
	// Block 2: a bad checksum.
	blocks[2][40] ^= 0xff
	for _, b := range blocks[:2] {
		SetLeafChecksum(b, f, seed)
	}
	d := &Dir{Format: f, NBlocks: 4, CsumSeed: seed, Ino: 12,
		Read: func(lblk uint32) ([]byte, error) { return blocks[lblk], nil }}
	var listed []string
	var skipped []string
	err := d.IterateSkipping(func(lblk uint32, off int, e Entry) error {
		listed = append(listed, string(e.Name))
		return nil
	}, func(lblk uint32, e *Entry, err error) error {
		if !errors.Is(err, fserr.ErrCorrupt) {
			t.Errorf("block %d: skipped for %v, want a corruption", lblk, err)
		}
		if e != nil {
			skipped = append(skipped, fmt.Sprintf("%d:%s:%d", lblk, e.Name, e.Inode))
		} else {
			skipped = append(skipped, fmt.Sprintf("%d:block", lblk))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"n00", "n02", "n10", "n30", "n31", "n32"}; !slices.Equal(listed, want) {
		t.Errorf("listed %v, want %v", listed, want)
	}
	if want := []string{"0:n01:1000", "1:block", "2:block"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	// The strict walk fails on the first bad block.
	if err := d.Iterate(func(uint32, int, Entry) error { return nil }); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Iterate: %v, want a corruption", err)
	}
	// Lookups: the names beside the bad inode number are found, the bad
	// one is a corruption.
	for _, name := range []string{"n00", "n02"} {
		if _, err := d.Lookup([]byte(name)); err != nil {
			t.Errorf("lookup %s: %v", name, err)
		}
	}
	if _, err := d.Lookup([]byte("n01")); !errors.Is(err, fserr.ErrCorrupt) || !strings.Contains(err.Error(), "inode out of bounds") {
		t.Errorf("lookup n01: %v, want inode out of bounds", err)
	}
	// An error of a callback stops the walk; fs.SkipAll with nil.
	stop := errors.New("stop")
	if err := d.IterateSkipping(func(uint32, int, Entry) error { return stop }, nil); err != stop {
		t.Errorf("fn's error: %v", err)
	}
	if err := d.IterateSkipping(func(uint32, int, Entry) error { return nil },
		func(uint32, *Entry, error) error { return fs.SkipAll }); err != nil {
		t.Errorf("skip's SkipAll: %v", err)
	}
}
