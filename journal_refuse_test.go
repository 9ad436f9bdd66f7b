//go:build linux

package ext4go_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestCorruptJournalImagesRefused: the e2fsprogs images
// j_corrupt_descr_csum (the descriptor block of the first transaction
// fails its checksum) and j_corrupt_revoke_rcount (the revoke block of
// the first transaction has r_count 65535) hold journals that the
// kernel's recovery refuses as a whole (kernel: do_one_pass fails its
// scan with -EFSBADCRC, scan_revoke_records its revoke pass with
// -EINVAL; the mount fails) and e2fsck too (e2fsprogs: recovery.c, the
// same code; e2fsck then discards the journal and checks the filesystem
// as it is on disk). So: read-only and writable opens fail alike with
// ErrJournalReplay and a *JournalRecoveryError naming the transaction,
// the journal block and its filesystem block; neither writes to the
// image; Options.IgnoreJournal reads the on-disk state, which is the
// filesystem e2fsck -fy leaves (compared through debugfs rdump).
func TestCorruptJournalImagesRefused(t *testing.T) {
	testutil.RequireTools(t, "e2fsck", "debugfs")
	dir := testutil.SharedDir(t)
	for _, c := range []struct {
		name    string
		seq     uint32
		logBlk  uint32
		fsBlk   int64
		pass    string
		sum     bool
		e2fsSay string
	}{
		{"j_corrupt_descr_csum", 3, 1, 33, "scan", true, "Journal checksum error found"},
		{"j_corrupt_revoke_rcount", 1, 1, 9, "revoke", false, "Invalid argument while recovering journal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := testutil.SharedImage{Name: c.name, Path: filepath.Join(dir, c.name+".img.gz")}.Decompress(t)
			orig, err := os.ReadFile(img)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []ext4go.Options{{}, {Writable: true}, {Writable: true, AllowUnclean: true}} {
				fsys, err := ext4go.Open(img, &o)
				if err == nil {
					fsys.Close()
					t.Fatalf("%+v: opened a journal the kernel refuses", o)
				}
				var re *ext4go.JournalRecoveryError
				var ce *ext4go.CorruptError
				switch {
				case !errors.Is(err, ext4go.ErrJournalReplay) || !errors.Is(err, ext4go.ErrCorrupt) || errors.Is(err, ext4go.ErrChecksum):
					t.Errorf("writable %v: want ErrJournalReplay and ErrCorrupt (not ErrChecksum): %v", o.Writable, err)
				case !errors.As(err, &re) || !errors.As(err, &ce):
					t.Errorf("writable %v: no *JournalRecoveryError wrapping a *CorruptError: %v", o.Writable, err)
				case re.Seq != c.seq || re.LogBlock != c.logBlk || re.Pass != c.pass || re.Checksum != c.sum || ce.Block != c.fsBlk || ce.Ino != 8:
					t.Errorf("writable %v: got transaction %d, log block %d (fs block %d, inode %d), %s pass, checksum %v; want %d, %d (%d, 8), %s, %v",
						o.Writable, re.Seq, re.LogBlock, ce.Block, ce.Ino, re.Pass, re.Checksum, c.seq, c.logBlk, c.fsBlk, c.pass, c.sum)
				}
				t.Logf("writable %v: %v", o.Writable, err)
				if now, err := os.ReadFile(img); err != nil || !bytes.Equal(now, orig) {
					t.Fatalf("writable %v: the refused open changed the image (%v)", o.Writable, err)
				}
			}
			// Journal() reports the same refusal without failing.
			fsys, err := ext4go.Open(img, &ext4go.Options{IgnoreJournal: true})
			if err != nil {
				t.Fatalf("IgnoreJournal: %v", err)
			}
			defer fsys.Close()
			if fsys.Replay() != nil {
				t.Errorf("IgnoreJournal replayed %+v", fsys.Replay())
			}
			ji, err := fsys.Journal()
			var re *ext4go.JournalRecoveryError
			if err != nil || ji == nil || !errors.As(ji.ReplayError, &re) || re.Seq != c.seq {
				t.Errorf("Journal(): %+v, %v", ji, err)
			}
			// The on-disk state is what e2fsck leaves: it replays nothing.
			fixed := filepath.Join(t.TempDir(), "e2fsck.img")
			if err := os.WriteFile(fixed, orig, 0o644); err != nil {
				t.Fatal(err)
			}
			out, _ := exec.Command("e2fsck", "-fy", fixed).CombinedOutput()
			if !strings.Contains(string(out), c.e2fsSay) {
				t.Errorf("e2fsck does not say %q:\n%s", c.e2fsSay, out)
			}
			want := t.TempDir()
			testutil.DebugfsRdump(t, fixed, "/", want)
			if ents, _ := os.ReadDir(want); len(ents) == 0 {
				t.Fatalf("rdump of e2fsck's result holds %d entries", len(ents))
			}
			co := testutil.RdumpCompareOptions()
			co.SkipPaths = nil // lost+found is on both sides
			co.Meta = meta
			testutil.CompareFS(t, fsys, want, co)
		})
	}
}
