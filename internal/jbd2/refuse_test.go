package jbd2

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// logBuilder writes transactions into an in-memory csum-v3 log of 1 KiB
// blocks starting at block First.
type logBuilder struct {
	sb     *Superblock
	blocks map[uint32][]byte
	next   uint32
	seq    uint32
}

func newLogBuilder(t *testing.T) *logBuilder {
	sb := formats()["csum3"]
	sb.Sequence, sb.Start = 7, sb.First
	return &logBuilder{sb: sb, blocks: map[uint32][]byte{}, next: sb.First, seq: 7}
}

func (l *logBuilder) put(b []byte) uint32 {
	at := l.next
	l.blocks[at] = b
	l.next = l.sb.NextLogBlock(at)
	return at
}

// txn logs one transaction copying fill into each of blocks, committed at
// sec; it returns where its descriptor and commit block went.
func (l *logBuilder) txn(t *testing.T, sec uint64, fill byte, blocks ...uint64) (desc, commit uint32) {
	t.Helper()
	var tags []Tag
	var data [][]byte
	for i, blk := range blocks {
		d := make([]byte, l.sb.BlockSize)
		for j := range d {
			d[j] = fill
		}
		tag := Tag{Block: blk, Flags: FlagSameUUID, Checksum: TagChecksum(l.sb.Seed(), l.seq, d)}
		if i == len(blocks)-1 {
			tag.Flags |= FlagLastTag
		}
		tags = append(tags, tag)
		data = append(data, d)
	}
	b, err := EncodeDescriptor(l.sb, l.seq, tags)
	if err != nil {
		t.Fatal(err)
	}
	desc = l.put(b)
	for _, d := range data {
		l.put(d)
	}
	commit = l.put(EncodeCommit(l.sb, &Commit{Header: Header{Magic, BlockCommit, l.seq}, CommitSec: sec}))
	l.seq++
	return desc, commit
}

// revoke logs a transaction of one revoke block listing blocks.
func (l *logBuilder) revoke(t *testing.T, sec uint64, blocks ...uint64) (rv uint32) {
	t.Helper()
	b, err := EncodeRevoke(l.sb, l.seq, blocks)
	if err != nil {
		t.Fatal(err)
	}
	rv = l.put(b)
	l.put(EncodeCommit(l.sb, &Commit{Header: Header{Magic, BlockCommit, l.seq}, CommitSec: sec}))
	l.seq++
	return rv
}

func (l *logBuilder) recover() (*Recovery, error) {
	return Recover(l.sb, func(nr uint32) ([]byte, error) {
		if b, ok := l.blocks[nr]; ok {
			return b, nil
		}
		return make([]byte, l.sb.BlockSize), nil
	})
}

// spoil breaks the block tail checksum of log block nr.
func (l *logBuilder) spoil(nr uint32) {
	b := l.blocks[nr]
	b[len(b)-1] ^= 0xff
}

func wantRefused(t *testing.T, rec *Recovery, err error, seq, at uint32, pass string, sum bool) {
	t.Helper()
	var re *RecoveryError
	if !errors.As(err, &re) {
		t.Fatalf("want a *RecoveryError, got %v (recovery %s)", err, summary(rec))
	}
	if rec != nil {
		t.Errorf("a refused log still gave a recovery: %s", summary(rec))
	}
	if re.Seq != seq || re.LogBlock != at || re.Pass != pass || re.Checksum != sum {
		t.Errorf("got transaction %d, log block %d, pass %s, checksum %v; want %d, %d, %s, %v",
			re.Seq, re.LogBlock, re.Pass, re.Checksum, seq, at, pass, sum)
	}
	if !errors.Is(err, fserr.ErrCorrupt) || errors.Is(err, fserr.ErrChecksum) {
		t.Errorf("want ErrCorrupt and not ErrChecksum: %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestRecoverRefusesDamagedLog: the kernel's recovery fails as a whole,
// replaying none of the transactions before the damage, when a
// descriptor or revoke block fails its checksum in a transaction whose
// commit block is not older than the last one (kernel: do_one_pass,
// -EFSBADCRC from PASS_SCAN), or when a revoke block's r_count overruns
// the block (kernel: scan_revoke_records, -EINVAL from PASS_REVOKE). An
// older commit time instead marks a stale log, which ends the replay
// there. The e2fsprogs images j_corrupt_descr_csum and
// j_corrupt_revoke_rcount are the first two cases in their first
// transaction (TestRecoverCorruptJournalImages).
func TestRecoverRefusesDamagedLog(t *testing.T) {
	t.Run("descriptor-checksum", func(t *testing.T) {
		l := newLogBuilder(t)
		l.txn(t, 100, 0xaa, 50, 51)
		desc, _ := l.txn(t, 101, 0xbb, 52)
		l.spoil(desc)
		rec, err := l.recover()
		wantRefused(t, rec, err, 8, desc, "scan", true)
	})
	t.Run("descriptor-checksum-stale", func(t *testing.T) {
		// The same damage under an older commit: a stale log (lazy
		// journal init) after the last real transaction.
		l := newLogBuilder(t)
		l.txn(t, 100, 0xaa, 50, 51)
		desc, _ := l.txn(t, 99, 0xbb, 52)
		l.spoil(desc)
		rec, err := l.recover()
		if err != nil {
			t.Fatal(err)
		}
		if rec.EndSeq != 8 || len(rec.Blocks) != 2 || rec.Blocks[50][0] != 0xaa {
			t.Errorf("want transaction 7 replayed alone: %s", summary(rec))
		}
	})
	t.Run("revoke-checksum", func(t *testing.T) {
		l := newLogBuilder(t)
		l.txn(t, 100, 0xaa, 50)
		rv := l.revoke(t, 101, 50)
		l.spoil(rv)
		rec, err := l.recover()
		wantRefused(t, rec, err, 8, rv, "scan", true)
	})
	t.Run("revoke-count", func(t *testing.T) {
		l := newLogBuilder(t)
		l.txn(t, 100, 0xaa, 50)
		rv := l.revoke(t, 101, 50)
		l.txn(t, 102, 0xcc, 51)
		b := l.blocks[rv]
		b[HeaderSize], b[HeaderSize+1], b[HeaderSize+2], b[HeaderSize+3] = 0, 0, 0xff, 0xff
		SetBlockTail(l.sb, b) // a valid checksum: only the count is wrong
		rec, err := l.recover()
		wantRefused(t, rec, err, 8, rv, "revoke", false)
	})
	t.Run("intact", func(t *testing.T) {
		l := newLogBuilder(t)
		l.txn(t, 100, 0xaa, 50)
		l.revoke(t, 101, 50)
		l.txn(t, 102, 0xcc, 51)
		rec, err := l.recover()
		if err != nil {
			t.Fatal(err)
		}
		if rec.EndSeq != 10 || len(rec.Blocks) != 1 || rec.RevokeHits != 1 {
			t.Errorf("want 3 transactions, block 51 alone: %s", summary(rec))
		}
	})
}

// TestRecoverCorruptJournalImages: the e2fsprogs images
// j_corrupt_descr_csum (csum v3, the descriptor block of transaction 3,
// the first, fails its checksum) and j_corrupt_revoke_rcount (the revoke
// block of transaction 1, the first, has r_count 65535 in 4 KiB blocks)
// are refused as a whole, as the kernel refuses them (EFSBADCRC from the
// scan, EINVAL from the revoke pass: the mount fails) and as e2fsck does
// ("Journal checksum error found", "Invalid argument while recovering
// journal": it replays nothing, discards the journal and checks the
// filesystem as it is on disk). The error names the transaction and the
// log block; e2fsck -E journal_only changes no block outside the
// superblock and the journal (compareWithE2fsck).
func TestRecoverCorruptJournalImages(t *testing.T) {
	needTool(t, "debugfs")
	needTool(t, "e2fsck")
	for _, c := range []struct {
		name      string
		seq, at   uint32
		pass      string
		sum       bool
		e2fsckSay string
	}{
		{"j_corrupt_descr_csum", 3, 1, "scan", true, "Journal checksum error found"},
		{"j_corrupt_revoke_rcount", 1, 1, "revoke", false, "Invalid argument while recovering journal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(sharedDir, c.name+".img.gz")
			if _, err := os.Stat(src); err != nil {
				t.Skipf("image absent: %v", err)
			}
			path := gunzip(t, src)
			j, err := exec.Command("debugfs", "-R", "cat <8>", path).Output()
			if err != nil {
				t.Fatal(err)
			}
			sb, err := Decode(j)
			if err != nil {
				t.Fatal(err)
			}
			bs := int(sb.BlockSize)
			rec, err := Recover(sb, func(nr uint32) ([]byte, error) {
				if off := int(nr) * bs; off+bs <= len(j) {
					return j[off : off+bs], nil
				}
				return make([]byte, bs), nil
			})
			wantRefused(t, rec, err, c.seq, c.at, c.pass, c.sum)
			// e2fsck refuses it too, and writes nothing of it home.
			cp := filepath.Join(t.TempDir(), "e2fsck.img")
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cp, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command("e2fsck", "-y", "-E", "journal_only", cp).CombinedOutput()
			if !strings.Contains(string(out), c.e2fsckSay) {
				t.Errorf("e2fsck does not say %q: %s", c.e2fsckSay, out)
			}
			if !compareWithE2fsck(t, path, dumpe2fs(t, path)) {
				t.Error("not compared with e2fsck")
			}
		})
	}
}

// TestRecoverFailedCommit: a commit block failing its checksum under a
// commit time not older than the last ends the replay before its
// transaction and is reported in FailedCommit (kernel: j_failed_commit;
// e2fsck: "Journal transaction N was corrupt, replay was aborted"), as
// in the e2fsprogs image j_corrupt_commit_csum; a stale one (older) is
// not reported.
func TestRecoverFailedCommit(t *testing.T) {
	for _, c := range []struct {
		name   string
		sec    uint64
		failed uint32
	}{{"corrupt", 101, 8}, {"stale", 99, 0}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLogBuilder(t)
			l.txn(t, 100, 0xaa, 50)
			_, commit := l.txn(t, c.sec, 0xbb, 51)
			l.blocks[commit][16] ^= 0xff
			rec, err := l.recover()
			if err != nil {
				t.Fatal(err)
			}
			if rec.EndSeq != 8 || len(rec.Blocks) != 1 || rec.FailedCommit != c.failed {
				t.Errorf("want transaction 7 alone, failed commit %d: %s, failed commit %d", c.failed, summary(rec), rec.FailedCommit)
			}
		})
	}
	t.Run("j_corrupt_commit_csum", func(t *testing.T) {
		needTool(t, "debugfs")
		src := filepath.Join(sharedDir, "j_corrupt_commit_csum.img.gz")
		if _, err := os.Stat(src); err != nil {
			t.Skipf("image absent: %v", err)
		}
		j, err := exec.Command("debugfs", "-R", "cat <8>", gunzip(t, src)).Output()
		if err != nil {
			t.Fatal(err)
		}
		sb, err := Decode(j)
		if err != nil {
			t.Fatal(err)
		}
		bs := int(sb.BlockSize)
		rec, err := Recover(sb, func(nr uint32) ([]byte, error) {
			if off := int(nr) * bs; off+bs <= len(j) {
				return j[off : off+bs], nil
			}
			return make([]byte, bs), nil
		})
		if err != nil || rec.FailedCommit != 3 || len(rec.Blocks) != 0 {
			t.Errorf("want nothing replayed, failed commit 3: %s, %v", summary(rec), err)
		}
	})
}
