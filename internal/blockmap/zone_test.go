package blockmap

import (
	"errors"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/syszone"
)

// TestMapZone: a pointer naming a block of the system zone makes every
// lookup and walk through the array holding it fail as corruption, naming
// the file block, unless the inode owns the range; the Editor refuses it
// before changing anything.
func TestMapZone(t *testing.T) {
	m := newMemFS(1024)
	data := sample(1024)
	root := m.build(t, data)
	p := uint32(256)
	for _, c := range []struct {
		name   string
		zone   *syszone.Zone
		lookup uint32 // a file block whose lookup must fail, or must work when want is ""
		want   string
	}{
		{"outside", syszone.New([]syszone.Range{{Start: 1, End: 999}}), 5, ""},
		{"direct", syszone.New([]syszone.Range{{Start: 50001, End: 50002}}), 0, "file blocks from 1"},
		// Block 1000 is the single indirect block (memFS allocates from 1000).
		{"indirect block", syszone.New([]syszone.Range{{Start: 1000, End: 1001}}), 12 + p - 2, "file blocks from 12"},
		{"data under an indirect block", syszone.New([]syszone.Range{{Start: 60001, End: 60002}}), 12 + p - 1, "file blocks from 267"},
		{"owned by the inode", syszone.New(nil).WithOwner(11, []syszone.Range{{Start: 0, End: 1 << 32}}), 12 + p - 1, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			mp := m.mapOf(root)
			mp.Zone = c.zone
			_, lerr := mp.Lookup(c.lookup)
			werr := mp.Walk(func(Run) error { return nil })
			for _, err := range []error{lerr, werr} {
				if c.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					continue
				}
				var ce *fserr.CorruptError
				if !errors.As(err, &ce) || ce.Ino != 11 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fixed metadata") {
					t.Errorf("%v, want a corruption of inode 11 saying %q", err, c.want)
				}
			}
		})
	}

	// The Editor: a map whose indirect block lies in the zone is left as it was.
	s := newMemStore(t, 1024)
	var r [RootSize]byte
	e := &Editor{Root: &r, Store: s, BlockSize: 1024, BlocksCount: 1 << 30, Ino: 11}
	if err := e.Insert(10, 5000, 4); err != nil { // file blocks 10..13: an indirect block
		t.Fatal(err)
	}
	ind := uint64(r[4*IndSlot]) | uint64(r[4*IndSlot+1])<<8 | uint64(r[4*IndSlot+2])<<16 | uint64(r[4*IndSlot+3])<<24
	e.Zone = syszone.New([]syszone.Range{{Start: ind, End: ind + 1}})
	before := r
	if err := e.Insert(20, 6000, 1); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Insert under the indirect block: %v, want ErrCorrupt", err)
	}
	if err := e.Remove(0, 1<<32-1); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Remove: %v, want ErrCorrupt", err)
	}
	if r != before {
		t.Error("a refused edit changed i_block")
	}
	e.Zone = syszone.New([]syszone.Range{{Start: 7000, End: 7001}})
	if err := e.Insert(2, 7000, 1); err == nil {
		t.Error("Insert of a data block in the zone succeeded")
	}
}
