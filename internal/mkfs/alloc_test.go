package mkfs

import (
	"math/rand/v2"
	"testing"
)

// naiveGetFreeBlocks is ext2fs_get_free_blocks2 transcribed literally: test
// every position, one at a time.
func naiveGetFreeBlocks(m *bitmap, fdb, blocks, start, finish, num uint64) (uint64, bool) {
	b := start
	if b == 0 {
		b = fdb
	}
	if finish == 0 {
		finish = start
	}
	if num == 0 {
		num = 1
	}
	for steps := 0; steps < 3*int(blocks)+3; steps++ {
		if b+num-1 >= blocks {
			if finish > start {
				return 0, false
			}
			b = fdb
		}
		if m.clear(b, num) {
			return b, true
		}
		b++
		if b == finish {
			return 0, false
		}
	}
	return 0, false // the C loop would not terminate
}

// TestGetFreeBlocks checks the skipping search against the literal loop on
// random bitmaps, ranges and run lengths.
func TestGetFreeBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 20000; iter++ {
		blocks := uint64(r.IntN(300) + 2)
		fdb := uint64(r.IntN(2))
		p := &plan{blocks: blocks, firstData: uint32(fdb)}
		f := &builder{p: p, bmap: newBitmap(blocks)}
		density := r.Float64()
		for b := uint64(0); b < blocks; b++ {
			if r.Float64() < density {
				f.bmap.set(b)
			}
		}
		start, finish := uint64(r.IntN(int(blocks))), uint64(r.IntN(int(blocks)+5))
		num := uint64(r.IntN(12))
		wb, wok := naiveGetFreeBlocks(f.bmap, fdb, blocks, start, finish, num)
		gb, gok := f.getFreeBlocks(start, finish, num)
		if wok != gok || wb != gb {
			t.Fatalf("blocks %d fdb %d start %d finish %d num %d: got (%d, %v), want (%d, %v)",
				blocks, fdb, start, finish, num, gb, gok, wb, wok)
		}
	}
}

// TestBitmap checks find, setRange, count and bytes against bit-by-bit
// definitions.
func TestBitmap(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 2000; iter++ {
		n := uint64(r.IntN(500) + 1)
		if iter%4 == 0 {
			n = uint64(r.IntN(5*chunkBits) + 1) // cross chunk boundaries
		}
		m := newBitmap(n)
		ref := make([]bool, n)
		for k := 0; k < r.IntN(10); k++ {
			b := uint64(r.IntN(int(n)))
			l := uint64(r.IntN(int(min(n-b, 200))) + 1)
			m.setRange(b, l)
			for i := b; i < b+l; i++ {
				ref[i] = true
			}
		}
		from := uint64(r.IntN(int(n)))
		to := from + uint64(r.IntN(int(n-from)))
		for _, want := range []bool{false, true} {
			got, ok := m.find(from, to, want)
			wantPos, wantOK := uint64(0), false
			for i := from; i <= to; i++ {
				if ref[i] == want {
					wantPos, wantOK = i, true
					break
				}
			}
			if ok != wantOK || got != wantPos {
				t.Fatalf("find(%d, %d, %v) = %d, %v; want %d, %v", from, to, want, got, ok, wantPos, wantOK)
			}
		}
		var c uint64
		for i := from; i <= to; i++ {
			if ref[i] {
				c++
			}
		}
		if got := m.count(from, to); got != c {
			t.Fatalf("count(%d, %d) = %d, want %d", from, to, got, c)
		}
		buf := make([]byte, 9)
		m.bytes(buf, from)
		for i := uint64(0); i < 72; i++ {
			want := from+i < n && ref[from+i]
			if got := buf[i/8]&(1<<(i%8)) != 0; got != want {
				t.Fatalf("bytes bit %d = %v, want %v", i, got, want)
			}
		}
	}
}
