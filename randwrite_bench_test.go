//go:build linux

package ext4go_test

import (
	"math/rand/v2"
	"testing"

	"github.com/ext4go/ext4go"
)

// BenchmarkRandomWriteUnwritten: 4 KiB writes at random blocks of a file
// of 256 MiB allocated with fallocate (unwritten extents), as fio's
// randwrite does after laying out its file. Each write converts one block
// of an unwritten extent, splitting it, in a tree that grows with them;
// the file starts again when half its blocks are written. On the 2-CPU VM
// of the mount benchmarks: 16-20 µs a write, 7 of them the pwrite into the
// host's page cache and 6-7 the extent walks (Lookup, then Convert).
func BenchmarkRandomWriteUnwritten(b *testing.B) {
	_, fsys := formatRW(b, 1<<30)
	defer fsys.Close()
	const size = 256 << 20
	const blocks = size / 4096
	order := rand.New(rand.NewPCG(1, 2)).Perm(blocks)
	var f *ext4go.File
	fresh := func() {
		if f != nil {
			f.Close()
			if err := fsys.Remove("bench"); err != nil {
				b.Fatal(err)
			}
		}
		var err error
		if f, err = fsys.Create("bench"); err != nil {
			b.Fatal(err)
		}
		if err := f.Fallocate(0, 0, size); err != nil {
			b.Fatal(err)
		}
	}
	fresh()
	buf := make([]byte, 4096)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == blocks/2 {
			b.StopTimer()
			fresh()
			i = 0
			b.StartTimer()
		}
		if _, err := f.WriteAt(buf, int64(order[i])*4096); err != nil {
			b.Fatal(err)
		}
		i++
	}
	f.Close()
}
