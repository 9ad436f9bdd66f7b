//go:build linux

package ext4go_test

// Model-based random test of the write path: seeded sequences of thousands
// of operations are applied both to a fresh mke2fs image through ext4go and
// to an in-memory model of the tree. Every operation's
// outcome (success or the exact errno) must match the model's prediction.
// Periodically the filesystem is closed, e2fsck -fn must find it clean, and
// three independent readers must see exactly the model: ext4go itself
// reopened read-only, debugfs rdump (where faithful) and the kernel through
// a read-only loop mount. Then the image is reopened writable and the run
// continues; at the end everything is removed again and the free counts
// must be back where mke2fs left them.
//
// Reproduce a failure with the seed and configuration it prints:
//
//	EXT4GO_SEED=1234 go test -run 'TestModel/4k$' .
//
// EXT4GO_SOAK=N runs N seeds per configuration with longer sequences, and
// EXT4GO_MODEL_TRACE=FILE writes every operation to FILE.<config>, and
// EXT4GO_MODEL_PARANOID=1 compares the whole live tree after every operation.

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
	"golang.org/x/sys/unix"
)

// modelConfig is one mke2fs variant the model runs on.
type modelConfig struct {
	name      string
	blockSize int
	args      []string // extra mke2fs arguments
	inode128  bool     // 128-byte inodes: whole-second times, no in-inode xattrs
	bigDir    bool     // run the 10k-entry directory phase
	blockMap  bool     // no extent feature: files are block-mapped (fallocate only punches)
	fsType    string   // mke2fs -t (default ext4)
}

var modelConfigs = []modelConfig{
	{name: "4k", blockSize: 4096, bigDir: true},
	{name: "1k", blockSize: 1024, bigDir: true},
	{name: "4k-nocsum", blockSize: 4096, args: []string{"-O", "^metadata_csum"}},
	{name: "1k-no64bit", blockSize: 1024, args: []string{"-O", "^64bit"}},
	{name: "4k-nocsum-no64bit-uninit", blockSize: 4096, args: []string{"-O", "^metadata_csum,^64bit,uninit_bg"}},
	{name: "4k-inline", blockSize: 4096, args: []string{"-O", "inline_data"}},
	{name: "1k-fewinodes", blockSize: 1024, args: []string{"-N", "160"}},
	{name: "4k-inode128", blockSize: 4096, args: []string{"-I", "128"}, inode128: true},
	{name: "4k-ext3", blockSize: 4096, fsType: "ext3", blockMap: true},
	{name: "1k-ext2", blockSize: 1024, fsType: "ext2", blockMap: true, bigDir: true},
}

const (
	modelImageSize = 128 << 20
	chunkSize      = 4096 // model content granularity (not the fs block size)
)

// TestModel runs the model test on every configuration.
func TestModel(t *testing.T) {
	if _, err := exec.LookPath("e2fsck"); err != nil {
		if _, err := os.Stat("/usr/sbin/e2fsck"); err != nil {
			t.Skip("e2fsprogs not installed")
		}
	}
	ops, every := 1500, 500
	seeds := 1
	if testing.Short() {
		ops, every = 400, 200
	}
	soak := 0
	if s := os.Getenv("EXT4GO_SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("EXT4GO_SOAK=%q: want a positive number of seeds", s)
		}
		soak, seeds, ops, every = n, n, 6000, 1000
	}
	var fixedSeed *uint64
	if s := os.Getenv("EXT4GO_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("EXT4GO_SEED=%q: %v", s, err)
		}
		fixedSeed, seeds = &n, 1
	}
	base := uint64(1)
	if soak > 0 && fixedSeed == nil {
		base = uint64(time.Now().UnixNano())
	}
	for ci, cfg := range modelConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			for i := 0; i < seeds; i++ {
				seed := base + uint64(ci)*1_000_003 + uint64(i)
				if fixedSeed != nil {
					seed = *fixedSeed
				}
				if soak > 0 {
					t.Logf("seed %d", seed)
				}
				r := newModelRun(t, cfg, seed)
				r.run(ops, every)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// The model.

type mKind uint8

const (
	kFile mKind = iota
	kDir
	kSymlink
	kFifo
	kChr
	kBlk
	kSock
)

func (k mKind) String() string {
	return [...]string{"file", "dir", "symlink", "fifo", "chardev", "blockdev", "socket"}[k]
}

// modeType is the S_IF* bits of k.
func (k mKind) modeType() uint32 {
	return [...]uint32{0x8000, 0x4000, 0xA000, 0x1000, 0x2000, 0x6000, 0xC000}[k]
}

func kindOfMode(m uint32) (mKind, bool) {
	for k := kFile; k <= kSock; k++ {
		if k.modeType() == m&0xF000 {
			return k, true
		}
	}
	return 0, false
}

// mTime is a timestamp known exactly (lo == hi) or known to lie in [lo, hi]
// (set by the filesystem's clock during an operation).
type mTime struct{ lo, hi time.Time }

// mObj is one inode of the model.
type mObj struct {
	id       int
	kind     mKind
	perm     uint32 // 07777
	uid, gid uint32
	mtime    mTime
	xattrs   map[string][]byte
	links    int // names pointing at it (directories: 1)
	opens    int // open handles

	// Regular files: content as non-zero chunks, and the fs blocks
	// mapped (written or preallocated), for space accounting.
	size  int64
	data  map[int64][]byte
	alloc ivset

	// Directories.
	kids   *nameSet
	parent *mObj
	name   string
	dirIdx int
	system bool // lost+found: never touched, never compared

	target       string // symlinks
	major, minor uint32 // devices
}

func (o *mObj) nlink() int {
	if o.kind != kDir {
		return o.links
	}
	n := 2
	for _, name := range o.kids.names {
		if o.kids.objs[name].kind == kDir {
			n++
		}
	}
	return n
}

// path returns a directory's path relative to the root ("." for the root).
func (o *mObj) path() string {
	if o.parent == nil {
		return "."
	}
	var parts []string
	for d := o; d.parent != nil; d = d.parent {
		parts = append(parts, d.name)
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

// isAncestorOf reports whether directory o is d or above it.
func (o *mObj) isAncestorOf(d *mObj) bool {
	for ; d != nil; d = d.parent {
		if d == o {
			return true
		}
	}
	return false
}

func joinPath(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// write stores p at off in the content (sizes are the caller's business).
func (o *mObj) write(off int64, p []byte) {
	for len(p) > 0 {
		k := off / chunkSize
		in := off % chunkSize
		n := min(int64(len(p)), chunkSize-in)
		c := o.data[k]
		if c == nil {
			if allZero(p[:n]) {
				p, off = p[n:], off+n
				continue
			}
			c = make([]byte, chunkSize)
			o.data[k] = c
		}
		copy(c[in:], p[:n])
		if allZero(c) {
			delete(o.data, k)
		}
		p, off = p[n:], off+n
	}
}

// zero clears the content bytes [from, to).
func (o *mObj) zero(from, to int64) {
	if from >= to {
		return
	}
	first, last := from/chunkSize, (to-1)/chunkSize
	clearChunk := func(k int64) {
		c := o.data[k]
		if c == nil {
			return
		}
		a, b := max(from-k*chunkSize, 0), min(to-k*chunkSize, chunkSize)
		clear(c[a:b])
		if allZero(c) {
			delete(o.data, k)
		}
	}
	if last-first+1 > int64(len(o.data)) {
		for k := range o.data { // order does not matter: chunks are independent
			if k >= first && k <= last {
				clearChunk(k)
			}
		}
		return
	}
	for k := first; k <= last; k++ {
		clearChunk(k)
	}
}

// read fills p with the content at off (zeros where there is none).
func (o *mObj) read(off int64, p []byte) {
	for len(p) > 0 {
		k := off / chunkSize
		in := off % chunkSize
		n := min(int64(len(p)), chunkSize-in)
		if c := o.data[k]; c != nil {
			copy(p[:n], c[in:])
		} else {
			clear(p[:n])
		}
		p, off = p[n:], off+n
	}
}

// dataRanges returns the chunk ranges holding non-zero data, sorted.
func (o *mObj) dataRanges() [][2]int64 {
	keys := make([]int64, 0, len(o.data))
	for k := range o.data {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var out [][2]int64
	for _, k := range keys {
		a, b := k*chunkSize, (k+1)*chunkSize
		if n := len(out); n > 0 && out[n-1][1] == a {
			out[n-1][1] = b
			continue
		}
		out = append(out, [2]int64{a, b})
	}
	return out
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// nameSet is a directory's entries with deterministic random choice.
type nameSet struct {
	names []string
	pos   map[string]int
	objs  map[string]*mObj
}

func newNameSet() *nameSet {
	return &nameSet{pos: map[string]int{}, objs: map[string]*mObj{}}
}

func (s *nameSet) get(name string) (*mObj, bool) { o, ok := s.objs[name]; return o, ok }
func (s *nameSet) len() int                      { return len(s.names) }

func (s *nameSet) put(name string, o *mObj) {
	if _, ok := s.objs[name]; !ok {
		s.pos[name] = len(s.names)
		s.names = append(s.names, name)
	}
	s.objs[name] = o
}

func (s *nameSet) del(name string) {
	i, ok := s.pos[name]
	if !ok {
		return
	}
	last := s.names[len(s.names)-1]
	s.names[i] = last
	s.pos[last] = i
	s.names = s.names[:len(s.names)-1]
	delete(s.pos, name)
	delete(s.objs, name)
}

// ivset is a sorted set of disjoint, non-adjacent half-open intervals.
type ivset [][2]int64

func (s ivset) add(a, b int64) ivset {
	if a >= b {
		return s
	}
	var out ivset
	for _, iv := range s {
		switch {
		case iv[1] < a || iv[0] > b:
			out = append(out, iv)
		default:
			a, b = min(a, iv[0]), max(b, iv[1])
		}
	}
	out = append(out, [2]int64{a, b})
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func (s ivset) remove(a, b int64) ivset {
	if a >= b {
		return s
	}
	var out ivset
	for _, iv := range s {
		if iv[1] <= a || iv[0] >= b {
			out = append(out, iv)
			continue
		}
		if iv[0] < a {
			out = append(out, [2]int64{iv[0], a})
		}
		if iv[1] > b {
			out = append(out, [2]int64{b, iv[1]})
		}
	}
	return out
}

func (s ivset) count() int64 {
	var n int64
	for _, iv := range s {
		n += iv[1] - iv[0]
	}
	return n
}

// ---------------------------------------------------------------------------
// The run.

// mHandle is an open *ext4go.File and the model file it writes.
type mHandle struct {
	f        *ext4go.File
	o        *mObj
	path     string
	append   bool
	readable bool
	writable bool
}

type modelRun struct {
	t     *testing.T
	cfg   modelConfig
	seed  uint64
	rng   *rand.Rand
	image string
	fs    *ext4go.FS
	bs    int64

	root    *mObj
	dirs    []*mObj // every live directory, root first (dirIdx)
	nextID  int
	nameN   int
	handles []*mHandle

	inodes, inodeLimit int   // live inodes (incl. orphans) vs what the image has
	blocks, blockLimit int64 // file blocks mapped (model estimate) vs budget

	gran      time.Duration // timestamp granularity of the image
	t0, t1    time.Time     // around the last operation
	opN       int
	log       [40]string
	logN      int
	checks    int
	trace     io.Writer // every operation, with EXT4GO_MODEL_TRACE=file
	paranoid  bool      // compare the live tree after every operation (EXT4GO_MODEL_PARANOID=1)
	freeInit  [2]uint64 // free blocks and inodes of the fresh image
	rootBlks0 int64     // root directory's sectors in the fresh image
}

func newModelRun(t *testing.T, cfg modelConfig, seed uint64) *modelRun {
	r := &modelRun{t: t, cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), bs: int64(cfg.blockSize)}
	r.gran = 1
	if cfg.inode128 {
		r.gran = time.Second
	}
	r.image = filepath.Join(t.TempDir(), "model.img")
	r.paranoid = os.Getenv("EXT4GO_MODEL_PARANOID") != ""
	if p := os.Getenv("EXT4GO_MODEL_TRACE"); p != "" {
		f, err := os.Create(p + "." + cfg.name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		r.trace = f
	}
	fsType := cmp.Or(cfg.fsType, "ext4")
	args := append([]string{"-t", fsType, "-b", strconv.Itoa(cfg.blockSize)}, cfg.args...)
	testutil.Mke2fs(t, r.image, modelImageSize, args...)

	// The fresh image's root and free counts.
	ro, err := ext4go.Open(r.image, nil)
	if err != nil {
		t.Fatalf("open fresh image: %v", err)
	}
	info := ro.Info()
	r.freeInit = [2]uint64{info.FreeBlocks, uint64(info.FreeInodes)}
	r.inodeLimit = int(info.FreeInodes) - 4
	r.blockLimit = int64(info.FreeBlocks) * 35 / 100
	fi, err := ro.Lstat(".")
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*ext4go.Stat)
	r.rootBlks0 = st.Blocks
	r.root = &mObj{id: 0, kind: kDir, perm: uint32(st.Mode) & 0o7777, uid: st.UID, gid: st.GID,
		mtime: mTime{st.Mtime, st.Mtime}, xattrs: map[string][]byte{}, links: 1, kids: newNameSet()}
	r.nextID = 1
	r.dirs = []*mObj{r.root}
	lf := &mObj{id: r.nextID, kind: kDir, system: true, links: 1, kids: newNameSet(), parent: r.root, name: "lost+found", dirIdx: -1}
	r.nextID++
	r.root.kids.put("lost+found", lf)
	ro.Close()
	r.fs = r.openRW()
	t.Cleanup(func() {
		if r.fs != nil {
			r.fs.Close()
		}
	})
	return r
}

func (r *modelRun) openRW() *ext4go.FS {
	fsys, err := ext4go.Open(r.image, &ext4go.Options{Writable: true})
	if err != nil {
		r.fatalf("open writable: %v", err)
	}
	return fsys
}

// run applies n random operations, checking every every operations, then
// removes everything and checks once more.
func (r *modelRun) run(n, every int) {
	bigAt := -1
	if r.cfg.bigDir {
		bigAt = n / 2
	}
	for i := 0; i < n; i++ {
		if i == bigAt {
			r.bigDirPhase()
		}
		r.randomOp()
		if r.t.Failed() {
			return
		}
		if r.paranoid {
			r.compare(extView{r.fs})
		}
		if (i+1)%every == 0 && i+1 < n {
			r.checkpoint()
		}
	}
	r.teardown()
	r.checkpoint()
	r.checkEmpty()
}

func (r *modelRun) logOp(format string, args ...any) {
	r.opN++
	line := fmt.Sprintf("#%d %s", r.opN, fmt.Sprintf(format, args...))
	r.log[r.logN%len(r.log)] = line
	r.logN++
	if r.trace != nil {
		fmt.Fprintln(r.trace, line)
	}
}

func (r *modelRun) history() string {
	var b strings.Builder
	start := max(0, r.logN-30)
	for i := start; i < r.logN; i++ {
		b.WriteString("  " + r.log[i%len(r.log)] + "\n")
	}
	return b.String()
}

// fatalf fails the run with the seed and the last operations.
func (r *modelRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\n\nconfig %s, seed %d, after %d ops; reproduce with:\n  EXT4GO_SEED=%d go test -run 'TestModel/%s$' .\nlast operations:\n%s",
		fmt.Sprintf(format, args...), r.cfg.name, r.seed, r.opN, r.seed, r.cfg.name, r.history())
}

// errnoOf maps an error of the API to the errno it stands for (0 if none
// does).
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, fs.ErrPermission):
		return syscall.EPERM
	}
	return 0
}

func errName(e syscall.Errno) string {
	if e == 0 {
		return "ok"
	}
	return unix.ErrnoName(e)
}

// do runs one operation and checks its outcome against want, recording the
// time window it ran in. It reports whether the operation succeeded.
func (r *modelRun) do(want syscall.Errno, format string, args ...any) func(error) bool {
	r.logOp("%s -> want %s", fmt.Sprintf(format, args...), errName(want))
	r.t0 = time.Now().Round(0)
	return func(err error) bool {
		r.t.Helper()
		r.t1 = time.Now().Round(0)
		got := errnoOf(err)
		if err != nil && got == 0 {
			r.fatalf("%s: unexpected error %v (want %s)", r.log[(r.logN-1)%len(r.log)], err, errName(want))
		}
		if got != want {
			r.fatalf("%s: got %v (%s), want %s", r.log[(r.logN-1)%len(r.log)], err, errName(got), errName(want))
		}
		return err == nil
	}
}

// now is the time window of the last operation, at the image's granularity.
func (r *modelRun) now() mTime {
	return mTime{r.t0.Truncate(r.gran), r.t1}
}

// resolve walks name in the model as ext4go does: symlinks in the middle
// are followed, the last one when follow; absolute targets restart at the
// root and ".." stops there.
func (r *modelRun) resolve(name string, follow bool) (*mObj, syscall.Errno) {
	if name == "." {
		return r.root, 0
	}
	stack := []*mObj{r.root}
	rest := strings.Split(name, "/")
	hops := 0
	for len(rest) > 0 {
		elem := rest[0]
		rest = rest[1:]
		cur := stack[len(stack)-1]
		if elem == "" {
			continue
		}
		if cur.kind != kDir {
			return nil, syscall.ENOTDIR
		}
		switch elem {
		case ".":
			continue
		case "..":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			continue
		}
		next, ok := cur.kids.get(elem)
		if !ok {
			return nil, syscall.ENOENT
		}
		if next.kind == kSymlink && (len(rest) > 0 || follow) {
			if hops++; hops > 40 {
				return nil, syscall.ELOOP
			}
			if strings.HasPrefix(next.target, "/") {
				stack = stack[:1]
			}
			rest = append(strings.Split(next.target, "/"), rest...)
			continue
		}
		stack = append(stack, next)
	}
	return stack[len(stack)-1], 0
}

// parentOf resolves the directory that holds name.
func (r *modelRun) parentOf(name string) (*mObj, string, syscall.Errno) {
	base := path.Base(name)
	if len(base) > 255 {
		return nil, "", syscall.ENAMETOOLONG
	}
	d, e := r.resolve(path.Dir(name), true)
	if e != 0 {
		return nil, "", e
	}
	if d.kind != kDir {
		return nil, "", syscall.ENOTDIR
	}
	return d, base, 0
}

// newObj makes a model inode as ext4go's create does: owner 0:0, the group
// (and for directories the setgid bit) of a setgid parent.
func (r *modelRun) newObj(parent *mObj, kind mKind, perm uint32) *mObj {
	o := &mObj{id: r.nextID, kind: kind, perm: perm, xattrs: map[string][]byte{}, links: 1, mtime: r.now(), dirIdx: -1}
	r.nextID++
	if parent.perm&0o2000 != 0 {
		o.gid = parent.gid
		if kind == kDir {
			o.perm |= 0o2000
		}
	}
	switch kind {
	case kFile:
		o.data = map[int64][]byte{}
	case kDir:
		o.kids = newNameSet()
	}
	r.inodes++
	return o
}

// link adds name in dir for o.
func (r *modelRun) link(dir *mObj, name string, o *mObj) {
	dir.kids.put(name, o)
	if o.kind == kDir {
		o.parent, o.name = dir, name
		o.dirIdx = len(r.dirs)
		r.dirs = append(r.dirs, o)
	}
	dir.mtime = r.now()
}

// unlink removes name from dir, dropping a link of what it names.
func (r *modelRun) unlink(dir *mObj, name string) {
	o, _ := dir.kids.get(name)
	dir.kids.del(name)
	dir.mtime = r.now()
	if o.kind == kDir {
		last := r.dirs[len(r.dirs)-1]
		r.dirs[o.dirIdx] = last
		last.dirIdx = o.dirIdx
		r.dirs = r.dirs[:len(r.dirs)-1]
		o.dirIdx = -1
		o.links = 0
	} else {
		o.links--
	}
	r.maybeFree(o)
}

// maybeFree forgets an inode without links or open handles.
func (r *modelRun) maybeFree(o *mObj) {
	if o.links > 0 || o.opens > 0 {
		return
	}
	r.inodes--
	if o.kind == kFile {
		r.blocks -= o.alloc.count()
		o.alloc = nil
	}
}

// setAlloc records a change of o's mapped blocks.
func (r *modelRun) setAlloc(o *mObj, s ivset) {
	r.blocks += s.count() - o.alloc.count()
	o.alloc = s
}

// ---------------------------------------------------------------------------
// Checkpoints: close, e2fsck, compare three readers with the model, reopen.

func (r *modelRun) checkpoint() {
	r.t.Helper()
	r.checks++
	// Sometimes leave handles open: Close must then free the orphans.
	if r.rng.IntN(2) == 0 {
		r.closeAllHandles()
	}
	// A crash right after a Sync: the image as the device holds it then
	// (journal not checkpointed, orphans on their lists). Once replayed
	// and its orphans finished it must equal what Close leaves.
	var crashCopy string
	if r.cfg.fsType != "ext2" && r.rng.IntN(2) == 0 {
		if err := r.fs.Sync(); err != nil {
			r.fatalf("sync: %v", err)
		}
		b, err := os.ReadFile(r.image)
		if err != nil {
			r.fatal(err)
		}
		crashCopy = r.image + ".crash"
		if err := os.WriteFile(crashCopy, b, 0o644); err != nil {
			r.fatal(err)
		}
	}
	r.logOp("checkpoint %d: close", r.checks)
	if err := r.fs.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.fs = nil
	for _, h := range r.handles {
		h.o.opens--
		r.maybeFree(h.o)
	}
	r.handles = nil

	if exit, out := testutil.E2fsckFN(r.t, r.image); exit != 0 {
		r.fatalf("e2fsck -fn exit %d after checkpoint %d:\n%s", exit, r.checks, out)
	}
	if crashCopy != "" {
		w, err := ext4go.Open(crashCopy, &ext4go.Options{Writable: true})
		if err != nil {
			r.fatalf("open the crash copy of checkpoint %d: %v", r.checks, err)
		}
		if w.Replay() == nil {
			r.fatalf("the crash copy of checkpoint %d had no journal to replay", r.checks)
		}
		if err := w.Close(); err != nil {
			r.fatalf("close the crash copy: %v", err)
		}
		if exit, out := testutil.E2fsckFN(r.t, crashCopy); exit != 0 {
			r.fatalf("e2fsck -fn exit %d on the replayed crash copy of checkpoint %d:\n%s", exit, r.checks, out)
		}
		ro, err := ext4go.Open(crashCopy, nil)
		if err != nil {
			r.fatalf("reopen the crash copy: %v", err)
		}
		r.compare(extView{ro})
		ro.Close()
		os.Remove(crashCopy)
	}

	ro, err := ext4go.Open(r.image, nil)
	if err != nil {
		r.fatalf("reopen read-only: %v", err)
	}
	r.compare(extView{ro})
	ro.Close()

	r.compareRdump()
	if ok, _ := testutil.CanMount(); ok {
		r.t.Run(fmt.Sprintf("mount%d", r.checks), func(t *testing.T) {
			mp := testutil.Mount(t, r.image, true)
			r.compare(hostView{root: mp})
		})
		if r.t.Failed() {
			r.fatalf("the kernel's view differs from the model (see above)")
		}
	}
	r.fs = r.openRW()
}

func (r *modelRun) closeAllHandles() {
	for len(r.handles) > 0 {
		r.closeHandle(0)
	}
}

// checkEmpty verifies that after the teardown the image holds nothing but
// lost+found and its free counts are those of the fresh image (less what
// the root directory grew by).
func (r *modelRun) checkEmpty() {
	if r.t.Failed() {
		return
	}
	if err := r.fs.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.fs = nil
	ro, err := ext4go.Open(r.image, nil)
	if err != nil {
		r.fatalf("reopen: %v", err)
	}
	defer ro.Close()
	ents, err := ro.ReadDir(".")
	if err != nil || len(ents) != 1 || ents[0].Name() != "lost+found" {
		r.fatalf("after removing everything the root holds %v (%v)", ents, err)
	}
	fi, err := ro.Lstat(".")
	if err != nil {
		r.fatal(err)
	}
	grown := (fi.Sys().(*ext4go.Stat).Blocks - r.rootBlks0) * 512 / r.bs
	info := ro.Info()
	if uint64(info.FreeInodes) != r.freeInit[1] {
		r.fatalf("free inodes %d after removing everything, fresh image had %d", info.FreeInodes, r.freeInit[1])
	}
	if info.FreeBlocks+uint64(grown) != r.freeInit[0] {
		r.fatalf("free blocks %d (+%d grown root) after removing everything, fresh image had %d", info.FreeBlocks, grown, r.freeInit[0])
	}
}

func (r *modelRun) fatal(err error) { r.t.Helper(); r.fatalf("%v", err) }

// vInfo is what a reader shows of one entry.
type vInfo struct {
	kind         mKind
	perm         uint32
	uid, gid     uint32
	mtime        time.Time
	nlink        uint64
	ino          uint64
	size         int64
	major, minor uint32
	xattrs       map[string][]byte
}

// vCaps says what a reader keeps faithfully.
type vCaps struct {
	specialBits bool // setuid/setgid/sticky
	xattrs      bool
	links       bool // nlink and hard-link identity
	devices     bool // device nodes, fifos, sockets
	symlinkMeta bool // owner and mtime of symlinks
	secTimes    bool // whole seconds, low 32 bits unsigned (debugfs)
	holes       bool // file data ranges tell where data is
}

type view interface {
	caps() vCaps
	readDir(p string) ([]string, error)
	lstat(p string) (vInfo, error)
	readlink(p string) (string, error)
	open(p string) (vFile, error)
}

type vFile interface {
	io.ReaderAt
	ranges(size int64) ([][2]int64, error)
	Close() error
}

// extView is ext4go itself.
type extView struct{ fs *ext4go.FS }

func (v extView) caps() vCaps {
	return vCaps{specialBits: true, xattrs: true, links: true, devices: true, symlinkMeta: true, holes: true}
}

func (v extView) readDir(p string) ([]string, error) {
	ents, err := v.fs.ReadDir(p)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

func (v extView) lstat(p string) (vInfo, error) {
	fi, err := v.fs.Lstat(p)
	if err != nil {
		return vInfo{}, err
	}
	st := fi.Sys().(*ext4go.Stat)
	k, ok := kindOfMode(uint32(st.Mode))
	if !ok {
		return vInfo{}, fmt.Errorf("mode %#o", st.Mode)
	}
	x, err := st.Xattrs()
	if err != nil {
		return vInfo{}, err
	}
	return vInfo{kind: k, perm: uint32(st.Mode) & 0o7777, uid: st.UID, gid: st.GID, mtime: st.Mtime,
		nlink: uint64(st.Nlink), ino: uint64(st.Ino), size: st.Size, major: st.Major(), minor: st.Minor(), xattrs: x}, nil
}

func (v extView) readlink(p string) (string, error) { return v.fs.ReadLink(p) }

func (v extView) open(p string) (vFile, error) {
	f, err := v.fs.Open(p)
	if err != nil {
		return nil, err
	}
	return extFile{f.(*ext4go.File)}, nil
}

type extFile struct{ *ext4go.File }

func (f extFile) ranges(int64) ([][2]int64, error) {
	rs, err := f.DataRanges()
	var out [][2]int64
	for _, r := range rs {
		out = append(out, [2]int64{r.Off, r.Off + r.Len})
	}
	return out, err
}

// hostView is a directory of the host: a kernel mount, or rdump output.
type hostView struct {
	root  string
	rdump bool
}

func (v hostView) caps() vCaps {
	if v.rdump {
		return vCaps{secTimes: true}
	}
	return vCaps{specialBits: true, xattrs: true, links: true, devices: true, symlinkMeta: true, holes: true}
}

func (v hostView) host(p string) string {
	if p == "." {
		return v.root
	}
	return filepath.Join(v.root, p)
}

func (v hostView) readDir(p string) ([]string, error) {
	ents, err := os.ReadDir(v.host(p))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, err
}

func (v hostView) lstat(p string) (vInfo, error) {
	hp := v.host(p)
	fi, err := os.Lstat(hp)
	if err != nil {
		return vInfo{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	k, ok := kindOfMode(st.Mode)
	if !ok {
		return vInfo{}, fmt.Errorf("mode %#o", st.Mode)
	}
	// The times through statx: struct stat cuts them past 2038 on
	// 32-bit platforms.
	_, mtime, err := testutil.HostTimes(hp)
	if err != nil {
		return vInfo{}, err
	}
	in := vInfo{kind: k, perm: st.Mode & 0o7777, uid: st.Uid, gid: st.Gid, mtime: mtime,
		nlink: uint64(st.Nlink), ino: st.Ino, size: st.Size, major: unix.Major(st.Rdev), minor: unix.Minor(st.Rdev)}
	if !v.rdump {
		m, err := testutil.HostMeta(hp)
		if err != nil {
			return vInfo{}, err
		}
		in.xattrs = m.Xattrs
	}
	return in, nil
}

func (v hostView) readlink(p string) (string, error) { return os.Readlink(v.host(p)) }

func (v hostView) open(p string) (vFile, error) {
	f, err := os.Open(v.host(p))
	if err != nil {
		return nil, err
	}
	return hostFile{f, !v.rdump}, nil
}

type hostFile struct {
	*os.File
	seek bool
}

// ranges finds the data with SEEK_DATA/SEEK_HOLE.
func (f hostFile) ranges(size int64) ([][2]int64, error) {
	if !f.seek {
		return [][2]int64{{0, size}}, nil
	}
	var out [][2]int64
	for off := int64(0); off < size; {
		d, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break
		}
		if err != nil {
			return nil, err
		}
		h, err := unix.Seek(int(f.Fd()), d, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		out = append(out, [2]int64{d, h})
		off = h
	}
	return out, nil
}

// comparer collects differences between a view and the model.
type comparer struct {
	r     *modelRun
	v     view
	caps  vCaps
	diffs []string
	inoOf map[*mObj]uint64
	objOf map[uint64]*mObj
}

func (c *comparer) add(p, format string, args ...any) {
	if len(c.diffs) < 40 {
		c.diffs = append(c.diffs, p+": "+fmt.Sprintf(format, args...))
	}
}

// compare checks that the whole tree seen through v is the model.
func (r *modelRun) compare(v view) {
	r.t.Helper()
	c := &comparer{r: r, v: v, caps: v.caps(), inoOf: map[*mObj]uint64{}, objOf: map[uint64]*mObj{}}
	c.entry(".", r.root)
	c.dir(".", r.root)
	if len(c.diffs) > 0 {
		r.fatalf("%T differs from the model after checkpoint %d:\n  %s", v, r.checks, strings.Join(c.diffs, "\n  "))
	}
}

// dir compares the entries of model directory d, seen at p.
func (c *comparer) dir(p string, d *mObj) {
	names, err := c.v.readDir(p)
	if err != nil {
		c.add(p, "readdir: %v", err)
		return
	}
	got := map[string]bool{}
	for _, n := range names {
		got[n] = true
	}
	want := append([]string(nil), d.kids.names...)
	sort.Strings(want)
	for _, n := range want {
		o := d.kids.objs[n]
		cp := joinPath(p, n)
		if o.system {
			continue
		}
		if !got[n] {
			if !c.caps.devices && o.kind >= kFifo {
				continue
			}
			c.add(cp, "missing (a %s in the model)", o.kind)
			continue
		}
		delete(got, n)
		if !c.entry(cp, o) {
			continue
		}
		if o.kind == kDir {
			c.dir(cp, o)
		}
	}
	for n := range got {
		if p == "." && n == "lost+found" {
			continue
		}
		c.add(joinPath(p, n), "not in the model")
	}
}

// entry compares one entry; it reports whether the types agree.
func (c *comparer) entry(p string, o *mObj) bool {
	in, err := c.v.lstat(p)
	if err != nil {
		c.add(p, "lstat: %v", err)
		return false
	}
	if in.kind != o.kind {
		c.add(p, "is a %s, model has a %s", in.kind, o.kind)
		return false
	}
	permMask := uint32(0o7777)
	if !c.caps.specialBits {
		permMask = 0o777
	}
	meta := o.kind != kSymlink || c.caps.symlinkMeta
	if o.kind != kSymlink && in.perm&permMask != o.perm&permMask {
		c.add(p, "mode %#o, want %#o", in.perm&permMask, o.perm&permMask)
	}
	if meta && (in.uid != o.uid || in.gid != o.gid) {
		c.add(p, "owner %d:%d, want %d:%d", in.uid, in.gid, o.uid, o.gid)
	}
	if meta && p != "." {
		c.mtime(p, in.mtime, o.mtime)
	}
	if c.caps.links {
		if in.nlink != uint64(o.nlink()) {
			c.add(p, "nlink %d, want %d", in.nlink, o.nlink())
		}
		if prev, ok := c.inoOf[o]; ok && prev != in.ino {
			c.add(p, "inode %d, but the same model file was seen as inode %d", in.ino, prev)
		}
		if prev, ok := c.objOf[in.ino]; ok && prev != o {
			c.add(p, "inode %d is also a different model file (id %d vs %d)", in.ino, prev.id, o.id)
		}
		c.inoOf[o], c.objOf[in.ino] = in.ino, o
	}
	if c.caps.xattrs {
		c.xattrs(p, in.xattrs, o.xattrs)
	}
	switch o.kind {
	case kFile:
		if in.size != o.size {
			c.add(p, "size %d, want %d", in.size, o.size)
			return true
		}
		c.content(p, o)
	case kSymlink:
		t, err := c.v.readlink(p)
		if err != nil {
			c.add(p, "readlink: %v", err)
		} else if t != o.target {
			c.add(p, "symlink target %q, want %q", trunc(t), trunc(o.target))
		}
	case kChr, kBlk:
		if in.major != o.major || in.minor != o.minor {
			c.add(p, "device %d:%d, want %d:%d", in.major, in.minor, o.major, o.minor)
		}
	}
	return true
}

func trunc(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s...(%d bytes)", s[:80], len(s))
	}
	return s
}

func (c *comparer) mtime(p string, got time.Time, want mTime) {
	if c.caps.secTimes {
		lo, hi := want.lo.Unix(), want.hi.Unix()
		if lo < 0 || hi >= 1<<32 {
			return // debugfs reads the low 32 bits as unsigned
		}
		if s := got.Unix(); s < lo || s > hi {
			c.add(p, "mtime %d, want %d..%d", s, lo, hi)
		}
		return
	}
	if got.Before(want.lo) || got.After(want.hi) {
		if want.lo.Equal(want.hi) {
			c.add(p, "mtime %s, want %s", got.UTC().Format(time.RFC3339Nano), want.lo.UTC().Format(time.RFC3339Nano))
		} else {
			c.add(p, "mtime %s, want between %s and %s", got.UTC().Format(time.RFC3339Nano),
				want.lo.UTC().Format(time.RFC3339Nano), want.hi.UTC().Format(time.RFC3339Nano))
		}
	}
}

func (c *comparer) xattrs(p string, got, want map[string][]byte) {
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			c.add(p, "xattr %s missing", k)
		} else if !bytes.Equal(g, w) {
			c.add(p, "xattr %s = %d bytes %x..., want %d bytes %x...", k, len(g), g[:min(len(g), 16)], len(w), w[:min(len(w), 16)])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			c.add(p, "xattr %s not in the model", k)
		}
	}
}

// content compares a file's bytes wherever either side may hold data.
func (c *comparer) content(p string, o *mObj) {
	f, err := c.v.open(p)
	if err != nil {
		c.add(p, "open: %v", err)
		return
	}
	defer f.Close()
	rs, err := f.ranges(o.size)
	if err != nil {
		c.add(p, "data ranges: %v", err)
		return
	}
	if err := compareContent(o, f, rs); err != nil {
		c.add(p, "%v", err)
	}
}

// compareContent reads the union of rs and the model's data ranges from f
// and compares it with the model; elsewhere both sides read zeros.
func compareContent(o *mObj, f io.ReaderAt, rs [][2]int64) error {
	all := append(append([][2]int64(nil), rs...), o.dataRanges()...)
	sort.Slice(all, func(i, j int) bool { return all[i][0] < all[j][0] })
	bufLen := int64(0)
	for _, rg := range all {
		bufLen = max(bufLen, min(rg[1], o.size)-rg[0])
	}
	bufLen = min(bufLen, 1<<20)
	got := make([]byte, bufLen)
	want := make([]byte, bufLen)
	end := int64(-1)
	for _, rg := range all {
		a, b := max(rg[0], end), min(rg[1], o.size)
		for a < b {
			n := min(b-a, int64(len(got)))
			m, err := f.ReadAt(got[:n], a)
			if int64(m) != n {
				return fmt.Errorf("read %d bytes at %d: got %d, %v", n, a, m, err)
			}
			o.read(a, want[:n])
			if !bytes.Equal(got[:n], want[:n]) {
				i := 0
				for got[i] == want[i] {
					i++
				}
				return fmt.Errorf("content differs at byte %d: %x..., want %x...", a+int64(i), got[i:min(int(n), i+8)], want[i:min(int(n), i+8)])
			}
			a += n
		}
		end = max(end, rg[1])
	}
	return nil
}

// compareRdump dumps every subtree whose files are small enough with
// debugfs rdump (which writes holes as zeros) and compares it.
func (r *modelRun) compareRdump() {
	r.t.Helper()
	const limit = 24 << 20
	var roots []*mObj
	var pick func(d *mObj)
	pick = func(d *mObj) {
		if apparent(d) <= limit {
			roots = append(roots, d)
			return
		}
		for _, n := range d.kids.names {
			if o := d.kids.objs[n]; o.kind == kDir && !o.system {
				pick(o)
			}
		}
	}
	pick(r.root)
	if len(roots) == 0 {
		return
	}
	dest := r.t.TempDir()
	var req strings.Builder
	for i, d := range roots {
		p := "/" + d.path()
		if d == r.root {
			p = "/"
		}
		q, ok := testutil.DebugfsQuote(p)
		dq, ok2 := testutil.DebugfsQuote(filepath.Join(dest, strconv.Itoa(i)))
		if !ok || !ok2 {
			continue
		}
		os.Mkdir(filepath.Join(dest, strconv.Itoa(i)), 0o755)
		fmt.Fprintf(&req, "rdump %s %s\n", q, dq)
	}
	cmdFile := filepath.Join(dest, "cmds")
	if err := os.WriteFile(cmdFile, []byte(req.String()), 0o644); err != nil {
		r.fatal(err)
	}
	debugfs, err := exec.LookPath("debugfs")
	if err != nil {
		debugfs = "/usr/sbin/debugfs"
	}
	out, err := exec.Command(debugfs, "-f", cmdFile, r.image).CombinedOutput()
	if err != nil {
		r.fatalf("debugfs rdump: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "rdump:") || strings.Contains(line, "dump_file:") || strings.Contains(line, "rdump_inode") {
			r.fatalf("debugfs rdump reported: %s", line)
		}
	}
	for i, d := range roots {
		vroot := filepath.Join(dest, strconv.Itoa(i))
		if d != r.root {
			vroot = filepath.Join(vroot, d.name)
		}
		c := &comparer{r: r, v: hostView{root: vroot, rdump: true}, caps: hostView{rdump: true}.caps()}
		if d != r.root {
			c.entry(".", d)
		}
		c.dir(".", d)
		if len(c.diffs) > 0 {
			r.fatalf("debugfs rdump of %s differs from the model after checkpoint %d:\n  %s", d.path(), r.checks, strings.Join(c.diffs, "\n  "))
		}
	}
	os.RemoveAll(dest)
}

// apparent sums the sizes of the files under d, each name counted (rdump
// writes every hard link out in full).
func apparent(d *mObj) int64 {
	var n int64
	for _, name := range d.kids.names {
		switch o := d.kids.objs[name]; o.kind {
		case kFile:
			n += o.size
		case kDir:
			n += apparent(o)
		}
	}
	return n
}

// ---------------------------------------------------------------------------
// Operations.

var modelOps = []struct {
	weight int
	fn     func(*modelRun)
}{
	{10, (*modelRun).opCreate},
	{14, (*modelRun).opWrite},
	{4, (*modelRun).opReadCheck},
	{5, (*modelRun).opTruncate},
	{7, (*modelRun).opFallocate},
	{5, (*modelRun).opMkdir},
	{1, (*modelRun).opMkdirAll},
	{9, (*modelRun).opRename},
	{3, (*modelRun).opLink},
	{4, (*modelRun).opSymlink},
	{1, (*modelRun).opMknod},
	{8, (*modelRun).opRemove},
	{2, (*modelRun).opChmod},
	{2, (*modelRun).opChown},
	{2, (*modelRun).opChtimes},
	{6, (*modelRun).opSetXattr},
	{3, (*modelRun).opRemoveXattr},
	{1, (*modelRun).opSharedXattrs},
	{2, (*modelRun).opOpenHandle},
	{3, (*modelRun).opHandleIO},
	{2, (*modelRun).opCloseHandle},
	{3, (*modelRun).opStatCheck},
	{1, (*modelRun).opSync},
}

func (r *modelRun) randomOp() {
	total := 0
	for _, o := range modelOps {
		total += o.weight
	}
	x := r.rng.IntN(total)
	for _, o := range modelOps {
		if x < o.weight {
			o.fn(r)
			return
		}
		x -= o.weight
	}
}

func isFile(o *mObj) bool { return o.kind == kFile }

// pickEntry returns a random entry (its directory, name and object)
// satisfying ok.
func (r *modelRun) pickEntry(ok func(*mObj) bool) (*mObj, string, *mObj, bool) {
	for try := 0; try < 40; try++ {
		d := r.dirs[r.rng.IntN(len(r.dirs))]
		if d.kids.len() == 0 {
			continue
		}
		name := d.kids.names[r.rng.IntN(d.kids.len())]
		o := d.kids.objs[name]
		if o.system || (ok != nil && !ok(o)) {
			continue
		}
		return d, name, o, true
	}
	return nil, "", nil, false
}

func (r *modelRun) randomDir() *mObj { return r.dirs[r.rng.IntN(len(r.dirs))] }

// newName returns a name not used before in this run, of varied shapes.
func (r *modelRun) newName() string {
	r.nameN++
	n := r.nameN
	switch x := r.rng.IntN(100); {
	case x < 78:
		return fmt.Sprintf("n%d", n)
	case x < 83:
		return fmt.Sprintf("with space %d", n)
	case x < 88:
		return fmt.Sprintf("ütf8-é-%d", n)
	case x < 91:
		s := fmt.Sprintf("long%d-", n)
		return s + strings.Repeat("x", 200+r.rng.IntN(56)-len(s))
	case x < 95:
		return fmt.Sprintf(".dot%d", n)
	default:
		return fmt.Sprintf("-dash%d", n)
	}
}

// targetPath returns a path for a create-like operation: mostly a new name
// in an existing directory, sometimes a name that exists, one reached
// through a symlink, one below a non-directory or below a missing
// directory, or a name that is too long.
func (r *modelRun) targetPath() string {
	x := r.rng.IntN(100)
	switch {
	case x < 80:
	case x < 88:
		if d, name, _, ok := r.pickEntry(nil); ok {
			return joinPath(d.path(), name)
		}
	case x < 92:
		if d, name, _, ok := r.pickEntry(func(o *mObj) bool { return o.kind == kSymlink }); ok {
			return joinPath(joinPath(d.path(), name), r.newName())
		}
	case x < 95:
		if d, name, _, ok := r.pickEntry(func(o *mObj) bool { return o.kind != kDir }); ok {
			return joinPath(joinPath(d.path(), name), r.newName())
		}
	case x < 98:
		return joinPath(joinPath(r.randomDir().path(), "missing"+strconv.Itoa(r.nameN)), r.newName())
	default:
		return joinPath(r.randomDir().path(), strings.Repeat("L", 256))
	}
	d := r.randomDir()
	if len(d.path()) > 2800 {
		d = r.root
	}
	return joinPath(d.path(), r.newName())
}

// entryPath returns the path of a random entry satisfying ok.
func (r *modelRun) entryPath(ok func(*mObj) bool) (string, bool) {
	d, name, _, found := r.pickEntry(ok)
	if !found {
		return "", false
	}
	return joinPath(d.path(), name), true
}

func goPerm(p uint32) fs.FileMode {
	m := fs.FileMode(p & 0o777)
	if p&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if p&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if p&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// randPerm returns permission bits, with special bits now and then.
func (r *modelRun) randPerm(dir bool) uint32 {
	common := []uint32{0o644, 0o600, 0o755, 0o700, 0o444, 0o000, 0o777, 0o640}
	p := common[r.rng.IntN(len(common))]
	if r.rng.IntN(8) == 0 {
		p = uint32(r.rng.IntN(0o1000))
	}
	if r.rng.IntN(10) == 0 {
		if dir {
			p |= 0o1000 // mkdir keeps only the sticky bit
		} else {
			p |= uint32(r.rng.IntN(8)) << 9
		}
	}
	return p
}

func (r *modelRun) genData(n int) []byte {
	p := make([]byte, n)
	switch r.rng.IntN(12) {
	case 0: // zeros: written blocks that read as zeros
	case 1:
		b := byte(r.rng.IntN(255) + 1)
		for i := range p {
			p[i] = b
		}
	default:
		for i := 0; i < n; i += 8 {
			v := r.rng.Uint64()
			for j := 0; j < 8 && i+j < n; j++ {
				p[i+j] = byte(v >> (8 * j))
			}
		}
	}
	return p
}

// blocksOf is the fs blocks [a, b) covering bytes [off, end).
func (r *modelRun) blocksOf(off, end int64) (int64, int64) {
	return off / r.bs, (end + r.bs - 1) / r.bs
}

// maxFileSize is ext4's limit for extent-mapped files: 2^32-1 blocks.
func (r *modelRun) maxFileSize() int64 { return (1<<32 - 1) * r.bs }

// applyWrite records a successful write of p at off to o.
func (r *modelRun) applyWrite(o *mObj, off int64, p []byte) {
	if len(p) == 0 {
		return
	}
	end := off + int64(len(p))
	o.write(off, p)
	o.size = max(o.size, end)
	a, b := r.blocksOf(off, end)
	r.setAlloc(o, o.alloc.add(a, b))
	o.mtime = r.now()
}

// applyTruncate records a successful truncate of o to size.
func (r *modelRun) applyTruncate(o *mObj, size int64) {
	if size < o.size {
		o.zero(size, o.size)
		a, _ := r.blocksOf(size, size)
		r.setAlloc(o, o.alloc.remove(a, 1<<62))
	}
	o.size = size
	o.mtime = r.now()
}

// genWrite picks where and how much to write to o, within the space budget.
func (r *modelRun) genWrite(o *mObj) (int64, int) {
	var off int64
	var n int
	switch x := r.rng.IntN(100); {
	case x < 30:
		off, n = r.rng.Int64N(o.size+1), 1+r.rng.IntN(8192)
	case x < 45:
		off, n = o.size, 1+r.rng.IntN(16384)
	case x < 68:
		off, n = r.rng.Int64N(4<<20), 1+r.rng.IntN(65536)
	case x < 80:
		off, n = r.rng.Int64N(1<<20), 65536+r.rng.IntN(1<<20)
	case x < 83:
		off, n = r.rng.Int64N(8<<20), 1<<20+r.rng.IntN(3<<20)
	case x < 93: // far and sparse
		off, n = 1<<30+r.rng.Int64N(5<<30), 1+r.rng.IntN(16384)
	default: // across a block boundary
		off = (1+r.rng.Int64N(64))*r.bs - 1 - r.rng.Int64N(16)
		n = 2 + r.rng.IntN(64)
	}
	a, b := r.blocksOf(off, off+int64(n))
	if r.blocks+(b-a) > r.blockLimit {
		off, n = r.rng.Int64N(o.size+1), 1+r.rng.IntN(512)
		if r.blocks+2 > r.blockLimit {
			return 0, 0
		}
	}
	return off, n
}

// openFile opens model file o by path p (following symlinks) with ext4go,
// which must succeed.
func (r *modelRun) openFile(p string, flag int, o *mObj) (*mHandle, bool) {
	check := r.do(0, "open %q flag %#x", p, flag)
	f, err := r.fs.OpenFile(p, flag, 0)
	if !check(err) {
		return nil, false
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	o.opens++
	return &mHandle{f: f, o: o, path: p, append: flag&os.O_APPEND != 0,
		readable: acc != os.O_WRONLY, writable: acc != os.O_RDONLY}, true
}

func (r *modelRun) closeH(h *mHandle) {
	check := r.do(0, "close %q", h.path)
	if !check(h.f.Close()) {
		return
	}
	h.o.opens--
	r.maybeFree(h.o)
}

// keepOrClose keeps a handle open for later operations now and then.
func (r *modelRun) keepOrClose(h *mHandle) {
	if len(r.handles) < 6 && r.rng.IntN(8) == 0 {
		r.handles = append(r.handles, h)
		return
	}
	r.closeH(h)
}

// filePath picks a regular file, sometimes by a symlink to it.
func (r *modelRun) filePath() (string, *mObj, bool) {
	if r.rng.IntN(10) == 0 {
		if p, ok := r.entryPath(func(o *mObj) bool { return o.kind == kSymlink }); ok {
			if o, e := r.resolve(p, true); e == 0 && o.kind == kFile {
				return p, o, true
			}
		}
	}
	d, name, o, ok := r.pickEntry(isFile)
	if !ok {
		return "", nil, false
	}
	return joinPath(d.path(), name), o, true
}

func (r *modelRun) opCreate() {
	p := r.targetPath()
	excl := r.rng.IntN(2) == 0
	perm := r.randPerm(false)
	d, base, want := r.parentOf(p)
	var existing *mObj
	if want == 0 {
		existing, _ = d.kids.get(base)
		switch {
		case existing == nil:
			if r.inodes >= r.inodeLimit {
				return
			}
		case existing.system:
			return
		case excl:
			want = syscall.EEXIST
		case existing.kind == kDir:
			want = syscall.EISDIR
		case existing.kind != kFile:
			return // creating through a symlink, opening devices: not modelled
		}
	}
	flag := os.O_RDWR | os.O_CREATE
	if excl {
		flag |= os.O_EXCL
	} else {
		flag |= os.O_TRUNC
	}
	check := r.do(want, "create %q flag %#x perm %#o", p, flag, perm)
	f, err := r.fs.OpenFile(p, flag, goPerm(perm))
	if !check(err) {
		return
	}
	o := existing
	if o != nil {
		r.applyTruncate(o, 0)
	} else {
		o = r.newObj(d, kFile, perm)
		r.link(d, base, o)
	}
	o.opens++
	h := &mHandle{f: f, o: o, path: p, readable: true, writable: true}
	if r.rng.IntN(3) > 0 {
		off, n := r.genWrite(o)
		if r.rng.IntN(2) == 0 {
			off = 0
		}
		data := r.genData(n)
		check := r.do(0, "writeat %q off %d len %d", p, off, n)
		_, err := f.WriteAt(data, off)
		if check(err) {
			r.applyWrite(o, off, data)
		}
	}
	r.keepOrClose(h)
}

func (r *modelRun) opWrite() {
	p, o, ok := r.filePath()
	if !ok {
		return
	}
	flag := os.O_RDWR
	app := r.rng.IntN(5) == 0
	if app {
		flag = os.O_WRONLY | os.O_APPEND
	}
	h, ok := r.openFile(p, flag, o)
	if !ok {
		return
	}
	r.handleWrite(h)
	r.keepOrClose(h)
}

// handleWrite writes through h as the model predicts.
func (r *modelRun) handleWrite(h *mHandle) {
	o := h.o
	off, n := r.genWrite(o)
	if n == 0 {
		return
	}
	data := r.genData(n)
	switch {
	case !h.writable:
		check := r.do(syscall.EBADF, "write %q on a read-only handle", h.path)
		_, err := h.f.WriteAt(data, off)
		check(err)
		return
	case !h.append && r.rng.IntN(40) == 0: // past the largest file
		check := r.do(syscall.EFBIG, "writeat %q off %d (past the maximum size)", h.path, r.maxFileSize())
		_, err := h.f.WriteAt(data, r.maxFileSize())
		check(err)
		return
	}
	if h.append {
		if r.rng.IntN(10) == 0 {
			check := r.do(syscall.EINVAL, "writeat %q on an O_APPEND handle", h.path)
			_, err := h.f.WriteAt(data, 0)
			check(err)
			return
		}
		if r.blocks+int64(n)/r.bs+2 > r.blockLimit {
			return
		}
		check := r.do(0, "append %q len %d (size %d)", h.path, n, o.size)
		m, err := h.f.Write(data)
		if check(err) {
			if m != n {
				r.fatalf("append wrote %d of %d bytes", m, n)
			}
			r.applyWrite(o, o.size, data)
		}
		return
	}
	check := r.do(0, "writeat %q off %d len %d (size %d)", h.path, off, n, o.size)
	m, err := h.f.WriteAt(data, off)
	if check(err) {
		if m != n {
			r.fatalf("writeat wrote %d of %d bytes", m, n)
		}
		r.applyWrite(o, off, data)
	}
}

// handleRead reads a random range through h and compares it.
func (r *modelRun) handleRead(h *mHandle) {
	o := h.o
	off := r.rng.Int64N(o.size + 2)
	if rs := o.dataRanges(); len(rs) > 0 && r.rng.IntN(2) == 0 {
		rg := rs[r.rng.IntN(len(rs))]
		off = rg[0] + r.rng.Int64N(rg[1]-rg[0])
	}
	n := 1 + r.rng.IntN(70000)
	buf := make([]byte, n)
	r.logOp("readat %q off %d len %d (size %d)", h.path, off, n, o.size)
	m, err := h.f.ReadAt(buf, off)
	want := int(max(0, min(int64(n), o.size-off)))
	if m != want || (m < n && err != io.EOF) || (m == n && err != nil) {
		r.fatalf("readat %q off %d len %d: got %d, %v; want %d bytes (size %d)", h.path, off, n, m, err, want, o.size)
	}
	exp := make([]byte, m)
	o.read(off, exp)
	if !bytes.Equal(buf[:m], exp) {
		i := 0
		for buf[i] == exp[i] {
			i++
		}
		r.fatalf("readat %q off %d: byte %d differs: %x..., want %x...", h.path, off, off+int64(i), buf[i:min(m, i+8)], exp[i:min(m, i+8)])
	}
}

func (r *modelRun) opReadCheck() {
	p, o, ok := r.filePath()
	if !ok {
		return
	}
	h, ok := r.openFile(p, os.O_RDONLY, o)
	if !ok {
		return
	}
	r.handleRead(h)
	if o.size < 1<<20 && r.rng.IntN(3) == 0 {
		r.logOp("readfile %q", p)
		b, err := r.fs.ReadFile(p)
		if err != nil {
			r.fatalf("readfile %q: %v", p, err)
		}
		exp := make([]byte, o.size)
		o.read(0, exp)
		if !bytes.Equal(b, exp) {
			r.fatalf("readfile %q: %d bytes differ from the model's %d", p, len(b), len(exp))
		}
	}
	r.closeH(h)
}

func (r *modelRun) opTruncate() {
	p, o, ok := r.filePath()
	if !ok {
		return
	}
	var size int64
	var want syscall.Errno
	switch x := r.rng.IntN(100); {
	case x < 15:
	case x < 50:
		size = r.rng.Int64N(o.size + 1)
	case x < 75:
		size = o.size + r.rng.Int64N(1<<20)
	case x < 87:
		size = 1<<30 + r.rng.Int64N(5<<30)
	case x < 94:
		size = o.size
	case x < 97:
		size, want = -1-r.rng.Int64N(100), syscall.EINVAL
	default:
		size, want = r.maxFileSize()+1+r.rng.Int64N(1<<20), syscall.EFBIG
	}
	h, ok := r.openFile(p, os.O_RDWR, o)
	if !ok {
		return
	}
	check := r.do(want, "truncate %q %d (size %d)", p, size, o.size)
	if check(h.f.Truncate(size)) {
		r.applyTruncate(o, size)
	}
	r.keepOrClose(h)
}

func (r *modelRun) opFallocate() {
	p, o, ok := r.filePath()
	if !ok {
		return
	}
	var off, n int64
	switch x := r.rng.IntN(10); {
	case x < 6:
		off, n = r.rng.Int64N(o.size+r.bs), 1+r.rng.Int64N(256<<10)
	case x < 8:
		off, n = r.rng.Int64N(4<<20), 1+r.rng.Int64N(2<<20)
	default:
		off, n = 1<<30+r.rng.Int64N(5<<30), 1+r.rng.Int64N(64<<10)
	}
	modes := []int{0, ext4go.FallocKeepSize, ext4go.FallocPunchHole | ext4go.FallocKeepSize,
		ext4go.FallocPunchHole | ext4go.FallocKeepSize, ext4go.FallocZeroRange, ext4go.FallocZeroRange | ext4go.FallocKeepSize}
	mode := modes[r.rng.IntN(len(modes))]
	var want syscall.Errno
	switch r.rng.IntN(30) {
	case 0:
		mode, want = ext4go.FallocPunchHole, syscall.EOPNOTSUPP // as Linux: punch needs KEEP_SIZE
	case 1:
		n, want = 0, syscall.EINVAL
	case 2:
		off, want = -1, syscall.EINVAL
	case 3:
		off, want = r.maxFileSize(), syscall.EFBIG
	}
	end := off + n
	if want == 0 && r.cfg.blockMap && mode&ext4go.FallocPunchHole == 0 {
		want = syscall.EOPNOTSUPP // as Linux: preallocation needs extents
	}
	if want == 0 && mode&ext4go.FallocPunchHole == 0 {
		a, b := r.blocksOf(off, end)
		if r.blocks+(b-a) > r.blockLimit {
			return
		}
	}
	h, ok := r.openFile(p, os.O_RDWR, o)
	if !ok {
		return
	}
	check := r.do(want, "fallocate %q mode %#x off %d len %d (size %d)", p, mode, off, n, o.size)
	if check(h.f.Fallocate(mode, off, n)) {
		switch {
		case mode&ext4go.FallocPunchHole != 0:
			e := min(end, o.size)
			if off < e {
				o.zero(off, e)
				r.setAlloc(o, o.alloc.remove((off+r.bs-1)/r.bs, e/r.bs))
				o.mtime = r.now()
			}
		default:
			if mode&ext4go.FallocZeroRange != 0 {
				o.zero(off, end)
			}
			// Every allocating mode moves mtime, as the kernel's
			// ext4_fallocate does (TestFallocateTimesMatchKernel).
			o.mtime = r.now()
			if mode&ext4go.FallocKeepSize == 0 {
				o.size = max(o.size, end)
			}
			a, b := r.blocksOf(off, end)
			r.setAlloc(o, o.alloc.add(a, b))
		}
	}
	r.keepOrClose(h)
}

// createCheck predicts a create-like operation at p: the parent's errors,
// then EEXIST, else room for another inode. ok is false when the operation
// should not be tried.
func (r *modelRun) createCheck(p string) (d *mObj, base string, want syscall.Errno, ok bool) {
	d, base, want = r.parentOf(p)
	if want != 0 {
		return d, base, want, true
	}
	if o, exists := d.kids.get(base); exists {
		return d, base, syscall.EEXIST, !o.system
	}
	return d, base, 0, r.inodes < r.inodeLimit
}

func (r *modelRun) opMkdir() {
	p := r.targetPath()
	perm := r.randPerm(true)
	d, base, want, ok := r.createCheck(p)
	if !ok {
		return
	}
	check := r.do(want, "mkdir %q %#o", p, perm)
	if check(r.fs.Mkdir(p, goPerm(perm))) {
		r.link(d, base, r.newObj(d, kDir, perm))
	}
}

func (r *modelRun) opMkdirAll() {
	d := r.randomDir()
	depth := 2 + r.rng.IntN(25)
	if len(d.path())+depth*12 > 2800 || r.inodes+depth > r.inodeLimit {
		return
	}
	p := d.path()
	var names []string
	for i := 0; i < depth; i++ {
		r.nameN++
		names = append(names, "deep"+strconv.Itoa(r.nameN))
		p = joinPath(p, names[i])
	}
	perm := r.randPerm(true) | 0o700
	check := r.do(0, "mkdirall %q %#o", p, perm)
	if check(r.fs.MkdirAll(p, goPerm(perm))) {
		for _, n := range names {
			c := r.newObj(d, kDir, perm)
			r.link(d, n, c)
			d = c
		}
	}
}

// subtreePathLen is the longest path below directory o, relative to o.
func subtreePathLen(o *mObj) int {
	if o.kind != kDir {
		return 0
	}
	m := 0
	for _, n := range o.kids.names {
		m = max(m, 1+len(n)+subtreePathLen(o.kids.objs[n]))
	}
	return m
}

func (r *modelRun) opRename() {
	sd, sname, src, ok := r.pickEntry(nil)
	if !ok {
		return
	}
	srcPath := joinPath(sd.path(), sname)
	var dstPath string
	switch x := r.rng.IntN(100); {
	case x < 40:
		dstPath = r.targetPath()
	case x < 70:
		dstPath, _ = r.entryPath(nil)
	case x < 82: // same kind in the same directory
		if n := sd.kids.names[r.rng.IntN(sd.kids.len())]; !sd.kids.objs[n].system && sd.kids.objs[n].kind == src.kind {
			dstPath = joinPath(sd.path(), n)
		}
	case x < 88: // into its own subtree
		if src.kind == kDir {
			for _, d := range r.dirs {
				if src.isAncestorOf(d) && r.rng.IntN(3) == 0 {
					dstPath = joinPath(d.path(), r.newName())
					break
				}
			}
		}
	case x < 94: // onto an ancestor of its directory
		if sd.parent != nil {
			a := sd
			for a.parent.parent != nil && r.rng.IntN(2) == 0 {
				a = a.parent
			}
			dstPath = a.path()
		}
	default: // itself, or another link to it
		dstPath = srcPath
		if src.links > 1 {
			for _, d := range r.dirs {
				for _, n := range d.kids.names {
					if d.kids.objs[n] == src && n != sname {
						dstPath = joinPath(d.path(), n)
					}
				}
			}
		}
	}
	if dstPath == "" {
		dstPath = joinPath(r.randomDir().path(), r.newName())
	}
	flags := 0
	switch r.rng.IntN(20) {
	case 0, 1, 2:
		flags = ext4go.RenameNoReplace
	case 3, 4, 5:
		flags = ext4go.RenameExchange
	}
	exch := flags&ext4go.RenameExchange != 0

	// Predict, in the order Linux checks (do_renameat2, vfs_rename).
	var want syscall.Errno
	od, obase, e1 := r.parentOf(srcPath)
	nd, nbase, e2 := r.parentOf(dstPath)
	var s, dst *mObj
	switch {
	case e1 != 0:
		want = e1
	case e2 != 0:
		want = e2
	default:
		s, _ = od.kids.get(obase)
		dst, _ = nd.kids.get(nbase)
		cross := od != nd
		switch {
		case dst != nil && dst.system:
			return
		case s == nil:
			want = syscall.ENOENT
		case flags&ext4go.RenameNoReplace != 0 && dst != nil:
			want = syscall.EEXIST
		case exch && dst == nil:
			want = syscall.ENOENT
		case cross && s.kind == kDir && s.isAncestorOf(nd):
			want = syscall.EINVAL
		case cross && dst != nil && dst.kind == kDir && dst.isAncestorOf(od):
			want = syscall.ENOTEMPTY
			if exch {
				want = syscall.EINVAL
			}
		case dst == s:
		case !exch && dst != nil && s.kind == kDir && dst.kind != kDir:
			want = syscall.ENOTDIR
		case !exch && dst != nil && s.kind != kDir && dst.kind == kDir:
			want = syscall.EISDIR
		case !exch && dst != nil && dst.kind == kDir && dst.kids.len() > 0:
			want = syscall.ENOTEMPTY
		}
		if want == 0 && dst != s {
			// Keep every path short enough for the kernel's PATH_MAX.
			if s.kind == kDir && len(nd.path())+1+len(nbase)+subtreePathLen(s) > 3300 {
				return
			}
			if exch && dst.kind == kDir && len(od.path())+1+len(obase)+subtreePathLen(dst) > 3300 {
				return
			}
		}
	}
	check := r.do(want, "rename %q -> %q flags %d", srcPath, dstPath, flags)
	if !check(r.fs.RenameWith(srcPath, dstPath, flags)) || dst == s {
		return
	}
	now := r.now()
	if exch {
		od.kids.put(obase, dst)
		nd.kids.put(nbase, s)
		if dst.kind == kDir {
			dst.parent, dst.name = od, obase
		}
	} else {
		if dst != nil {
			r.unlink(nd, nbase)
		}
		od.kids.del(obase)
		nd.kids.put(nbase, s)
	}
	if s.kind == kDir {
		s.parent, s.name = nd, nbase
	}
	od.mtime, nd.mtime = now, now
}

func (r *modelRun) opLink() {
	var oldPath string
	switch x := r.rng.IntN(20); {
	case x == 0:
		oldPath = "missing" + strconv.Itoa(r.nameN)
	case x == 1:
		oldPath, _ = r.entryPath(func(o *mObj) bool { return o.kind == kDir })
	default:
		oldPath, _ = r.entryPath(func(o *mObj) bool { return o.kind != kDir })
	}
	if oldPath == "" {
		return
	}
	newPath := r.targetPath()
	var want syscall.Errno
	old, e := r.resolve(oldPath, false)
	d, base, e2 := r.parentOf(newPath)
	switch {
	case e != 0:
		want = e
	case e2 != 0:
		want = e2
	default:
		if o, ok := d.kids.get(base); ok {
			if o.system {
				return
			}
			want = syscall.EEXIST
		} else if old.kind == kDir {
			want = syscall.EPERM
		}
	}
	check := r.do(want, "link %q -> %q", oldPath, newPath)
	if check(r.fs.Link(oldPath, newPath)) {
		old.links++
		r.link(d, base, old)
	}
}

// genTarget returns a symlink target: a path to something (relative or
// absolute), a dangling one, or a long one (slow symlink).
func (r *modelRun) genTarget(d *mObj) string {
	depth := strings.Count(d.path(), "/") + 1
	if d == r.root {
		depth = 0
	}
	switch x := r.rng.IntN(100); {
	case x < 35:
		if p, ok := r.entryPath(nil); ok {
			return strings.Repeat("../", depth) + p
		}
	case x < 50:
		if p, ok := r.entryPath(nil); ok {
			return "/" + p
		}
	case x < 60:
		return "dangling" + strconv.Itoa(r.nameN)
	case x < 70:
		return strings.Repeat("y", 58+r.rng.IntN(4)) // the fast/slow boundary
	case x < 85:
		return strings.Repeat("z", 60+r.rng.IntN(int(r.bs)-60))
	case x < 88:
		return ".."
	}
	return "t" + strconv.Itoa(r.rng.IntN(1000))
}

func (r *modelRun) opSymlink() {
	p := r.targetPath()
	d, base, want, ok := r.createCheck(p)
	if !ok {
		return
	}
	var target string
	if d != nil {
		target = r.genTarget(d)
	} else {
		target = "x"
	}
	if want == 0 && r.rng.IntN(30) == 0 {
		target = strings.Repeat("w", int(r.bs)+r.rng.IntN(100))
	}
	if want == 0 && len(target) >= int(r.bs) {
		want = syscall.ENAMETOOLONG // a target must fit one block
	}
	check := r.do(want, "symlink %q -> %q", p, trunc(target))
	if check(r.fs.Symlink(target, p)) {
		o := r.newObj(d, kSymlink, 0o777)
		o.target = target
		r.link(d, base, o)
	}
}

func (r *modelRun) opMknod() {
	p := r.targetPath()
	d, base, want, ok := r.createCheck(p)
	if !ok {
		return
	}
	kind := []mKind{kFifo, kChr, kBlk, kSock}[r.rng.IntN(4)]
	perm := r.randPerm(false) &^ 0o7000
	var maj, mnr uint32
	if kind == kChr || kind == kBlk {
		maj, mnr = uint32(r.rng.IntN(4096)), uint32(r.rng.IntN(1<<20))
	}
	check := r.do(want, "mknod %q %s %#o %d:%d", p, kind, perm, maj, mnr)
	if check(r.fs.Mknod(p, kind.modeType()|perm, unix.Mkdev(maj, mnr))) {
		o := r.newObj(d, kind, perm)
		o.major, o.minor = maj, mnr
		r.link(d, base, o)
	}
}

func (r *modelRun) opRemove() {
	var p string
	if r.rng.IntN(15) == 0 {
		p = r.targetPath()
	} else if q, ok := r.entryPath(nil); ok {
		p = q
	} else {
		return
	}
	d, base, want := r.parentOf(p)
	if want == 0 {
		o, ok := d.kids.get(base)
		switch {
		case !ok:
			want = syscall.ENOENT
		case o.system:
			return
		case o.kind == kDir && o.kids.len() > 0:
			want = syscall.ENOTEMPTY
		}
	}
	r.remove(p, d, base, want)
}

func (r *modelRun) remove(p string, d *mObj, base string, want syscall.Errno) {
	check := r.do(want, "remove %q", p)
	if check(r.fs.Remove(p)) {
		r.unlink(d, base)
	}
}

// attrTarget picks a path for an attribute change and the model object it
// reaches (following a final symlink when follow).
func (r *modelRun) attrTarget(follow bool) (string, *mObj, syscall.Errno, bool) {
	var p string
	switch x := r.rng.IntN(40); {
	case x == 0:
		p = "."
	case x == 1:
		p = "missing" + strconv.Itoa(r.nameN)
	default:
		var ok bool
		if p, ok = r.entryPath(nil); !ok {
			return "", nil, 0, false
		}
	}
	o, e := r.resolve(p, follow)
	if e == 0 && o.system {
		return "", nil, 0, false
	}
	return p, o, e, true
}

func (r *modelRun) opChmod() {
	p, o, want, ok := r.attrTarget(true)
	if !ok {
		return
	}
	perm := r.randPerm(false)
	if r.rng.IntN(5) == 0 {
		perm = uint32(r.rng.IntN(0o10000))
	}
	check := r.do(want, "chmod %q %#o", p, perm)
	if check(r.fs.Chmod(p, goPerm(perm))) {
		o.perm = perm
	}
}

// randID returns an owner to set: -1 keeps, and ids past 2^31-1 are
// negative ints on 32-bit systems, as Chown takes them.
func (r *modelRun) randID() int {
	ids := []int64{-1, 0, 1, 1000, 65534, 65535, 65536, 1 << 31, 1<<32 - 2}
	if r.rng.IntN(4) == 0 {
		return r.rng.IntN(1 << 20)
	}
	return int(ids[r.rng.IntN(len(ids))])
}

func (r *modelRun) opChown() {
	follow := r.rng.IntN(2) == 0
	p, o, want, ok := r.attrTarget(follow)
	if !ok {
		return
	}
	uid, gid := r.randID(), r.randID()
	check := r.do(want, "chown(follow=%v) %q %d:%d", follow, p, uid, gid)
	var err error
	if follow {
		err = r.fs.Chown(p, uid, gid)
	} else {
		err = r.fs.Lchown(p, uid, gid)
	}
	if check(err) {
		if uid != -1 {
			o.uid = uint32(uid)
		}
		if gid != -1 {
			o.gid = uint32(gid)
		}
	}
}

// Timestamp range of the inodes (Linux s_time_min, s_time_max).
const (
	timeMin      = -1 << 31
	timeMax128   = 1<<31 - 1
	timeMaxExtra = 1<<34 - 1 - 1<<31 // 2446-05-10
)

// randTime returns a timestamp to set, and the one ext4 stores: with
// 128-byte inodes a signed 32-bit second count, else 1901..2446 with
// nanoseconds; times outside are clamped, as by Linux.
func (r *modelRun) randTime() (time.Time, time.Time) {
	hi := int64(timeMaxExtra)
	if r.cfg.inode128 {
		hi = timeMax128
	}
	var sec int64
	switch x := r.rng.IntN(20); {
	case x < 10:
		sec = r.rng.Int64N(1 << 32) // what debugfs can show
	case x < 13:
		sec = timeMin + r.rng.Int64N(1<<31)
	case x < 18:
		sec = r.rng.Int64N(hi + 1)
	case x < 19:
		sec = hi + 1 + r.rng.Int64N(1<<32)
	default:
		sec = timeMin - 1 - r.rng.Int64N(1<<32)
	}
	t := time.Unix(sec, r.rng.Int64N(1e9))
	switch {
	case sec < timeMin:
		return t, time.Unix(timeMin, 0)
	case sec > hi:
		return t, time.Unix(hi, 0)
	}
	return t, t.Truncate(r.gran)
}

func (r *modelRun) opChtimes() {
	follow := r.rng.IntN(3) > 0
	p, o, want, ok := r.attrTarget(follow)
	if !ok {
		return
	}
	at, _ := r.randTime()
	mt, stored := r.randTime()
	if r.rng.IntN(8) == 0 {
		mt = time.Time{} // keep
	}
	check := r.do(want, "chtimes(follow=%v) %q mtime %s", follow, p, mt.UTC().Format(time.RFC3339Nano))
	var err error
	if follow {
		err = r.fs.Chtimes(p, at, mt)
	} else {
		err = r.fs.Lchtimes(p, at, mt)
	}
	if check(err) && !mt.IsZero() {
		o.mtime = mTime{stored, stored}
	}
}

// xattrSize is the space an attribute takes in an xattr block.
func xattrSize(name string, value []byte) int {
	suffix := name[strings.IndexByte(name, '.')+1:]
	return 16 + (len(suffix)+3)&^3 + (len(value)+3)&^3
}

// xattrRoom is the budget of o's attributes: whatever fits one block
// always fits, as the inode body is tried first.
func (r *modelRun) xattrRoom(o *mObj) int {
	used := 0
	for k, v := range o.xattrs {
		used += xattrSize(k, v)
	}
	return int(r.bs) - 32 - 4 - 16 - used
}

func (r *modelRun) opSetXattr() {
	d, name, o, ok := r.pickEntry(nil)
	if !ok {
		return
	}
	p := joinPath(d.path(), name)
	userOK := o.kind == kFile || o.kind == kDir // Linux allows user.* there only
	var attr string
	var value []byte
	switch x := r.rng.IntN(100); {
	case x < 45 && userOK:
		attr, value = fmt.Sprintf("user.s%d", r.rng.IntN(6)), r.genData(r.rng.IntN(41))
	case x < 65 && userOK:
		attr, value = fmt.Sprintf("user.big%d", r.rng.IntN(3)), r.genData(int(r.bs)/8+r.rng.IntN(int(r.bs)/4))
	case x < 85:
		attr, value = fmt.Sprintf("trusted.t%d", r.rng.IntN(4)), r.genData(r.rng.IntN(100))
	default:
		attr, value = fmt.Sprintf("security.x%d", r.rng.IntN(2)), r.genData(r.rng.IntN(30))
	}
	flags := 0
	switch r.rng.IntN(6) {
	case 0:
		flags = ext4go.XattrCreate
	case 1:
		flags = ext4go.XattrReplace
	}
	_, exists := o.xattrs[attr]
	var want syscall.Errno
	switch x := r.rng.IntN(40); {
	case x == 0:
		attr, want = "user."+strings.Repeat("n", 251), syscall.ERANGE
	case x == 1:
		value, want = make([]byte, 65537), syscall.E2BIG
	case x == 2:
		attr, want = "nonsense.x", syscall.EOPNOTSUPP
	case x == 3 && userOK:
		attr, value, want = "user.huge", r.genData(int(r.bs)+r.rng.IntN(int(r.bs))), syscall.ENOSPC
		flags = 0 // XATTR_REPLACE would fail first with ENODATA
	case flags == ext4go.XattrCreate && exists:
		want = syscall.EEXIST
	case flags == ext4go.XattrReplace && !exists:
		want = syscall.ENODATA
	default:
		room := r.xattrRoom(o)
		if exists {
			room += xattrSize(attr, o.xattrs[attr])
		}
		if xattrSize(attr, value) > room {
			return
		}
	}
	check := r.do(want, "setxattr %q %s (%d bytes) flags %d", p, trunc(attr), len(value), flags)
	if check(r.fs.SetXattr(p, attr, value, flags)) {
		o.xattrs[attr] = value
	}
}

func (r *modelRun) opRemoveXattr() {
	d, name, o, ok := r.pickEntry(func(o *mObj) bool { return len(o.xattrs) > 0 || r.rng.IntN(4) == 0 })
	if !ok {
		return
	}
	p := joinPath(d.path(), name)
	names := make([]string, 0, len(o.xattrs))
	for k := range o.xattrs {
		names = append(names, k)
	}
	sort.Strings(names)
	attr := "user.never"
	want := syscall.ENODATA
	if len(names) > 0 && r.rng.IntN(6) > 0 {
		attr, want = names[r.rng.IntN(len(names))], 0
	}
	check := r.do(want, "removexattr %q %s", p, attr)
	if check(r.fs.RemoveXattr(p, attr)) {
		delete(o.xattrs, attr)
	}
}

// opSharedXattrs gives several inodes the same large attribute set, so
// that they share one xattr block.
func (r *modelRun) opSharedXattrs() {
	prof := r.rng.IntN(3)
	vr := rand.New(rand.NewPCG(uint64(prof), 7))
	set := []struct {
		name  string
		value []byte
	}{
		{fmt.Sprintf("user.shared%d", prof), make([]byte, int(r.bs)/4)},
		{fmt.Sprintf("trusted.shared%d", prof), make([]byte, int(r.bs)/8)},
	}
	for _, a := range set {
		for i := range a.value {
			a.value[i] = byte(vr.Uint32())
		}
	}
	for i := 0; i < 2+r.rng.IntN(6); i++ {
		d, name, o, ok := r.pickEntry(func(o *mObj) bool { return o.kind == kFile || o.kind == kDir })
		if !ok {
			return
		}
		need := 0
		for _, a := range set {
			need += xattrSize(a.name, a.value)
			if v, ok := o.xattrs[a.name]; ok {
				need -= xattrSize(a.name, v)
			}
		}
		if need > r.xattrRoom(o) {
			continue
		}
		p := joinPath(d.path(), name)
		for _, a := range set {
			check := r.do(0, "setxattr %q %s (%d bytes, shared set)", p, a.name, len(a.value))
			if check(r.fs.SetXattr(p, a.name, a.value, 0)) {
				o.xattrs[a.name] = a.value
			}
		}
	}
}

func (r *modelRun) opOpenHandle() {
	if len(r.handles) >= 6 {
		return
	}
	p, o, ok := r.filePath()
	if !ok {
		return
	}
	flag := []int{os.O_RDWR, os.O_RDWR, os.O_WRONLY | os.O_APPEND, os.O_RDONLY}[r.rng.IntN(4)]
	if h, ok := r.openFile(p, flag, o); ok {
		r.handles = append(r.handles, h)
	}
}

// opHandleIO uses a held handle: a write or a read, and now and then
// unlinks a name of its file first, so the file lives on as an orphan.
func (r *modelRun) opHandleIO() {
	if len(r.handles) == 0 {
		return
	}
	h := r.handles[r.rng.IntN(len(r.handles))]
	if h.o.links > 0 && r.rng.IntN(6) == 0 {
		if d, base, e := r.parentOf(h.path); e == 0 {
			if o, ok := d.kids.get(base); ok && o == h.o {
				r.remove(h.path, d, base, 0)
			}
		}
	}
	if h.readable && r.rng.IntN(3) == 0 {
		r.handleRead(h)
		return
	}
	r.handleWrite(h)
}

func (r *modelRun) opCloseHandle() {
	if len(r.handles) == 0 {
		return
	}
	r.closeHandle(r.rng.IntN(len(r.handles)))
}

func (r *modelRun) closeHandle(i int) {
	h := r.handles[i]
	r.handles = append(r.handles[:i], r.handles[i+1:]...)
	r.closeH(h)
}

// opSync commits everything so far, through the FS or an open file.
func (r *modelRun) opSync() {
	if len(r.handles) > 0 && r.rng.IntN(2) == 0 {
		h := r.handles[r.rng.IntN(len(r.handles))]
		check := r.do(0, "fsync %q", h.path)
		check(h.f.Sync())
		return
	}
	check := r.do(0, "sync")
	check(r.fs.Sync())
}

// opStatCheck compares one entry of the live (writable) filesystem with
// the model.
func (r *modelRun) opStatCheck() {
	d, name, o, ok := r.pickEntry(nil)
	if !ok {
		return
	}
	p := joinPath(d.path(), name)
	r.logOp("statcheck %q", p)
	c := &comparer{r: r, v: extView{r.fs}, caps: extView{}.caps(), inoOf: map[*mObj]uint64{}, objOf: map[uint64]*mObj{}}
	if o.kind == kFile && o.size > 64<<20 && len(o.data) > 256 {
		return
	}
	c.entry(p, o)
	if o.kind == kDir && o.kids.len() < 2000 {
		names, err := c.v.readDir(p)
		want := 0
		for _, n := range o.kids.names {
			if !o.kids.objs[n].system {
				want++
			}
		}
		if err != nil || len(names) != want {
			c.add(p, "readdir: %d names, %v; want %d", len(names), err, want)
		}
	}
	if len(c.diffs) > 0 {
		r.fatalf("live filesystem differs from the model:\n  %s", strings.Join(c.diffs, "\n  "))
	}
	// A missing name must be missing.
	missing := joinPath(d.path(), "absent"+strconv.Itoa(r.nameN))
	if _, err := r.fs.Lstat(missing); errnoOf(err) != syscall.ENOENT {
		r.fatalf("lstat %q: %v, want ENOENT", missing, err)
	}
}

// bigDirPhase fills one directory with 10 000 entries (2 000 with -short),
// removing and renaming entries in between.
func (r *modelRun) bigDirPhase() {
	target := 10000
	if testing.Short() {
		target = 2000
	}
	if r.inodes+target+100 > r.inodeLimit {
		return
	}
	r.nameN++
	p := "big" + strconv.Itoa(r.nameN)
	check := r.do(0, "mkdir %q (big directory)", p)
	if !check(r.fs.Mkdir(p, 0o755)) {
		return
	}
	d := r.newObj(r.root, kDir, 0o755)
	r.link(r.root, p, d)
	created := 0
	for created < target {
		switch x := r.rng.IntN(20); {
		case x < 14 || d.kids.len() == 0:
			r.nameN++
			name := fmt.Sprintf("e%d-", r.nameN)
			name += strings.Repeat("q", r.rng.IntN(1+r.rng.IntN(250-len(name))))
			fp := p + "/" + name
			check := r.do(0, "create %q", fp)
			f, err := r.fs.OpenFile(fp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
			if !check(err) {
				return
			}
			o := r.newObj(d, kFile, 0o644)
			r.link(d, name, o)
			if r.rng.IntN(10) == 0 {
				data := r.genData(1 + r.rng.IntN(100))
				check := r.do(0, "write %q %d bytes", fp, len(data))
				if _, err := f.Write(data); check(err) {
					r.applyWrite(o, 0, data)
				}
			}
			check = r.do(0, "close %q", fp)
			check(f.Close())
			created++
		case x < 18:
			name := d.kids.names[r.rng.IntN(d.kids.len())]
			r.remove(p+"/"+name, d, name, 0)
		case x < 19:
			old := d.kids.names[r.rng.IntN(d.kids.len())]
			nn := d.kids.names[r.rng.IntN(d.kids.len())]
			if r.rng.IntN(2) == 0 {
				r.nameN++
				nn = fmt.Sprintf("r%d", r.nameN)
			}
			check := r.do(0, "rename %q -> %q", p+"/"+old, p+"/"+nn)
			if check(r.fs.Rename(p+"/"+old, p+"/"+nn)) && old != nn {
				if _, ok := d.kids.get(nn); ok {
					r.unlink(d, nn)
				}
				o, _ := d.kids.get(old)
				d.kids.del(old)
				d.kids.put(nn, o)
				d.mtime = r.now()
			}
		default:
			name := d.kids.names[r.rng.IntN(d.kids.len())]
			r.logOp("lstat %q", p+"/"+name)
			if _, err := r.fs.Lstat(p + "/" + name); err != nil {
				r.fatalf("lstat %q: %v", p+"/"+name, err)
			}
			if _, err := r.fs.Lstat(p + "/nope" + name); errnoOf(err) != syscall.ENOENT {
				r.fatalf("lstat of a missing name in the big directory: %v", err)
			}
		}
		if r.t.Failed() {
			return
		}
	}
}

// teardown removes everything, depth first in random order, truncating
// files and removing attributes now and then before the unlink, and
// trying to remove non-empty directories (ENOTEMPTY).
func (r *modelRun) teardown() {
	if r.rng.IntN(2) == 0 {
		r.closeAllHandles()
	}
	var walk func(d *mObj)
	walk = func(d *mObj) {
		names := append([]string(nil), d.kids.names...)
		r.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		dp := d.path()
		for _, n := range names {
			o, ok := d.kids.get(n)
			if !ok || o.system {
				continue
			}
			p := joinPath(dp, n)
			switch {
			case o.kind == kDir:
				if o.kids.len() > 0 && r.rng.IntN(5) == 0 {
					r.remove(p, d, n, syscall.ENOTEMPTY)
				}
				walk(o)
			case o.kind == kFile && r.rng.IntN(4) == 0:
				if h, ok := r.openFile(p, os.O_RDWR, o); ok {
					check := r.do(0, "truncate %q 0", p)
					if check(h.f.Truncate(0)) {
						r.applyTruncate(o, 0)
					}
					r.closeH(h)
				}
			}
			if len(o.xattrs) > 0 && r.rng.IntN(3) == 0 {
				for _, k := range slices.Sorted(maps.Keys(o.xattrs)) {
					check := r.do(0, "removexattr %q %s", p, k)
					if check(r.fs.RemoveXattr(p, k)) {
						delete(o.xattrs, k)
					}
				}
			}
			r.remove(p, d, n, 0)
			if r.t.Failed() {
				return
			}
		}
	}
	walk(r.root)
}

// TestWriteAfterTreeGrowth is a regression test for a bug the model test
// found: a write that adds an extent to a tree block (depth 1) changes
// neither i_block nor the size, and the cached block map was kept, so the
// new data read back as zeros until the filesystem was reopened.
func TestWriteAfterTreeGrowth(t *testing.T) {
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4", "-b", "4096")
	fsys := openRW(t, image)
	defer fsys.Close()
	f, err := fsys.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Six separate extents (the root holds four), the last far out so the
	// file's size covers everything written afterwards.
	for _, blk := range []int64{9, 52, 157, 474, 684, 548467, 122146, 300, 1000} {
		p := bytes.Repeat([]byte{byte(blk%250 + 1)}, 4096)
		if _, err := f.WriteAt(p, blk*4096); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(p))
		if _, err := f.ReadAt(got, blk*4096); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, p) {
			t.Fatalf("block %d reads back wrong right after the write", blk)
		}
	}
}
