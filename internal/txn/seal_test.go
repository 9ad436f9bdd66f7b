package txn

import (
	"errors"
	"testing"
)

// A seal says a block's checksum under one seed is known good: it holds
// from the verifying view (or sealed write) until any change of the block,
// and only for that seed.
func TestSeal(t *testing.T) {
	m, _ := newTest(t, 16, Options{})
	verifies := 0
	// view reads block 4 under seed, verifying (and so sealing) when it is
	// not sealed, and reports whether it was sealed.
	view := func(seed uint32, verifyOK bool) bool {
		t.Helper()
		var was bool
		err := m.ViewSealed(4, seed, func(b []byte, sealed bool) (bool, error) {
			was = sealed
			if !sealed {
				verifies++
				return verifyOK, nil
			}
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return was
	}
	change := func(modify func(h *Handle) error) {
		t.Helper()
		h, err := m.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer h.End()
		modify(h)
	}
	write := func(b []byte) error { b[0]++; return nil }

	if view(7, false) || view(7, false) {
		t.Fatal("a block that failed verification was sealed")
	}
	if view(7, true) {
		t.Fatal("sealed before any verification held")
	}
	if !view(7, true) || verifies != 3 {
		t.Fatalf("verified block not sealed (%d verifications, want 3)", verifies)
	}
	if view(8, true) {
		t.Fatal("a seal under seed 7 served seed 8")
	}
	if view(7, true) {
		t.Fatal("seed 8's verification kept seed 7's seal")
	}

	change(func(h *Handle) error { return h.Modify(4, write) })
	if view(7, true) {
		t.Fatal("seal survived Modify")
	}
	change(func(h *Handle) error { return h.ModifySealed(4, 9, write) })
	if !view(9, true) {
		t.Fatal("ModifySealed did not seal")
	}
	change(func(h *Handle) error {
		return h.ModifySealed(4, 9, func(b []byte) error { b[1] = 1; return errors.New("half done") })
	})
	if view(9, true) {
		t.Fatal("a failed ModifySealed sealed its half-written block")
	}
	change(func(h *Handle) error { return h.CreateSealed(4, 10, write) })
	if !view(10, true) {
		t.Fatal("CreateSealed did not seal")
	}
	change(func(h *Handle) error { return h.Create(4, write) })
	if view(10, true) {
		t.Fatal("seal survived Create")
	}
	// Forgotten, the block comes back from the device unsealed.
	view(11, true)
	change(func(h *Handle) error { h.Forget(4); return nil })
	if view(11, true) {
		t.Fatal("seal survived Forget")
	}
}
