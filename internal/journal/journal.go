// Package journal is ext4go's jbd2 log writer: the txn.Committer of a
// filesystem with a journal (kernel: fs/jbd2/commit.c, checkpoint.c,
// journal.c). A transaction's metadata blocks are first written to the
// log (revoke blocks, then descriptor blocks each followed by the blocks
// it tags) and flushed, then a commit block is written and flushed, and
// only then are the blocks written to their home locations. Recovery
// (jbd2.Recover, the kernel's, e2fsck's) replays committed transactions
// whose home writes a crash may have cut short.
//
// Ordering, as the kernel's data=ordered with barriers:
//   - file data is written by the filesystem before the handle that maps
//     it ends, so the flush before the commit block makes it durable
//     before the metadata that points at it can replay;
//   - the journal superblock that makes the log live (s_start) is written
//     before that same flush;
//   - home writes are not flushed per transaction: a checkpoint (when the
//     log is full, and at Close) flushes them and only then moves the
//     log's tail in the journal superblock, so a crash always finds every
//     transaction whose home writes may be missing still in the log.
//
// Revokes: a block freed by a transaction while a copy of it is in the
// live log (Logged) gets a revoke record in the freeing transaction, so a
// replay never writes the old copy over the block's new owner (file data,
// which is not logged). Blocks freed by a transaction are handed out
// again only after it commits (the allocator's deferred frees), so the
// revoke is always durable before the reuse. The one exception, file data
// a transaction allocated and frees again, is reused in that same
// transaction: if it becomes a logged block there, logging it cancels the
// revoke (txn: cancelRevoke), as jbd2 does.
//
// Locks: Commit, Checkpoint and Close are serialised by the caller (the
// txn manager's commit lock); loggedMu protects logged, which handles of
// the running transaction query while a commit runs.
package journal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/txn"
)

// Device is the filesystem's device.
type Device interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Sync() error
}

// vectorWriter is a Device that writes pieces lying end to end with one
// call (dev.File's pwritev): a run of log or home blocks is then written
// from the blocks' own buffers, without a copy into one.
type vectorWriter interface {
	WriteVAt(pieces [][]byte, off int64) (int, error)
}

// Map returns the filesystem block holding journal block nr.
type Map func(nr uint32) (uint64, error)

// ErrTooBig is returned by Commit for a transaction that does not fit in
// the whole log.
var ErrTooBig = errors.New("journal: transaction larger than the journal")

// ErrClosed is returned by Commit after Close.
var ErrClosed = errors.New("journal: closed")

// Stats counts what the journal wrote.
type Stats struct {
	Commits     int // transactions committed
	Blocks      int // metadata blocks logged
	Revokes     int // revoke records written
	Checkpoints int // times the log was emptied to make room
	Flushes     int // device flushes
}

// Journal writes transactions through an internal jbd2 log.
type Journal struct {
	// Durable, when set, is called once a commit block is durable,
	// before the transaction's blocks are written home.
	Durable func() error

	dev  Device
	bs   int64
	phys Map
	sb   jbd2.Superblock // as last written, Start and Sequence included
	now  func() time.Time

	first, end uint32 // the log area [first, end)
	head       uint32 // next log block to write
	used       uint32 // log blocks from the tail to head
	seq        uint32 // sequence of the next transaction
	live       bool   // the superblock on disk has s_start set
	appending  bool   // opened by Append: the log's older transactions are not ours to checkpoint
	closed     bool
	lastCommit uint64 // seconds of the last commit block (kept monotonic)
	perDesc    int    // tags one descriptor block holds
	stats      Stats
	buf        []byte   // reused by writeLog and writeHome for merged writes
	vec        [][]byte // the same, where the device writes pieces (vectorWriter)

	loggedMu sync.Mutex
	logged   map[uint64]uint64 // fs block -> newest txn ID with a copy in the live log
}

// Open prepares to write through the journal whose superblock is sb (as
// decoded from journal block 0, which phys maps). The log must be empty
// (s_start 0: recovered or cleanly closed); the first commit makes it live.
// blocks64 says the filesystem has block numbers beyond 32 bits (ext4's
// 64bit feature): the journal then gets 64-bit tags, as the kernel sets
// them at mount; the revoke feature is set for the revoke blocks written.
// Both are written with the superblock that makes the log live.
func Open(d Device, blockSize int, sb *jbd2.Superblock, phys Map, now func() time.Time, blocks64 bool) (*Journal, error) {
	if sb.Start != 0 {
		return nil, fmt.Errorf("journal: the log holds transactions (s_start %d); recover it first", sb.Start)
	}
	if int(sb.BlockSize) != blockSize {
		return nil, fmt.Errorf("journal: block size %d, filesystem %d", sb.BlockSize, blockSize)
	}
	if now == nil {
		now = time.Now
	}
	j := &Journal{dev: d, bs: int64(blockSize), phys: phys, sb: *sb, now: now,
		first: sb.First, end: sb.LogEnd(), seq: sb.Sequence, logged: map[uint64]uint64{}}
	if sb.Version() < 2 {
		// A version 1 superblock has no feature fields, so no revoke
		// records: it becomes version 2 (with no features but those
		// below), which every jbd2 reader understands.
		j.sb.Header.BlockType = jbd2.BlockSuperV2
		j.sb.FeatureCompat, j.sb.FeatureIncompat, j.sb.FeatureROCompat = 0, 0, 0
		j.sb.NrUsers = 1
	}
	j.sb.FeatureIncompat |= jbd2.IncompatRevoke
	if blocks64 {
		j.sb.FeatureIncompat |= jbd2.Incompat64Bit
	}
	j.head = j.first
	if j.end <= j.first+4 {
		return nil, fmt.Errorf("journal: log area [%d, %d) too small", j.first, j.end)
	}
	tb := j.sb.TagBytes()
	space := jbd2.DescriptorSpace(&j.sb)
	j.perDesc = 1 + (space-tb-16)/tb // the first tag carries the UUID
	if j.perDesc < 1 {
		return nil, fmt.Errorf("journal: descriptor block has no room for tags")
	}
	return j, nil
}

// Capacity returns the number of blocks of the log area.
func (j *Journal) Capacity() int { return int(j.end - j.first) }

// MaxTransaction is the number of metadata blocks a transaction should
// stay under (kernel: j_max_transaction_buffers, a quarter of the log).
func (j *Journal) MaxTransaction() int { return j.Capacity() / 4 }

// Stats returns what the journal has written so far.
func (j *Journal) Stats() Stats { return j.stats }

// Frozen records that blocks are about to be logged by transaction tid
// (txn.Logger).
func (j *Journal) Frozen(tid uint64, blocks []txn.Block) {
	j.loggedMu.Lock()
	for _, b := range blocks {
		j.logged[b.Nr] = tid
	}
	j.loggedMu.Unlock()
}

// Logged returns the blocks of [start, start+n) with a copy in the live
// log (txn.Logger).
func (j *Journal) Logged(start, n uint64) []uint64 {
	j.loggedMu.Lock()
	defer j.loggedMu.Unlock()
	var out []uint64
	if n <= uint64(len(j.logged)) {
		for nr := start; nr < start+n; nr++ {
			if _, ok := j.logged[nr]; ok {
				out = append(out, nr)
			}
		}
		return out
	}
	for nr := range j.logged {
		if nr >= start && nr < start+n {
			out = append(out, nr)
		}
	}
	return out
}

// write is one block to write to the log.
type write struct {
	jblk uint32
	data []byte
}

// Append prepares to commit one more transaction after the committed
// ones of a log that needs recovery (sb as on disk, s_start set): head is
// the log block after the last commit block, used the log blocks from
// s_start to it, seq the next transaction's ID and lastCommit the newest
// commit time in the log. The journal's features stay as they are (the
// log was written with them). Commit writes the transaction after the
// others, with the superblock unchanged; one that does not fit in the free
// part of the log fails with ErrTooBig, as the older transactions cannot
// be checkpointed here: their blocks are the caller's to write home (and
// flush) before Close empties the log.
func Append(d Device, blockSize int, sb *jbd2.Superblock, phys Map, now func() time.Time, head, used, seq uint32, lastCommit uint64) (*Journal, error) {
	if sb.Start == 0 {
		return nil, fmt.Errorf("journal: the log is empty; Open it")
	}
	if int(sb.BlockSize) != blockSize {
		return nil, fmt.Errorf("journal: block size %d, filesystem %d", sb.BlockSize, blockSize)
	}
	if now == nil {
		now = time.Now
	}
	j := &Journal{dev: d, bs: int64(blockSize), phys: phys, sb: *sb, now: now,
		first: sb.First, end: sb.LogEnd(), seq: seq, logged: map[uint64]uint64{},
		head: head, used: used, live: true, appending: true, lastCommit: lastCommit}
	if j.end <= j.first+4 || head < j.first || head >= j.end || used >= j.end-j.first {
		return nil, fmt.Errorf("journal: log area [%d, %d) with head %d, %d blocks used", j.first, j.end, head, used)
	}
	tb := j.sb.TagBytes()
	space := jbd2.DescriptorSpace(&j.sb)
	j.perDesc = 1 + (space-tb-16)/tb
	if j.perDesc < 1 {
		return nil, fmt.Errorf("journal: descriptor block has no room for tags")
	}
	return j, nil
}

// Commit logs the transaction, commits it and writes its blocks home
// (txn.Committer). It returns once the commit block is durable.
func (j *Journal) Commit(tid uint64, blocks []txn.Block, revokes []uint64) error {
	if j.closed {
		return ErrClosed
	}
	sb := &j.sb
	perRevoke := jbd2.RevokeCapacity(sb)
	ndesc := (len(blocks) + j.perDesc - 1) / j.perDesc
	nrev := (len(revokes) + perRevoke - 1) / perRevoke
	need := uint32(ndesc + len(blocks) + nrev + 1)
	// One block of the log always stays free, so that a full log never
	// ends where it starts.
	room := uint32(j.Capacity()) - 1
	if need > room {
		return fmt.Errorf("%w: %d blocks to log, %d in the journal", ErrTooBig, need, j.Capacity())
	}
	if room-j.used < need {
		if j.appending {
			return fmt.Errorf("%w: %d blocks to log, %d free after the log's transactions", ErrTooBig, need, room-j.used)
		}
		if err := j.checkpoint(tid); err != nil {
			return err
		}
	}
	seq := j.seq
	var writes []write
	next := j.head
	put := func(b []byte) {
		writes = append(writes, write{next, b})
		next = j.nextBlock(next)
	}
	for i := 0; i < len(revokes); i += perRevoke {
		b, err := jbd2.EncodeRevoke(sb, seq, revokes[i:min(i+perRevoke, len(revokes))])
		if err != nil {
			return err
		}
		put(b)
	}
	crc := ^uint32(0) // v1 transaction checksum
	v1 := sb.HasCompat(jbd2.CompatChecksum) && !sb.HasCsumV2or3()
	for i := 0; i < len(blocks); i += j.perDesc {
		group := blocks[i:min(i+j.perDesc, len(blocks))]
		tags := make([]jbd2.Tag, len(group))
		copies := make([][]byte, len(group))
		for k, blk := range group {
			data := blk.Data
			t := &tags[k]
			t.Block = blk.Nr
			if len(data) >= 4 && binary.BigEndian.Uint32(data) == jbd2.Magic {
				data = append([]byte(nil), data...)
				jbd2.Escape(data)
				t.Flags |= jbd2.FlagEscape
			}
			if k == 0 {
				t.UUID = sb.UUID
			} else {
				t.Flags |= jbd2.FlagSameUUID
			}
			if k == len(group)-1 {
				t.Flags |= jbd2.FlagLastTag
			}
			jbd2.SetTagChecksum(sb, t, seq, data)
			copies[k] = data
		}
		desc, err := jbd2.EncodeDescriptor(sb, seq, tags)
		if err != nil {
			return err
		}
		put(desc)
		if v1 {
			crc = jbd2.TransactionCRC32(crc, desc)
		}
		for _, c := range copies {
			put(c)
			if v1 {
				crc = jbd2.TransactionCRC32(crc, c)
			}
		}
	}
	if !j.live {
		// The first transaction since the log was emptied: the
		// superblock must point at it before its commit block is
		// durable (the flush below covers both).
		if err := j.writeSuper(j.head, seq); err != nil {
			return err
		}
	}
	if err := j.writeLog(writes); err != nil {
		return err
	}
	if err := j.flush(); err != nil {
		return err
	}
	c := &jbd2.Commit{Header: jbd2.Header{Magic: jbd2.Magic, BlockType: jbd2.BlockCommit, Sequence: seq}}
	t := j.now()
	sec := uint64(t.Unix())
	if sec < j.lastCommit {
		sec = j.lastCommit // recovery takes an older commit for a stale log
	}
	j.lastCommit = sec
	c.CommitSec, c.CommitNsec = sec, uint32(t.Nanosecond())
	if v1 {
		c.ChecksumType, c.ChecksumSize, c.Checksums[0] = jbd2.ChecksumCRC32, 4, crc
	}
	if err := j.writeLog([]write{{next, jbd2.EncodeCommit(sb, c)}}); err != nil {
		return err
	}
	next = j.nextBlock(next)
	if err := j.flush(); err != nil {
		return err
	}
	// Committed: the transaction survives a crash from here on.
	if j.Durable != nil {
		if err := j.Durable(); err != nil {
			return err
		}
	}
	j.head = next
	j.used += need
	j.seq++
	j.stats.Commits++
	j.stats.Blocks += len(blocks)
	j.stats.Revokes += len(revokes)
	return j.writeHome(blocks)
}

// Checkpoint flushes every committed transaction's home writes and empties
// the log (the superblock then points at the next transaction's place).
func (j *Journal) Checkpoint() error {
	if j.closed {
		return ErrClosed
	}
	return j.checkpoint(^uint64(0))
}

// checkpoint empties the log: every transaction in it has been written
// home; a flush makes that durable, then the tail moves to the head.
// Logged copies of transactions before keep (being frozen for logging
// now) stay recorded.
func (j *Journal) checkpoint(keep uint64) error {
	if j.used == 0 && !j.live {
		return nil
	}
	if err := j.flush(); err != nil {
		return err
	}
	j.used = 0
	j.stats.Checkpoints++
	j.loggedMu.Lock()
	for nr, tid := range j.logged {
		if tid < keep {
			delete(j.logged, nr)
		}
	}
	j.loggedMu.Unlock()
	if !j.live {
		return nil
	}
	if err := j.writeSuper(j.head, j.seq); err != nil {
		return err
	}
	return j.flush()
}

// Close checkpoints and marks the journal empty (s_start 0, s_sequence the
// next transaction's), as an unmount leaves it.
func (j *Journal) Close() error {
	if j.closed {
		return nil
	}
	if err := j.checkpoint(^uint64(0)); err != nil {
		return err
	}
	j.closed = true
	j.live = true // write the superblock even if nothing was committed
	if err := j.writeSuper(0, j.seq); err != nil {
		return err
	}
	return j.flush()
}

func (j *Journal) nextBlock(b uint32) uint32 {
	if b+1 >= j.end {
		return j.first
	}
	return b + 1
}

// writeSuper writes the journal superblock with s_start and s_sequence.
func (j *Journal) writeSuper(start, seq uint32) error {
	j.sb.Start, j.sb.Sequence = start, seq
	j.sb.Errno = 0
	if start == 0 {
		j.sb.Head = j.head // as jbd2_mark_journal_empty leaves it
	}
	p, err := j.phys(0)
	if err != nil {
		return err
	}
	raw := j.sb.Encode()
	buf := make([]byte, j.bs)
	copy(buf, raw)
	// The rest of block 0 is kept as it is on disk.
	if _, err := j.dev.ReadAt(buf[len(raw):], int64(p)*j.bs+int64(len(raw))); err != nil {
		return fmt.Errorf("journal: reading its superblock: %w", err)
	}
	if _, err := j.dev.WriteAt(buf, int64(p)*j.bs); err != nil {
		return fmt.Errorf("journal: writing its superblock: %w", err)
	}
	j.live = start != 0
	return nil
}

// writeLog writes log blocks, merging runs that are contiguous on disk.
func (j *Journal) writeLog(ws []write) error {
	vw, _ := j.dev.(vectorWriter)
	run, vec := j.buf[:0], j.vec[:0]
	defer func() { j.buf, j.vec = run[:0], dropPieces(vec) }()
	var runStart uint64
	var runLen int64
	flush := func() error {
		if runLen == 0 {
			return nil
		}
		var err error
		if vw != nil {
			_, err = vw.WriteVAt(vec, int64(runStart)*j.bs)
		} else {
			_, err = j.dev.WriteAt(run, int64(runStart)*j.bs)
		}
		run, vec, runLen = run[:0], dropPieces(vec), 0
		if err != nil {
			return fmt.Errorf("journal: writing the log: %w", err)
		}
		return nil
	}
	for _, w := range ws {
		p, err := j.phys(w.jblk)
		if err != nil {
			return err
		}
		if runLen > 0 && p != runStart+uint64(runLen) {
			if err := flush(); err != nil {
				return err
			}
		}
		if runLen == 0 {
			runStart = p
		}
		if vw != nil {
			vec = append(vec, w.data)
		} else {
			run = append(run, w.data...)
		}
		runLen++
	}
	return flush()
}

// dropPieces empties pieces, letting go of the buffers it named.
func dropPieces(pieces [][]byte) [][]byte {
	clear(pieces)
	return pieces[:0]
}

// writeHome writes committed blocks to their places (sorted by number),
// merging neighbours into one write.
func (j *Journal) writeHome(blocks []txn.Block) error {
	for i := 0; i < len(blocks); {
		k := i + 1
		for k < len(blocks) && blocks[k].Nr == blocks[k-1].Nr+1 {
			k++
		}
		var err error
		if k == i+1 {
			_, err = j.dev.WriteAt(blocks[i].Data, int64(blocks[i].Nr)*j.bs)
		} else if vw, ok := j.dev.(vectorWriter); ok {
			vec := j.vec[:0]
			for _, b := range blocks[i:k] {
				vec = append(vec, b.Data)
			}
			_, err = vw.WriteVAt(vec, int64(blocks[i].Nr)*j.bs)
			j.vec = dropPieces(vec)
		} else {
			buf := j.buf[:0]
			for _, b := range blocks[i:k] {
				buf = append(buf, b.Data...)
			}
			_, err = j.dev.WriteAt(buf, int64(blocks[i].Nr)*j.bs)
			j.buf = buf[:0]
		}
		if err != nil {
			return fmt.Errorf("write block %d: %w", blocks[i].Nr, err)
		}
		i = k
	}
	return nil
}

func (j *Journal) flush() error {
	j.stats.Flushes++
	return j.dev.Sync()
}
