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
			return (*p)[:n]
		}
		scratchBufs.Put(p)
	}
	return make([]byte, n, max(n, 4096))
}

// putScratch gives back a buffer from getScratch (or any buffer nothing
// else refers to).
func putScratch(b []byte) {
	if cap(b) == 0 || cap(b) > maxScratch {
		return
	}
	scratchBufs.Put(&b)
}
