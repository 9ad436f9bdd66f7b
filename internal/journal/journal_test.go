package journal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/txn"
)

const (
	bs       = 1024
	jStart   = 1000 // filesystem block of journal block 0
	jLen     = 1024 // journal blocks: the smallest log jbd2 allows, so it wraps often
	fsBlocks = 2100
	commits  = 90
)

// recDev is a memory device that records every write and flush.
type recDev struct {
	mu   sync.Mutex
	data []byte
	log  []rec
}

type rec struct {
	off   int64
	data  []byte
	flush bool
}

func (d *recDev) ReadAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}

func (d *recDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, rec{off: off, data: bytes.Clone(p)})
	return copy(d.data[off:], p), nil
}

func (d *recDev) Sync() error {
	d.mu.Lock()
	d.log = append(d.log, rec{flush: true})
	d.mu.Unlock()
	return nil
}

// vecDev is a recDev that also writes pieces end to end in one call, as
// dev.File does with pwritev (vectorWriter): one record a call.
type vecDev struct {
	*recDev
	calls, pieces int
}

func (d *vecDev) WriteVAt(pieces [][]byte, off int64) (int, error) {
	d.calls++
	d.pieces += len(pieces)
	return d.WriteAt(bytes.Join(pieces, nil), off)
}

func formats() map[string]func(*jbd2.Superblock) {
	return map[string]func(*jbd2.Superblock){
		"v2-plain": func(*jbd2.Superblock) {},
		"64bit":    func(sb *jbd2.Superblock) { sb.FeatureIncompat |= jbd2.Incompat64Bit },
		"csum-v3": func(sb *jbd2.Superblock) {
			sb.FeatureIncompat |= jbd2.IncompatCsumV3 | jbd2.Incompat64Bit
			sb.ChecksumType = jbd2.ChecksumCRC32C
		},
		"csum-v2": func(sb *jbd2.Superblock) {
			sb.FeatureIncompat |= jbd2.IncompatCsumV2
			sb.ChecksumType = jbd2.ChecksumCRC32C
		},
		"csum-v1": func(sb *jbd2.Superblock) { sb.FeatureCompat |= jbd2.CompatChecksum },
	}
}

func newJournalSB(set func(*jbd2.Superblock)) *jbd2.Superblock {
	sb := &jbd2.Superblock{Header: jbd2.Header{Magic: jbd2.Magic, BlockType: jbd2.BlockSuperV2},
		BlockSize: bs, MaxLen: jLen, First: 1, Sequence: 7, NrUsers: 1}
	copy(sb.UUID[:], "0123456789abcdef")
	set(sb)
	return sb
}

func phys(nr uint32) (uint64, error) {
	if nr >= jLen {
		return 0, fmt.Errorf("journal block %d not mapped", nr)
	}
	return jStart + uint64(nr), nil
}

// home reports whether filesystem block nr may be used by transactions.
func home(nr uint64) bool { return nr < jStart || nr >= jStart+jLen }

// TestCrashPoints commits many random transactions through a small log
// (it wraps many times, and is checkpointed when full), then rebuilds the
// device as a crash after every record could leave it (unflushed writes
// kept or lost) and recovers it: the filesystem blocks must equal the
// state after some transaction k, where every transaction whose Commit
// had returned is included and at most the one in progress is added.
// The crash points are every flush and 80 random records (EXT4GO_CRASH=all:
// every record). Each format runs on a device that takes one buffer a
// write; csum-v3 (the default format) also on one that takes pieces
// (vecDev): the pieces do not depend on the format.
func TestCrashPoints(t *testing.T) {
	for name, set := range formats() {
		testCrashPoints(t, name, set, false)
		if name == "csum-v3" {
			testCrashPoints(t, name, set, true)
		}
	}
}

func testCrashPoints(t *testing.T, name string, set func(*jbd2.Superblock), vector bool) {
	sub := name
	if vector {
		sub += "-vector"
	}
	t.Run(sub, func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(1, uint64(len(name))))
		d := &recDev{data: make([]byte, fsBlocks*bs)}
		var dv Device = d
		vd := &vecDev{recDev: d}
		if vector {
			dv = vd
		}
		sb := newJournalSB(set)
		copy(d.data[jStart*bs:], sb.Encode())
		base := bytes.Clone(d.data)
		clock := time.Unix(1700000000, 0)
		j, err := Open(dv, bs, sb, phys, func() time.Time { clock = clock.Add(time.Millisecond); return clock }, sb.Is64Bit())
		if err != nil {
			t.Fatal(err)
		}
		// states[k] is the filesystem after k transactions; ends[k]
		// the log length when Commit k returned.
		state := map[uint64][]byte{}
		states := []map[uint64][]byte{clone(state)}
		ends := []int{0}
		magic := make([]byte, bs) // a block that must be escaped
		magic[0], magic[1], magic[2], magic[3] = 0xc0, 0x3b, 0x39, 0x98
		for k := 1; k <= commits; k++ {
			n := 1 + rng.IntN(70)
			var blocks []txn.Block
			seen := map[uint64]bool{}
			for len(blocks) < n {
				nr := uint64(rng.IntN(fsBlocks))
				if !home(nr) || seen[nr] {
					continue
				}
				seen[nr] = true
				data := make([]byte, bs)
				if rng.IntN(8) == 0 {
					copy(data, magic)
				}
				copy(data[8:], fmt.Sprintf("tx %d block %d", k, nr))
				blocks = append(blocks, txn.Block{Nr: nr, Data: data})
			}
			sortBlocks(blocks)
			var revokes []uint64
			if rng.IntN(3) == 0 {
				for nr := range state {
					if !seen[nr] && rng.IntN(4) == 0 {
						revokes = append(revokes, nr)
					}
				}
			}
			j.Frozen(uint64(k), blocks)
			if err := j.Commit(uint64(k), blocks, revokes); err != nil {
				t.Fatalf("commit %d: %v", k, err)
			}
			for _, b := range blocks {
				state[b.Nr] = b.Data
			}
			states = append(states, clone(state))
			ends = append(ends, len(d.log))
		}
		if err := j.Close(); err != nil {
			t.Fatal(err)
		}
		st := j.Stats()
		t.Logf("%d commits, %d blocks, %d revokes, %d checkpoints, %d flushes, %d records", st.Commits, st.Blocks, st.Revokes, st.Checkpoints, st.Flushes, len(d.log))
		if st.Checkpoints < 3 {
			t.Errorf("only %d checkpoints: the log did not wrap", st.Checkpoints)
		}
		if vector && vd.pieces <= vd.calls {
			t.Errorf("%d vectored writes of %d pieces: no run of blocks went through one", vd.calls, vd.pieces)
		}
		// After Close the journal is empty and the blocks are home.
		final, err := jbd2.Decode(d.data[jStart*bs : jStart*bs+1024])
		if err != nil || final.Start != 0 || final.Sequence != 7+commits {
			t.Fatalf("closed journal superblock: %+v, %v", final, err)
		}
		checkState(t, d.data, states[len(states)-1], "after close")

		for _, cut := range cuts(d.log, rng) {
			img := crash(base, d.log[:cut], rng)
			done := 0 // transactions whose Commit returned before cut
			for k, e := range ends {
				if e <= cut {
					done = k
				}
			}
			got := recoverImage(t, img)
			if !matches(got, states[done]) && (done+1 >= len(states) || !matches(got, states[done+1])) {
				t.Fatalf("crash after record %d (transactions done: %d): the recovered blocks match neither state %d nor %d", cut, done, done, done+1)
			}
		}
	})
}

// cuts returns the crash points to try: right after every flush and at
// 80 random records; EXT4GO_CRASH=all tries every record.
func cuts(log []rec, rng *rand.Rand) []int {
	var out []int
	if os.Getenv("EXT4GO_CRASH") == "all" {
		for i := 0; i <= len(log); i++ {
			out = append(out, i)
		}
		return out
	}
	for i, r := range log {
		if r.flush {
			out = append(out, i+1)
		}
	}
	for range 80 {
		out = append(out, rng.IntN(len(log)+1))
	}
	return out
}

func clone(m map[uint64][]byte) map[uint64][]byte {
	out := make(map[uint64][]byte, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortBlocks(bs []txn.Block) {
	for i := 1; i < len(bs); i++ {
		for k := i; k > 0 && bs[k].Nr < bs[k-1].Nr; k-- {
			bs[k], bs[k-1] = bs[k-1], bs[k]
		}
	}
}

// crash applies log to base: everything before the last flush, and each
// later write with probability 1/2.
func crash(base []byte, log []rec, rng *rand.Rand) []byte {
	img := bytes.Clone(base)
	last := 0
	for i, r := range log {
		if r.flush {
			last = i + 1
		}
	}
	for i, r := range log {
		if r.flush || (i >= last && rng.IntN(2) == 0) {
			continue
		}
		copy(img[r.off:], r.data)
	}
	return img
}

// recoverImage runs jbd2 recovery on img and applies it.
func recoverImage(t *testing.T, img []byte) []byte {
	t.Helper()
	sb, err := jbd2.Decode(img[jStart*bs : jStart*bs+1024])
	if err != nil {
		t.Fatalf("journal superblock: %v", err)
	}
	r, err := jbd2.Recover(sb, func(nr uint32) ([]byte, error) {
		p, err := phys(nr)
		if err != nil {
			return nil, err
		}
		return bytes.Clone(img[p*bs : (p+1)*bs]), nil
	})
	if err != nil {
		t.Fatalf("recover: %v", err)
	}
	if len(r.BadBlocks) > 0 {
		t.Fatalf("recover: bad blocks %v", r.BadBlocks)
	}
	out := bytes.Clone(img)
	for nr, b := range r.Blocks {
		copy(out[nr*bs:], b)
	}
	return out
}

func matches(img []byte, state map[uint64][]byte) bool {
	for nr := uint64(0); nr < fsBlocks; nr++ {
		if !home(nr) {
			continue
		}
		want, ok := state[nr]
		if !ok {
			want = make([]byte, bs)
		}
		if !bytes.Equal(img[nr*bs:(nr+1)*bs], want) {
			return false
		}
	}
	return true
}

func checkState(t *testing.T, img []byte, state map[uint64][]byte, when string) {
	t.Helper()
	if !matches(img, state) {
		t.Fatalf("%s: the blocks are not the last state", when)
	}
}

func TestOpenRefuses(t *testing.T) {
	sb := newJournalSB(func(*jbd2.Superblock) {})
	sb.Start = 3
	if _, err := Open(&recDev{data: make([]byte, fsBlocks*bs)}, bs, sb, phys, nil, false); err == nil {
		t.Error("a journal with a log to recover was opened for writing")
	}
	sb.Start = 0
	if _, err := Open(&recDev{data: make([]byte, fsBlocks*bs)}, 4096, sb, phys, nil, false); err == nil {
		t.Error("a block size mismatch was accepted")
	}
	j, err := Open(&recDev{data: make([]byte, fsBlocks*bs)}, bs, sb, phys, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]txn.Block, jLen)
	for i := range big {
		big[i] = txn.Block{Nr: uint64(i), Data: make([]byte, bs)}
	}
	if err := j.Commit(1, big, nil); err == nil {
		t.Error("a transaction larger than the log was accepted")
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Commit(2, big[:1], nil); err == nil {
		t.Error("commit after Close")
	}
}
