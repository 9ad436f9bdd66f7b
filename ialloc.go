package ext4go

import (
	"github.com/ext4go/ext4go/internal/ialloc"
	"github.com/ext4go/ext4go/internal/super"
)

// inodeStore is how the inode allocator reads and changes inode bitmaps.
type inodeStore struct{ f *FS }

func (s inodeStore) GroupCounts(g uint32) (uint32, uint32, error) {
	gd := s.f.groups[g]
	return gd.FreeInodesCount, gd.UsedDirsCount, nil
}

func (s inodeStore) ReadInodeBitmap(g uint32) ([]byte, error) {
	f := s.f
	return f.readBitmap(g, "inode bitmap", super.BGInodeUninit,
		func(gd *super.GroupDesc) uint64 { return gd.InodeBitmap },
		f.initInodeBitmap,
		func(gd *super.GroupDesc, b []byte) error { return super.VerifyInodeBitmap(f.sb, gd, g, b) })
}

// initInodeBitmap fills b as an INODE_UNINIT group's bitmap: no inode in
// use, the bits past inodes_per_group set (kernel: ext4_init_inode_bitmap).
func (f *FS) initInodeBitmap(b []byte) {
	clear(b)
	for i := uint64(f.sb.InodesPerGroup); i < uint64(len(b))*8; i++ {
		b[i/8] |= 1 << (i % 8)
	}
}

func (s inodeStore) UpdateInodeBitmap(tx ialloc.Tx, g, index uint32, used, isDir bool, freeInodes, usedDirs uint32) error {
	f := s.f
	h, own, err := f.txHandle(tx)
	if err != nil {
		return err
	}
	if own {
		defer h.End()
	}
	gd := f.groups[g]
	if used {
		// A group whose inodes come into use gets its block bitmap
		// initialised too (kernel: __ext4_new_inode).
		f.w.gdMu[g].Lock()
		blockUninit := gd.Flags&super.BGBlockUninit != 0
		f.w.gdMu[g].Unlock()
		if blockUninit {
			err := h.Modify(gd.BlockBitmap, func(b []byte) error {
				f.w.gdMu[g].Lock()
				defer f.w.gdMu[g].Unlock()
				if gd.Flags&super.BGBlockUninit == 0 {
					return nil
				}
				f.initBlockBitmap(g, b)
				gd.Flags &^= super.BGBlockUninit
				super.SetBlockBitmapChecksum(f.sb, gd, b)
				f.w.gdMu[g].bitmapCrcOK = false
				return f.writeGroupDesc(h, g)
			})
			if err != nil {
				return err
			}
		}
	}
	return h.Modify(gd.InodeBitmap, func(b []byte) error {
		f.w.gdMu[g].Lock()
		defer f.w.gdMu[g].Unlock()
		if gd.Flags&super.BGInodeUninit != 0 {
			f.initInodeBitmap(b)
			gd.Flags &^= super.BGInodeUninit
		}
		if used {
			b[index/8] |= 1 << (index % 8)
			if f.sb.HasGroupDescCsum() {
				if unusedFrom := f.sb.InodesPerGroup - gd.ItableUnused; index >= unusedFrom {
					gd.ItableUnused = f.sb.InodesPerGroup - index - 1
				}
			}
		} else {
			b[index/8] &^= 1 << (index % 8)
		}
		gd.FreeInodesCount = freeInodes
		gd.UsedDirsCount = usedDirs
		super.SetInodeBitmapChecksum(f.sb, gd, b)
		return f.writeGroupDesc(h, g)
	})
}
