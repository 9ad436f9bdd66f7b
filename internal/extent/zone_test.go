package extent

import (
	"errors"
	"strings"
	"testing"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/syszone"
)

// TestTreeZone: an extent or an index naming a block of the system zone
// makes every walk and lookup through its node fail as corruption, unless
// the inode owns that range; the Editor refuses it before changing
// anything.
func TestTreeZone(t *testing.T) {
	m := newMemFS(1024)
	exts := sampleExtents(40) // data from block 1_000_000, nodes from 100
	root := m.build(t, exts, 8)
	tr := m.tree(root)
	if _, err := tr.Extents(); err != nil {
		t.Fatal(err)
	}
	nodes, err := tr.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		zone *syszone.Zone
		want string // "" when the walk must work
	}{
		{"outside", syszone.New([]syszone.Range{{Start: 1, End: 99}, {Start: 2_000_000, End: 2_000_100}}), ""},
		{"data", syszone.New([]syszone.Range{{Start: exts[17].Start + 1, End: exts[17].Start + 2}}), "maps file blocks"},
		{"index node", syszone.New([]syszone.Range{{Start: nodes[len(nodes)-1], End: nodes[len(nodes)-1] + 1}}), "names block"},
		{"owned by the inode", syszone.New(nil).WithOwner(12, []syszone.Range{{Start: 0, End: 1 << 40}}), ""},
		{"owned by another", syszone.New(nil).WithOwner(8, []syszone.Range{{Start: exts[3].Start, End: exts[3].Start + 1}}), "maps file blocks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := m.tree(root)
			tr.Zone = c.zone
			_, err := tr.Extents()
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *fserr.CorruptError
			if !errors.As(err, &ce) || ce.Ino != 12 || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "fixed metadata") {
				t.Fatalf("walk: %v, want a corruption of inode 12 saying %q", err, c.want)
			}
		})
	}

	// An Editor on a root whose extent lies in the zone changes nothing.
	s := newMemStore(1024)
	root0 := mustEncodeRoot(t, &Node{Header: Header{Magic: Magic, Max: 4}})
	ed := &Editor{Root: &root0, Store: s, BlockSize: 1024, BlocksCount: 1 << 20, Ino: 12}
	if err := ed.Insert(Extent{Logical: 0, Len: 4, Start: 500}); err != nil {
		t.Fatal(err)
	}
	ed.Zone = syszone.New([]syszone.Range{{Start: 502, End: 503}})
	before := *ed.Root
	if _, err := ed.Lookup(10); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Lookup: %v, want ErrCorrupt", err)
	}
	if err := ed.Insert(Extent{Logical: 10, Len: 1, Start: 600}); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Insert: %v, want ErrCorrupt", err)
	}
	if err := ed.Remove(0, MaxLogical); !errors.Is(err, fserr.ErrCorrupt) {
		t.Errorf("Remove: %v, want ErrCorrupt", err)
	}
	if *ed.Root != before {
		t.Error("a refused edit changed the root")
	}
	if err := ed.Insert(Extent{Logical: 10, Len: 1, Start: 502}); err == nil {
		t.Error("Insert of an extent in the zone succeeded")
	}
}
