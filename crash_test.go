//go:build linux

package ext4go_test

// Crash simulation without the kernel: a recording device logs
// every write and flush of a journalled workload. For many crash points
// the image as a power cut there could leave it is rebuilt: every write
// before the last flush is there; writes since then are each kept,
// dropped or torn at 512-byte sectors. Each crash image must then
//   - replay through e2fsck (its journal is valid jbd2) to a filesystem
//     e2fsck -fn finds clean,
//   - replay through ext4go, read-only (in memory) and writable (home),
//     and e2fsck -fn must find the written replay clean,
//   - hold every file synced before the crash point and not touched
//     since, with exactly its content.
//
// EXT4GO_CRASH=N tries N crash points per configuration (default 24, CI).

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/testutil"
)

// recDev records writes and flushes in order. Writes reach the image
// underneath at once (reads see them, as a page cache would); Sync only
// marks the record.
type recDev struct {
	ext4go.Device
	mu  sync.Mutex
	log []devRec
}

type devRec struct {
	off   int64
	data  []byte
	flush bool
}

func (d *recDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, devRec{off: off, data: bytes.Clone(p)})
	return d.Device.WriteAt(p, off)
}

func (d *recDev) Sync() error {
	d.mu.Lock()
	d.log = append(d.log, devRec{flush: true})
	d.mu.Unlock()
	return nil
}

// openRecorded opens image for writing through a recording device, with
// commits only when asked (Sync, size).
func openRecorded(t *testing.T, image string) (*ext4go.FS, *recDev) {
	t.Helper()
	return openRecordedWith(t, image, &ext4go.Options{Writable: true, CommitInterval: -1})
}

// openRecordedWith is openRecorded with options of the test's own.
func openRecordedWith(t *testing.T, image string, opts *ext4go.Options) (*ext4go.FS, *recDev) {
	t.Helper()
	d, err := ext4go.OpenImageDevice(image, true)
	if err != nil {
		t.Fatal(err)
	}
	rd := &recDev{Device: d}
	fsys, err := ext4go.OpenDevice(rd, opts)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, rd
}

func (d *recDev) mark() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.log)
}

// crashFile is a file of the crash workload's model.
type crashFile struct {
	data    []byte
	touched int // last phase that created or changed it
}

type crashConfig struct {
	name    string
	size    int64
	mkfs    []string
	journal func(*jbd2.Superblock) // journal features to set before the run
}

func TestCrashRecovery(t *testing.T) {
	points := 24
	if v, err := strconv.Atoi(os.Getenv("EXT4GO_CRASH")); err == nil && v > 0 {
		points = v
	}
	configs := []crashConfig{
		{"4k", 32 << 20, []string{"-t", "ext4", "-b", "4096"}, nil},
		{"1k", 16 << 20, []string{"-t", "ext4", "-b", "1024"}, nil},
		{"32bit-nocsum", 32 << 20, []string{"-t", "ext4", "-O", "^64bit,^metadata_csum"}, nil},
		{"ext3", 16 << 20, []string{"-t", "ext3"}, nil},
		{"csum-v3", 32 << 20, []string{"-t", "ext4"}, func(sb *jbd2.Superblock) {
			sb.FeatureIncompat |= jbd2.IncompatCsumV3
			sb.ChecksumType = jbd2.ChecksumCRC32C
		}},
		{"csum-v2", 16 << 20, []string{"-t", "ext4", "-b", "1024"}, func(sb *jbd2.Superblock) {
			sb.FeatureIncompat |= jbd2.IncompatCsumV2
			sb.ChecksumType = jbd2.ChecksumCRC32C
		}},
		{"csum-v1-async", 16 << 20, []string{"-t", "ext4", "-O", "^metadata_csum"}, func(sb *jbd2.Superblock) {
			sb.FeatureCompat |= jbd2.CompatChecksum
			sb.FeatureIncompat |= jbd2.IncompatAsyncCommit
		}},
	}
	for i, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			crashRun(t, cfg, uint64(i)+1, points)
		})
	}
}

// setJournalFeatures rewrites the journal superblock of image.
func setJournalFeatures(t *testing.T, image string, set func(*jbd2.Superblock)) {
	t.Helper()
	out := testutil.Debugfs(t, image, "bmap <8> 0")
	blk, err := strconv.ParseInt(string(bytes.TrimSpace([]byte(out))), 10, 64)
	if err != nil {
		t.Fatalf("journal block 0: %q", out)
	}
	bsOut := testutil.Debugfs(t, image, "stats")
	bs := int64(4096)
	if bytes.Contains([]byte(bsOut), []byte("Block size:               1024")) {
		bs = 1024
	}
	f, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1024)
	if _, err := f.ReadAt(buf, blk*bs); err != nil {
		t.Fatal(err)
	}
	sb, err := jbd2.Decode(buf)
	if err != nil {
		t.Fatal(err)
	}
	set(sb)
	if _, err := f.WriteAt(sb.Encode(), blk*bs); err != nil {
		t.Fatal(err)
	}
}

func crashRun(t *testing.T, cfg crashConfig, seed uint64, points int) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, cfg.size, cfg.mkfs...)
	if cfg.journal != nil {
		setJournalFeatures(t, image, cfg.journal)
	}
	base, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	fsys, rd := openRecorded(t, image)
	rng := rand.New(rand.NewPCG(seed, 99))
	plan, states := crashPlan(seed, 10)
	// marks[p] is the log position when phase p+1's Sync returned.
	var marks []int
	if err := runCrashPlan(fsys, plan, func(int) { marks = append(marks, rd.mark()) }); err != nil {
		t.Fatal(err)
	}
	phases := len(plan)
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
	log := rd.log
	t.Logf("%d writes and flushes recorded over %d phases", len(log), phases)

	// Crash points: every flush, then random points, up to points.
	var cuts []int
	for i, r := range log {
		if r.flush {
			cuts = append(cuts, i+1)
		}
	}
	rng.Shuffle(len(cuts), func(i, j int) { cuts[i], cuts[j] = cuts[j], cuts[i] })
	if len(cuts) > points/2 {
		cuts = cuts[:points/2]
	}
	for len(cuts) < points {
		cuts = append(cuts, 1+rng.IntN(len(log)))
	}
	slices.Sort(cuts)
	for _, cut := range cuts {
		// The model that must hold: the last phase synced before cut.
		phase := 0
		for p, m := range marks {
			if m <= cut {
				phase = p + 1
			}
		}
		img := crashImage(t, dir, base, log[:cut], rng)
		checkCrashImage(t, img, cut, phase, states)
		if t.Failed() {
			t.Fatalf("crash at record %d of %d (after phase %d) failed; image kept at %s", cut, len(log), phase, img)
		}
		os.Remove(img)
	}
}

// zeroedTail reports whether got is old with the rest of the block at
// offset at zeroed (at most to the next 4 KiB): a truncate to at zeros
// that part of its last block in place, before its transaction commits,
// and a crash may keep the zeros and lose the truncate.
func zeroedTail(got, old []byte, at int) bool {
	if len(got) != len(old) || at >= len(old) {
		return false
	}
	end := min(len(old), (at+4095)/4096*4096)
	if !bytes.Equal(got[:at], old[:at]) || !bytes.Equal(got[end:], old[end:]) {
		return false
	}
	for i := at; i < end; i++ {
		if got[i] != old[i] && got[i] != 0 {
			return false
		}
	}
	return true
}

// crashImage builds the image a power cut after records log could leave.
func crashImage(t *testing.T, dir string, base []byte, log []devRec, rng *rand.Rand) string {
	img := bytes.Clone(base)
	last := 0 // records before the last flush are durable
	for i, r := range log {
		if r.flush {
			last = i + 1
		}
	}
	for i, r := range log {
		if r.flush {
			continue
		}
		if i < last {
			copy(img[r.off:], r.data)
			continue
		}
		switch rng.IntN(3) {
		case 0: // lost
		case 1:
			copy(img[r.off:], r.data)
		case 2: // torn: a random subset of its sectors
			for s := 0; s < len(r.data); s += 512 {
				at := r.off + int64(s)
				n := 512
				if at == 1024 {
					// The primary superblock is read before any
					// journal can help: like the kernel, ext4go
					// relies on its 1024 bytes being written whole.
					n = 1024
				}
				if rng.IntN(2) == 0 {
					copy(img[at:], r.data[s:min(s+n, len(r.data))])
				}
				s += n - 512
			}
		}
	}
	path := filepath.Join(dir, "crash")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func checkCrashImage(t *testing.T, img string, cut, phase int, states []map[string]crashFile) {
	t.Helper()
	var want map[string]crashFile
	if phase > 0 {
		want = states[phase-1]
	}
	stable := func(name string, f crashFile) bool {
		// Untouched by the phase the crash interrupted.
		if phase < len(states) {
			next, ok := states[phase][name]
			return ok && next.touched <= phase && bytes.Equal(next.data, f.data)
		}
		return true
	}
	checkFiles := func(how string, fsys fs.FS) {
		for name, f := range want {
			got, err := fs.ReadFile(fsys, name)
			if !stable(name, f) {
				// Changed by the interrupted phase (removed, renamed away,
				// truncated or appended to): if the crash left it, it
				// holds its content from before the phase, or the
				// phase's change of it partly or wholly made. Never
				// another file's bytes: the space a phase frees is not
				// reused before the phase commits.
				if err != nil {
					continue
				}
				next := f.data
				if phase < len(states) {
					if n, ok := states[phase][name]; ok {
						next = n.data
					}
				}
				if len(got) < min(len(f.data), len(next)) || !bytes.HasPrefix(f.data, got) && !bytes.HasPrefix(next, got) && !zeroedTail(got, f.data, len(next)) {
					t.Errorf("crash at %d, %s: file %s changed by the interrupted phase: %d bytes, neither its synced content (%d bytes) nor the phase's (%d bytes)",
						cut, how, name, len(got), len(f.data), len(next))
				}
				continue
			}
			if err != nil || !bytes.Equal(got, f.data) {
				t.Errorf("crash at %d, %s: synced file %s: %d bytes (want %d), %v", cut, how, name, len(got), len(f.data), err)
			}
		}
	}
	// e2fsck replays the journal and must find the result clean.
	e2 := img + ".e2fsck"
	copyFile(t, img, e2)
	if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", e2).CombinedOutput(); err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
			t.Errorf("crash at %d: e2fsck journal replay: %v\n%s", cut, err, out)
		}
	}
	if code, out := testutil.E2fsckFN(t, e2); code != 0 {
		t.Errorf("crash at %d: e2fsck -fn after e2fsck's replay exits %d:\n%s", cut, code, out)
	}
	os.Remove(e2)

	// ext4go's in-memory replay.
	ro, err := ext4go.Open(img, nil)
	if err != nil {
		t.Errorf("crash at %d: read-only open: %v", cut, err)
		return
	}
	checkFiles("read-only replay", ro)
	ro.Close()

	// ext4go's replay written home.
	w := img + ".ext4go"
	copyFile(t, img, w)
	defer os.Remove(w)
	fsys, err := ext4go.Open(w, &ext4go.Options{Writable: true})
	if err != nil {
		t.Errorf("crash at %d: writable open: %v", cut, err)
		return
	}
	checkFiles("written replay", fsys)
	if err := fsys.Close(); err != nil {
		t.Errorf("crash at %d: close: %v", cut, err)
	}
	if code, out := testutil.E2fsckFN(t, w); code != 0 {
		t.Errorf("crash at %d: e2fsck -fn after ext4go's replay exits %d:\n%s", cut, code, out)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// crashOp is one step of a crash workload.
type crashOp struct {
	kind     string // mkdir, write, remove, rename, truncate, append, xattr, and the time-only read and rewrite
	name, to string
	data     []byte
	size     int
}

// crashPlan makes a seeded workload of phases, each ending in a Sync, and
// the files expected after each phase.
func crashPlan(seed uint64, phases int) (plan [][]crashOp, states []map[string]crashFile) {
	rng := rand.New(rand.NewPCG(seed, 99))
	model := map[string]*crashFile{}
	var ops []crashOp
	for i := range 3 {
		ops = append(ops, crashOp{kind: "mkdir", name: fmt.Sprintf("d%d", i)})
	}
	for p := 1; p <= phases; p++ {
		// A file written and removed within the phase: its blocks were
		// allocated by the running transaction and go back at once
		// (mballoc.FreeReuseFresh), so the phase's new files reuse
		// them before the commit.
		scratch := fmt.Sprintf("d%d/scratch%d", p%3, p)
		ops = append(ops, crashOp{kind: "write", name: scratch, data: pattern(int64(p), 3, 40000+rng.IntN(60000))},
			crashOp{kind: "remove", name: scratch})
		names := slices.Sorted(func(yield func(string) bool) {
			for k, v := range model {
				if v.touched < p && !yield(k) {
					return
				}
			}
		})
		if len(names) > 3 {
			// Delete, rename, truncate and extend older files, before
			// the new files are written: the space they free must not
			// be reused before the phase commits.
			victim := names[rng.IntN(len(names))]
			ops = append(ops, crashOp{kind: "remove", name: victim})
			delete(model, victim)
			names = slices.DeleteFunc(names, func(s string) bool { return s == victim })
			from := names[rng.IntN(len(names))]
			to := fmt.Sprintf("d%d/r%d", (p+1)%3, p)
			ops = append(ops, crashOp{kind: "rename", name: from, to: to})
			model[to] = model[from]
			model[to].touched = p
			delete(model, from)
			names = slices.DeleteFunc(names, func(s string) bool { return s == from })
			tr := names[rng.IntN(len(names))]
			keep := len(model[tr].data) / 2
			ops = append(ops, crashOp{kind: "truncate", name: tr, size: keep})
			model[tr].data = model[tr].data[:keep]
			model[tr].touched = p
			if ap := names[rng.IntN(len(names))]; ap != tr {
				extra := pattern(int64(p), 7, 3000+rng.IntN(30000))
				ops = append(ops, crashOp{kind: "append", name: ap, data: extra})
				model[ap].data = append(bytes.Clone(model[ap].data), extra...)
				model[ap].touched = p
			}
		}
		for i := 0; i < 4; i++ {
			name := fmt.Sprintf("d%d/f%d_%d", p%3, p, i)
			size := rng.IntN(20000)
			if rng.IntN(5) == 0 {
				size = 100000 + rng.IntN(200000)
			}
			data := pattern(int64(seed)*1000+int64(p*100+i), 0, size)
			ops = append(ops, crashOp{kind: "write", name: name, data: data})
			model[name] = &crashFile{data: data, touched: p}
		}
		ops = append(ops, crashOp{kind: "xattr", name: fmt.Sprintf("d%d/f%d_0", p%3, p), data: []byte(strconv.Itoa(p))})
		plan = append(plan, ops)
		ops = nil
		state := map[string]crashFile{}
		for k, v := range model {
			state[k] = *v
		}
		states = append(states, state)
	}
	return plan, states
}

// runCrashPlan applies plan to fsys, syncing after each phase and then
// calling synced with the phase's number (1-based).
func runCrashPlan(fsys *ext4go.FS, plan [][]crashOp, synced func(phase int)) error {
	for p, ops := range plan {
		for _, op := range ops {
			if err := applyCrashOp(fsys, op); err != nil {
				return fmt.Errorf("phase %d: %s %s: %w", p+1, op.kind, op.name, err)
			}
		}
		// Every other phase ends in an fsync of one file instead: it
		// commits the running transaction (all of the phase) too.
		if p%2 == 1 {
			f, err := fsys.OpenFile(ops[len(ops)-1].name, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			err = f.Sync()
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		} else if err := fsys.Sync(); err != nil {
			return err
		}
		synced(p + 1)
	}
	return nil
}

func applyCrashOp(fsys *ext4go.FS, op crashOp) error {
	if k, ok := strings.CutPrefix(op.kind, "pause:"); ok {
		time.Sleep(3 * time.Millisecond)
		op.kind = k
	}
	switch op.kind {
	case "mkdir":
		return fsys.Mkdir(op.name, 0o755)
	case "write":
		return fsys.WriteFile(op.name, op.data, 0o644)
	case "remove":
		return fsys.Remove(op.name)
	case "rename":
		return fsys.Rename(op.name, op.to)
	case "xattr":
		return fsys.SetXattr(op.name, "user.phase", op.data, 0)
	case "read": // an access time
		f, err := fsys.Open(op.name)
		if err != nil {
			return err
		}
		_, err = io.ReadAll(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case "rewrite": // the first bytes again, as they are: mtime and ctime only
		f, err := fsys.OpenFile(op.name, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		buf := make([]byte, 4096)
		n, err := f.ReadAt(buf, 0)
		if err == io.EOF {
			err = nil
		}
		if err == nil && n > 0 {
			_, err = f.WriteAt(buf[:n], 0)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	flag := os.O_WRONLY
	if op.kind == "append" {
		flag |= os.O_APPEND
	}
	f, err := fsys.OpenFile(op.name, flag, 0)
	if err != nil {
		return err
	}
	if op.kind == "append" {
		_, err = f.Write(op.data)
	} else {
		err = f.Truncate(int64(op.size))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// failDev fails every write and flush after the first n writes, as a
// device that died.
type failDev struct {
	ext4go.Device
	left atomic.Int64
}

func (d *failDev) WriteAt(p []byte, off int64) (int, error) {
	if d.left.Add(-1) < 0 {
		return 0, syscall.EIO
	}
	return d.Device.WriteAt(p, off)
}

func (d *failDev) Sync() error {
	if d.left.Load() < 0 {
		return syscall.EIO
	}
	return d.Device.Sync()
}

// TestDeviceDies: the device fails every write from the n-th on, in the
// middle of a workload. Operations fail with errors (no panic, no hang),
// and what reached the device replays (by e2fsck and by ext4go) to a
// filesystem e2fsck finds clean.
func TestDeviceDies(t *testing.T) {
	// How many writes the whole run makes, on a device that does not die.
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "1024")
	fsys, rd := openRecorded(t, image)
	plan, _ := crashPlan(5, 6)
	if err := runCrashPlan(fsys, plan, func(int) {}); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, r := range rd.log {
		if !r.flush {
			total++
		}
	}
	t.Logf("%d writes in all", total)
	for _, n := range []int64{1, 2, 3, total / 8, total / 4, total / 2, total * 3 / 4, total - 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			image := filepath.Join(t.TempDir(), "img")
			testutil.Mke2fs(t, image, 16<<20, "-t", "ext4", "-b", "1024")
			d, err := ext4go.OpenImageDevice(image, true)
			if err != nil {
				t.Fatal(err)
			}
			fd := &failDev{Device: d}
			fd.left.Store(n)
			fsys, err := ext4go.OpenDevice(fd, &ext4go.Options{Writable: true, CommitInterval: -1})
			if err != nil {
				t.Logf("open failed: %v", err)
				d.Close()
			} else {
				err := runCrashPlan(fsys, plan, func(int) {})
				t.Logf("workload: %v", err)
				if err := fsys.Close(); err == nil {
					t.Error("Close after the device died reports no error")
				}
			}
			e2 := image + ".e2fsck"
			copyFile(t, image, e2)
			if out, err := exec.Command("e2fsck", "-E", "journal_only", "-y", e2).CombinedOutput(); err != nil {
				if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() > 1 {
					t.Errorf("e2fsck journal replay: %v\n%s", err, out)
				}
			}
			if code, out := testutil.E2fsckFN(t, e2); code != 0 {
				t.Errorf("e2fsck -fn after e2fsck's replay exits %d:\n%s", code, out)
			}
			w, err := ext4go.Open(image, &ext4go.Options{Writable: true})
			if err != nil {
				t.Fatalf("writable open after the failure: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			testutil.RequireFsckClean(t, image)
		})
	}
}
