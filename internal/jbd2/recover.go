package jbd2

import (
	"errors"
	"fmt"
	"sort"

	"github.com/ext4go/ext4go/internal/fserr"
)

// ReadLog reads journal block nr (counted from the start of the journal,
// block 0 holding its superblock).
type ReadLog func(nr uint32) ([]byte, error)

// Recovery is what replaying a journal gives: the filesystem blocks the
// committed transactions logged, last copy first-class (a later
// transaction's copy replaces an earlier one), without the revoked ones.
type Recovery struct {
	Blocks map[uint64][]byte // filesystem block -> its content after the replay
	Order  []uint64          // Blocks' keys in log order of their last copy

	// Transactions [StartSeq, EndSeq) were replayed; EndSeq is where
	// the next transaction's ID must go on (the journal's s_sequence
	// once it is reset).
	StartSeq, EndSeq uint32
	// LogHead is the log block after the last replayed commit block
	// (where transaction EndSeq would go), LogUsed the log blocks from
	// s_start to it, LastCommit the newest commit time the scan saw.
	LogHead, LogUsed uint32
	LastCommit       uint64
	Revokes          int // revoke records read
	RevokeHits       int // logged copies skipped for a revoke
	// FastCommits are the fast commits to apply after the blocks (ext4's
	// replay of them needs the filesystem: see ScanFastCommits), or nil.
	FastCommits *FastCommits
	// BadBlocks are logged copies whose tag checksum failed: skipped,
	// as the kernel skips them, and reported (the kernel then fails the
	// recovery with EIO after replaying the rest).
	BadBlocks []uint64
	// FailedCommit is the transaction whose commit block failed its
	// checksum (not a stale log's): the log ends before it and it is not
	// replayed; 0 if none (kernel: j_failed_commit, for which
	// jbd2_journal_load then refuses the journal with EFSCORRUPTED;
	// e2fsck: "Journal transaction N was corrupt, replay was aborted").
	FailedCommit uint32

	writes int            // replayed copies so far
	last   map[uint64]int // block -> the number of its last replayed copy
}

// Recover runs the kernel's three recovery passes (kernel:
// jbd2_journal_recover, do_one_pass) over the log of sb: a scan that
// finds the last transaction with a valid commit block, a pass collecting
// revoke records, and a replay of the tagged blocks not revoked by a
// later-or-same transaction. It reads the journal only and returns what
// the replay would write; it writes nothing. A journal with nothing to
// replay (s_start 0) gives an empty Recovery. Committed fast commits of the
// transaction after the last full one are returned in FastCommits, for the
// filesystem to apply; a stale fast-commit area is ignored, and one whose
// first fast commit fails its checksum is refused, as the kernel refuses
// it.
func Recover(sb *Superblock, read ReadLog) (*Recovery, error) {
	r := &Recovery{Blocks: map[uint64][]byte{}, StartSeq: sb.Sequence, EndSeq: sb.Sequence, LogHead: sb.Start}
	if sb.Start == 0 {
		return r, nil
	}
	end, err := r.pass(sb, read, passScan, 0, nil)
	if err != nil {
		return nil, err
	}
	r.EndSeq = end
	if sb.HasIncompat(IncompatFastCommit) {
		// Fast commits of the transaction after the last full one are
		// replayed after the full ones; without that, a replay would
		// lose their changes. A stale fast-commit area (another
		// transaction's) is ignored, as the kernel ignores it.
		fc, err := ScanFastCommits(sb, read, end)
		switch {
		case err != nil:
			return nil, fserr.Corrupt("journal", "%v", err)
		case fc != nil && len(fc.Tags) > 0:
			r.FastCommits = fc
		}
	}
	revoked := map[uint64]uint32{} // block -> newest transaction revoking it
	if _, err := r.pass(sb, read, passRevoke, end, revoked); err != nil {
		return nil, err
	}
	r.last = map[uint64]int{}
	if _, err := r.pass(sb, read, passReplay, end, revoked); err != nil {
		return nil, err
	}
	for blk := range r.Blocks {
		r.Order = append(r.Order, blk)
	}
	sort.Slice(r.Order, func(i, j int) bool { return r.last[r.Order[i]] < r.last[r.Order[j]] })
	return r, nil
}

// RecoveryError is a log the kernel's recovery refuses as a whole
// (kernel: do_one_pass's "goto failed" exits, which make
// jbd2_journal_recover fail before or during the replay; e2fsprogs'
// recovery.c is the same code): nothing is replayed, not even the
// transactions before Seq, since the kernel's scan or revoke pass fails
// before its replay pass starts. The kernel then refuses the mount;
// e2fsck reports it ("Journal checksum error found", "... while
// recovering journal"), discards the journal and checks the filesystem
// as it is on disk.
type RecoveryError struct {
	Seq      uint32 // the transaction with the damage
	LogBlock uint32 // the damaged journal block (0 is the journal superblock)
	Pass     string // the recovery pass that failed: "scan", "revoke" or "replay"
	// Checksum is set when a block failed its checksum (the kernel's
	// EFSBADCRC) rather than breaking the format (EINVAL, EFSCORRUPTED).
	Checksum bool
	// Err is the cause, a *fserr.CorruptError (it matches
	// fserr.ErrCorrupt; a checksum cause is not a *fserr.ChecksumError,
	// since skipping checksums does not make the kernel replay it).
	Err error
}

func (e *RecoveryError) Error() string {
	return fmt.Sprintf("journal transaction %d, log block %d (%s pass): %v", e.Seq, e.LogBlock, e.Pass, e.Err)
}

func (e *RecoveryError) Unwrap() error { return e.Err }

type passKind int

const (
	passScan passKind = iota
	passRevoke
	passReplay
)

func (k passKind) String() string {
	return [...]string{"scan", "revoke", "replay"}[k]
}

// asCorrupt turns a checksum error into the corruption it stands for
// here (see RecoveryError.Err); other errors are returned unchanged.
func asCorrupt(err error) (error, bool) {
	var ke *fserr.ChecksumError
	if errors.As(err, &ke) {
		return &fserr.CorruptError{What: ke.What, Block: ke.Block, Ino: ke.Ino,
			Detail: fmt.Sprintf("checksum mismatch (stored %#x, computed %#x)", ke.Stored, ke.Computed)}, true
	}
	return err, false
}

// pass walks the log once. The scan returns the end transaction; the
// other passes stop there.
func (r *Recovery) pass(sb *Superblock, read ReadLog, kind passKind, end uint32, revoked map[uint64]uint32) (uint32, error) {
	seq := sb.Sequence
	blk := sb.Start
	crc := ^uint32(0) // v1 transaction checksum
	var lastCommit uint64
	needCommitTime := false // a checksum failed: is this a stale log?
	// The first block that failed its checksum in the scan, reported if
	// the commit block after it shows the log is not stale.
	var badAt uint32
	var badErr error
	// fail refuses the log: the damage is block at of transaction seq.
	fail := func(at uint32, cause error) (uint32, error) {
		cause, sum := asCorrupt(cause)
		return 0, &RecoveryError{Seq: seq, LogBlock: at, Pass: kind.String(), Checksum: sum, Err: cause}
	}
	endKnown := false
	// done is where the log ends: the first transaction that failed its
	// commit checks (async_commit scans on past it), else seq.
	done := func() (uint32, error) {
		if kind == passScan && endKnown {
			return end, nil
		}
		return seq, nil
	}
	// A valid log is never longer than the log area: a walk that has
	// consumed more (a log that loops on itself) is corrupt.
	logLen := int64(sb.LogEnd() - sb.First)
	var used int64
	for {
		if kind != passScan && !SeqAfter(end, seq) {
			return done()
		}
		b, err := read(blk)
		if err != nil {
			return 0, fmt.Errorf("jbd2: reading log block %d: %w", blk, err)
		}
		h, err := DecodeHeader(b)
		if err != nil || h.Sequence != seq {
			break // not a journal block of the next transaction: the end
		}
		// A block of the log (the one that ends it, read above, may be
		// the first again when the log fills the whole area).
		if used++; used > logLen {
			return fail(blk, fserr.Corrupt("journal", "the log runs on past its own start"))
		}
		here := blk
		blk = sb.NextLogBlock(blk)
		switch h.BlockType {
		case BlockDescriptor:
			if err := VerifyBlockTail(sb, b); err != nil {
				if kind != passScan {
					return fail(here, err)
				}
				// Maybe stale blocks of an old log (lazy journal init):
				// the next commit block's time tells.
				needCommitTime = true
				if badErr == nil {
					badAt, badErr = here, err
				}
			}
			d, err := DecodeDescriptor(sb, b)
			if err != nil {
				return fail(here, err)
			}
			if used += int64(len(d.Tags)); used > logLen {
				return fail(here, fserr.Corrupt("journal", "the log runs on past its own start"))
			}
			if kind == passScan && sb.HasCompat(CompatChecksum) && !needCommitTime && !endKnown {
				crc = TransactionCRC32(crc, b)
				for range d.Tags {
					data, err := read(blk)
					if err != nil {
						return 0, fmt.Errorf("jbd2: reading log block %d: %w", blk, err)
					}
					crc = TransactionCRC32(crc, data)
					blk = sb.NextLogBlock(blk)
				}
				continue
			}
			for i := range d.Tags {
				t := &d.Tags[i]
				at := blk
				blk = sb.NextLogBlock(blk)
				if kind != passReplay {
					continue
				}
				data, err := read(at)
				if err != nil {
					return 0, fmt.Errorf("jbd2: reading log block %d: %w", at, err)
				}
				if rs, ok := revoked[t.Block]; ok && !SeqAfter(seq, rs) {
					r.RevokeHits++
					continue
				}
				if VerifyTag(sb, t, seq, data) != nil {
					r.BadBlocks = append(r.BadBlocks, t.Block)
					continue
				}
				c := append([]byte(nil), data...)
				if t.Flags&FlagEscape != 0 {
					Unescape(c)
				}
				r.Blocks[t.Block] = c
				r.writes++
				r.last[t.Block] = r.writes
			}
		case BlockCommit:
			c, err := DecodeCommit(sb, b)
			if err != nil {
				return fail(here, err)
			}
			if needCommitTime {
				// kernel: do_one_pass, "Invalid checksum found in
				// transaction": a commit not older than the last one
				// says the bad block belongs to this log, and the whole
				// recovery fails (-EFSBADCRC) before any replay.
				if c.CommitSec >= lastCommit {
					return fail(badAt, badErr)
				}
				return done() // a stale log after a newer one: the end
			}
			bad := false
			if kind == passScan && sb.HasCompat(CompatChecksum) {
				if endKnown {
					// A commit after the one that failed: that one was
					// corrupt, not interrupted (kernel: j_failed_commit).
					r.FailedCommit = end
					return end, nil
				}
				ok := (c.Checksums[0] == crc && c.ChecksumType == ChecksumCRC32 && c.ChecksumSize == 4) ||
					(c.ChecksumType == 0 && c.ChecksumSize == 0 && c.Checksums[0] == 0)
				bad = !ok
				crc = ^uint32(0)
			}
			if kind == passScan && !bad && VerifyCommit(sb, b) != nil {
				bad = true
			}
			if bad {
				if c.CommitSec < lastCommit {
					return done() // stale
				}
				// This transaction did not commit: the log ends before it
				// (with async_commit the scan goes on to see whether a
				// later commit exists, but nothing after is replayed).
				if !sb.HasIncompat(IncompatAsyncCommit) {
					if kind == passScan {
						r.FailedCommit = seq
					}
					return done()
				}
				if !endKnown {
					endKnown = true
					end = seq
				}
			}
			if kind == passScan {
				lastCommit = c.CommitSec
				r.LastCommit = max(r.LastCommit, c.CommitSec)
				if !endKnown {
					r.LogHead, r.LogUsed = blk, uint32(used)
				}
			}
			seq++
		case BlockRevoke:
			if kind == passScan {
				if err := VerifyBlockTail(sb, b); err != nil {
					needCommitTime = true
					if badErr == nil {
						badAt, badErr = here, err
					}
				}
			}
			if kind != passRevoke {
				continue
			}
			// kernel: scan_revoke_records, whose -EINVAL for an r_count
			// beyond the block fails the whole recovery.
			rv, err := DecodeRevoke(sb, b)
			if err != nil {
				return fail(here, err)
			}
			for _, blk := range rv.Blocks {
				if old, ok := revoked[blk]; !ok || SeqAfter(seq, old) {
					revoked[blk] = seq
				}
				r.Revokes++
			}
		default:
			return done() // unknown block type: the end
		}
	}
	return done()
}
