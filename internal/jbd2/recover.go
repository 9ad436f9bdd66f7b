package jbd2

import (
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

type passKind int

const (
	passScan passKind = iota
	passRevoke
	passReplay
)

// pass walks the log once. The scan returns the end transaction; the
// other passes stop there.
func (r *Recovery) pass(sb *Superblock, read ReadLog, kind passKind, end uint32, revoked map[uint64]uint32) (uint32, error) {
	seq := sb.Sequence
	blk := sb.Start
	crc := ^uint32(0) // v1 transaction checksum
	var lastCommit uint64
	needCommitTime := false // a checksum failed: is this a stale log?
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
			return 0, fserr.Corrupt("journal", "the log runs on past its own start")
		}
		here := blk
		blk = sb.NextLogBlock(blk)
		switch h.BlockType {
		case BlockDescriptor:
			if VerifyBlockTail(sb, b) != nil {
				if kind != passScan {
					return 0, fserr.Corrupt("journal", "bad checksum of descriptor block %d (transaction %d)", here, seq)
				}
				// Maybe stale blocks of an old log (lazy journal init):
				// the next commit block's time tells.
				needCommitTime = true
			}
			d, err := DecodeDescriptor(sb, b)
			if err != nil {
				return 0, err
			}
			if used += int64(len(d.Tags)); used > logLen {
				return 0, fserr.Corrupt("journal", "the log runs on past its own start")
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
				return 0, err
			}
			if needCommitTime {
				if c.CommitSec >= lastCommit {
					return 0, fserr.Corrupt("journal", "bad checksum in transaction %d", seq)
				}
				return done() // a stale log after a newer one: the end
			}
			bad := false
			if kind == passScan && sb.HasCompat(CompatChecksum) {
				if endKnown {
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
			if kind == passScan && VerifyBlockTail(sb, b) != nil {
				needCommitTime = true
			}
			if kind != passRevoke {
				continue
			}
			rv, err := DecodeRevoke(sb, b)
			if err != nil {
				return 0, err
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
