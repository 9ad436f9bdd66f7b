package journal

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/txn"
)

// FuzzRecoverWritten writes a journal with this package (a format and
// transactions chosen by the input), leaves it as a crash would, corrupts
// log bytes where the input says, and recovers it: recovery must never
// panic or run away, and every replayed copy is one whole block.
func FuzzRecoverWritten(f *testing.F) {
	f.Add(uint8(0), uint64(1), []byte{})
	f.Add(uint8(2), uint64(7), []byte{0, 0, 1, 0, 0xff})
	f.Add(uint8(3), uint64(9), []byte{3, 4, 0, 0, 0xc0, 7, 0, 0, 0x3b})
	f.Fuzz(func(t *testing.T, format uint8, seed uint64, damage []byte) {
		names := []string{"v2-plain", "64bit", "csum-v3", "csum-v2", "csum-v1"}
		set := formats()[names[int(format)%len(names)]]
		d := &recDev{data: make([]byte, fsBlocks*bs)}
		sb := newJournalSB(set)
		copy(d.data[jStart*bs:], sb.Encode())
		clock := time.Unix(1700000000, 0)
		j, err := Open(d, bs, sb, phys, func() time.Time { clock = clock.Add(time.Second); return clock }, sb.Is64Bit())
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(seed, 1))
		for k := 1; k <= 1+int(seed%12); k++ {
			var blocks []txn.Block
			seen := map[uint64]bool{}
			for range 1 + rng.IntN(40) {
				nr := uint64(rng.IntN(fsBlocks))
				if !home(nr) || seen[nr] {
					continue
				}
				seen[nr] = true
				data := make([]byte, bs)
				binary.BigEndian.PutUint64(data[rng.IntN(bs-8):], rng.Uint64())
				if rng.IntN(6) == 0 {
					binary.BigEndian.PutUint32(data, jbd2.Magic)
				}
				blocks = append(blocks, txn.Block{Nr: nr, Data: data})
			}
			sortBlocks(blocks)
			var revokes []uint64
			for range rng.IntN(5) {
				revokes = append(revokes, uint64(rng.IntN(fsBlocks)))
			}
			if err := j.Commit(uint64(k), blocks, revokes); err != nil {
				t.Fatal(err)
			}
		}
		// Damage: (offset in the log, value) pairs, 5 bytes each.
		img := bytes.Clone(d.data)
		for i := 0; i+5 <= len(damage); i += 5 {
			off := int(binary.LittleEndian.Uint32(damage[i:])) % (jLen * bs)
			img[jStart*bs+off] = damage[i+4]
		}
		jsb, err := jbd2.Decode(img[jStart*bs : jStart*bs+1024])
		if err != nil {
			return // the damage hit the superblock: refused, fine
		}
		reads := 0
		r, err := jbd2.Recover(jsb, func(nr uint32) ([]byte, error) {
			if reads++; reads > 8*jLen {
				t.Fatalf("recovery read %d blocks of a %d-block journal", reads, jLen)
			}
			p, err := phys(nr)
			if err != nil {
				return nil, err
			}
			return bytes.Clone(img[p*bs : (p+1)*bs]), nil
		})
		if err != nil {
			return
		}
		// Block numbers are whatever the (damaged, perhaps unchecksummed)
		// tags say: the filesystem checks them against its size.
		for nr, b := range r.Blocks {
			if len(b) != bs {
				t.Fatalf("replayed block %d of %d bytes", nr, len(b))
			}
		}
	})
}
