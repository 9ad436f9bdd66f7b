package txn

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// toySum is a checksum in a block's last 4 bytes: crc32 of the rest, xor
// seed. A block whose first byte is 0xff counts as malformed.
type toySum struct{ calls int }

func (s *toySum) sum(b []byte, seed uint32) error {
	s.calls++
	if b[0] == 0xff {
		return errors.New("malformed header")
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4])^seed)
	return nil
}

func toyGood(b []byte, seed uint32) bool {
	return binary.LittleEndian.Uint32(b[len(b)-4:]) == crc32.ChecksumIEEE(b[:len(b)-4])^seed
}

// A deferred checksum is computed once per block per transaction, at the
// freeze, however often the block changed; every reader that may look at
// the checksum field sees it computed, and only a reader under the
// writer's seal sees the content before that.
func TestModifyDeferred(t *testing.T) {
	m, d := newTest(t, 16, Options{})
	var s toySum
	h, err := m.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := h.ModifyDeferred(4, 7, s.sum, func(b []byte) error { b[1] = byte(i); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if s.calls != 0 {
		t.Fatalf("%d checksums computed by 100 deferred changes, want 0 before the commit", s.calls)
	}
	// Under the writer's seal: the content, sealed, its checksum not
	// computed yet.
	err = m.ViewSealed(4, 7, func(b []byte, sealed bool) (bool, error) {
		if !sealed || b[1] != 99 {
			t.Errorf("view under the writer's seal: sealed %v, content %d", sealed, b[1])
		}
		return true, nil
	})
	if err != nil || s.calls != 0 {
		t.Fatalf("view under the writer's seal: %v, %d checksums computed", err, s.calls)
	}
	h.End()
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	if s.calls != 1 {
		t.Fatalf("%d checksums computed for one block of one transaction, want 1", s.calls)
	}
	if blk := d.data[4*1024 : 5*1024]; blk[1] != 99 || !toyGood(blk, 7) {
		t.Fatalf("committed block: content %d, checksum good %v", blk[1], toyGood(blk, 7))
	}

	// Each kind of reader that may look at the field settles it first.
	readers := map[string]func(check func(b []byte)) error{
		"View": func(check func(b []byte)) error {
			return m.View(4, func(b []byte) error { check(b); return nil })
		},
		"ViewSealed under another seed": func(check func(b []byte)) error {
			return m.ViewSealed(4, 8, func(b []byte, sealed bool) (bool, error) {
				if sealed {
					t.Error("sealed under another seed")
				}
				check(b)
				return false, nil
			})
		},
		"Modify": func(check func(b []byte)) error {
			h, err := m.Begin()
			if err != nil {
				return err
			}
			defer h.End()
			return h.Modify(4, func(b []byte) error { check(b); return nil })
		},
		"ModifyDeferred under another seed": func(check func(b []byte)) error {
			h, err := m.Begin()
			if err != nil {
				return err
			}
			defer h.End()
			return h.ModifyDeferred(4, 8, s.sum, func(b []byte) error { check(b); return nil })
		},
	}
	for name, read := range readers {
		h, err := m.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if err := h.ModifyDeferred(4, 7, s.sum, func(b []byte) error { b[2]++; return nil }); err != nil {
			t.Fatal(err)
		}
		h.End()
		before := s.calls
		if err := read(func(b []byte) {
			if !toyGood(b, 7) {
				t.Errorf("%s: checksum field not computed", name)
			}
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.calls != before+1 {
			t.Errorf("%s: %d checksums computed, want 1", name, s.calls-before)
		}
		if err := m.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	// A Create starts the block afresh: the pending checksum of what it
	// replaces is not computed.
	h, _ = m.Begin()
	h.ModifyDeferred(5, 7, s.sum, func(b []byte) error { b[1] = 1; return nil })
	before := s.calls
	h.CreateDeferred(5, 7, s.sum, func(b []byte) error { b[1] = 2; return nil })
	h.End()
	if err := m.Commit(); err != nil {
		t.Fatal(err)
	}
	if blk := d.data[5*1024 : 6*1024]; s.calls != before+1 || blk[1] != 2 || !toyGood(blk, 7) {
		t.Fatalf("Create over a pending checksum: %d computed (want 1), content %d, good %v", s.calls-before, blk[1], toyGood(blk, 7))
	}
}

// A deferred checksum that cannot be computed at the freeze aborts the
// commit: no block of the transaction reaches the device, nothing more
// commits, and a reader of the block gets the error.
func TestModifyDeferredSumFails(t *testing.T) {
	m, d := newTest(t, 16, Options{})
	var s toySum
	h, _ := m.Begin()
	h.Modify(3, func(b []byte) error { b[0] = 1; return nil })
	h.ModifyDeferred(4, 7, s.sum, func(b []byte) error { b[0] = 0xff; return nil })
	h.End()
	if err := m.Commit(); err == nil {
		t.Fatal("commit of a block whose checksum failed succeeded")
	}
	if d.writes != 0 {
		t.Fatalf("%d blocks written by the failed commit", d.writes)
	}
	if !errors.Is(m.Err(), ErrAborted) {
		t.Fatalf("manager error %v, want ErrAborted", m.Err())
	}
	if _, err := m.Begin(); err == nil {
		t.Fatal("Begin after the abort succeeded")
	}

	m, _ = newTest(t, 16, Options{})
	h, _ = m.Begin()
	h.ModifyDeferred(4, 7, s.sum, func(b []byte) error { b[0] = 0xff; return nil })
	h.End()
	if err := m.View(4, func([]byte) error { return nil }); err == nil {
		t.Fatal("a view of a block whose checksum failed succeeded")
	}
	// Unsealed: a reader under the writer's seal verifies it now.
	m.ViewSealed(4, 7, func(b []byte, sealed bool) (bool, error) {
		if sealed {
			t.Error("a block whose checksum failed still sealed")
		}
		return false, nil
	})
}

// The deferred write allocates nothing.
func TestModifyDeferredAllocs(t *testing.T) {
	m, _ := newTest(t, 16, Options{})
	sum := SumFunc(func(b []byte, seed uint32) error { b[len(b)-1] = byte(seed); return nil })
	fn := func(b []byte) error { b[1]++; return nil }
	h, _ := m.Begin()
	h.ModifyDeferred(4, 7, sum, fn) // the buffer and its dirty entry
	if n := testing.AllocsPerRun(100, func() { h.ModifyDeferred(4, 7, sum, fn) }); n != 0 {
		t.Fatalf("ModifyDeferred: %v allocations, want 0", n)
	}
	h.End()
}
