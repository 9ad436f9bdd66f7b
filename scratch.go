package ext4go

import (
	"sync"

	"github.com/ext4go/ext4go/internal/pad"
)

// scratchBufs recycles the temporary byte buffers of the write path (a
// write padded to whole blocks, a directory block kept for undo), which
// otherwise were most of the bytes a mounted filesystem allocated: the
// collector's work grows with them. Buffers larger than maxScratch are not
// kept.
var scratchBufs sync.Pool

const maxScratch = 2 << 20

// scratchBox holds a buffer in scratchBufs. Every get and put of the
// write path writes one, so a box has a line of its own: 24-byte boxes of
// two goroutines shared lines.
type scratchBox struct {
	b []byte
	_ [(pad.Line - 24) * pad.On]byte
}

// getScratch returns a buffer of n bytes with unspecified content; give it
// back with putScratch once nothing refers to it.
func getScratch(n int) []byte {
	if p, ok := scratchBufs.Get().(*scratchBox); ok {
		if cap(p.b) >= n {
			b := p.b[:n]
			p.b = nil
			scratchBoxes.Put(p)
			return b
		}
		scratchBufs.Put(p)
	}
	return make([]byte, n, max(n, 4096))
}

// scratchBoxes keeps the emptied boxes scratchBufs holds its buffers in,
// for putScratch's next: a box made per put was an allocation per tree
// block of every write into a file with an extent tree block.
var scratchBoxes sync.Pool

// putScratch gives back a buffer from getScratch (or any buffer nothing
// else refers to).
func putScratch(b []byte) {
	if cap(b) == 0 || cap(b) > maxScratch {
		return
	}
	p, _ := scratchBoxes.Get().(*scratchBox)
	if p == nil {
		p = new(scratchBox)
	}
	p.b = b
	scratchBufs.Put(p)
}
