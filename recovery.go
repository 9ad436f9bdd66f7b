package ext4go

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/journal"
	"github.com/ext4go/ext4go/internal/super"
	"github.com/ext4go/ext4go/internal/txn"
)

// Journal recovery. A filesystem whose journal holds
// committed transactions not yet written home (needs_recovery: a crash, a
// kill, or a live kernel mount) is read as the kernel would see it after
// replaying them: the journal is replayed into memory (jbd2.Recover), its
// fast commits applied over that (fastcommit_replay.go), and the blocks
// both give overlay the device, which is never written. A
// writable open first checks that the replayed filesystem can be written,
// then writes the replay home, resets the journal and clears
// needs_recovery (replayHome), and opens the result (which finishes its
// orphans).

// ErrJournalReplay matches the error of a read-only open whose journal
// needs recovery but cannot be replayed (a corrupt journal the kernel's
// recovery refuses too, fast commits that cannot be applied); the error
// also matches the cause (ErrCorrupt, ErrUnsupported).
var ErrJournalReplay = errors.New("the journal needs recovery and cannot be replayed")

// JournalReplay describes the replay a read-only open made.
type JournalReplay struct {
	Transactions int // committed transactions replayed
	Blocks       int // filesystem blocks they wrote (last copies)
	Revoked      int // logged copies skipped for a revoke record
	BadBlocks    int // logged copies skipped for a bad checksum
	FastCommits  int // fast-commit records applied after the transactions
	// FailedCommit is the transaction whose commit block failed its
	// checksum, where the replay stopped; 0 if none. e2fsck reports it
	// ("Journal transaction N was corrupt, replay was aborted") and the
	// kernel refuses such a journal after its replay (jbd2_journal_load).
	FailedCommit uint32
}

// Replay reports the journal replay this open made in memory, or nil if
// the journal needed none.
func (f *FS) Replay() *JournalReplay { return f.replay }

// journalLog is a journal read for recovery: its superblock, where its
// block 0 lies, and the replay.
type journalLog struct {
	sb    *jbd2.Superblock
	phys0 uint64 // filesystem block holding journal block 0
	rec   *jbd2.Recovery
	phys  func(nr uint32) (uint64, error)
	// blocks are what the replay writes, in the order of order: the
	// logged blocks, then those the fast commits changed (fc).
	blocks map[uint64][]byte
	order  []uint64
	fc     map[uint64][]byte
}

// addBlocks adds the blocks a fast-commit replay changed, which come
// after (and replace) the logged ones.
func (j *journalLog) addBlocks(bs map[uint64][]byte) {
	blocks := make(map[uint64][]byte, len(j.blocks)+len(bs))
	var order []uint64
	for _, blk := range j.order {
		if _, ok := bs[blk]; !ok {
			order = append(order, blk)
			blocks[blk] = j.blocks[blk]
		}
	}
	var more []uint64
	for blk, b := range bs {
		more = append(more, blk)
		blocks[blk] = b
	}
	sort.Slice(more, func(a, b int) bool { return more[a] < more[b] })
	j.blocks, j.order, j.fc = blocks, append(order, more...), bs
}

// journalFile is the internal journal as stored: its superblock and the
// filesystem block of every journal block.
type journalFile struct {
	sb     *jbd2.Superblock
	phys   func(nr uint32) (uint64, error)
	phys0  uint64 // filesystem block holding journal block 0
	mapped uint64 // journal blocks [0, mapped) are all mapped
	runs   []run  // the journal inode's block runs
}

// openJournalFile maps the journal inode and decodes its superblock.
func (f *FS) openJournalFile() (*journalFile, error) {
	sb := f.sb
	if !sb.HasCompat(super.CompatHasJournal) || sb.JournalInum == 0 {
		return nil, &UnsupportedError{Feature: "external journal", Detail: "the journal is on another device"}
	}
	n, err := f.readInode(sb.JournalInum)
	if err != nil {
		return nil, fmt.Errorf("journal inode: %w", err)
	}
	runs, err := f.buildMapping(n, n.in())
	if err != nil {
		return nil, fmt.Errorf("journal inode %d: %w", sb.JournalInum, err)
	}
	phys := func(nr uint32) (uint64, error) {
		i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > uint64(nr) })
		if i == len(runs) || runs[i].logical > uint64(nr) {
			return 0, &CorruptError{What: "journal inode", Block: -1, Ino: sb.JournalInum, Detail: fmt.Sprintf("journal block %d is not mapped", nr)}
		}
		p := runs[i].physical + uint64(nr) - runs[i].logical
		if p >= sb.BlocksCount() {
			return 0, &CorruptError{What: "journal inode", Block: int64(p), Ino: sb.JournalInum, Detail: "journal block outside the filesystem"}
		}
		return p, nil
	}
	jf := &journalFile{phys: phys, runs: runs}
	if jf.phys0, err = phys(0); err != nil {
		return nil, err
	}
	b0, err := jf.read(f, 0)
	if err != nil {
		return nil, err
	}
	jsb, err := jbd2.Decode(b0)
	if err != nil {
		return nil, fserr.At(err, -1, sb.JournalInum)
	}
	switch {
	case jsb.BlockSize != uint32(f.blockSize):
		return nil, &CorruptError{What: "journal superblock", Block: -1, Ino: sb.JournalInum,
			Detail: fmt.Sprintf("journal block size %d, filesystem %d", jsb.BlockSize, f.blockSize)}
	case jsb.UnknownIncompat() != 0:
		return nil, &UnsupportedError{Feature: fmt.Sprintf("journal incompat features %#x", jsb.UnknownIncompat())}
	}
	jf.sb = jsb
	jf.mapped = lastLogical(runs)
	if len(runs) > 0 && runs[0].logical != 0 {
		jf.mapped = 0
	}
	for i := 1; i < len(runs); i++ {
		if runs[i].logical != runs[i-1].logical+runs[i-1].length {
			jf.mapped = min(jf.mapped, runs[i-1].logical+runs[i-1].length)
		}
	}
	return jf, nil
}

func lastLogical(runs []run) uint64 {
	if len(runs) == 0 {
		return 0
	}
	r := runs[len(runs)-1]
	return r.logical + r.length
}

// read reads journal block nr.
func (jf *journalFile) read(f *FS, nr uint32) ([]byte, error) {
	p, err := jf.phys(nr)
	if err != nil {
		return nil, err
	}
	b := make([]byte, f.blockSize)
	if _, err := f.dev.ReadAt(b, int64(p)*f.blockSize); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// locate fills in where a recovery error lies: the journal inode, and
// for a *JournalRecoveryError the filesystem block of the damaged log
// block.
func (jf *journalFile) locate(err error, ino uint32) error {
	var re *jbd2.RecoveryError
	if errors.As(err, &re) && re == err {
		blk := int64(-1)
		if p, perr := jf.phys(re.LogBlock); perr == nil {
			blk = int64(p)
		}
		c := *re
		c.Err = fserr.At(re.Err, blk, ino)
		return &c
	}
	return fserr.At(err, -1, ino)
}

// recoverJournal replays the internal journal into memory.
func (f *FS) recoverJournal() (*journalLog, error) {
	jf, err := f.openJournalFile()
	if err != nil {
		var u *UnsupportedError
		if errors.As(err, &u) && u.Feature == "external journal" {
			return nil, &UnsupportedError{Feature: "journal replay", Detail: "the journal is on an external device"}
		}
		return nil, err
	}
	sb := f.sb
	rec, err := jbd2.Recover(jf.sb, func(nr uint32) ([]byte, error) { return jf.read(f, nr) })
	if err != nil {
		return nil, jf.locate(err, sb.JournalInum)
	}
	for blk := range rec.Blocks {
		if blk >= sb.BlocksCount() {
			return nil, &CorruptError{What: "journal", Block: int64(blk), Ino: sb.JournalInum, Detail: "a logged block lies outside the filesystem"}
		}
	}
	return &journalLog{sb: jf.sb, phys0: jf.phys0, phys: jf.phys, rec: rec, blocks: rec.Blocks, order: rec.Order}, nil
}

// replayHome finishes a recovery for writing, as the kernel does at
// mount (jbd2_journal_recover, then journal_reset and ext4's clearing of
// needs_recovery): the replayed blocks are written to their places and
// flushed, the journal is marked empty with the sequence going on after
// the last replayed transaction, and needs_recovery is cleared. Each step
// is flushed before the next, so a crash in between leaves a journal that
// replays to the same result.
//
// The blocks of a fast-commit replay are not the log's: a crash while
// they go home would leave some of them, and a second replay would start
// from another state. They are first committed as one more transaction
// of the log (EndSeq, the one the fast commits belong to, which makes the
// fast-commit area stale for any later recovery), after the logged blocks
// are home; from its commit on, any recovery replays them whole.
func (f *FS) replayHome(d dev.Device, j *journalLog) error {
	bs := f.blockSize
	for _, blk := range j.order {
		if _, ok := j.fc[blk]; ok {
			continue
		}
		if _, err := d.WriteAt(j.blocks[blk], int64(blk)*bs); err != nil {
			return fmt.Errorf("writing replayed block %d: %w", blk, err)
		}
	}
	if err := d.Sync(); err != nil {
		return err
	}
	if len(j.fc) > 0 {
		rec := j.rec
		jl, err := journal.Append(d, int(bs), j.sb, j.phys, f.now, rec.LogHead, rec.LogUsed, rec.EndSeq, rec.LastCommit)
		if err != nil {
			return err
		}
		blocks := make([]txn.Block, 0, len(j.fc))
		for blk, b := range j.fc {
			blocks = append(blocks, txn.Block{Nr: blk, Data: b})
		}
		sort.Slice(blocks, func(a, b int) bool { return blocks[a].Nr < blocks[b].Nr })
		// Once the fast commits are in the log their area goes, at
		// once: a stale HEAD is refused by e2fsck (1.47's scan fails on
		// a HEAD of another transaction, where the kernel's stops).
		jl.Durable = func() error {
			first, end := j.sb.FastCommitArea()
			if first >= end {
				return nil
			}
			p, err := j.phys(first)
			if err != nil {
				return err
			}
			if _, err := d.WriteAt(make([]byte, bs), int64(p)*bs); err != nil {
				return fmt.Errorf("clearing the fast-commit area: %w", err)
			}
			return d.Sync()
		}
		if err := jl.Commit(uint64(rec.EndSeq), blocks, nil); err != nil {
			return fmt.Errorf("logging the fast-commit replay: %w", err)
		}
		// Written home by the commit; Close flushes them and empties
		// the log, its sequence going on after this transaction.
		if err := jl.Close(); err != nil {
			return err
		}
	} else {
		jsb := *j.sb
		jsb.Start = 0
		jsb.Sequence = j.rec.EndSeq + 1
		if _, err := d.WriteAt(jsb.Encode(), int64(j.phys0)*bs); err != nil {
			return fmt.Errorf("writing the journal superblock: %w", err)
		}
		if err := d.Sync(); err != nil {
			return err
		}
	}
	buf := make([]byte, super.Size)
	if _, err := d.ReadAt(buf, super.Offset); err != nil {
		return err
	}
	sb, err := super.DecodeNoVerify(buf)
	if err != nil {
		return fserr.At(err, 0, 0)
	}
	sb.FeatureIncompat &^= super.IncompatRecover
	if _, err := d.WriteAt(sb.Encode(), super.Offset); err != nil {
		return fmt.Errorf("writing the superblock: %w", err)
	}
	return d.Sync()
}

// overlayDev is a read-only device with replayed journal blocks over it.
type overlayDev struct {
	dev.Device
	blocks map[uint64][]byte
	bs     int64
}

func (d *overlayDev) ReadAt(p []byte, off int64) (int, error) {
	n, err := d.Device.ReadAt(p, off)
	// Patch every replayed block the read covers.
	for blk := off / d.bs; blk*d.bs < off+int64(len(p)); blk++ {
		b, ok := d.blocks[uint64(blk)]
		if !ok {
			continue
		}
		start := blk * d.bs
		lo, hi := max(start, off), min(start+d.bs, off+int64(len(p)))
		copy(p[lo-off:hi-off], b[lo-start:hi-start])
	}
	return n, err
}

func (d *overlayDev) WriteAt([]byte, int64) (int, error) {
	return 0, errors.New("ext4go: a replayed journal's view is read-only")
}

// JournalInfo describes an internal journal as it is on disk.
type JournalInfo struct {
	Blocks   uint32   // s_maxlen: journal blocks, its superblock included
	First    uint32   // first block of the log
	Sequence uint32   // the first transaction the log expects
	Start    uint32   // where the log starts; 0: nothing to replay
	Features []string // journal features, as dumpe2fs names them
	// What a replay would do now (when Start != 0): committed
	// transactions, the blocks they write, revoke records read.
	Transactions, LoggedBlocks, RevokeRecords int
	FastCommits                               int // fast-commit records to apply after the transactions
	// ReplayError is why the log cannot be replayed, if it cannot.
	ReplayError error
}

// Journal describes the internal journal on disk, or returns nil without
// one. On a read-only open of an image that needed recovery, it shows the
// log as it is on disk (see Replay for what the open replayed).
func (f *FS) Journal() (*JournalInfo, error) {
	if f.closed.Load() {
		return nil, fs.ErrClosed
	}
	if !f.sb.HasCompat(super.CompatHasJournal) || f.sb.JournalInum == 0 {
		return nil, nil
	}
	jf, err := f.openJournalFile()
	if err != nil {
		return nil, err
	}
	jsb := jf.sb
	info := &JournalInfo{Blocks: jsb.MaxLen, First: jsb.First, Sequence: jsb.Sequence, Start: jsb.Start, Features: jsb.FeatureNames()}
	if jsb.Start != 0 {
		rec, err := jbd2.Recover(jsb, func(nr uint32) ([]byte, error) { return jf.read(f, nr) })
		if err != nil {
			info.ReplayError = jf.locate(err, f.sb.JournalInum)
		} else {
			info.Transactions = int(rec.EndSeq - rec.StartSeq)
			info.LoggedBlocks = len(rec.Blocks)
			info.RevokeRecords = rec.Revokes
			if rec.FastCommits != nil {
				info.FastCommits = len(rec.FastCommits.Tags)
			}
		}
	}
	return info, nil
}
