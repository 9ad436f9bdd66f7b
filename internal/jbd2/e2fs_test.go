package jbd2

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/testutil"
)

func needTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed: %v", name, err)
	}
}

func mkfs(t testing.TB, size int64, args ...string) string {
	t.Helper()
	needTool(t, "mke2fs")
	path := filepath.Join(t.TempDir(), "fs.img")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
	all := append([]string{"-q", "-F", "-E", "lazy_itable_init=1,nodiscard"}, args...)
	if out, err := exec.Command("mke2fs", append(all, path)...).CombinedOutput(); err != nil {
		t.Fatalf("mke2fs %v: %v\n%s", args, err, out)
	}
	return path
}

// journalOf returns the contents of the journal inode of the image.
func journalOf(t testing.TB, path string) []byte {
	t.Helper()
	needTool(t, "debugfs")
	out, err := exec.Command("debugfs", "-R", "cat <8>", path).Output()
	if err != nil {
		t.Fatalf("debugfs cat <8>: %v", err)
	}
	return out
}

func dumpe2fs(t testing.TB, path string) map[string]string {
	t.Helper()
	needTool(t, "dumpe2fs")
	out, _ := exec.Command("dumpe2fs", "-h", path).Output()
	m := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m
}

// compareDumpe2fs checks the journal lines of `dumpe2fs -h`
// (lib/e2p/ljs.c) against sb.
func compareDumpe2fs(t *testing.T, sb *Superblock, h map[string]string) {
	t.Helper()
	if _, ok := h["Journal features"]; !ok {
		t.Error("dumpe2fs printed no journal information")
		return
	}
	// dumpe2fs shows a fast commit area whenever the filesystem (not the
	// journal, whose flag the kernel sets at mount) has fast_commit.
	fc := uint32(0)
	if strings.Contains(h["Filesystem features"], "fast_commit") {
		fc = sb.NumFCBlocks
		if fc == 0 {
			fc = DefaultFCBlocks
		}
	}
	feats := strings.Join(sb.FeatureNames(), " ")
	if feats == "" {
		feats = "(none)"
	}
	want := map[string]string{
		"Journal features":        feats,
		"Total journal blocks":    fmt.Sprint(sb.MaxLen),
		"Max transaction length":  fmt.Sprint(sb.MaxLen - fc),
		"Fast commit length":      fmt.Sprint(fc),
		"Journal sequence":        fmt.Sprintf("0x%08x", sb.Sequence),
		"Journal start":           fmt.Sprint(sb.Start),
		"Journal first block":     fmt.Sprint(sb.First),
		"Journal errno":           fmt.Sprint(sb.Errno),
		"Journal number of users": fmt.Sprint(sb.NrUsers),
		"Journal checksum":        fmt.Sprintf("0x%08x", sb.Checksum),
	}
	if sb.HasCsumV2or3() {
		want["Journal checksum type"] = "crc32c"
	} else if sb.HasCompat(CompatChecksum) {
		want["Journal checksum type"] = "crc32"
	}
	for k, w := range want {
		if got, ok := h[k]; ok && got != w {
			t.Errorf("%s: dumpe2fs says %q, we say %q", k, got, w)
		}
	}
	if _, ok := h["Journal checksum"]; ok != sb.HasCsumV2or3() {
		t.Errorf("journal checksum printed %v, we have v2/v3 %v", ok, sb.HasCsumV2or3())
	}
}

func TestMkfsJournals(t *testing.T) {
	for _, c := range []struct {
		name string
		size int64
		args []string
	}{
		{"ext4-4k", 64 << 20, []string{"-t", "ext4", "-b", "4096"}},
		{"ext4-1k", 64 << 20, []string{"-t", "ext4", "-b", "1024"}},
		{"fast_commit", 64 << 20, []string{"-t", "ext4", "-O", "fast_commit"}},
		{"fast_commit-size", 64 << 20, []string{"-t", "ext4", "-b", "4096", "-O", "fast_commit", "-J", "size=8,fast_commit_size=1"}},
		{"ext3", 32 << 20, []string{"-t", "ext3"}},
		{"no64bit", 32 << 20, []string{"-t", "ext4", "-O", "^64bit"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			path := mkfs(t, c.size, c.args...)
			j := journalOf(t, path)
			sb, err := Decode(j)
			if err != nil {
				t.Fatal(err)
			}
			if int(sb.MaxLen)*int(sb.BlockSize) != len(j) {
				t.Errorf("journal inode has %d bytes, superblock says %d blocks of %d", len(j), sb.MaxLen, sb.BlockSize)
			}
			if !bytes.Equal(sb.Encode(), j[:SuperblockSize]) {
				t.Error("Encode does not reproduce the superblock")
			}
			compareDumpe2fs(t, sb, dumpe2fs(t, path))
		})
	}
}

// TestExternalJournalDevice decodes the superblock of a journal_dev image:
// it sits in the block after the ext4 superblock.
func TestExternalJournalDevice(t *testing.T) {
	for _, bs := range []int{1024, 4096} {
		path := mkfs(t, 16<<20, "-O", "journal_dev", "-b", fmt.Sprint(bs))
		img, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		start := (1024/bs + 1) * bs
		sb, err := Decode(img[start:])
		if err != nil {
			t.Fatalf("%d: %v", bs, err)
		}
		if sb.First != uint32(1024/bs+2) || int(sb.MaxLen)*bs != len(img) || sb.NrUsers != 0 {
			t.Errorf("%d: first %d maxlen %d users %d", bs, sb.First, sb.MaxLen, sb.NrUsers)
		}
		compareDumpe2fs(t, sb, dumpe2fs(t, path))
	}
}

// logEntry is one line of our walk, in the format of `debugfs logdump -a`.
type walkResult struct {
	lines       []string
	descriptors int
	commits     int
	revokes     int
	tagErrs     []error // data blocks whose tag checksum fails
	tailErrs    []error // descriptor/revoke blocks whose tail checksum fails
	commitErrs  []error
	decodeErrs  []error
	escaped     int
}

// walk reads the log of journal j block by block from s_first, the way
// `debugfs logdump -O` does, until a block without the magic, decoding and
// verifying everything it meets. It stops after maxBlocks blocks so a
// corrupt journal cannot loop.
func walk(sb *Superblock, j []byte) *walkResult {
	r := &walkResult{}
	bs := int(sb.BlockSize)
	block := func(n uint32) []byte {
		if int64(n+1)*int64(bs) > int64(len(j)) {
			return nil
		}
		return j[int(n)*bs : int(n+1)*bs]
	}
	n := sb.First
	for steps := 0; steps < int(sb.MaxLen); steps++ {
		b := block(n)
		if b == nil {
			break
		}
		h, err := DecodeHeader(b)
		if err != nil {
			break
		}
		switch h.BlockType {
		case BlockDescriptor:
			r.descriptors++
			if err := VerifyBlockTail(sb, b); err != nil {
				r.tailErrs = append(r.tailErrs, err)
			}
			d, err := DecodeDescriptor(sb, b)
			if err != nil {
				r.decodeErrs = append(r.decodeErrs, err)
				break
			}
			for _, tag := range d.Tags {
				n = sb.NextLogBlock(n)
				r.lines = append(r.lines, fmt.Sprintf("FS block %d logged at journal block %d (flags 0x%x)", tag.Block, n, tag.Flags))
				if tag.Flags&FlagEscape != 0 {
					r.escaped++
				}
				if data := block(n); data != nil {
					if err := VerifyTag(sb, &tag, h.Sequence, data); err != nil {
						r.tagErrs = append(r.tagErrs, err)
					}
				}
			}
		case BlockCommit:
			r.commits++
			if err := VerifyCommit(sb, b); err != nil {
				r.commitErrs = append(r.commitErrs, err)
			}
			if _, err := DecodeCommit(sb, b); err != nil {
				r.decodeErrs = append(r.decodeErrs, err)
			}
		case BlockRevoke:
			r.revokes++
			if err := VerifyBlockTail(sb, b); err != nil {
				r.tailErrs = append(r.tailErrs, err)
			}
			rv, err := DecodeRevoke(sb, b)
			if err != nil {
				r.decodeErrs = append(r.decodeErrs, err)
				break
			}
			for _, blk := range rv.Blocks {
				r.lines = append(r.lines, fmt.Sprintf("Revoke FS block %d", blk))
			}
		default:
			r.decodeErrs = append(r.decodeErrs, fmt.Errorf("block %d: type %d", n, h.BlockType))
		}
		n = sb.NextLogBlock(n)
		if n == sb.First {
			break
		}
	}
	return r
}

var reLogdump = regexp.MustCompile(`^\s+(FS block \d+ logged at journal block \d+ \(flags 0x[0-9a-f]+\)|Revoke FS block \d+)$`)

// logdumpLines returns the tag and revoke lines of `debugfs logdump -O -a`.
func logdumpLines(t *testing.T, path string) []string {
	out, err := exec.Command("debugfs", "-R", "logdump -O -a", path).Output()
	if err != nil {
		t.Fatalf("logdump: %v", err)
	}
	var lines []string
	for line := range strings.Lines(string(out)) {
		if m := reLogdump.FindStringSubmatch(strings.TrimRight(line, "\n")); m != nil {
			lines = append(lines, m[1])
		}
	}
	return lines
}

// TestMountedJournal lets the kernel write real transactions — descriptor,
// commit and revoke blocks with v3 checksums — and decodes them all.
func TestMountedJournal(t *testing.T) {
	testutil.RequireMount(t)
	for _, c := range []struct {
		name string
		args []string
		opts string
	}{
		{"1k", []string{"-t", "ext4", "-b", "1024"}, ""},
		{"4k-journal-data", []string{"-t", "ext4", "-b", "4096"}, "data=journal"},
		{"nocsum-journal_checksum", []string{"-t", "ext4", "-b", "1024", "-O", "^metadata_csum"}, "journal_checksum"},
		{"32bit", []string{"-t", "ext4", "-b", "1024", "-O", "^64bit,^metadata_csum"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := mkfs(t, 64<<20, c.args...)
			mnt := t.TempDir()
			opts := "loop"
			if c.opts != "" {
				opts += "," + c.opts
			}
			if out, err := exec.Command("mount", "-o", opts, path, mnt).CombinedOutput(); err != nil {
				t.Skipf("mount: %v: %s", err, out)
			}
			mounted := true
			defer func() {
				if mounted {
					exec.Command("umount", mnt).Run()
				}
			}()
			// Directory blocks freed in a later transaction get revoked.
			for i := range 200 {
				d := filepath.Join(mnt, "d", fmt.Sprint(i))
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d, "f"), bytes.Repeat([]byte{byte(i)}, 3000), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			exec.Command("sync", "-f", mnt).Run()
			if err := os.RemoveAll(filepath.Join(mnt, "d")); err != nil {
				t.Fatal(err)
			}
			exec.Command("sync", "-f", mnt).Run()
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Fatalf("umount: %v: %s", err, out)
			}
			mounted = false

			j := journalOf(t, path)
			sb, err := Decode(j)
			if err != nil {
				t.Fatal(err)
			}
			compareDumpe2fs(t, sb, dumpe2fs(t, path))
			r := walk(sb, j)
			t.Logf("features %v: %d descriptors, %d commits, %d revoke blocks, %d lines",
				sb.FeatureNames(), r.descriptors, r.commits, r.revokes, len(r.lines))
			if r.descriptors == 0 || r.commits == 0 {
				t.Fatal("no transactions in the journal")
			}
			for _, errs := range [][]error{r.tagErrs, r.tailErrs, r.commitErrs, r.decodeErrs} {
				for _, err := range errs {
					t.Error(err)
				}
			}
			want := logdumpLines(t, path)
			if strings.Join(r.lines, "\n") != strings.Join(want, "\n") {
				t.Errorf("our walk and logdump differ:\nours %d lines, logdump %d", len(r.lines), len(want))
				for i := range min(len(r.lines), len(want)) {
					if r.lines[i] != want[i] {
						t.Errorf("first difference at %d: %q vs %q", i, r.lines[i], want[i])
						break
					}
				}
			}
		})
	}
}

const sharedDir = "../../../shared/testdata/e2fsprogs"

func gunzip(t *testing.T, src string) string {
	t.Helper()
	in, err := os.Open(src)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("shared e2fsprogs test image absent: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	zr, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".gz"))
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestSharedJournalImages walks the journals of the e2fsprogs j_* images
// (and other images with a journal inode) and checks that each planted
// corruption is reported as what it is.
func TestSharedJournalImages(t *testing.T) {
	needTool(t, "debugfs")
	paths, _ := filepath.Glob(filepath.Join(sharedDir, "*.img.gz"))
	if len(paths) == 0 {
		t.Skipf("no e2fsprogs test images in %s", sharedDir)
	}
	expect := map[string]func(t *testing.T, sbErr error, r *walkResult){
		"j_corrupt_sb_csum": func(t *testing.T, err error, _ *walkResult) {
			if !errors.Is(err, fserr.ErrChecksum) {
				t.Errorf("want a checksum error, got %v", err)
			}
		},
		"j_corrupt_sb_magic": func(t *testing.T, err error, _ *walkResult) {
			if !errors.Is(err, fserr.ErrCorrupt) || errors.Is(err, fserr.ErrChecksum) {
				t.Errorf("want a corrupt superblock, got %v", err)
			}
		},
		"j_corrupt_commit_csum": func(t *testing.T, _ error, r *walkResult) {
			if len(r.commitErrs) == 0 {
				t.Error("bad commit checksum not found")
			}
		},
		"j_corrupt_descr_csum": func(t *testing.T, _ error, r *walkResult) {
			if len(r.tailErrs) == 0 {
				t.Error("bad descriptor checksum not found")
			}
		},
		"j_corrupt_revoke_csum": func(t *testing.T, _ error, r *walkResult) {
			if len(r.tailErrs) == 0 {
				t.Error("bad revoke checksum not found")
			}
		},
		"j_corrupt_revoke_rcount": func(t *testing.T, _ error, r *walkResult) {
			if len(r.decodeErrs) == 0 {
				t.Error("bad revoke count not found")
			}
		},
		"j_corrupt_journal_block": func(t *testing.T, _ error, r *walkResult) {
			if len(r.tagErrs) == 0 {
				t.Error("bad data block checksum not found")
			}
		},
	}
	for _, src := range paths {
		name := strings.TrimSuffix(filepath.Base(src), ".img.gz")
		if !strings.HasPrefix(name, "j_") && !strings.Contains(name, "jnl") && !strings.Contains(name, "journal") && !strings.Contains(name, "orphan") {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := gunzip(t, src)
			j, err := exec.Command("debugfs", "-R", "cat <8>", path).Output()
			if err != nil || len(j) < SuperblockSize {
				t.Skipf("no journal inode (%v, %d bytes)", err, len(j))
			}
			sb, sbErr := Decode(j)
			if sbErr != nil {
				t.Logf("Decode: %v", sbErr)
				sb, err = DecodeNoVerify(j)
			}
			var r *walkResult
			if err == nil {
				r = walk(sb, j)
				t.Logf("%v: %d descriptors, %d commits, %d revokes; errors: tag %v tail %v commit %v decode %v",
					sb.FeatureNames(), r.descriptors, r.commits, r.revokes, r.tagErrs, r.tailErrs, r.commitErrs, r.decodeErrs)
				if h := dumpe2fs(t, path); sbErr == nil && strings.Contains(h["Filesystem features"], "has_journal") {
					compareDumpe2fs(t, sb, h)
				}
			} else {
				r = &walkResult{}
			}
			if f := expect[name]; f != nil {
				f(t, sbErr, r)
			}
		})
	}
}
