package ext4go

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/mballoc"
)

// fillJob is a regular file, or a part of one, whose blocks are allocated
// and whose data a worker copies into them: from data (bytes base… of the
// file) when the source was read already, else from the host file src.
type fillJob struct {
	src  string
	data []byte
	base int64
	size int64 // the file's size
	runs []run
	// pieces, when set, is a gathered batch instead: data of several
	// files (with their last blocks' zero padding) lying end to end on
	// the device from byte at, written with one pwritev.
	pieces [][]byte
	at     int64
	// held are the pooled buffers the job's data lies in; each gets one
	// release when the job is done.
	held []*dataBuf
}

// gathered is a batch of in-memory file data being put together for one
// write: small files are allocated one after another, so their data
// usually lies end to end on the device, and one pwritev of many files
// costs far less than a pwrite each. The allocator spreads small files
// over a few regions (a locality group each), so gatherStreams batches
// are open at once, each continuing in its region.
type gathered struct {
	pieces   [][]byte
	at, end  int64 // device bytes [at, end) the pieces cover
	firstSrc string
	used     uint64     // when last added to, for replacing the oldest
	held     []*dataBuf // a reference to each piece's buffer
}

// reserveHostFile allocates the blocks of a host file's data ranges and
// queues the copy. finish, if set, changes the inode in the same write as
// the size (the times of a file nothing else changes after).
func (b *builder) reserveHostFile(n *node, h *hostEntry, finish func(*inode.Inode)) error {
	size := h.st.Size
	n.mu.Lock()
	runs, err := b.f.reserve(n, size, h.ranges, finish)
	n.mu.Unlock()
	if err != nil {
		return err
	}
	b.queue(fillJob{src: h.path, data: h.data, size: size, runs: runs, held: heldBy(h.buf)})
	h.data, h.buf = nil, nil
	return nil
}

// heldBy is the held list of a job whose data lies in d (nil: not pooled).
func heldBy(d *dataBuf) []*dataBuf {
	if d == nil {
		return nil
	}
	return []*dataBuf{d}
}

// queue hands a job to the fill workers; data already in memory joins the
// batch being gathered.
func (b *builder) queue(j fillJob) {
	if j.data != nil && b.gather(j) {
		for _, d := range j.held {
			d.release() // the batches hold their own references
		}
		return
	}
	var total int64
	for _, r := range j.runs {
		total += int64(r.length) * b.f.blockSize
	}
	b.send(j, total)
}

func (b *builder) send(j fillJob, total int64) {
	b.total.Add(total)
	b.pending.Add(1)
	b.jobs <- j
}

// gather adds the in-memory data of j to the batch, sending the batch on
// when j's data does not continue it. It reports false, leaving the job to
// fill, if the data does not cover the runs (fill reports that).
func (b *builder) gather(j fillJob) bool {
	bs := b.f.blockSize
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		if off < j.base || end-j.base > int64(len(j.data)) {
			return false
		}
	}
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		phys := int64(r.physical) * bs
		piece := j.data[off-j.base : end-j.base]
		var pad []byte
		if end == j.size && j.size%bs != 0 {
			pad = zeroBlock[:bs-j.size%bs]
		}
		g := b.batchAt(phys)
		if len(g.pieces)+2 > dev.MaxIovecs || g.end-g.at+int64(len(piece)) > gatherMax {
			b.flush(g)
		}
		if len(g.pieces) == 0 {
			g.at, g.end, g.firstSrc = phys, phys, j.src
		}
		b.gatherClock++
		g.used = b.gatherClock
		g.pieces = append(g.pieces, piece)
		for _, d := range j.held {
			d.hold()
			g.held = append(g.held, d)
		}
		if pad != nil {
			g.pieces = append(g.pieces, pad)
		}
		g.end += int64(len(piece) + len(pad))
	}
	return true
}

// batchAt returns the batch that data at device byte phys continues, or
// an empty one (sending the oldest batch on to make room).
func (b *builder) batchAt(phys int64) *gathered {
	var oldest *gathered
	for i := range b.batches {
		g := &b.batches[i]
		if len(g.pieces) > 0 && g.end == phys {
			return g
		}
		if oldest == nil || g.used < oldest.used {
			oldest = g
		}
	}
	b.flush(oldest)
	return oldest
}

// flush sends batch g to the workers and empties it.
func (b *builder) flush(g *gathered) {
	if len(g.pieces) > 0 {
		b.send(fillJob{src: g.firstSrc, pieces: g.pieces, at: g.at, held: g.held}, g.end-g.at)
	}
	*g = gathered{}
}

// flushBatch sends every gathered batch to the workers.
func (b *builder) flushBatch() {
	for i := range b.batches {
		b.flush(&b.batches[i])
	}
}

// drainFill waits until every queued job is done: before blocks that a
// queued job writes can be freed (a tar entry replacing an earlier file).
func (b *builder) drainFill() error {
	b.flushBatch()
	b.pending.Wait()
	return b.fillFailed()
}

// reserve maps written blocks over the block-aligned cover of ranges and
// sets n's size; the caller writes the data into the returned runs before
// Close. Allocation happens here, in the caller's order, which keeps
// builds reproducible while the copying runs in parallel. n.mu is held.
func (f *FS) reserve(n *node, size int64, ranges []Range, finish func(*inode.Inode)) ([]run, error) {
	if err := f.checkDataWritable(n); err != nil {
		return nil, err
	}
	if size > f.maxFileSize(n) {
		return nil, syscall.EFBIG
	}
	bs := f.blockSize
	type span struct{ from, to uint64 }
	var spans []span
	for _, r := range ranges {
		s := span{uint64(r.Off / bs), uint64((r.Off + r.Len + bs - 1) / bs)}
		if k := len(spans) - 1; k >= 0 && s.from <= spans[k].to {
			spans[k].to = max(spans[k].to, s.to)
			continue
		}
		spans = append(spans, s)
	}
	finished := false
	for i, s := range spans {
		for lblk := s.from; lblk < s.to; {
			var last func(*inode.Inode)
			if i == len(spans)-1 {
				// The size (and finish) go into the handle that maps
				// the last blocks, if this chunk turns out to be it:
				// one inode write fewer per file.
				last = func(in *inode.Inode) {
					in.Size = uint64(size)
					if finish != nil {
						finish(in)
					}
					finished = true
				}
			}
			got, err := f.reserveChunk(n, size, lblk, s.to, last)
			if err != nil {
				return nil, err
			}
			lblk += got
		}
	}
	if finished {
		return f.mapping(n)
	}
	h, err := f.begin()
	if err != nil {
		return nil, err
	}
	in := editInode(n)
	in.Size = uint64(size)
	if finish != nil {
		finish(in)
	}
	err = f.setInode(h, n, in)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return nil, err
	}
	return f.mapping(n)
}

// reserveChunk maps blocks from lblk towards end, as many as one
// allocation gives; if they reach end, last (when set) changes the inode
// before it is written.
func (f *FS) reserveChunk(n *node, size int64, lblk, end uint64, last func(*inode.Inode)) (uint64, error) {
	h, err := f.begin()
	if err != nil {
		return 0, err
	}
	defer h.End()
	in := editInode(n)
	s := pooledExtStore(f, h, n.ino)
	defer putExtStore(s)
	ed := f.editor(n, in, s)
	req := mballoc.Request{Inode: n.ino, Logical: lblk, Len: uint32(min(end-lblk, maxAllocChunk)),
		Flags: mballoc.FlagData, FileSize: uint64(size)}
	ext, err := f.mapNew(h, in, s, ed, req, nil, false, nil)
	if err != nil {
		return 0, err
	}
	if last != nil && lblk+uint64(ext.Len) >= end {
		last(in)
	}
	return uint64(ext.Len), f.setInode(h, n, in)
}

// startFill starts the workers that copy file data, and the progress
// reports.
func (b *builder) startFill() {
	b.jobs = make(chan fillJob, 4*b.o.Workers)
	for i := 0; i < b.o.Workers; i++ {
		b.fillWG.Add(1)
		go func() {
			defer b.fillWG.Done()
			for j := range b.jobs {
				if b.fillErr.Load() == nil {
					if err := b.fill(j); err != nil {
						err = fmt.Errorf("%s: %w", j.src, err)
						b.fillErr.CompareAndSwap(nil, &err)
					}
				} // else drain: the walk stops at its next entry
				for _, d := range j.held {
					d.release()
				}
				b.pending.Done()
			}
		}()
	}
	b.stopProgress = make(chan struct{})
	if b.o.Progress != nil {
		go func() {
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-b.stopProgress:
					return
				case <-t.C:
					b.o.Progress(b.done.Load(), b.total.Load())
				}
			}
		}()
	}
}

// fillFailed returns the first error of a fill worker.
func (b *builder) fillFailed() error {
	if p := b.fillErr.Load(); p != nil {
		return *p
	}
	return nil
}

// stopFill waits for the queued copies and returns the first error.
func (b *builder) stopFill() error {
	b.flushBatch()
	close(b.jobs)
	b.fillWG.Wait()
	close(b.stopProgress)
	if err := b.fillFailed(); err != nil {
		return err
	}
	if b.o.Progress != nil {
		b.o.Progress(b.done.Load(), b.total.Load())
	}
	return nil
}

// writebackStarter is a device that can start writing back what was
// written to it without waiting (dev.File).
type writebackStarter interface{ StartWriteback() error }

// dataSyncer is a device that can wait until what was written to it is
// durable (dev.File).
type dataSyncer interface{ SyncData() error }

// vectorWriter is a device that writes many pieces in one call (dev.File).
type vectorWriter interface {
	WriteVAt(pieces [][]byte, off int64) (int, error)
}

// fill copies a file's data into its reserved blocks, or writes a gathered
// batch. Every writebackEvery bytes written in all (unflushed counts them)
// it starts the device's writeback and, unless another worker is at it,
// waits for the device to have everything so far: done along the way, on a
// worker, the wait costs no CPU, while left to Close's fsync, on a virtual
// disk that fsync waited for the host to write out the whole image's data
// at once (120 of the 800 ms of a build of /usr/local/go here). The error
// of that sync is the build's: it is reported once, and Close's fsync
// would not see it again.
func (b *builder) fill(j fillJob) error {
	f := b.f
	var buf *[]byte
	if j.pieces == nil {
		buf = fillBufs.Get().(*[]byte)
	}
	wrote, err := f.fillData(j, buf, &b.done)
	if buf != nil {
		fillBufs.Put(buf)
	}
	if err != nil {
		return err
	}
	// Only this job's bytes: done moves with the other workers' too.
	if b.unflushed.Add(wrote) < writebackEvery {
		return nil
	}
	b.unflushed.Store(0)
	if w, ok := f.dev.(writebackStarter); ok {
		w.StartWriteback() // only a hint
	}
	if s, ok := f.dev.(dataSyncer); ok && b.syncing.CompareAndSwap(false, true) {
		defer b.syncing.Store(false)
		if err := s.SyncData(); err != nil {
			return fmt.Errorf("syncing the image: %w", err)
		}
	}
	return nil
}

// fillBufs are the read buffers of fills from host files: only as many
// as copies run at once (a few; most data comes in gathered batches),
// not one for each worker, whose first use cost a page fault each 4 KiB.
var fillBufs = sync.Pool{New: func() any {
	b := make([]byte, 1<<20)
	return &b
}}

// fillData writes j, adding the bytes to done as it goes, and returns how
// many it wrote; bufp is the read buffer of a job that is not a batch (nil
// for a batch).
func (f *FS) fillData(j fillJob, bufp *[]byte, done *atomic.Int64) (int64, error) {
	if j.pieces != nil {
		var n int
		var err error
		if w, ok := f.dev.(vectorWriter); ok {
			n, err = w.WriteVAt(j.pieces, j.at)
		} else {
			for _, p := range j.pieces {
				if _, err = f.dev.WriteAt(p, j.at+int64(n)); err != nil {
					break
				}
				n += len(p)
			}
		}
		done.Add(int64(n))
		return int64(n), err
	}
	var src io.ReaderAt
	if j.data != nil {
		src = bytesReaderAt{j.data, j.base}
	} else {
		file, err := os.Open(j.src)
		if err != nil {
			return 0, err
		}
		defer file.Close()
		src = file
	}
	buf := *bufp
	bs := f.blockSize
	var wrote int64
	for _, r := range j.runs {
		off := int64(r.logical) * bs
		end := min(off+int64(r.length)*bs, j.size)
		phys := int64(r.physical) * bs
		for off < end {
			n := min(int64(len(buf)), end-off)
			m, err := src.ReadAt(buf[:n], off)
			if err != nil && err != io.EOF {
				return wrote, err
			}
			if int64(m) < n {
				return wrote, fmt.Errorf("changed while being copied (shorter than %d bytes)", j.size)
			}
			// Pad the file's last block with zeros.
			w := n
			if off+n == j.size && j.size%bs != 0 {
				w = (n + bs - 1) / bs * bs
				if w > int64(len(buf)) {
					w = n
				} else {
					clear(buf[n:w])
				}
			}
			if _, err := f.dev.WriteAt(buf[:w], phys); err != nil {
				return wrote, err
			}
			if w == n && off+n == j.size && j.size%bs != 0 {
				zeros := make([]byte, bs-j.size%bs)
				if _, err := f.dev.WriteAt(zeros, phys+n); err != nil {
					return wrote, err
				}
			}
			done.Add(n)
			wrote += n
			off += n
			phys += n
		}
	}
	return wrote, nil
}
