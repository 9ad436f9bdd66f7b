package ext4go

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ext4go/ext4go/internal/mkfs"
)

// BenchmarkBuildCreate is the part of mkfs -d that runs on one goroutine
// and bounds its wall time: making entries, 1000 to a directory made for
// them, as the builder does (names known absent, no ACLs). No host I/O.
func BenchmarkBuildCreate(b *testing.B) {
	img := filepath.Join(b.TempDir(), "img")
	if err := mkfs.Format(img, mkfs.Options{Size: 4 << 30}); err != nil {
		b.Fatal(err)
	}
	f, err := OpenForBuild(img)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	root, err := f.resolve("bench", ".", true)
	if err != nil {
		b.Fatal(err)
	}
	var dir *node
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%1000 == 0 {
			root.mu.Lock()
			dir, err = f.create(root, "d"+strconv.Itoa(i/1000), newEntry{mode: 0o40755, absent: true})
			root.mu.Unlock()
			if err != nil {
				b.Fatal(err)
			}
		}
		dir.mu.Lock()
		_, err := f.create(dir, "file-"+strconv.Itoa(i), newEntry{mode: 0o100644, absent: true})
		dir.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
}
