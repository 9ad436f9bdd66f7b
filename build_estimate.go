package ext4go

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/ext4go/ext4go/internal/host"
)

// Estimate is what a source tree needs in a filesystem of a given block
// size: blocks for data, directories, symlinks and xattr blocks, and
// inodes. Metadata the filesystem itself needs (inode tables, bitmaps,
// journal) is not included.
type Estimate struct {
	Blocks, Inodes uint64
	DataBytes      int64
}

// EstimateDir walks the host directory src and estimates what AddDir will
// use with blocks of bs bytes. Directories are read by several goroutines
// at once (on a cold cache the walk waits on the disk).
func EstimateDir(src string, bs int) (Estimate, error) {
	e := &estimator{bs: int64(bs), sem: make(chan struct{}, scanParallel)}
	st, err := os.Lstat(src)
	if err != nil {
		return Estimate{}, err
	}
	if !st.IsDir() {
		return Estimate{}, fmt.Errorf("%s: not a directory", src)
	}
	e.inodes.Add(1)
	if xattrListSize(src) > 64 {
		e.blocks.Add(1)
	}
	e.dir(src)
	e.wg.Wait()
	if p := e.err.Load(); p != nil {
		return Estimate{}, *p
	}
	return Estimate{Blocks: e.blocks.Load(), Inodes: e.inodes.Load(), DataBytes: e.data.Load()}, nil
}

// estimator sums what a tree needs; its counters are updated by the
// goroutines reading the tree.
type estimator struct {
	bs             int64
	sem            chan struct{} // bounds the extra goroutines
	wg             sync.WaitGroup
	blocks, inodes atomic.Uint64
	data           atomic.Int64
	err            atomic.Pointer[error]
}

func (e *estimator) fail(err error) { e.err.CompareAndSwap(nil, &err) }

// dir counts directory p's entries, each in a goroutine of its own while
// sem has room and inline otherwise (so the recursion cannot starve).
func (e *estimator) dir(p string) {
	d, err := os.Open(p)
	if err != nil {
		e.fail(err)
		return
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		e.fail(fmt.Errorf("%s: %w", p, err))
		return
	}
	dirBytes := int64(24) // "." and ".."
	for _, name := range names {
		if e.err.Load() != nil {
			return
		}
		dirBytes += int64(8 + (len(name)+3)&^3)
		child := filepath.Join(p, name)
		select {
		case e.sem <- struct{}{}:
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer func() { <-e.sem }()
				e.entry(child)
			}()
		default:
			e.entry(child)
		}
	}
	// Half-full blocks after splits, and an htree index for big ones.
	e.blocks.Add(uint64(dirBytes*2/e.bs) + 1)
}

// entry counts one entry below the root.
func (e *estimator) entry(p string) {
	e.inodes.Add(1)
	st, err := lstatHost(p)
	if err != nil {
		e.fail(err)
		return
	}
	switch st.Type() {
	case host.IFREG:
		ranges, err := hostDataRanges(p, st.Size)
		if err != nil {
			e.fail(err)
			return
		}
		var blocks uint64
		for _, r := range ranges {
			blocks += uint64((r.Off%e.bs + r.Len + e.bs - 1) / e.bs)
			e.data.Add(r.Len)
		}
		// Extent tree blocks: a leaf block per 340 extents, generously.
		blocks += blocks / 32768 / 100
		e.blocks.Add(blocks)
	case host.IFLNK:
		if st.Size >= 60 {
			e.blocks.Add(1)
		}
	case host.IFDIR:
		e.dir(p)
	}
	if xattrListSize(p) > 64 {
		e.blocks.Add(1) // may not fit the inode
	}
}

// SizeFor returns an image size with room for est plus a margin of
// marginPercent of the content, in a filesystem of block size bs with
// inodeSize-byte inodes and a journal of journalBytes.
func SizeFor(est Estimate, bs, inodeSize int, journalBytes int64, marginPercent int) int64 {
	content := int64(est.Blocks) * int64(bs)
	size := content + content*int64(marginPercent)/100
	size += int64(est.Inodes+est.Inodes/5+64) * int64(inodeSize) // inode tables
	size += journalBytes
	size += size / 64          // bitmaps, descriptors, reserved GDT, resize room
	size += 2 << 20            // superblock backups, root, lost+found, slack
	size += size * 5 / 100 / 1 // the 5% reserved for root
	return (size + 1<<20 - 1) &^ (1<<20 - 1)
}
