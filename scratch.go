package ext4go

import "sync"

// scratchBufs recycles the temporary byte buffers of the write path (a
// write padded to whole blocks, a directory block kept for undo), which
// otherwise were most of the bytes a mounted filesystem allocated: the
// collector's work grows with them. Buffers larger than maxScratch are not
// kept.
var scratchBufs sync.Pool

const maxScratch = 2 << 20

// getScratch returns a buffer of n bytes with unspecified content; give it
// back with putScratch once nothing refers to it.
func getScratch(n int) []byte {
	if p, ok := scratchBufs.Get().(*[]byte); ok {
		if cap(*p) >= n {
			b := (*p)[:n]
			*p = nil
			scratchBoxes.Put(p)
			return b
		}
		scratchBufs.Put(p)
	}
	return make([]byte, n, max(n, 4096))
}

// scratchBoxes keeps the emptied boxes (*[]byte) scratchBufs holds its
// buffers in, for putScratch's next: a box made per put was an allocation
// per tree block of every write into a file with an extent tree block.
var scratchBoxes sync.Pool

// putScratch gives back a buffer from getScratch (or any buffer nothing
// else refers to).
func putScratch(b []byte) {
	if cap(b) == 0 || cap(b) > maxScratch {
		return
	}
	p, _ := scratchBoxes.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	*p = b
	scratchBufs.Put(p)
}
