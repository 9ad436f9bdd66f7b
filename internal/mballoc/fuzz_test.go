package mballoc

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// FuzzBuddy applies mark-used and free operations decoded from the input to
// a buddy generated from the input's bitmap, checking after each that it
// equals the reference.
func FuzzBuddy(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(make([]byte, 200))
	f.Add([]byte{0xff, 0x0f, 0xf0, 0x55, 0xaa, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const nbits = 1000 // a short group of a 1 KiB-block filesystem
		b := newBuddy(nbits, 8192, 11)
		src := make([]uint64, 128)
		k := min(len(data), 128)
		for i := 0; i < k; i++ {
			src[i] = uint64(data[i]) * 0x0101010101010101 >> (uint(i) % 8)
		}
		b.generate(src)
		if err := sameAsReference(b); err != nil {
			t.Fatal(err)
		}
		// Each op is checked against the reference (O(bits×orders)); a
		// bounded op count keeps one input well under a millisecond.
		ops := data[k:]
		ops = ops[:min(len(ops), 4*48)]
		for ; len(ops) >= 4; ops = ops[4:] {
			start := uint32(binary.LittleEndian.Uint16(ops)) % nbits
			n := uint32(ops[2])%64 + 1
			n = min(n, nbits-start)
			if ops[3]&1 == 0 {
				if ok, _ := allClear(b.bitmap, start, n); ok {
					b.markUsed(start, n)
				}
			} else {
				err := b.freeRange(start, n)
				if ok, _ := allSet(b.bitmap, start, n); ok == (err != nil) && err != nil {
					t.Fatalf("free of a used range failed: %v", err)
				}
			}
			if err := sameAsReference(b); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// fuzzStore serves one group's bitmap and descriptor count from fuzz input.
type fuzzStore struct {
	bitmap []byte
	free   uint32
}

func (s *fuzzStore) GroupFree(uint32) (uint32, error)                                 { return s.free, nil }
func (s *fuzzStore) ReadBlockBitmap(uint32) ([]byte, error)                           { return s.bitmap, nil }
func (s *fuzzStore) UpdateBlockBitmap(Tx, uint32, uint32, uint32, bool, uint32) error { return nil }

// FuzzLoadBitmap gives the allocator arbitrary on-disk bitmaps and
// descriptor counts: it must never panic, must report a disagreement as
// corruption, and must never hand out a cluster the bitmap marks used.
func FuzzLoadBitmap(f *testing.F) {
	f.Add(make([]byte, 128), uint32(1024), uint16(5))
	f.Add([]byte{0xff, 0x01}, uint32(1014), uint16(900))
	f.Add([]byte{0xff}, uint32(3), uint16(1))
	f.Fuzz(func(t *testing.T, bm []byte, free uint32, want uint16) {
		gm := Geometry{BlockSize: 1024, BlocksPerGroup: 1024, BlocksCount: 1024}
		s := &fuzzStore{bitmap: bm, free: free}
		a, err := New(gm, s, Config{CPUs: 1})
		if err != nil {
			if !errors.Is(err, fserr.ErrCorrupt) {
				t.Fatalf("New: %v", err)
			}
			return
		}
		e, err := a.Allocate(nil, Request{Len: uint32(want%200) + 1, Flags: FlagData, Inode: 12})
		if err != nil {
			if !errors.Is(err, fserr.ErrCorrupt) && !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Allocate: %v", err)
			}
			return
		}
		disk := make([]uint64, 16)
		wordsFromBytes(disk, bm)
		for c := uint32(e.Start); c < uint32(e.End()); c++ {
			if testBit(disk, c) {
				t.Fatalf("allocated cluster %d marked used in the bitmap", c)
			}
		}
	})
}
