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
			if compareWithE2fsck(t, path, h) {
				checked++
			}
		})
	}
	t.Logf("%d images compared with e2fsck", checked)
}

// compareWithE2fsck replays the journal of the image at path (dumpe2fs
// header h) with Recover and with e2fsck -E journal_only, and compares
// every block outside the superblock and the journal. It reports whether
// the comparison was made (false: skipped with the reason).
func compareWithE2fsck(t *testing.T, path string, h map[string]string) bool {
	t.Helper()
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
	if rerr == nil && rec.FastCommits != nil {
		// The fast commits change blocks through the filesystem: the
		// root package compares that replay with e2fsck's
		// (TestFastCommitsMatchE2fsck).
		t.Skipf("%d fast-commit records to replay: compared at the filesystem level", len(rec.FastCommits.Tags))
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
	// A journal we refuse, e2fsck's recovery (the kernel's code) must
	// refuse too: it then discards the journal, replaying nothing.
	if rerr != nil && !bytes.Contains(out, []byte("while recovering journal")) && !bytes.Contains(out, []byte("Journal checksum error")) {
		t.Errorf("we refused (%v) a journal e2fsck recovered", rerr)
	}
	return true
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

// TestDebugfsJournals: journals made by e2fsprogs' own journal writer
// (debugfs jo/jw/jc, as e2fsprogs' j_* tests make them) in every format
// it writes (no checksums, v2, v3; 32- and 64-bit tags; 1k and 4k blocks):
// several transactions, blocks that must be escaped, revokes of blocks
// logged before and after, and a last transaction left without its commit
// block. Recover must replay exactly what e2fsck's replay writes.
func TestDebugfsJournals(t *testing.T) {
	needTool(t, "debugfs")
	needTool(t, "e2fsck")
	for _, c := range []struct {
		name string
		mkfs []string
		jo   string
	}{
		{"4k-64bit-plain", []string{"-b", "4096"}, "jo"},
		{"4k-64bit-v3", []string{"-b", "4096"}, "jo -c"},
		{"4k-64bit-v2", []string{"-b", "4096"}, "jo -c -v 2"},
		{"1k-32bit-v3", []string{"-b", "1024", "-O", "^64bit"}, "jo -c"},
		{"1k-32bit-plain", []string{"-b", "1024", "-O", "^64bit,^metadata_csum"}, "jo"},
		{"4k-32bit-v2", []string{"-b", "4096", "-O", "^64bit"}, "jo -c -v 2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := mkfs(t, 64<<20, append([]string{"-t", "ext4"}, c.mkfs...)...)
			bs := 4096
			if c.mkfs[1] == "1024" {
				bs = 1024
			}
			// Data files: random blocks, and blocks starting with the
			// journal magic (escaped in the log).
			plain := make([]byte, 6*bs)
			for i := range plain {
				plain[i] = byte(i*7 + i/bs)
			}
			magic := bytes.Clone(plain[:3*bs])
			for i := 0; i < 3; i++ {
				copy(magic[i*bs:], []byte{0xc0, 0x3b, 0x39, 0x98})
			}
			write := func(name string, b []byte) string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			pf, mf := write("plain", plain), write("magic", magic)
			script := strings.Join([]string{
				c.jo,
				"jw -b 3000-3005 " + pf,
				"jw -b 3100,3200,3300 " + mf,
				"jw -r 3001,3200",
				"jw -b 3001,3400,3401,3402,3403,3404 " + pf,
				"jw -b 3500,3501 -r 3003 " + mf,
				"jw -b 3600-3605 -c " + pf, // never committed
				"jc",
			}, "\n") + "\n"
			cmd := write("script", []byte(script))
			if out, err := exec.Command("debugfs", "-w", "-f", cmd, path).CombinedOutput(); err != nil || bytes.Contains(out, []byte("rror")) {
				t.Fatalf("debugfs: %v\n%s", err, out)
			}
			h := dumpe2fs(t, path)
			if !strings.Contains(h["Filesystem features"], "needs_recovery") {
				t.Fatalf("debugfs left no journal to recover: %v", h["Filesystem features"])
			}
			t.Logf("journal features: %s", h["Journal features"])
			if !compareWithE2fsck(t, path, h) {
				t.Fatal("not compared")
			}
		})
	}
}
