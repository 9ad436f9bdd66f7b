package pad

// Line is the cache line the padding keeps writers apart on.
const Line = 64

// Apart reports whether the first hot bytes of array elements stride bytes
// apart can never share a Line, wherever the array starts on an 8-byte
// boundary. A stride of whole lines is not enough: the heap puts a small
// object with pointers (an array of shards with their maps, or a struct
// embedding one) 8 bytes past a line, behind its malloc header, and a
// struct puts an embedded array wherever its earlier fields end; then a
// shard's lock sits on one line with its neighbour's map, and two
// writers of neighbouring shards bounce that line. Fields 8-byte aligned
// in ranges hot bytes long share no line when at least Line-8 bytes lie
// between them.
func Apart(stride, hot uintptr) bool { return stride >= hot+Line-8 }
