//go:build linux

package xattr

// Checks against xattrs stored by mke2fs -d (from a host tree set up with
// setxattr) and by the kernel (loop mount), cross-checked with the host's
// getxattr view and debugfs ea_list.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/testutil"
)

func needTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"mke2fs", "debugfs", "dumpe2fs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
}

func run(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "E2FSPROGS_FAKE_TIME=1700000000")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %q: %v\n%s%s", name, args, err, out.Bytes(), errb.Bytes())
	}
	return out.Bytes()
}

type image struct {
	path      string
	data      []byte
	bs        int
	inodeSize int
	seed      uint32 // filesystem checksum seed
	csum      bool
	eaInode   bool
	inodes    uint32
}

func loadImage(t testing.TB, path string) *image {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sb := map[string]string{}
	for _, line := range strings.Split(string(run(t, "dumpe2fs", "-h", path)), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			sb[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	im := &image{path: path, data: data}
	im.bs, _ = strconv.Atoi(sb["Block size"])
	im.inodeSize, _ = strconv.Atoi(sb["Inode size"])
	n, _ := strconv.Atoi(sb["Inode count"])
	im.inodes = uint32(n)
	feat := " " + sb["Filesystem features"] + " "
	im.csum = strings.Contains(feat, " metadata_csum ")
	im.eaInode = strings.Contains(feat, " ea_inode ")
	if s, ok := sb["Checksum seed"]; ok {
		v, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 32)
		im.seed = uint32(v)
	} else {
		var raw []byte
		u := strings.ReplaceAll(sb["Filesystem UUID"], "-", "")
		for i := 0; i+2 <= len(u); i += 2 {
			v, _ := strconv.ParseUint(u[i:i+2], 16, 8)
			raw = append(raw, byte(v))
		}
		im.seed = csum.CRC32C(0xFFFFFFFF, raw)
	}
	return im
}

var reImap = regexp.MustCompile(`located at block (\d+), offset 0x([0-9a-f]+)`)

// rawInode returns the on-disk bytes of the inode at spec (a path or <ino>).
func (im *image) rawInode(t testing.TB, spec string) []byte {
	t.Helper()
	m := reImap.FindSubmatch(run(t, "debugfs", "-R", "imap "+spec, im.path))
	if m == nil {
		t.Fatalf("imap %s failed", spec)
	}
	blk, _ := strconv.ParseUint(string(m[1]), 10, 64)
	off, _ := strconv.ParseUint(string(m[2]), 16, 64)
	p := blk*uint64(im.bs) + off
	return im.data[p : p+uint64(im.inodeSize)]
}

func (im *image) opts() Options {
	return Options{EAInode: im.eaInode, InodesCount: im.inodes}
}

// decoded is everything stored for one inode.
type decoded struct {
	area     []byte
	ibody    []Entry
	blockNr  uint64
	block    []byte
	header   Header
	blockEs  []Entry
	extraIsz int
}

func (im *image) decode(t testing.TB, spec string) decoded {
	t.Helper()
	raw := im.rawInode(t, spec)
	var d decoded
	d.extraIsz = int(binary.LittleEndian.Uint16(raw[128:]))
	area, err := IBodyArea(raw, d.extraIsz)
	if err != nil {
		t.Fatal(err)
	}
	d.area = area
	if d.ibody, err = DecodeIBody(area, im.opts()); err != nil {
		t.Fatalf("%s: in-inode: %v", spec, err)
	}
	d.blockNr = uint64(binary.LittleEndian.Uint32(raw[104:])) | uint64(binary.LittleEndian.Uint16(raw[118:]))<<32
	if d.blockNr != 0 {
		p := d.blockNr * uint64(im.bs)
		d.block = im.data[p : p+uint64(im.bs)]
		if im.csum {
			if err := VerifyBlockChecksum(d.block, d.blockNr, im.seed); err != nil {
				t.Fatalf("%s: %v", spec, err)
			}
		}
		if d.header, d.blockEs, err = DecodeBlock(d.block, im.opts()); err != nil {
			t.Fatalf("%s: block %d: %v", spec, d.blockNr, err)
		}
	}
	return d
}

// vfsView returns name → value as getxattr shows them (ACLs in VFS form).
func (d decoded) vfsView(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, e := range append(slices.Clone(d.ibody), d.blockEs...) {
		name, ok := e.FullName()
		if !ok {
			t.Fatalf("unknown index %d", e.Index)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("%q stored twice", name)
		}
		v := e.Value
		if e.Index == IndexPosixACLAccess || e.Index == IndexPosixACLDefault {
			var err error
			if v, err = ACLToXattr(v); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		out[name] = v
	}
	return out
}

// hostXattrs reads what the host kernel shows for path (getfattr's view).
func hostXattrs(t testing.TB, path string) map[string][]byte {
	t.Helper()
	buf := make([]byte, 64*1024)
	n, err := syscall.Listxattr(path, buf)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if name == "" || strings.HasPrefix(name, "security.selinux") {
			continue
		}
		v := make([]byte, 64*1024)
		m, err := syscall.Getxattr(path, name, v)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = v[:m]
	}
	return out
}

func setx(t testing.TB, path, name string, value []byte) {
	t.Helper()
	if err := syscall.Setxattr(path, name, value, 0); err != nil {
		t.Skipf("host setxattr %s on %s: %v (the host filesystem must support user/trusted xattrs and ACLs)", name, path, err)
	}
}

func vfsACL(t testing.TB, es ...ACLEntry) []byte {
	b, err := EncodeXattrACL(es)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildTree makes a host tree whose xattrs cover in-inode and block
// storage, every name index mke2fs can copy, ACLs, empty and binary values
// and names with bytes ≥ 0x80.
func buildTree(t testing.TB, dir string) []string {
	t.Helper()
	files := []string{"small", "big", "many", "acl", "acldir", "high", "empty", "none"}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if f == "acldir" {
			os.Mkdir(p, 0o755)
		} else if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := func(f string) string { return filepath.Join(dir, f) }
	setx(t, p("small"), "user.a", []byte("1"))
	setx(t, p("small"), "trusted.t", []byte{0, 1, 2, 0xff})
	setx(t, p("small"), "security.s", []byte("sec"))
	setx(t, p("big"), "user.big", bytes.Repeat([]byte("0123456789"), 70))
	setx(t, p("big"), "user.tiny", []byte("t"))
	for i := range 12 {
		setx(t, p("many"), fmt.Sprintf("user.attr%02d", i), bytes.Repeat([]byte{byte('A' + i)}, 30+i))
	}
	acl := vfsACL(t,
		ACLEntry{Tag: ACLUserObj, Perm: 6}, ACLEntry{Tag: ACLUser, Perm: 4, ID: 1000},
		ACLEntry{Tag: ACLGroupObj, Perm: 4}, ACLEntry{Tag: ACLGroup, Perm: 6, ID: 4242},
		ACLEntry{Tag: ACLMask, Perm: 6}, ACLEntry{Tag: ACLOther, Perm: 4})
	setx(t, p("acl"), NamePosixACLAccess, acl)
	setx(t, p("acldir"), NamePosixACLAccess, acl)
	setx(t, p("acldir"), NamePosixACLDefault, vfsACL(t,
		ACLEntry{Tag: ACLUserObj, Perm: 7}, ACLEntry{Tag: ACLGroupObj, Perm: 5}, ACLEntry{Tag: ACLOther, Perm: 0}))
	setx(t, p("high"), "user.\xe9\xff-high", bytes.Repeat([]byte{0x80}, 500))
	setx(t, p("high"), "trusted.\xc3\xa9", []byte("é"))
	setx(t, p("high"), "user.plain", bytes.Repeat([]byte("p"), 300))
	setx(t, p("empty"), "user.empty", []byte{})
	setx(t, p("empty"), "user.x", []byte("x"))
	return files
}

// debugfs ea_list prints "  name (size)...", a name with unprintable bytes
// as hex bytes each followed by a space.
var (
	reEAList = regexp.MustCompile(`(?m)^  (.+?) \((\d+)\)`)
	reHexRun = regexp.MustCompile(`^([0-9a-f]{2} )+$`)
)

func eaListName(s string) string {
	if !reHexRun.MatchString(strings.TrimSpace(s) + " ") {
		return s
	}
	var b []byte
	for _, h := range strings.Fields(s) {
		v, _ := strconv.ParseUint(h, 16, 8)
		b = append(b, byte(v))
	}
	return string(b)
}

func TestImageXattrs(t *testing.T) {
	needTools(t)
	for _, bs := range []string{"1024", "4096"} {
		t.Run("bs"+bs, func(t *testing.T) {
			tmp := t.TempDir()
			src := filepath.Join(tmp, "src")
			os.Mkdir(src, 0o755)
			files := buildTree(t, src)
			img := filepath.Join(tmp, "img")
			run(t, "mke2fs", "-q", "-F", "-t", "ext4", "-I", "256", "-b", bs, "-d", src, img, "8M")
			im := loadImage(t, img)
			if !im.csum {
				t.Fatal("expected metadata_csum")
			}
			signedSeen, unsignedSeen := 0, 0
			for _, f := range files {
				d := im.decode(t, "/"+f)
				got := d.vfsView(t)
				want := hostXattrs(t, filepath.Join(src, f))
				if !maps.EqualFunc(got, want, bytes.Equal) {
					t.Errorf("%s: decoded %q\nhost    %q", f, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
					for k, v := range want {
						if !bytes.Equal(got[k], v) {
							t.Errorf("%s: %q = %x, host %x", f, k, got[k], v)
						}
					}
				}
				// debugfs ea_list: names and on-disk sizes.
				listed := map[string]int{}
				for _, m := range reEAList.FindAllSubmatch(run(t, "debugfs", "-R", "ea_list /"+f, img), -1) {
					n, _ := strconv.Atoi(string(m[2]))
					listed[eaListName(string(m[1]))] = n
				}
				for _, e := range append(slices.Clone(d.ibody), d.blockEs...) {
					name, _ := e.FullName()
					if n, ok := listed[name]; !ok || n != len(e.Value) {
						t.Errorf("%s: %q (%d bytes) vs debugfs ea_list %d, %v", f, name, len(e.Value), n, ok)
					}
				}
				if len(listed) != len(got) {
					t.Errorf("%s: debugfs lists %d attributes, we decode %d", f, len(listed), len(got))
				}
				// In-inode: e2fsprogs writes hash 0; re-encoding gives the
				// same bytes.
				if len(d.ibody) > 0 {
					for _, e := range d.ibody {
						if e.Hash != 0 {
							t.Errorf("%s: in-inode %q hash %#x", f, e.Name, e.Hash)
						}
					}
					area, err := EncodeIBody(len(d.area), d.ibody)
					if err != nil || !bytes.Equal(area, d.area) {
						t.Errorf("%s: in-inode re-encode differs (%v)\n%x\n%x", f, err, area, d.area)
					}
				}
				if d.block == nil {
					continue
				}
				// e2fsprogs leaves h_hash 0 (it is only a sharing hint);
				// the kernel sets it.
				if d.header.RefCount != 1 || d.header.Hash != 0 && d.header.Hash != BlockHash(d.blockEs) {
					t.Errorf("%s: header %+v, block hash %#x", f, d.header, BlockHash(d.blockEs))
				}
				allUnsigned := true
				for _, e := range d.blockEs {
					if !EntryHashOK(e) {
						t.Errorf("%s: %q hash %#x matches neither variant", f, e.Name, e.Hash)
					}
					if HashEntry(e.Name, e.Value) != HashEntrySigned(e.Name, e.Value) {
						if e.Hash == HashEntry(e.Name, e.Value) {
							unsignedSeen++
						} else {
							signedSeen++
							allUnsigned = false
						}
					}
				}
				for i := 1; i < len(d.blockEs); i++ {
					if Less(d.blockEs[i], d.blockEs[i-1]) {
						t.Errorf("%s: block entries %d, %d out of order", f, i-1, i)
					}
				}
				if allUnsigned {
					b, err := EncodeBlock(d.blockEs, BlockParams{Size: im.bs, RefCount: d.header.RefCount, Csum: true, Seed: im.seed, BlockNr: d.blockNr})
					// Equal but for h_hash and so h_checksum.
					orig := bytes.Clone(d.block)
					binary.LittleEndian.PutUint32(orig[12:], BlockHash(d.blockEs))
					SetBlockChecksum(orig, d.blockNr, im.seed)
					if err != nil || !bytes.Equal(b, orig) {
						t.Errorf("%s: block re-encode differs (%v)", f, err)
					}
				}
				t.Logf("%s: %d in inode, %d in block %d", f, len(d.ibody), len(d.blockEs), d.blockNr)
			}
			t.Logf("high-byte names: %d unsigned hashes, %d signed", unsignedSeen, signedSeen)
			if unsignedSeen+signedSeen == 0 {
				t.Error("no block entry with a high-byte name")
			}
		})
	}
}

// TestImageKernelXattrs lets the kernel store xattrs, one of them in an EA
// inode, and checks hashes it computed.
func TestImageKernelXattrs(t *testing.T) {
	needTools(t)
	tmp := t.TempDir()
	img := filepath.Join(tmp, "img")
	testutil.RequireMount(t)
	run(t, "mke2fs", "-q", "-F", "-t", "ext4", "-O", "ea_inode", "-I", "256", "-b", "1024", img, "8M")
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("loop mount unavailable: %v %s", err, out)
	}
	huge := bytes.Repeat([]byte("huge value "), 400) // > block size: EA inode
	func() {
		defer func() {
			if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
				t.Fatalf("umount: %v %s", err, out)
			}
		}()
		f := filepath.Join(mnt, "f")
		os.WriteFile(f, nil, 0o644)
		setx(t, f, "user.s", []byte("small"))
		setx(t, f, "user.mid\xe9", bytes.Repeat([]byte("m"), 300))
		setx(t, f, "user.mid2", bytes.Repeat([]byte("n"), 300))
		setx(t, f, "user.huge", huge)
		setx(t, f, "trusted.z", []byte{})
	}()
	im := loadImage(t, img)
	d := im.decode(t, "/f")
	got := d.vfsView(t)
	if len(got) != 5 {
		t.Fatalf("decoded %q", slices.Sorted(maps.Keys(got)))
	}
	var ea *Entry
	for _, e := range append(slices.Clone(d.ibody), d.blockEs...) {
		if e.ValueInum != 0 {
			ea = &e
		}
	}
	if ea == nil || string(ea.Name) != "huge" || int(ea.ValueSize) != len(huge) || ea.Value != nil {
		t.Fatalf("no EA inode entry for user.huge: %+v", ea)
	}
	// The EA inode keeps crc32c(seed, value) in i_atime; e_hash mixes it in.
	raw := im.rawInode(t, fmt.Sprintf("<%d>", ea.ValueInum))
	valueHash := binary.LittleEndian.Uint32(raw[8:])
	if c := csum.CRC32C(im.seed, huge); c != valueHash {
		t.Errorf("EA inode value hash %#x, crc32c %#x", valueHash, c)
	}
	if want := HashEntryEAInode(ea.Name, valueHash); ea.Hash != want {
		t.Errorf("EA inode entry hash %#x, want %#x", ea.Hash, want)
	}
	for _, e := range d.blockEs {
		if e.ValueInum == 0 && e.Hash != HashEntry(e.Name, e.Value) {
			t.Errorf("kernel block entry %q hash %#x, want the unsigned %#x", e.Name, e.Hash, HashEntry(e.Name, e.Value))
		}
	}
	for _, e := range d.ibody {
		if e.ValueInum == 0 && e.Hash != 0 && !EntryHashOK(e) {
			t.Errorf("kernel in-inode entry %q hash %#x", e.Name, e.Hash)
		}
	}
	if d.block != nil && d.header.Hash != BlockHash(d.blockEs) {
		t.Errorf("block hash %#x, want %#x", d.header.Hash, BlockHash(d.blockEs))
	}
	// Without the feature the same bytes are refused.
	opt := im.opts()
	opt.EAInode = false
	_, err1 := DecodeIBody(d.area, opt)
	var err2 error
	if d.block != nil {
		_, _, err2 = DecodeBlock(d.block, opt)
	}
	if err1 == nil && err2 == nil {
		t.Error("EA inode reference accepted without ea_inode")
	}
	t.Logf("in inode %d, in block %d, EA inode %d", len(d.ibody), len(d.blockEs), ea.ValueInum)
}

var (
	realSeedOnce sync.Once
	realSeedList []realSeed
)

// realSeeds returns in-inode areas and xattr blocks from a mke2fs -d image
// as fuzz seeds, or nothing if the tools or host xattrs are missing.
func realSeeds(tb testing.TB) []realSeed {
	realSeedOnce.Do(func() {
		for _, tool := range []string{"mke2fs", "debugfs", "dumpe2fs"} {
			if _, err := exec.LookPath(tool); err != nil {
				return
			}
		}
		tmp, err := os.MkdirTemp("", "xattrseed")
		if err != nil {
			return
		}
		defer os.RemoveAll(tmp)
		src := filepath.Join(tmp, "src")
		os.Mkdir(src, 0o755)
		f := filepath.Join(src, "f")
		os.WriteFile(f, nil, 0o644)
		if syscall.Setxattr(f, "user.a", []byte("in inode"), 0) != nil ||
			syscall.Setxattr(f, "user.b", bytes.Repeat([]byte("b"), 200), 0) != nil ||
			syscall.Setxattr(f, "trusted.c", []byte("c"), 0) != nil {
			return
		}
		img := filepath.Join(tmp, "img")
		run(tb, "mke2fs", "-q", "-F", "-t", "ext4", "-I", "256", "-b", "1024", "-d", src, img, "4M")
		d := loadImage(tb, img).decode(tb, "/f")
		realSeedList = append(realSeedList, realSeed{bytes.Clone(d.area), bytes.Clone(d.block)})
	})
	return realSeedList
}
