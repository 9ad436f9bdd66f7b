//go:build linux

package ext4go_test

import (
	"fmt"
	"testing"
)

// BenchmarkLookupLargeDir: LookupAt of a name in an htree directory of
// 20,000 names (what each stat and create in such a directory does first).
func BenchmarkLookupLargeDir(b *testing.B) {
	_, fsys := formatRW(b, 256<<20)
	defer fsys.Close()
	if err := fsys.Mkdir("many", 0o755); err != nil {
		b.Fatal(err)
	}
	const n = 20000
	for i := range n {
		f, err := fsys.Create(fmt.Sprintf("many/f%06d", i))
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	d, err := fsys.OpenFile("many", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	names := make([]string, 1024)
	for i := range names {
		names[i] = fmt.Sprintf("f%06d", i*19%n)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f, err := d.LookupAt(names[i%len(names)])
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
		i++
	}
}
