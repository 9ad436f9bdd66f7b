//go:build linux

package ext4go_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/testutil"
)

// The fast-commit area of j_recover_fast_commit: journal blocks 1025 to
// 1039, at filesystem blocks 1091 to 1105 (debugfs: bmap <8> 1025); its
// fast commits belong to transaction 6.
const (
	fcAreaBlock  = 1091
	fcAreaBlocks = 15
	fcAreaTid    = 6
)

// FuzzFastCommitReplay replays hostile fast commits: records of any kind
// and content, checksummed as the kernel writes them so that the scan
// accepts them, in place of j_recover_fast_commit's. A read-only open
// must refuse them with an error or give a tree that reads without a
// panic or a hang; a writable open must refuse them leaving the image as
// it was, or replay them and close without a panic.
func FuzzFastCommitReplay(f *testing.F) {
	base := fastCommitImage(f)
	f.Add(fcSeedRecords(base))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, records []byte) {
		image := bytes.Clone(base)
		copy(image[fcAreaBlock*1024:(fcAreaBlock+fcAreaBlocks)*1024], fcArea(records))
		done := make(chan string, 1)
		go func() {
			defer func() {
				if p := recover(); p != nil {
					done <- fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
				}
			}()
			done <- replayHostile(t, image)
		}()
		select {
		case res := <-done:
			if res != "" {
				t.Fatal(res)
			}
		case <-time.After(fuzzTimeout):
			t.Fatal("the replay hangs")
		}
	})
}

// replayHostile opens image read-only and writable; it returns what went
// wrong, or "".
func replayHostile(t *testing.T, image []byte) string {
	ro, err := ext4go.NewFS(bytes.NewReader(image), int64(len(image)), nil)
	if err == nil {
		fs.WalkDir(ro, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				// A bounded read: a record may give a file any size.
				if f, err := ro.Open(p); err == nil {
					io.Copy(io.Discard, io.LimitReader(f, 4<<20))
					f.Close()
				}
			}
			return nil
		})
		ro.Close()
	}
	path := filepath.Join(t.TempDir(), "img")
	if err := os.WriteFile(path, image, 0o644); err != nil {
		return err.Error()
	}
	w, err := ext4go.Open(path, &ext4go.Options{Writable: true})
	if err != nil {
		after, rerr := os.ReadFile(path)
		if rerr != nil {
			return rerr.Error()
		}
		if !bytes.Equal(after, image) {
			return fmt.Sprintf("a refused writable open (%v) changed the image", err)
		}
		return ""
	}
	w.Close()
	return ""
}

// fcArea lays records (tag byte, length byte, value) out as the kernel
// writes fast commits: a HEAD, the records packed in blocks (a PAD
// filling a block's end), and a TAIL with the checksum of all of it.
func fcArea(records []byte) []byte {
	const bs = 1024
	area := make([]byte, fcAreaBlocks*bs)
	off := 0
	var crc uint32
	put := func(tag uint16, val []byte, last bool) bool {
		need := 4 + len(val)
		if last {
			need = 4 + 8
		}
		if room := bs - off%bs; room < need+4 && room != bs {
			// Pad to the end of the block (a PAD needs its 4 bytes).
			binary.LittleEndian.PutUint16(area[off:], 7)
			binary.LittleEndian.PutUint16(area[off+2:], uint16(room-4))
			crc = csum.CRC32C(crc, area[off:off+room])
			off += room
		}
		if off+need > len(area) {
			return false
		}
		binary.LittleEndian.PutUint16(area[off:], tag)
		binary.LittleEndian.PutUint16(area[off+2:], uint16(len(val)))
		copy(area[off+4:], val)
		if last {
			crc = csum.CRC32C(crc, area[off:off+8])
			binary.LittleEndian.PutUint32(area[off+8:], crc)
		} else {
			crc = csum.CRC32C(crc, area[off:off+need])
		}
		off += need
		return true
	}
	head := make([]byte, 8)
	binary.LittleEndian.PutUint32(head[4:], fcAreaTid)
	put(9, head, false)
	for len(records) >= 2 {
		tag := uint16(records[0]%6) + 1
		n := min(int(records[1]), len(records)-2)
		val := records[2 : 2+n]
		records = records[2+n:]
		if !put(tag, val, false) {
			break
		}
	}
	tail := make([]byte, 8)
	binary.LittleEndian.PutUint32(tail, fcAreaTid)
	put(8, tail, true)
	return area
}

// fcSeedRecords reads the image's own fast-commit records in fcArea's
// input format.
func fcSeedRecords(image []byte) []byte {
	area := image[fcAreaBlock*1024 : (fcAreaBlock+fcAreaBlocks)*1024]
	var out []byte
	for blk := 0; blk < fcAreaBlocks; blk++ {
		b := area[blk*1024 : (blk+1)*1024]
		for off := 0; off+4 <= len(b); {
			tag := binary.LittleEndian.Uint16(b[off:])
			n := int(binary.LittleEndian.Uint16(b[off+2:]))
			if off+4+n > len(b) || tag == 0 || tag > 9 {
				break
			}
			if tag >= 1 && tag <= 6 && n <= 255 {
				out = append(out, byte(tag-1), byte(n))
				out = append(out, b[off+4:off+4+n]...)
			}
			off += 4 + n
			if tag == 8 {
				return out
			}
		}
	}
	return out
}

// TestFastCommitFuzzSeed: the fuzz target's own encoding of
// j_recover_fast_commit's records replays to the image's tree, so the
// fuzzer starts from a replay that works.
func TestFastCommitFuzzSeed(t *testing.T) {
	base := fastCommitImage(t)
	image := bytes.Clone(base)
	copy(image[fcAreaBlock*1024:(fcAreaBlock+fcAreaBlocks)*1024], fcArea(fcSeedRecords(base)))
	a, err := ext4go.NewFS(bytes.NewReader(base), int64(len(base)), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ext4go.NewFS(bytes.NewReader(image), int64(len(image)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := b.Replay(); r == nil || r.FastCommits != 13 {
		t.Fatalf("replay of the re-encoded records: %+v, want 13 records", r)
	}
	ta, tb := treeContents(t, a), treeContents(t, b)
	if len(ta) != len(tb) {
		t.Fatalf("%d names, the original replay %d", len(tb), len(ta))
	}
	for k, v := range ta {
		if tb[k] != v {
			t.Errorf("%s differs", k)
		}
	}
}

// TestFastCommitHostile: fast commits a hostile or broken kernel could
// log, checksummed so that the scan accepts them. Each is skipped as the
// kernel skips it (and the image replays e2fsck-clean), or refused with
// the image left as it was; none may free the journal or map a block
// into the filesystem's metadata.
func TestFastCommitHostile(t *testing.T) {
	base := fastCommitImage(t)
	le := binary.LittleEndian
	rec := func(tag byte, v []byte) []byte { return append([]byte{tag - 1, byte(len(v))}, v...) }
	delRange := func(ino, lblk, n uint32) []byte {
		v := make([]byte, 12)
		le.PutUint32(v, ino)
		le.PutUint32(v[4:], lblk)
		le.PutUint32(v[8:], n)
		return rec(2, v)
	}
	addRange := func(ino, lblk uint32, n uint16, pblk uint32) []byte {
		v := make([]byte, 16)
		le.PutUint32(v, ino)
		le.PutUint32(v[4:], lblk)
		le.PutUint16(v[8:], n)
		le.PutUint32(v[12:], pblk)
		return rec(1, v)
	}
	dentry := func(tag byte, parent, ino uint32, name string) []byte {
		v := make([]byte, 8)
		le.PutUint32(v, parent)
		le.PutUint32(v[4:], ino)
		return rec(tag, append(v, name...))
	}
	// A new directory: its INODE record, then its CREAT_DENTRY in /a.
	dirInode := make([]byte, 4+128)
	le.PutUint32(dirInode, 15) // free in the image
	raw := dirInode[4:]
	le.PutUint16(raw[0:], 0o40755)
	for _, off := range []int{8, 12, 16} {
		le.PutUint32(raw[off:], 1700000000)
	}
	le.PutUint16(raw[0x1A:], 2)
	le.PutUint32(raw[0x20:], 0x80000) // extents
	le.PutUint32(raw[100:], 4321)     // generation
	mkdir := append(rec(6, dirInode), dentry(3, 12, 15, "newdir")...)
	for _, c := range []struct {
		name    string
		records []byte
		refuse  bool // must be refused (else: replayed clean)
	}{
		{"mkdir", mkdir, false},
		{"unmap the journal", delRange(8, 0, 2000), false},
		{"unmap the root", delRange(2, 0, 100), true},
		{"map onto the journal", addRange(13, 500, 10, 100), true},
		{"map onto the inode table", addRange(13, 500, 4, 40), true},
		{"map past the end", addRange(13, 500, 4, 1<<30), true},
		{"create the root", dentry(3, 12, 2, "again"), true},
		{"link a directory into itself", dentry(4, 12, 12, "self"), false},
		{"link with a slash", dentry(4, 12, 13, "a/b"), false},
		{"unlink the root's dot-dot", dentry(5, 2, 2, ".."), false},
		{"rmdir a directory with files", dentry(5, 2, 12, "a"), true},
		{"link a directory", dentry(4, 2, 12, "b"), true},
		{"range of a directory", addRange(12, 5, 1, 1500), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			image := bytes.Clone(base)
			copy(image[fcAreaBlock*1024:(fcAreaBlock+fcAreaBlocks)*1024], fcArea(c.records))
			path := filepath.Join(t.TempDir(), "img")
			if err := os.WriteFile(path, image, 0o644); err != nil {
				t.Fatal(err)
			}
			w, err := ext4go.Open(path, &ext4go.Options{Writable: true})
			if err != nil {
				after, rerr := os.ReadFile(path)
				if rerr != nil {
					t.Fatal(rerr)
				}
				if !bytes.Equal(after, image) {
					t.Fatalf("the refused open (%v) changed the image", err)
				}
				if !c.refuse {
					t.Fatalf("refused: %v", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if c.refuse {
				t.Error("replayed; want a refusal")
			}
			testutil.RequireFsckClean(t, path)
			if c.name == "mkdir" {
				after := openImage(t, path)
				ents, err := after.ReadDir("a/newdir")
				fi, serr := after.Stat("a/newdir")
				after.Close()
				if err != nil || len(ents) != 0 || serr != nil || !fi.IsDir() {
					t.Errorf("a/newdir after the replay: %v entries, %v, %v", len(ents), err, serr)
				}
			}
		})
	}
}
