package ext4go

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ext4go/ext4go/internal/pad"

	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/orphan"
	"github.com/ext4go/ext4go/internal/super"
)

// orphanFile is the orphan file of a filesystem with feature orphan_file:
// blocks of inode slots where files unlinked while open are recorded,
// instead of on the superblock's singly linked list, which every unlink of
// an open file would otherwise serialise on (kernel: struct
// ext4_orphan_info). Each block has its own lock and an atomic count of
// free slots, so adds and removes on different blocks run in parallel.
// When every slot is taken, orphans go on the list as before.
type orphanFile struct {
	blocks []orphanBlock
	slots  int    // per block
	seed   uint32 // the orphan file inode's checksum seed
	csum   bool
	next   atomic.Uint32 // where the next search for a free slot starts

	// pending are the slots a crash left filled (index, inode), for
	// cleanupOrphans at open.
	pending []orphanSlot
}

type orphanSlot struct {
	idx int
	ino uint32
}

type orphanBlock struct {
	phys uint64
	mu   sync.Mutex // protects the block's slots while one is chosen and written
	free atomic.Int32
	_    [40 * pad.On]byte
}

// loadOrphanFile reads and checks the orphan file (kernel:
// ext4_init_orphan_info). Inodes it lists (a crash left work to finish)
// are recorded in pending for cleanupOrphans.
func (f *FS) loadOrphanFile() (*orphanFile, error) {
	sb := f.sb
	ino := sb.OrphanFileInum
	if ino == 0 || ino > sb.InodesCount {
		return nil, &CorruptError{What: "superblock", Block: 0, Detail: fmt.Sprintf("orphan_file inode %d out of range", ino)}
	}
	n, err := f.inode(ino)
	if err != nil {
		return nil, fmt.Errorf("orphan file: %w", err)
	}
	in := n.in()
	bs := uint64(f.blockSize)
	count := in.Size / bs
	if count == 0 || count > 1<<20 || in.Size%bs != 0 {
		return nil, &CorruptError{What: "orphan file", Block: -1, Ino: ino, Detail: fmt.Sprintf("size %d is not a positive whole number of blocks", in.Size)}
	}
	runs, err := f.mapping(n)
	if err != nil {
		return nil, fmt.Errorf("orphan file: %w", err)
	}
	of := &orphanFile{
		blocks: make([]orphanBlock, count),
		slots:  orphan.Slots(int(bs)),
		seed:   inode.Seed(sb.ChecksumSeed(), ino, in.Generation),
		csum:   sb.HasMetadataCsum(),
	}
	mapped := uint64(0)
	for _, r := range runs {
		if r.unwritten {
			continue
		}
		for i := uint64(0); i < r.length && r.logical+i < count; i++ {
			of.blocks[r.logical+i].phys = r.physical + i
			mapped++
		}
	}
	if mapped != count {
		return nil, &CorruptError{What: "orphan file", Block: -1, Ino: ino, Detail: fmt.Sprintf("%d of its %d blocks are not mapped", count-mapped, count)}
	}
	for i := range of.blocks {
		ob := &of.blocks[i]
		b, err := f.readBlock(ob.phys, "orphan file block")
		if err != nil {
			return nil, err
		}
		if err := orphan.Verify(b, int(bs), of.csum, of.seed, ob.phys); err != nil {
			return nil, err
		}
		free := of.slots
		for j := 0; j < of.slots; j++ {
			if ino := orphan.Slot(b, j); ino != 0 {
				of.pending = append(of.pending, orphanSlot{i*of.slots + j, ino})
				free--
			}
		}
		ob.free.Store(int32(free))
	}
	return of, nil
}

// add records ino in a free slot and returns the slot's index, or -1 when
// every slot is taken (kernel: ext4_orphan_file_add).
func (of *orphanFile) add(f *FS, h handle, ino uint32) (int, error) {
	n := uint32(len(of.blocks))
	start := of.next.Add(1) % n
	for k := uint32(0); k < n; k++ {
		i := (start + k) % n
		ob := &of.blocks[i]
		if ob.free.Add(-1) < 0 {
			ob.free.Add(1)
			continue
		}
		slot := -1
		ob.mu.Lock()
		err := h.Modify(ob.phys, func(b []byte) error {
			for j := 0; j < of.slots; j++ {
				if orphan.Slot(b, j) == 0 {
					slot = j
					orphan.SetSlot(b, j, ino)
					break
				}
			}
			if slot < 0 {
				return fmt.Errorf("orphan file block %d: its free count says a slot is free, none is", ob.phys)
			}
			if of.csum {
				orphan.SetChecksum(b, of.seed, ob.phys)
			}
			return nil
		})
		ob.mu.Unlock()
		if err != nil {
			ob.free.Add(1)
			return -1, err
		}
		return int(i)*of.slots + slot, nil
	}
	return -1, nil
}

// remove frees slot idx, which holds ino (kernel: ext4_orphan_file_del).
func (of *orphanFile) remove(h handle, idx int, ino uint32) error {
	ob := &of.blocks[idx/of.slots]
	slot := idx % of.slots
	ob.mu.Lock()
	defer ob.mu.Unlock()
	err := h.Modify(ob.phys, func(b []byte) error {
		if got := orphan.Slot(b, slot); got != ino {
			return fmt.Errorf("orphan file block %d slot %d holds inode %d, not %d", ob.phys, slot, got, ino)
		}
		orphan.SetSlot(b, slot, 0)
		if of.csum {
			orphan.SetChecksum(b, of.seed, ob.phys)
		}
		return nil
	})
	if err == nil {
		ob.free.Add(1)
	}
	return err
}

// setOrphanPresent sets or clears ro_compat orphan_present, which tells
// the kernel and e2fsck that the orphan file may list inodes: set while
// the filesystem is open for writing, cleared at a clean close. w.sbMu
// must be held.
func (f *FS) setOrphanPresent(on bool) {
	if f.w.orphanFile == nil {
		return
	}
	if on {
		f.sb.FeatureROCompat |= super.ROCompatOrphanPresent
	} else {
		f.sb.FeatureROCompat &^= super.ROCompatOrphanPresent
	}
}
