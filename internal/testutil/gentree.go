//go:build linux

package testutil

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Presets are the tree shapes GenTree builds. "all" (not listed) builds
// every one of them, each in a subdirectory named after it.
//
//	empty    nothing
//	small    a few files (0, 1 block, 1 block+1 bytes) and dirs, a symlink
//	large    2000+ files of deterministic random sizes 0..1 MiB (most small)
//	sparse   files with holes at start/middle/end, an all-hole file, and
//	         "big": 5 GiB apparent size with data at 0, ~2 GiB, across
//	         the 4 GiB offset, and at the end
//	deep     100 nested directories (path over 3000 bytes)
//	bigdir   one directory with 10 000 entries of varying name lengths
//	links    fast (<60 bytes) and slow (>=60, up to 4000 or block size-1)
//	         symlinks, dangling and odd-byte targets, hard links within and
//	         across directories
//	xattrs   user., trusted., security. xattrs small and large (over 1 KiB
//	         on 4 KiB blocks, so they go to the xattr block), many small
//	         ones, security.capability, POSIX ACLs, xattrs on a dir and a symlink
//	special  char/block devices (small, 8-bit-boundary and max 12:20-bit
//	         numbers), a fifo, a unix socket
//	odd      names with spaces, newlines, tabs, UTF-8, invalid UTF-8,
//	         255 bytes, "-x", leading dots, quotes, backslashes
//	modes    setuid/setgid/sticky, 000 files and dirs, uid/gid up to 2^32-2
//	times    mtimes with ns, pre-1970, 1901 and 2038 limits, post-2038, the
//	         ext4 maximum (2446); atimes differ from mtimes
var Presets = []string{"empty", "small", "large", "sparse", "deep", "bigdir", "links",
	"xattrs", "special", "odd", "modes", "times"}

// TreeSpec says what GenTree builds.
type TreeSpec struct {
	Preset string // one of Presets, or "all"
	Seed   uint64 // same seed (and BlockSize), same tree
	// BlockSize of the image the tree is meant for (default 4096). Large
	// xattr values and slow symlinks are sized to fit one block: mke2fs -d
	// cannot store more (no ea_inode), and the kernel refuses symlinks of
	// a block or longer.
	BlockSize int
}

// ManifestEntry is one entry GenTree created.
type ManifestEntry struct {
	Path string      // slash-separated, relative to the tree's root
	Type fs.FileMode // fs.FileMode type bits; 0 for regular files
	Size int64       // regular files: apparent size; symlinks: target length
}

// Manifest lists what GenTree created, in creation order (parents first).
type Manifest struct {
	Entries []ManifestEntry
	Bytes   int64 // sum of regular file apparent sizes (hard links once)
	Written int64 // data bytes written, holes excluded
	Xattrs  int   // number of entries carrying xattrs
}

// Defaults for every entry GenTree does not give explicit times: whole
// seconds (which mke2fs -d stores exactly), one second apart.
const baseTime = 1622548800 // 2021-06-01T12:00:00Z

// GenTree builds spec.Preset into dir (created if missing; expected to be
// empty), deterministically from spec.Seed: names, sizes, contents, modes,
// owners, xattrs and mtimes are the same on every run. Only ctimes, inode
// numbers and (after anyone reads the tree) atimes vary. It must run as
// root for devices, trusted.* xattrs and foreign owners; otherwise it skips.
func GenTree(t testing.TB, dir string, spec TreeSpec) *Manifest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("testutil: GenTree needs root (devices, owners, trusted.* xattrs)")
	}
	if spec.BlockSize == 0 {
		spec.BlockSize = 4096
	}
	if spec.BlockSize < 1024 || spec.BlockSize&(spec.BlockSize-1) != 0 {
		t.Fatalf("testutil: bad TreeSpec.BlockSize %d", spec.BlockSize)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("testutil: %v", err)
	}
	g := &gen{t: t, root: dir, bs: spec.BlockSize, m: &Manifest{}, explicit: map[string][2]time.Time{}}
	switch {
	case spec.Preset == "all":
		for _, p := range Presets {
			g.dir(p, 0o755)
			g.preset(p, spec.Seed, p+"/")
		}
	case presetFuncs[spec.Preset] != nil:
		g.preset(spec.Preset, spec.Seed, "")
	default:
		t.Fatalf("testutil: unknown preset %q (want one of %v or \"all\")", spec.Preset, Presets)
	}
	g.finish()
	return g.m
}

var presetFuncs = map[string]func(*gen){
	"empty": func(*gen) {}, "small": (*gen).small, "large": (*gen).large,
	"sparse": (*gen).sparse, "deep": (*gen).deep, "bigdir": (*gen).bigdir,
	"links": (*gen).links, "xattrs": (*gen).xattrs, "special": (*gen).special,
	"odd": (*gen).odd, "modes": (*gen).modes, "times": (*gen).times,
}

// gen builds one tree. Every method fails the test on error.
type gen struct {
	t        testing.TB
	root     string
	prefix   string // of the preset being built, "" or "name/"
	bs       int
	rng      *rand.Rand
	m        *Manifest
	explicit map[string][2]time.Time // explicit mtime, atime by rel path
	xattrd   map[string]bool
}

func (g *gen) preset(name string, seed uint64, prefix string) {
	h := fnv.New64a()
	h.Write([]byte(name))
	g.rng = rand.New(rand.NewPCG(seed, h.Sum64()))
	g.prefix = prefix
	presetFuncs[name](g)
	g.prefix = ""
}

func (g *gen) path(rel string) string { return filepath.Join(g.root, g.prefix+rel) }

func (g *gen) check(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatalf("testutil: GenTree: %v", err)
	}
}

func (g *gen) add(rel string, typ fs.FileMode, size int64) {
	g.m.Entries = append(g.m.Entries, ManifestEntry{Path: g.prefix + rel, Type: typ, Size: size})
	if typ == 0 {
		g.m.Bytes += size
	}
}

func (g *gen) dir(rel string, perm os.FileMode) {
	g.t.Helper()
	g.check(os.Mkdir(g.path(rel), 0o700))
	g.chmod(rel, perm)
	g.add(rel, fs.ModeDir, 0)
}

// file writes data (nil: empty file) with the given mode bits.
func (g *gen) file(rel string, data []byte, perm os.FileMode) {
	g.t.Helper()
	g.check(os.WriteFile(g.path(rel), data, 0o600))
	g.chmod(rel, perm)
	g.add(rel, 0, int64(len(data)))
	g.m.Written += int64(len(data))
}

// random returns n deterministic pseudo-random bytes.
func (g *gen) random(n int) []byte {
	var seed [32]byte
	for i := 0; i < 4; i++ {
		binary.LittleEndian.PutUint64(seed[i*8:], g.rng.Uint64())
	}
	b := make([]byte, n)
	rand.NewChaCha8(seed).Read(b)
	return b
}

// sparseFile creates a file of size bytes holding data only at the given
// offsets; everything else is a hole.
func (g *gen) sparseFile(rel string, size int64, pieces map[int64][]byte) {
	g.t.Helper()
	f, err := os.OpenFile(g.path(rel), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	g.check(err)
	for off, b := range pieces {
		_, err := f.WriteAt(b, off)
		g.check(err)
		g.m.Written += int64(len(b))
	}
	g.check(f.Truncate(size))
	g.check(f.Close())
	g.chmod(rel, 0o644)
	g.add(rel, 0, size)
}

func (g *gen) symlink(rel, target string) {
	g.t.Helper()
	g.check(os.Symlink(target, g.path(rel)))
	g.add(rel, fs.ModeSymlink, int64(len(target)))
}

func (g *gen) hardlink(oldRel, newRel string) {
	g.t.Helper()
	g.check(os.Link(g.path(oldRel), g.path(newRel)))
	for _, e := range g.m.Entries {
		if e.Path == g.prefix+oldRel {
			g.m.Entries = append(g.m.Entries, ManifestEntry{Path: g.prefix + newRel, Type: e.Type, Size: e.Size})
			return
		}
	}
	g.t.Fatalf("testutil: GenTree: hard link to unknown %q", oldRel)
}

func (g *gen) fifo(rel string, perm uint32) {
	g.t.Helper()
	g.check(unix.Mkfifo(g.path(rel), 0o600))
	g.chmod(rel, os.FileMode(perm))
	g.add(rel, fs.ModeNamedPipe, 0)
}

func (g *gen) device(rel string, block bool, major, minor uint32, perm uint32) {
	g.t.Helper()
	typ := fs.ModeDevice | fs.ModeCharDevice
	if block {
		typ = fs.ModeDevice
	}
	g.check(mknod(g.path(rel), block, major, minor))
	g.chmod(rel, os.FileMode(perm))
	g.add(rel, typ, 0)
}

// mknod makes a device node. A number that takes all 32 bits of the
// old dev_t (major 4095, minor 1048575) is a negative int on 32-bit
// platforms, which qemu-user sign-extends into an invalid dev_t: mknod(1)
// then makes it.
func mknod(path string, block bool, major, minor uint32) error {
	mode, kind := uint32(unix.S_IFCHR), "c"
	if block {
		mode, kind = unix.S_IFBLK, "b"
	}
	err := unix.Mknod(path, mode|0o600, int(unix.Mkdev(major, minor)))
	if err == unix.EINVAL && int64(int(unix.Mkdev(major, minor))) < 0 {
		out, cerr := exec.Command("mknod", "-m", "600", path, kind, fmt.Sprint(major), fmt.Sprint(minor)).CombinedOutput()
		if cerr != nil {
			return fmt.Errorf("mknod %s: %v (mknod(1): %v: %s)", path, err, cerr, out)
		}
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "mknod", Path: path, Err: err}
	}
	return nil
}

// socket creates a unix socket file by binding. The bind goes through
// /proc/self/fd/N/name so that the 108-byte sun_path limit does not depend
// on how long the temporary directory's path is.
func (g *gen) socket(rel string, perm uint32) {
	g.t.Helper()
	p := g.path(rel)
	dfd, err := unix.Open(filepath.Dir(p), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	g.check(err)
	defer unix.Close(dfd)
	addr := fmt.Sprintf("/proc/self/fd/%d/%s", dfd, filepath.Base(p))
	sfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	g.check(err)
	defer unix.Close(sfd)
	g.check(unix.Bind(sfd, &unix.SockaddrUnix{Name: addr}))
	g.chmod(rel, os.FileMode(perm))
	g.add(rel, fs.ModeSocket, 0)
}

// chmod sets the full mode bits (os.Chmod would mis-map setuid & co.).
func (g *gen) chmod(rel string, perm os.FileMode) {
	g.t.Helper()
	m := uint32(perm.Perm())
	if perm&os.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if perm&os.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if perm&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	g.check(unix.Fchmodat(unix.AT_FDCWD, g.path(rel), m, 0))
}

// chown must come before chmod/setcap: the kernel clears setuid, setgid
// and security.capability on chown.
func (g *gen) chown(rel string, uid, gid uint32) {
	g.t.Helper()
	g.check(unix.Lchown(g.path(rel), int(uid), int(gid)))
}

func (g *gen) xattr(rel, name string, value []byte) {
	g.t.Helper()
	if err := unix.Lsetxattr(g.path(rel), name, value, 0); err != nil {
		g.t.Fatalf("testutil: GenTree: setxattr %s %s: %v", g.path(rel), name, err)
	}
	if g.xattrd == nil {
		g.xattrd = map[string]bool{}
	}
	if !g.xattrd[g.prefix+rel] {
		g.xattrd[g.prefix+rel] = true
		g.m.Xattrs++
	}
}

func (g *gen) setTime(rel string, mtime, atime time.Time) {
	g.explicit[g.prefix+rel] = [2]time.Time{mtime, atime}
}

// finish gives every entry its mtime and atime, after all entries exist
// (creating an entry changes its parent's mtime).
func (g *gen) finish() {
	g.t.Helper()
	paths := []string{"."}
	for _, e := range g.m.Entries {
		paths = append(paths, e.Path)
	}
	for i, rel := range paths {
		ts, ok := g.explicit[rel]
		if !ok {
			d := time.Unix(baseTime+int64(i), 0)
			ts = [2]time.Time{d, d}
		}
		p := filepath.Join(g.root, rel)
		if err := Lutimes(p, ts[1], ts[0]); err != nil {
			g.t.Fatalf("testutil: GenTree: %v", err)
		}
	}
}

func (g *gen) small() {
	g.file("hello.txt", []byte("hello, world\n"), 0o644)
	g.file("empty", nil, 0o644)
	g.file("exec.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	g.file("block", g.random(4096), 0o644)
	g.file("block+1", g.random(4097), 0o600)
	g.dir("dir1", 0o755)
	g.file("dir1/a.txt", []byte(strings.Repeat("abcdefghij", 10)), 0o644)
	g.dir("dir1/sub", 0o750)
	g.file("dir1/sub/b.bin", g.random(5000), 0o640)
	g.dir("dir2", 0o755)
	g.symlink("link", "hello.txt")
}

func (g *gen) large() {
	g.dir("edge", 0o755)
	for _, n := range []int{0, 1, 1023, 1024, 1025, 4095, 4096, 4097, 65536, 1<<20 - 1, 1 << 20} {
		g.file(fmt.Sprintf("edge/size-%d", n), g.random(n), 0o644)
	}
	// All zeros written out: mke2fs -d turns zero blocks into holes.
	g.file("edge/zeros", make([]byte, 256<<10), 0o644)
	for d := 0; d < 20; d++ {
		dir := fmt.Sprintf("d%02d", d)
		g.dir(dir, 0o755)
		for f := 0; f < 100; f++ {
			var n int
			switch r := g.rng.Float64(); {
			case r < 0.85:
				n = g.rng.IntN(8<<10 + 1)
			case r < 0.98:
				n = g.rng.IntN(128<<10 + 1)
			default:
				n = g.rng.IntN(1<<20 + 1)
			}
			g.file(fmt.Sprintf("%s/f%03d", dir, f), g.random(n), 0o644)
		}
	}
}

func (g *gen) sparse() {
	const gib = int64(1) << 30
	g.sparseFile("start", 1<<20, map[int64][]byte{0: g.random(10000)})
	g.sparseFile("middle", 4<<20, map[int64][]byte{3 << 19: g.random(70000)})
	g.sparseFile("end", 3<<20+5, map[int64][]byte{3<<20 + 5 - 20000: g.random(20000)})
	g.sparseFile("holeonly", 10<<20, nil)
	multi := map[int64][]byte{}
	for i := 0; i < 10; i++ {
		multi[int64(i)<<20+int64(g.rng.IntN(1<<19))] = g.random(1 + g.rng.IntN(9000))
	}
	g.sparseFile("multi", 11<<20, multi)
	// Over 4 GiB: offsets and block numbers past 32 bits of bytes, data
	// straddling the 4 GiB offset.
	bigSize := 5*gib + 12345
	g.sparseFile("big", bigSize, map[int64][]byte{
		0:             g.random(4096 + 17),
		2*gib + 100:   g.random(5000),
		4*gib - 3000:  g.random(6000),
		bigSize - 777: g.random(777),
	})
	g.file("zeros-then-x", append(make([]byte, 64<<10), 'x'), 0o644)
}

func (g *gen) deep() {
	g.file("top.txt", []byte("top\n"), 0o644)
	rel := ""
	for i := 0; i < 100; i++ {
		name := fmt.Sprintf("level%03d-", i)
		name += strings.Repeat("x", 30-len(name))
		rel += name
		g.dir(rel, 0o755)
		if i%10 == 9 {
			g.file(rel+"/file.txt", []byte(fmt.Sprintf("level %d\n", i)), 0o644)
		}
		rel += "/"
	}
	g.file(rel+"leaf.txt", []byte("bottom\n"), 0o644)
	g.symlink(rel+"up", strings.Repeat("../", 100)+"top.txt")
}

func (g *gen) bigdir() {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789_"
	for i := 0; i < 10000; i++ {
		suffix := make([]byte, g.rng.IntN(48))
		for j := range suffix {
			suffix[j] = letters[g.rng.IntN(len(letters))]
		}
		name := fmt.Sprintf("e%05d-%s", i, suffix)
		if i%1000 == 999 {
			g.dir(name, 0o755)
		} else {
			g.file(name, nil, 0o644)
		}
	}
}

func (g *gen) links() {
	g.file("target", []byte("the target\n"), 0o644)
	g.dir("dir", 0o755)
	g.file("dir/target2", []byte("second target\n"), 0o644)
	g.symlink("fast1", "target")
	g.symlink("fast-dir", "dir")
	g.symlink("dir/up", "../target")
	fill := func(n int) string { // a dangling relative path of exactly n bytes
		s := strings.Repeat("abcdefgh/", n/9+1)
		return s[:n-1] + "z"
	}
	g.symlink("fast59", fill(59))
	maxLen := min(4000, g.bs-1)
	for _, n := range []int{60, 61, 100, 1000, maxLen} {
		g.symlink(fmt.Sprintf("slow%d", n), fill(n))
	}
	g.symlink("dangling", "no/such/file")
	g.symlink("dangling-abs", "/nonexistent/path/x")
	g.symlink("odd-target", "a b\nc\xff\xfe")
	g.symlink("slow-to-target", strings.Repeat("./", 40)+"target")
	// Hard links: same dir, across dirs, a 5-name group, an empty file.
	// (Not between symlinks: mke2fs -d splits those into separate inodes.)
	g.file("hard1", []byte("hard linked\n"), 0o644)
	g.hardlink("hard1", "hard2")
	g.hardlink("hard1", "dir/hard3")
	g.file("many", g.random(9000), 0o600)
	for i := 1; i < 5; i++ {
		g.hardlink("many", fmt.Sprintf("many.%d", i))
	}
	g.file("empty-hard", nil, 0o644)
	g.hardlink("empty-hard", "dir/empty-hard2")
}

// capV2 is a VFS_CAP_REVISION_2 security.capability value: effective,
// permitted CAP_NET_BIND_SERVICE and CAP_NET_RAW.
func capV2() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1) // revision 2 | effective
	binary.LittleEndian.PutUint32(b[4:], 1<<10|1<<13)  // permitted[0]
	return b
}

// posixACL encodes a system.posix_acl_* value (kernel posix_acl_xattr
// format, version 2) of (tag, perm, id) entries.
func posixACL(entries ...[3]uint32) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 2)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}

const (
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclGroup    = 0x08
	aclMask     = 0x10
	aclOther    = 0x20
	aclUndef    = 0xffffffff
)

func (g *gen) xattrs() {
	// A value that does not fit the inode (256-byte inodes leave ~100 bytes)
	// and, on 4 KiB blocks, is over 1 KiB; it must still fit one block.
	big := min(3000, g.bs*3/4-64)
	g.file("user-small", []byte("x"), 0o644)
	g.xattr("user-small", "user.a", []byte("1"))
	g.xattr("user-small", "user.empty", nil)
	g.file("user-bin", []byte("x"), 0o644)
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	g.xattr("user-bin", "user.bin", bin[:min(256, big)])
	g.file("user-large", []byte("x"), 0o644)
	g.xattr("user-large", "user.big", g.random(big))
	g.file("trusted", []byte("x"), 0o644)
	g.xattr("trusted", "trusted.t", []byte("trusted value"))
	g.xattr("trusted", "trusted.big", g.random(big/2))
	g.file("security", []byte("x"), 0o644)
	g.xattr("security", "security.s", []byte("security value"))
	g.file("mixed", g.random(3000), 0o644)
	g.xattr("mixed", "user.m", []byte("user"))
	g.xattr("mixed", "trusted.m", []byte("trusted"))
	g.xattr("mixed", "security.m", []byte("security"))
	g.file("many", []byte("x"), 0o644)
	for i := 0; i < 24; i++ {
		g.xattr("many", fmt.Sprintf("user.k%02d", i), []byte(fmt.Sprintf("value-%04d", i)))
	}
	g.file("cap", []byte("#!/bin/sh\n"), 0o755)
	g.xattr("cap", "security.capability", capV2())
	g.file("same1", []byte("1"), 0o644)
	g.file("same2", []byte("2"), 0o644)
	for _, f := range []string{"same1", "same2"} {
		g.xattr(f, "user.shared", []byte("identical xattr sets"))
		g.xattr(f, "user.shared2", g.random(0)) // empty
	}
	g.dir("dir", 0o755)
	g.xattr("dir", "user.d", []byte("on a directory"))
	g.symlink("symlink", "user-small")
	// user.* is not allowed on symlinks; trusted.* is.
	g.xattr("symlink", "trusted.sl", []byte("on a symlink"))
	g.file("acl", []byte("x"), 0o640)
	g.xattr("acl", "system.posix_acl_access", posixACL(
		[3]uint32{aclUserObj, 6, aclUndef}, [3]uint32{aclUser, 4, 1000},
		[3]uint32{aclGroupObj, 4, aclUndef}, [3]uint32{aclGroup, 6, 2000},
		[3]uint32{aclMask, 6, aclUndef}, [3]uint32{aclOther, 0, aclUndef}))
	g.dir("acl-dir", 0o750)
	g.xattr("acl-dir", "system.posix_acl_default", posixACL(
		[3]uint32{aclUserObj, 7, aclUndef}, [3]uint32{aclUser, 5, 70000},
		[3]uint32{aclGroupObj, 5, aclUndef}, [3]uint32{aclMask, 5, aclUndef},
		[3]uint32{aclOther, 0, aclUndef}))
}

func (g *gen) special() {
	devs := []struct {
		name         string
		block        bool
		major, minor uint32
	}{
		{"chr-1-3", false, 1, 3},
		{"chr-0-0", false, 0, 0},
		{"chr-255-255", false, 255, 255}, // largest old-style (8:8 bit) number
		{"chr-256-0", false, 256, 0},     // needs the new encoding
		{"chr-4095-1048575", false, 4095, 1048575},
		{"blk-8-0", true, 8, 0},
		{"blk-259-70000", true, 259, 70000},
	}
	for _, d := range devs {
		g.device(d.name, d.block, d.major, d.minor, 0o640)
	}
	g.fifo("fifo", 0o644)
	g.fifo("fifo-000", 0)
	g.socket("sock", 0o755)
	g.dir("sub", 0o755)
	g.device("sub/null", false, 1, 3, 0o666)
}

func (g *gen) odd() {
	names := []string{
		"with space", " leading space", "trailing space ", "new\nline", "tab\tname",
		"carriage\rreturn", "ünïcødé-日本語-🙂", "bad-\xff\xfe-utf8", "\x80", "latin1-caf\xe9",
		strings.Repeat("n", 255), strings.Repeat("é", 127) + "x", // 255 bytes
		"-x", "--", "-", ".hidden", "...", "..hidden", `back\slash`, `quo"te`, "star*?[]",
		"semi;colon", "%s%n", "$HOME", "Case", "case", "#hash", "\x01ctrl\x7f",
	}
	for i, n := range names {
		g.file(n, []byte(fmt.Sprintf("file %d: %q\n", i, n)), 0o644)
	}
	g.dir("dir with space", 0o755)
	g.file("dir with space/file\nnewline", []byte("inner\n"), 0o644)
	g.dir("dir with space/\xff\xfe-dir", 0o755)
	g.file("dir with space/\xff\xfe-dir/inner", []byte("deeper\n"), 0o644)
	g.symlink("dir with space/\xff\xfe-dir/link \xff", "../file\nnewline")
	g.dir(strings.Repeat("D", 255), 0o755)
	g.file(strings.Repeat("D", 255)+"/"+strings.Repeat("F", 255), []byte("long\n"), 0o644)
}

func (g *gen) modes() {
	perms := []struct {
		name string
		perm os.FileMode
	}{
		{"m0000", 0}, {"m0644", 0o644}, {"m0777", 0o777}, {"m0100", 0o100},
		{"suid", os.ModeSetuid | 0o755}, {"sgid", os.ModeSetgid | 0o755},
		{"sticky", os.ModeSticky | 0o644}, {"all", os.ModeSetuid | os.ModeSetgid | os.ModeSticky | 0o777},
		{"suid-noexec", os.ModeSetuid | 0o644}, {"sgid-noexec", os.ModeSetgid | 0o644},
	}
	for _, p := range perms {
		g.file(p.name, []byte(p.name+"\n"), p.perm)
	}
	g.dir("d000", 0o700)
	g.file("d000/inner", []byte("inside a 000 dir\n"), 0o644)
	g.chmod("d000", 0)
	g.dir("dsticky", os.ModeSticky|0o777)
	g.dir("dsgid", os.ModeSetgid|0o775)
	g.dir("d0500", 0o700)
	g.file("d0500/inner", []byte("inside a 0500 dir\n"), 0o644)
	g.chmod("d0500", 0o500)
	owners := []struct {
		name     string
		uid, gid uint32
	}{
		{"uid1", 1, 1}, {"uid1000", 1000, 100}, {"uid65534", 65534, 65534},
		{"uid65535", 65535, 65535}, {"uid65536", 65536, 65537},
		{"uid100000", 100000, 200000}, {"uid-max", 4294967294, 4294967294},
		{"gid-only", 0, 70000},
	}
	for _, o := range owners {
		g.file(o.name, []byte(o.name+"\n"), 0o644)
		g.chown(o.name, o.uid, o.gid)
	}
	// chown first: it clears setuid/setgid.
	g.file("suid-owned", []byte("suid-owned\n"), 0o644)
	g.chown("suid-owned", 70000, 80000)
	g.chmod("suid-owned", os.ModeSetuid|os.ModeSetgid|0o755)
	g.dir("owned-dir", 0o755)
	g.chown("owned-dir", 123456, 654321)
	g.symlink("owned-symlink", "uid1")
	g.chown("owned-symlink", 1234, 5678)
}

func (g *gen) times() {
	const maxExt4 = 1<<34 - 1<<31 - 1 // 2446-05-10T22:38:55Z, the largest ext4 second
	cases := []struct {
		name      string
		sec, nsec int64
	}{
		{"epoch", 0, 0},
		{"minus1", -1, 0},
		{"pre1970-ns", -123456790, 12345679},
		{"min32", -1 << 31, 0}, // 1901-12-13: smallest signed 32-bit second
		{"min32-ns", -1 << 31, 999999999},
		{"max32", 1<<31 - 1, 0}, // 2038-01-19T03:14:07Z
		{"y2038", 1 << 31, 0},   // first second needing the epoch bits
		{"ns-1", 1600000000, 1},
		{"ns-max", 1600000000, 999999999},
		{"y2100", 4102444800, 123456789},
		{"max-ext4", maxExt4, 0}, // the kernel drops ns at its maximum
		{"max-ext4-1s", maxExt4 - 1, 500000000},
	}
	for i, c := range cases {
		g.file(c.name, []byte(c.name+"\n"), 0o644)
		m := time.Unix(c.sec, c.nsec)
		g.setTime(c.name, m, time.Unix(1500000000+int64(i), 250000000))
	}
	g.dir("dir-ns", 0o755)
	g.file("dir-ns/inner", []byte("inner\n"), 0o644)
	g.setTime("dir-ns", time.Unix(1234567890, 500000000), time.Unix(1234567890, 0))
	g.dir("dir-2100", 0o755)
	g.setTime("dir-2100", time.Unix(4102444800, 0), time.Unix(4102444800, 0))
	g.symlink("symlink-ns", "epoch")
	g.setTime("symlink-ns", time.Unix(1500000000, 250000000), time.Unix(1500000000, 0))
	g.symlink("symlink-2200", "epoch")
	g.setTime("symlink-2200", time.Unix(7258118400, 42), time.Unix(7258118400, 0))
}
