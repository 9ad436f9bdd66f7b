package jbd2

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
)

// TestRecoverMatchesE2fsck: for every shared e2fsprogs image whose journal
// needs recovery, Recover's blocks are exactly what e2fsck's own replay
// (e2fsck -E journal_only, the kernel's recovery code) writes: every block
// outside the superblock and the journal is the replayed copy where we
// replay one and untouched elsewhere.
func TestRecoverMatchesE2fsck(t *testing.T) {
	needTool(t, "debugfs")
	needTool(t, "e2fsck")
	paths, _ := filepath.Glob(filepath.Join(sharedDir, "*.img.gz"))
	if len(paths) == 0 {
		t.Skipf("no e2fsprogs test images in %s", sharedDir)
	}
	checked := 0
	for _, src := range paths {
		name := strings.TrimSuffix(filepath.Base(src), ".img.gz")
		path := gunzip(t, src)
		h := dumpe2fs(t, path)
		if !strings.Contains(h["Filesystem features"], "needs_recovery") || !strings.Contains(h["Filesystem features"], "has_journal") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			j, err := exec.Command("debugfs", "-R", "cat <8>", path).Output()
			if err != nil || len(j) < SuperblockSize {
				t.Skipf("no journal inode to read (%v, %d bytes)", err, len(j))
			}
			sb, err := Decode(j)
			if err != nil {
				t.Skipf("journal superblock: %v (e2fsck clears such a journal)", err)
			}
			bs := int(sb.BlockSize)
			rec, rerr := Recover(sb, func(nr uint32) ([]byte, error) {
				off := int64(nr) * int64(bs)
				if off+int64(bs) > int64(len(j)) {
					return make([]byte, bs), nil
				}
				return j[off : off+int64(bs)], nil
			})
			t.Logf("recover: %v; err %v", summary(rec), rerr)
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			theirs := filepath.Join(t.TempDir(), "e2fsck.img")
			if err := os.WriteFile(theirs, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command("e2fsck", "-y", "-E", "journal_only", theirs).CombinedOutput()
			t.Logf("e2fsck: %s", bytes.TrimSpace(out))
			if errors.Is(rerr, fserr.ErrUnsupported) {
				t.Skipf("refused as unsupported (e2fsck replays it): %v", rerr)
			}
			if bytes.Contains(out, []byte("orphan")) {
				// e2fsck went on to process orphans: not a replay alone.
				t.Skipf("e2fsck also processed orphans; replay not compared")
			}
			got, err := os.ReadFile(theirs)
			if err != nil {
				t.Fatal(err)
			}
			skip := journalBlocks(t, path, bs)
			fsBS, _ := strconv.Atoi(h["Block size"])
			if fsBS != bs {
				t.Skipf("filesystem block size %d, journal %d", fsBS, bs)
			}
			if fsBS == 1024 {
				skip[1] = true
			} else {
				skip[0] = true
			}
			replayedByThem := false
			for b := 0; b*bs < len(orig) && (b+1)*bs <= len(got); b++ {
				if skip[uint64(b)] {
					continue
				}
				want := got[b*bs : (b+1)*bs]
				have := orig[b*bs : (b+1)*bs]
				if !bytes.Equal(want, have) {
					replayedByThem = true
				}
				if rerr == nil {
					if c, ok := rec.Blocks[uint64(b)]; ok {
						have = c
					}
				}
				if !bytes.Equal(want, have) {
					t.Errorf("block %d: ours differs from e2fsck's replay", b)
				}
			}
			if rerr != nil && replayedByThem {
				t.Errorf("we refused (%v) a journal e2fsck replayed", rerr)
			}
			checked++
		})
	}
	t.Logf("%d images compared with e2fsck", checked)
}

func summary(r *Recovery) string {
	if r == nil {
		return "none"
	}
	return "transactions " + strconv.Itoa(int(r.StartSeq)) + ".." + strconv.Itoa(int(r.EndSeq)) +
		", blocks " + strconv.Itoa(len(r.Blocks)) + ", revokes " + strconv.Itoa(r.Revokes) +
		", revoke hits " + strconv.Itoa(r.RevokeHits) + ", bad " + strconv.Itoa(len(r.BadBlocks))
}

// journalBlocks lists the filesystem blocks of the journal inode (debugfs
// blocks <8>), and its extent tree blocks are included by debugfs too.
func journalBlocks(t *testing.T, path string, bs int) map[uint64]bool {
	out, err := exec.Command("debugfs", "-R", "blocks <8>", path).Output()
	if err != nil {
		t.Fatalf("debugfs blocks <8>: %v", err)
	}
	m := map[uint64]bool{}
	for _, f := range regexp.MustCompile(`\d+`).FindAllString(string(out), -1) {
		n, _ := strconv.ParseUint(f, 10, 64)
		m[n] = true
	}
	out, _ = exec.Command("debugfs", "-R", "stat <8>", path).Output()
	// Extent tree index/leaf blocks of the journal, as "(ETB0):1234".
	for _, f := range regexp.MustCompile(`\(ETB\d*\):(\d+)`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseUint(f[1], 10, 64)
		m[n] = true
	}
	return m
}

// FuzzRecover runs the recovery passes over arbitrary logs in every
// journal format: no panic, a bounded walk, and replayed blocks only from
// the log.
func FuzzRecover(f *testing.F) {
	for i, sb := range fuzzFormats {
		s := *sb
		s.Start, s.Sequence = s.First, 7
		desc, _ := EncodeDescriptor(&s, 7, []Tag{{Block: 5, Flags: FlagLastTag | FlagSameUUID}})
		commit := EncodeCommit(&s, &Commit{Header: Header{Magic: Magic, BlockType: BlockCommit, Sequence: 7}})
		log := append(append(append([]byte{}, desc...), make([]byte, s.BlockSize)...), commit...)
		f.Add(uint8(i), s.Start, uint32(7), log)
	}
	f.Fuzz(func(t *testing.T, which uint8, start, seq uint32, log []byte) {
		sb := *pick(which)
		sb.Sequence = seq
		if start == 0 || start < sb.First || start >= sb.LogEnd() {
			start = sb.First
		}
		sb.Start = start
		bs := int(sb.BlockSize)
		reads := 0
		rec, err := Recover(&sb, func(nr uint32) ([]byte, error) {
			reads++
			if reads > 1<<16 {
				t.Fatalf("more than %d reads of a %d-block log", 1<<16, sb.MaxLen)
			}
			off := int(nr-sb.First) * bs
			b := make([]byte, bs)
			if nr >= sb.First && off < len(log) {
				copy(b, log[off:])
			}
			return b, nil
		})
		if err != nil {
			return
		}
		if len(rec.Blocks) != len(rec.Order) {
			t.Fatalf("%d blocks, %d in order", len(rec.Blocks), len(rec.Order))
		}
	})
}
