//go:build linux

package inode

import (
	"bytes"
	"encoding/hex"
	"github.com/ext4go/ext4go/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/csum"
)

// This file checks Decode against inodes written by mke2fs -d and by the
// kernel (through a loop mount, when the test runs as root), comparing with
// what debugfs prints.

// fsSeed computes the filesystem checksum seed from dumpe2fs: the
// explicit seed when the csum_seed feature is on, else crc32c of the UUID.
func fsSeed(t testing.TB, img string) uint32 {
	out := testutil.Run(t, "dumpe2fs", "-h", img)
	if m := regexp.MustCompile(`(?m)^Checksum seed:\s+0x([0-9a-f]+)`).FindStringSubmatch(out); m != nil {
		v, _ := strconv.ParseUint(m[1], 16, 32)
		return uint32(v)
	}
	m := regexp.MustCompile(`(?m)^Filesystem UUID:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatal("no UUID in dumpe2fs output")
	}
	u, err := hex.DecodeString(strings.ReplaceAll(m[1], "-", ""))
	if err != nil {
		t.Fatal(err)
	}
	return csum.CRC32C(^uint32(0), u)
}

func superField(t testing.TB, img, name string) int {
	out := testutil.Run(t, "dumpe2fs", "-h", img)
	m := regexp.MustCompile(`(?m)^` + name + `:\s+(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %q in dumpe2fs output", name)
	}
	v, _ := strconv.Atoi(m[1])
	return v
}

// rawInode reads an inode's bytes from the image at the place debugfs's
// imap names.
func rawInode(t testing.TB, img string, imap string, blockSize, inodeSize int) []byte {
	t.Helper()
	m := imapRE.FindStringSubmatch(imap)
	if m == nil {
		t.Fatalf("bad imap output %q", imap)
	}
	blk, _ := strconv.ParseInt(m[1], 10, 64)
	off, _ := strconv.ParseInt(m[2], 16, 64)
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, inodeSize)
	if _, err := f.ReadAt(b, blk*int64(blockSize)+off); err != nil {
		t.Fatal(err)
	}
	return b
}

// tryMount loop-mounts img, runs fn on the mount point and unmounts. It
// reports false when mounting is not possible here.
func tryMount(t *testing.T, img string, fn func(mnt string)) bool {
	t.Helper()
	if ok, why := testutil.CanMount(); !ok {
		t.Logf("no loop mount: %s", why)
		return false
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Logf("loop mount not available: %v %s", err, out)
		return false
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v %s", err, out)
		}
	}()
	fn(mnt)
	return true
}

// buildTree makes the source tree for mke2fs -d.
func buildTree(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "src")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "file"), bytes.Repeat([]byte("data "), 3000), 0o640))
	must(os.WriteFile(filepath.Join(dir, "owned"), []byte("x"), 0o600))
	must(os.Chown(filepath.Join(dir, "owned"), 100000, 200000))
	must(os.Symlink("short/target", filepath.Join(dir, "fastlink")))
	must(os.Symlink(strings.Repeat("long/", 30), filepath.Join(dir, "slowlink")))
	must(os.Symlink(strings.Repeat("y", 59), filepath.Join(dir, "link59")))
	must(os.Symlink(strings.Repeat("z", 60), filepath.Join(dir, "link60")))
	if os.Geteuid() == 0 {
		must(syscall.Mknod(filepath.Join(dir, "cdev"), syscall.S_IFCHR|0o644, 4<<8|5))
		// 300:70000 needs the new encoding; Linux dev_t is major<<8 in bits 8..19
		// and the minor's high bits from bit 20.
		must(syscall.Mknod(filepath.Join(dir, "bdev"), syscall.S_IFBLK|0o600, mkdev(300, 70000)))
	}
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(syscall.Mknod(filepath.Join(dir, "sock"), syscall.S_IFSOCK|0o755, 0))
	must(os.Chmod(filepath.Join(dir, "sub"), 0o777|os.ModeSticky))
	return dir
}

func mkdev(major, minor uint32) int {
	return int(minor&0xff | (major&0xfff)<<8 | (minor&^0xff)<<12)
}

var srcPaths = []string{"/", "/sub", "/file", "/owned", "/fastlink", "/slowlink", "/link59", "/link60", "/cdev", "/bdev", "/fifo", "/sock"}

// kernelTimes are set through the kernel on a mounted image.
var kernelTimes = map[string]time.Time{
	"t2100": time.Date(2100, 3, 4, 5, 6, 7, 123456789, time.UTC),
	"t1960": time.Date(1960, 1, 2, 3, 4, 5, 500000000, time.UTC),
	"t2400": time.Date(2400, 1, 1, 0, 0, 0, 1, time.UTC),
	"t2038": time.Unix(1<<31, 999999999).UTC(),
	"tmin":  time.Unix(-1<<31, 0).UTC(),
	"tzero": time.Unix(0, 0).UTC(),
}

type stat struct {
	typ                            string
	mode, flags                    uint64
	gen, verLo, verHi              uint64
	uid, gid, proj                 uint64
	hasProj                        bool
	size, acl, links, blocks       uint64
	times                          map[string][2]uint64 // name -> base, extra
	timeHasExtra                   bool
	extra                          int
	hasExtra                       bool
	csum                           uint64
	hasCsum                        bool
	devMajor, devMinor             uint64
	hasDev                         bool
	fastLink                       string
	hasFastLink, inlineOrExtentsOK bool
}

var (
	reHead   = regexp.MustCompile(`Type: (.+?)\s+Mode:\s+(\d+)\s+Flags: (0x[0-9a-f]+)`)
	reGen    = regexp.MustCompile(`Generation: (\d+)\s+Version: 0x([0-9a-f]+)(?::([0-9a-f]+))?`)
	reUser   = regexp.MustCompile(`User:\s+(\d+)\s+Group:\s+(\d+)(?:\s+Project:\s+(\d+))?\s+Size: (\d+)`)
	reACL    = regexp.MustCompile(`File ACL: (\d+)`)
	reLinks  = regexp.MustCompile(`Links: (\d+)\s+Blockcount: (\d+)`)
	reTime   = regexp.MustCompile(`(?m)^\s*(ctime|atime|mtime|crtime|dtime): 0x([0-9a-f]+)(?::([0-9a-f]+))?`)
	reExtra  = regexp.MustCompile(`Size of extra inode fields: (\d+)`)
	reCsum   = regexp.MustCompile(`Inode checksum: 0x([0-9a-f]+)`)
	reDev    = regexp.MustCompile(`Device major/minor number: (\d+):(\d+)`)
	reFastLn = regexp.MustCompile(`Fast link dest: "(.*)"`)
)

func parseStat(t *testing.T, s string) stat {
	t.Helper()
	var st stat
	m := reHead.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no inode header in %q", s)
	}
	st.typ = m[1]
	st.mode = num("0o" + m[2])
	st.flags = num(m[3])
	m = reGen.FindStringSubmatch(s)
	st.gen = num(m[1])
	if m[3] != "" {
		st.verHi, st.verLo = num("0x"+m[2]), num("0x"+m[3])
	} else {
		st.verLo = num("0x" + m[2])
	}
	m = reUser.FindStringSubmatch(s)
	st.uid, st.gid, st.size = num(m[1]), num(m[2]), num(m[4])
	if m[3] != "" {
		st.proj, st.hasProj = num(m[3]), true
	}
	st.acl = num(reACL.FindStringSubmatch(s)[1])
	m = reLinks.FindStringSubmatch(s)
	st.links, st.blocks = num(m[1]), num(m[2])
	st.times = map[string][2]uint64{}
	for _, m := range reTime.FindAllStringSubmatch(s, -1) {
		v := [2]uint64{num("0x" + m[2])}
		if m[3] != "" {
			v[1] = num("0x" + m[3])
			st.timeHasExtra = true
		}
		st.times[m[1]] = v
	}
	if m := reExtra.FindStringSubmatch(s); m != nil {
		st.extra, st.hasExtra = int(num(m[1])), true
	}
	if m := reCsum.FindStringSubmatch(s); m != nil {
		st.csum, st.hasCsum = num("0x"+m[1]), true
	}
	if m := reDev.FindStringSubmatch(s); m != nil {
		st.devMajor, st.devMinor, st.hasDev = num(m[1]), num(m[2]), true
	}
	if m := reFastLn.FindStringSubmatch(s); m != nil {
		st.fastLink, st.hasFastLink = m[1], true
	}
	return st
}

var debugfsType = map[FileType]string{
	0:           "bad type",
	TypeRegular: "regular", TypeDir: "directory", TypeSymlink: "symlink",
	TypeCharDev: "character special", TypeBlkDev: "block special",
	TypeFIFO: "FIFO", TypeSocket: "socket",
}

// compareStat checks the decoded inode against debugfs's stat output.
func compareStat(t *testing.T, name string, in *Inode, st stat) {
	t.Helper()
	errf := func(format string, a ...any) { t.Errorf("%s: "+format, append([]any{name}, a...)...) }
	if got := debugfsType[in.FileType()]; got != st.typ {
		errf("type %q, debugfs %q", got, st.typ)
	}
	if uint64(in.Perm()) != st.mode {
		errf("mode %o, debugfs %o", in.Perm(), st.mode)
	}
	if uint64(in.Flags) != st.flags {
		errf("flags %#x, debugfs %#x", in.Flags, st.flags)
	}
	if uint64(in.Generation) != st.gen {
		errf("generation %d, debugfs %d", in.Generation, st.gen)
	}
	if in.Version != st.verHi<<32|st.verLo {
		errf("version %#x, debugfs %#x:%#x", in.Version, st.verHi, st.verLo)
	}
	if uint64(in.UID) != st.uid || uint64(in.GID) != st.gid {
		errf("owner %d:%d, debugfs %d:%d", in.UID, in.GID, st.uid, st.gid)
	}
	if st.hasProj && uint64(in.Projid) != st.proj {
		errf("project %d, debugfs %d", in.Projid, st.proj)
	}
	if in.Size != st.size {
		errf("size %d, debugfs %d", in.Size, st.size)
	}
	if in.FileACL != st.acl {
		errf("file acl %d, debugfs %d", in.FileACL, st.acl)
	}
	if uint64(in.LinksCount) != st.links || in.Blocks != st.blocks {
		errf("links/blocks %d/%d, debugfs %d/%d", in.LinksCount, in.Blocks, st.links, st.blocks)
	}
	if st.hasExtra != (len(in.Raw) > GoodOldSize) || int(in.ExtraIsize) != st.extra {
		errf("extra isize %d, debugfs %d (%v)", in.ExtraIsize, st.extra, st.hasExtra)
	}
	// Re-encode our decoded times to compare with debugfs's raw words.
	for name, ts := range map[string]Timestamp{"ctime": in.Ctime, "atime": in.Atime, "mtime": in.Mtime, "crtime": in.Crtime} {
		want, ok := st.times[name]
		if !ok {
			if name == "crtime" && in.Crtime != (Timestamp{}) {
				errf("crtime %v decoded but debugfs shows none", in.Crtime)
			}
			continue
		}
		var b [8]byte
		encodeTime(b[:], 0, 4, st.timeHasExtra, ts)
		base := uint64(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
		extra := uint64(uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24)
		if base != want[0] || extra != want[1] {
			errf("%s %+v encodes as %#x:%#x, debugfs %#x:%#x", name, ts, base, extra, want[0], want[1])
		}
	}
	if st.hasCsum {
		stored := uint64(in.ChecksumLo) | uint64(in.ChecksumHi)<<16
		if stored != st.csum {
			errf("checksum %#x, debugfs %#x", stored, st.csum)
		}
	}
	if st.hasDev {
		if !in.IsDevice() {
			errf("debugfs shows a device, we decode %v", in.FileType())
		}
		ma, mi := in.Device()
		if uint64(ma) != st.devMajor || uint64(mi) != st.devMinor {
			errf("device %d:%d, debugfs %d:%d", ma, mi, st.devMajor, st.devMinor)
		}
	}
}

type variant struct {
	name   string
	mkfs   []string
	csum   bool
	size   int
	ext4   bool
	inline bool
}

var variants = []variant{
	{"ext4-256-csum", []string{"-t", "ext4", "-I", "256", "-O", "metadata_csum"}, true, 256, true, false},
	{"ext4-128-csum", []string{"-t", "ext4", "-I", "128", "-O", "metadata_csum"}, true, 128, true, false},
	{"ext4-512-csum-seed", []string{"-t", "ext4", "-I", "512", "-O", "metadata_csum,metadata_csum_seed", "-U", "clear"}, true, 512, true, false},
	{"ext4-256-nocsum", []string{"-t", "ext4", "-I", "256", "-O", "^metadata_csum,uninit_bg"}, false, 256, true, false},
	{"ext4-inline", []string{"-t", "ext4", "-I", "256", "-O", "metadata_csum,inline_data"}, true, 256, true, true},
	{"ext2-128", []string{"-t", "ext2", "-I", "128"}, false, 128, false, false},
}

func TestAgainstImages(t *testing.T) {
	testutil.RequireTools(t, "mke2fs", "debugfs", "dumpe2fs")
	src := buildTree(t)
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "img")
			args := append([]string{"-q", "-F", "-b", "1024"}, v.mkfs...)
			args = append(args, "-d", src, img, "16M")
			testutil.Run(t, "mke2fs", args...)
			paths := append([]string(nil), srcPaths...)
			mounted := tryMount(t, img, func(mnt string) { kernelChanges(t, mnt, v) })
			if mounted {
				for name := range kernelTimes {
					paths = append(paths, "/k/"+name)
				}
				paths = append(paths, "/k/flags", "/k/kfast", "/k/kslow", "/k")
			} else {
				t.Log("not root or no loop mount: skipping kernel-written inodes")
			}
			if v.size > GoodOldSize {
				// debugfs writes the project id (and the inode checksum).
				testutil.Run(t, "debugfs", "-w", "-R", "sif /owned projid 4242", img)
			}
			checkImage(t, img, v, paths, mounted)
		})
	}
}

// kernelChanges makes inodes through the kernel: it sets times beyond the
// 32-bit range (the kernel encodes the epoch bits and nanoseconds), inode
// flags and a project id, and new symlinks with random generations.
func kernelChanges(t *testing.T, mnt string, v variant) {
	k := filepath.Join(mnt, "k")
	if err := os.Mkdir(k, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, tm := range kernelTimes {
		p := filepath.Join(k, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := testutil.Lutimes(p, tm, tm); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(k, "flags"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("kernel/fast", filepath.Join(k, "kfast")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(strings.Repeat("kernel/slow/", 10), filepath.Join(k, "kslow")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+adAS", filepath.Join(k, "flags")).CombinedOutput(); err != nil {
		t.Logf("chattr: %v %s", err, out)
	}
	if out, err := exec.Command("chattr", "+T", k).CombinedOutput(); err != nil {
		t.Logf("chattr +T: %v %s", err, out)
	}
}

func checkImage(t *testing.T, img string, v variant, paths []string, mounted bool) {
	bs := superField(t, img, "Block size")
	isz := superField(t, img, "Inode size")
	if isz != v.size {
		t.Fatalf("inode size %d, want %d", isz, v.size)
	}
	seed := fsSeed(t, img)
	var cmds []string
	for _, p := range paths {
		cmds = append(cmds, "stat "+p, "imap "+p)
	}
	for _, n := range []string{"<2>", "<7>", "<8>", "<11>", "<1>", "<5>"} {
		cmds = append(cmds, "stat "+n, "imap "+n)
	}
	out := testutil.DebugfsBatch(t, img, cmds)
	for i := 0; i < len(cmds); i += 2 {
		p := strings.TrimPrefix(cmds[i], "stat ")
		sout := out[cmds[i]]
		if strings.Contains(sout, "File not found") || strings.TrimSpace(sout) == "" {
			if p == "/cdev" || p == "/bdev" || p == "<8>" {
				continue // not root, or no journal
			}
			t.Fatalf("%s: debugfs: %q", p, sout)
		}
		raw := rawInode(t, img, out[cmds[i+1]], bs, isz)
		in, err := Decode(raw, isz)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		compareStat(t, p, in, parseStat(t, sout))
		ino := inodeNumber(t, sout)
		if v.csum {
			if err := Verify(seed, ino, raw); err != nil {
				t.Errorf("%s: %v", p, err)
			}
			bad := append([]byte(nil), raw...)
			bad[isz-1] ^= 0x40
			if isz == GoodOldSize {
				bad[offFlags] ^= 1
			}
			if err := Verify(seed, ino, bad); err == nil {
				t.Errorf("%s: corrupted copy verifies", p)
			}
			if Verify(seed, ino+1, raw) == nil && !allZero(raw[:GoodOldSize]) {
				t.Errorf("%s: verifies as another inode number", p)
			}
		}
		// Round trip: Encode reproduces the bytes exactly, and EncodeChecksum
		// reproduces the stored checksum.
		enc := make([]byte, isz)
		if err := in.Encode(enc); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, raw) {
			t.Errorf("%s: re-encoding differs:\n%x\n%x", p, enc, raw)
		}
		if v.csum {
			in2 := *in
			in2.ChecksumLo, in2.ChecksumHi = 0, 0
			if err := in2.EncodeChecksum(enc, seed, ino); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, raw) || in2.ChecksumLo != in.ChecksumLo || in2.ChecksumHi != in.ChecksumHi {
				t.Errorf("%s: EncodeChecksum differs from the stored checksum", p)
			}
		}
		checkSemantics(t, p, in, v, bs, sout)
	}
}

func inodeNumber(t *testing.T, s string) uint32 {
	m := regexp.MustCompile(`Inode: (\d+)`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no inode number in %q", s)
	}
	return uint32(num(m[1]))
}

// checkSemantics checks what the source tree and the kernel changes imply.
func checkSemantics(t *testing.T, p string, in *Inode, v variant, bs int, sout string) {
	hugeFile := v.ext4
	blockSize := uint32(bs)
	switch p {
	case "/owned":
		if in.UID != 100000 || in.GID != 200000 {
			t.Errorf("%s: owner %d:%d", p, in.UID, in.GID)
		}
		if want := uint32(4242); v.size > GoodOldSize && in.Projid != want {
			t.Errorf("%s: project %d, want %d", p, in.Projid, want)
		}
	case "/cdev", "/bdev":
		ma, mi := in.Device()
		want := [2]uint32{4, 5}
		if p == "/bdev" {
			want = [2]uint32{300, 70000}
		}
		if [2]uint32{ma, mi} != want {
			t.Errorf("%s: device %d:%d, want %v", p, ma, mi, want)
		}
		// SetDevice produces the same i_block words as mke2fs.
		c := *in
		c.Block = [BlockLen]byte{}
		c.SetDevice(ma, mi)
		if c.Block != in.Block {
			t.Errorf("%s: SetDevice gives %x, disk has %x", p, c.Block[:12], in.Block[:12])
		}
	case "/fastlink", "/slowlink", "/link59", "/link60", "/k/kfast", "/k/kslow":
		fast := in.IsFastSymlink(blockSize, blockSize, hugeFile, false)
		debugfsFast := reFastLn.MatchString(sout)
		if fast && !debugfsFast {
			t.Errorf("%s: we say fast, debugfs does not", p)
		}
		wantFast := in.Size < BlockLen && !(v.inline && in.HasFlag(FlagInlineData))
		if fast != wantFast {
			t.Errorf("%s: fast=%v, want %v (size %d, flags %#x)", p, fast, wantFast, in.Size, in.Flags)
		}
		if fast {
			if got := string(in.Block[:in.Size]); got != reFastLn.FindStringSubmatch(sout)[1] {
				t.Errorf("%s: target %q", p, got)
			}
		}
	case "/k/flags":
		want := FlagAppend | FlagNoDump | FlagNoAtime | FlagSync
		if !in.HasFlag(want) {
			t.Errorf("%s: flags %#x lack %#x", p, in.Flags, want)
		}
	case "/k":
		if !in.HasFlag(FlagTopDir) || !in.IsDir() {
			t.Errorf("%s: flags %#x mode %#o", p, in.Flags, in.Mode)
		}
	case "/file":
		if in.Size != 15000 {
			t.Errorf("%s: size %d", p, in.Size)
		}
		if got := in.BlockBytes(blockSize, hugeFile); got < 15000 || got%uint64(bs) != 0 {
			t.Errorf("%s: %d bytes of blocks", p, got)
		}
		if v.ext4 != in.HasFlag(FlagExtents) {
			t.Errorf("%s: extents flag %v", p, in.HasFlag(FlagExtents))
		}
	}
	if name, ok := strings.CutPrefix(p, "/k/"); ok {
		if tm, ok := kernelTimes[name]; ok {
			want := FromTime(tm)
			if v.size == GoodOldSize {
				// No extra fields: the kernel clamps to 32 bits, no nanoseconds.
				want = Timestamp{Sec: min(max(tm.Unix(), -1<<31), 1<<31-1)}
			}
			if in.Mtime != want || in.Atime != want {
				t.Errorf("%s: mtime %+v atime %+v, want %+v", p, in.Mtime, in.Atime, want)
			}
			if v.size > GoodOldSize && !in.Mtime.Time().Equal(tm) {
				t.Errorf("%s: Time() %v, want %v", p, in.Mtime.Time(), tm)
			}
			if v.size > GoodOldSize && in.Crtime.Sec < 1600000000 {
				t.Errorf("%s: crtime %+v", p, in.Crtime)
			}
			if in.Generation == 0 && p != "/k/tzero" {
				// Kernel generations are random; one zero is possible, all zero is not.
				t.Logf("%s: generation 0", p)
			}
		}
	}
}
