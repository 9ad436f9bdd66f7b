// Package bench holds the allocator benchmarks that both the Go benchmarks
// of package mballoc and the "ext4go bench alloc" command run: the
// will-it-scale fallocate2 workload at the allocator, a preallocating
// variant of it, a fragmentation test with concurrent streaming writers and
// a small-files locality test. Each
// run builds a fresh in-memory filesystem (mballoc.MemStore) and a
// simulated journal that commits, releasing deferred frees, every few
// hundred microseconds.
package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go/internal/mballoc"
)

// Options describe the filesystem and allocator configuration of a run.
type Options struct {
	Legacy       bool                 // the pre-2025 configuration
	OptimizeScan mballoc.OptimizeScan // mb_optimize_scan
	Size         uint64               // filesystem bytes; 0 means 64 GiB
	BlockSize    uint32               // 0 means 4096
	CPUs         int                  // for the allocator's sizing; 0 means GOMAXPROCS
	Stats        bool                 // count mb_stats (returned in Result.Stats)
}

// Config returns the row label of the options: "default" or "legacy".
func (o Options) Config() string {
	if o.Legacy {
		return "legacy"
	}
	return "default"
}

// Row is one result line. Throughput rows have P and OpsPerSec, quality
// rows Metric and Value.
type Row struct {
	Bench     string
	Config    string
	Scan      string // mb_optimize_scan of the run: auto, on or off
	P         int
	OpsPerSec float64
	CPUPerOp  time.Duration // process CPU time per operation (0 if unknown); not marshalled
	Metric    string
	Value     float64
	Stats     *mballoc.Stats // when Options.Stats; not marshalled
}

// MarshalJSON writes a throughput row as
// {"bench","config","optimize_scan","p","ops_per_sec"} and a quality row as
// {"bench","config","optimize_scan","metric","value"}.
func (r Row) MarshalJSON() ([]byte, error) {
	if r.Metric != "" {
		return json.Marshal(struct {
			Bench  string  `json:"bench"`
			Config string  `json:"config"`
			Scan   string  `json:"optimize_scan"`
			Metric string  `json:"metric"`
			Value  float64 `json:"value"`
		}{r.Bench, r.Config, r.Scan, r.Metric, r.Value})
	}
	return json.Marshal(struct {
		Bench     string  `json:"bench"`
		Config    string  `json:"config"`
		Scan      string  `json:"optimize_scan"`
		P         int     `json:"p"`
		OpsPerSec float64 `json:"ops_per_sec"`
	}{r.Bench, r.Config, r.Scan, r.P, r.OpsPerSec})
}

// fsys is one benchmark filesystem with its journal.
type fsys struct {
	a     *mballoc.Allocator
	store *mballoc.MemStore
	geo   mballoc.Geometry
	tid   atomic.Uint64
	stop  chan struct{}
	wg    sync.WaitGroup
	err   atomic.Pointer[error]
}

type txID uint64

func (t txID) ID() uint64 { return uint64(t) }

func newFS(o Options) (*fsys, error) {
	size, bs := o.Size, o.BlockSize
	if size == 0 {
		size = 64 << 30
	}
	if bs == 0 {
		bs = 4096
	}
	gm := mballoc.GeometryFor(size, bs)
	s, err := mballoc.NewMemStore(gm, mballoc.MemStoreOptions{})
	if err != nil {
		return nil, err
	}
	t := mballoc.DefaultTunables(1)
	t.OptimizeScan = o.OptimizeScan
	t.Stats = o.Stats
	a, err := mballoc.New(gm, s, mballoc.Config{Legacy: o.Legacy, CPUs: o.CPUs, Tunables: &t})
	if err != nil {
		return nil, err
	}
	f := &fsys{a: a, store: s, geo: gm, stop: make(chan struct{})}
	f.tid.Store(1)
	f.wg.Add(1)
	go f.journal()
	return f, nil
}

// journal commits a transaction every 250µs (jbd2 commits every 5 s, but
// this filesystem is thousands of times faster than a disk).
func (f *fsys) journal() {
	defer f.wg.Done()
	tk := time.NewTicker(250 * time.Microsecond)
	defer tk.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tk.C:
		}
		if err := f.a.ReleaseDeferred(f.tid.Add(1) - 1); err != nil {
			f.fail(err)
		}
	}
}

func (f *fsys) tx() mballoc.Tx { return txID(f.tid.Load()) }

func (f *fsys) fail(err error) { f.err.CompareAndSwap(nil, &err) }

// close stops the journal and returns the first error seen.
func (f *fsys) close() error {
	close(f.stop)
	f.wg.Wait()
	if e := f.err.Load(); e != nil {
		return *e
	}
	return nil
}

// allocate runs req, committing the journal and retrying when only
// uncommitted frees stand in the way (kernel: ext4_should_retry_alloc).
func (f *fsys) allocate(req mballoc.Request) (mballoc.Extent, error) {
	for try := 0; ; try++ {
		e, err := f.a.Allocate(f.tx(), req)
		var ns *mballoc.NoSpaceError
		if errors.As(err, &ns) && ns.Pending > 0 && try < 100 {
			if err := f.a.ReleaseDeferred(f.tid.Add(1) - 1); err != nil {
				return e, err
			}
			continue
		}
		return e, err
	}
}

// file is a file being written at the allocator level: its extents, merged
// when physically contiguous.
type file struct {
	ino   uint32
	next  uint64
	exts  []mballoc.Extent
	flags mballoc.Flags // added to FlagData
}

func (fl *file) add(e mballoc.Extent) {
	if n := len(fl.exts); n > 0 && fl.exts[n-1].End() == e.Start {
		fl.exts[n-1].Len += e.Len
	} else {
		fl.exts = append(fl.exts, e)
	}
	fl.next += uint64(e.Len)
}

// paddedCount is a worker's operation count, alone on its cache line.
type paddedCount struct {
	n atomic.Int64
	_ [56]byte
}

// appendBlocks writes n blocks at the end of fl as an open file does.
func (f *fsys) appendBlocks(fl *file, n uint32, open bool, size uint64) error {
	bs := uint64(f.geo.BlockSize)
	for n > 0 {
		req := mballoc.Request{Inode: fl.ino, Logical: fl.next, Len: n, Flags: mballoc.FlagData | fl.flags,
			OpenForWrite: open, FileSize: fl.next * bs}
		if !open {
			req.FileSize = size
		}
		if k := len(fl.exts); k > 0 {
			req.LeftLogical, req.LeftPhysical = fl.next-1, fl.exts[k-1].End()-1
		}
		e, err := f.allocate(req)
		if err != nil {
			return err
		}
		fl.add(e)
		n -= min(n, e.Len)
	}
	return nil
}

// truncate frees all of fl's blocks in the current transaction.
func (f *fsys) truncate(fl *file) error {
	f.a.DiscardInodePrealloc(fl.ino)
	for _, e := range fl.exts {
		if err := f.a.Free(f.tx(), e.Start, uint64(e.Len), 0); err != nil {
			return err
		}
	}
	fl.exts = fl.exts[:0]
	fl.next = 0
	return nil
}

// Fallocate2 runs will-it-scale's fallocate2 at the allocator: each of p
// goroutines owns an unlinked file and fallocates 8 KiB (2 blocks of 4 KiB)
// at its end until it is 1 MiB, then truncates it to 0 and starts over. One
// operation is one 8 KiB fallocate. As in the kernel, where fallocate does
// not normalize a request that fits one extent
// (EXT4_GET_BLOCKS_NO_NORMALIZE), the requests carry FlagNoPrealloc, so
// every operation past the first 64 KiB searches the groups from the
// file's stream goal. It runs for d, or until ops operations when ops > 0,
// and reports operations per second.
func Fallocate2(o Options, p int, d time.Duration, ops int64) (Row, error) {
	return appendLoop(o, "fallocate2", p, d, ops, 8<<10, mballoc.FlagNoPrealloc)
}

// Append is Fallocate2 with normalized, preallocating requests, as buffered
// writes make them: most operations are served from the file's inode
// preallocation without searching.
func Append(o Options, p int, d time.Duration, ops int64) (Row, error) {
	return appendLoop(o, "append", p, d, ops, 8<<10, 0)
}

func appendLoop(o Options, name string, p int, d time.Duration, ops int64, chunk uint64, flags mballoc.Flags) (Row, error) {
	f, err := newFS(o)
	if err != nil {
		return Row{}, err
	}
	bs := uint64(f.geo.BlockSize)
	perOp := uint32((chunk + bs - 1) / bs)
	limit := (1 << 20) / bs
	// Each worker counts its own operations on a line of its own, as
	// will-it-scale's tasks do: a shared counter would be a line every
	// operation writes, the benchmark's own contention.
	done := make([]paddedCount, p)
	var stop atomic.Bool
	var wg sync.WaitGroup
	start, cpu0 := time.Now(), processCPU()
	for w := 0; w < p; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			fl := &file{ino: uint32(12 + w), flags: flags}
			share := int64(-1) // with ops > 0, this worker's part of them
			if ops > 0 {
				share = ops / int64(p)
				if int64(w) < ops%int64(p) {
					share++
				}
			}
			for !stop.Load() && share != 0 {
				if err := f.appendBlocks(fl, perOp, true, 0); err != nil {
					f.fail(fmt.Errorf("worker %d: %w", w, err))
					stop.Store(true)
					return
				}
				done[w].n.Add(1)
				share--
				if fl.next >= limit {
					if err := f.truncate(fl); err != nil {
						f.fail(err)
						stop.Store(true)
						return
					}
				}
			}
			if err := f.truncate(fl); err != nil {
				f.fail(err)
			}
		}(w)
	}
	if ops <= 0 {
		time.Sleep(d)
		stop.Store(true)
	}
	wg.Wait()
	el, cpu := time.Since(start), processCPU()-cpu0
	if err := f.close(); err != nil {
		return Row{}, err
	}
	var n int64
	for i := range done {
		n += done[i].n.Load()
	}
	n = max(n, 1)
	r := Row{Bench: name, Config: o.Config(), Scan: o.OptimizeScan.String(), P: p, OpsPerSec: float64(n) / el.Seconds(), CPUPerOp: cpu / time.Duration(n)}
	if o.Stats {
		st := f.a.Stats()
		r.Stats = &st
	}
	return r, nil
}

// Fragmentation runs 8 concurrent streaming writers, each appending 64 KiB
// at a time to its own file until it is 32 MiB (like fio with
// ioengine=falloc, numjobs=8, file_append=1), and reports the extents per
// file and the groups the files touch.
func Fragmentation(o Options) ([]Row, error) {
	const streams, chunk, total = 8, 64 << 10, 32 << 20
	f, err := newFS(o)
	if err != nil {
		return nil, err
	}
	bs := uint64(f.geo.BlockSize)
	files := make([]*file, streams)
	var wg sync.WaitGroup
	for w := range files {
		files[w] = &file{ino: uint32(12 + w)}
		wg.Add(1)
		go func(fl *file) {
			defer wg.Done()
			for fl.next*bs < total {
				if err := f.appendBlocks(fl, uint32(chunk/bs), true, 0); err != nil {
					f.fail(err)
					return
				}
				runtime.Gosched() // let the streams interleave as on a busy machine
			}
		}(files[w])
	}
	wg.Wait()
	if err := f.close(); err != nil {
		return nil, err
	}
	var sum, maxExt int
	groups := map[uint32]bool{}
	for _, fl := range files {
		sum += len(fl.exts)
		maxExt = max(maxExt, len(fl.exts))
		for _, e := range fl.exts {
			for b := e.Start; b < e.End(); b += uint64(f.geo.BlocksPerGroup) {
				groups[f.a.GroupOf(b)] = true
			}
			groups[f.a.GroupOf(e.End()-1)] = true
		}
	}
	c := o.Config()
	rows := []Row{
		{Bench: "fragmentation", Config: c, Metric: "extents_per_file", Value: float64(sum) / streams},
		{Bench: "fragmentation", Config: c, Metric: "max_extents_per_file", Value: float64(maxExt)},
		{Bench: "fragmentation", Config: c, Metric: "groups_touched", Value: float64(len(groups))},
	}
	for i := range rows {
		rows[i].Scan = o.OptimizeScan.String()
	}
	if o.Stats {
		st := f.a.Stats()
		rows[0].Stats = &st
	}
	return rows, nil
}

// FileSizes returns the sizes of the regular files under root, in walk
// order.
func FileSizes(root string) ([]int64, error) {
	var sizes []int64
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			sizes = append(sizes, info.Size())
		}
		return nil
	})
	return sizes, err
}

// SmallFiles writes files of the given sizes one after the other as an
// untar does (each written whole and closed: "small closed files"), with
// consecutive inode numbers, and reports the groups their data touches.
func SmallFiles(o Options, sizes []int64) ([]Row, error) {
	f, err := newFS(o)
	if err != nil {
		return nil, err
	}
	bs := uint64(f.geo.BlockSize)
	groups := map[uint32]bool{}
	var blocks, extents uint64
	for i, sz := range sizes {
		n := (uint64(sz) + bs - 1) / bs
		if n == 0 {
			continue
		}
		fl := &file{ino: uint32(12 + i)}
		if err := f.appendBlocks(fl, uint32(n), false, uint64(sz)); err != nil {
			f.close()
			return nil, err
		}
		blocks += n
		extents += uint64(len(fl.exts))
		for _, e := range fl.exts {
			for b := e.Start; b < e.End(); b += uint64(f.geo.BlocksPerGroup) {
				groups[f.a.GroupOf(b)] = true
			}
			groups[f.a.GroupOf(e.End()-1)] = true
		}
	}
	if err := f.close(); err != nil {
		return nil, err
	}
	c := o.Config()
	gs := make([]uint32, 0, len(groups))
	for g := range groups {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i] < gs[j] })
	rows := []Row{
		{Bench: "smallfiles", Config: c, Metric: "groups_touched", Value: float64(len(groups))},
		{Bench: "smallfiles", Config: c, Metric: "files", Value: float64(len(sizes))},
		{Bench: "smallfiles", Config: c, Metric: "blocks", Value: float64(blocks)},
		{Bench: "smallfiles", Config: c, Metric: "extents", Value: float64(extents)},
		{Bench: "smallfiles", Config: c, Metric: "min_group_span", Value: float64(minSpan(blocks, f.geo))},
	}
	for i := range rows {
		rows[i].Scan = o.OptimizeScan.String()
	}
	if o.Stats {
		st := f.a.Stats()
		rows[0].Stats = &st
	}
	return rows, nil
}

// minSpan is the fewest groups that could hold blocks.
func minSpan(blocks uint64, g mballoc.Geometry) uint64 {
	return (blocks + uint64(g.BlocksPerGroup) - 1) / uint64(g.BlocksPerGroup)
}
