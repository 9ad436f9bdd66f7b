package mkfs

import (
	"fmt"
	"sort"

	"github.com/ext4go/ext4go/internal/super"
)

// image is the list of writes that make the filesystem, in order: ranges to
// zero first, then metadata and file blocks, the primary superblock last.
type image struct {
	bs      int64
	zero    []extentRange // in blocks
	blocks  map[uint64][]byte
	supers  []superWrite // backup superblocks, then the primary
	written int64        // content bytes written before the superblock flush
}

type superWrite struct {
	off int64
	b   []byte
}

// finish completes the superblock and turns the builder into the writes.
func (f *builder) finish() (*image, error) {
	p := f.p
	img := &image{bs: int64(p.blockSize), blocks: f.blocks}

	// Block and inode bitmaps of initialised groups (write_bitmaps).
	bs := p.blockSize
	for g := uint32(0); g < p.groups; g++ {
		gd := &f.gd[g]
		if !p.gdCsum() || gd.Flags&super.BGBlockUninit == 0 {
			buf := make([]byte, bs)
			for i := range buf {
				buf[i] = 0xFF
			}
			nbytes := p.bpg / 8
			f.bmap.bytes(buf[:nbytes], p.groupFirstBlock(g))
			if g == p.groups-1 {
				// Pad the last group's bitmap past the end of the filesystem.
				if nbits := uint32((p.blocks - uint64(p.firstData)) % uint64(p.bpg)); nbits != 0 {
					for j := nbits; j < bs*8; j++ {
						buf[j/8] |= 1 << (j % 8)
					}
				}
			}
			super.SetBlockBitmapChecksum(f.sb, gd, buf)
			img.blocks[gd.BlockBitmap] = buf
		}
		if !p.gdCsum() || gd.Flags&super.BGInodeUninit == 0 {
			buf := make([]byte, bs)
			for i := range buf {
				buf[i] = 0xFF
			}
			nbytes := p.ipg / 8
			clear(buf[:nbytes])
			first := g*p.ipg + 1
			for ino := range f.inoMap {
				if ino >= first && ino < first+p.ipg {
					i := ino - first
					buf[i/8] |= 1 << (i % 8)
				}
			}
			super.SetInodeBitmapChecksum(f.sb, gd, buf)
			img.blocks[gd.InodeBitmap] = buf
		}
	}

	// Inode table blocks holding the inodes written.
	isz := p.inodeSize
	for ino, in := range f.inodes {
		g, idx := (ino-1)/p.ipg, (ino-1)%p.ipg
		blk := f.gd[g].InodeTable + uint64(idx*isz/bs)
		buf := img.blocks[blk]
		if buf == nil {
			buf = make([]byte, bs)
			img.blocks[blk] = buf
		}
		off := idx * isz % bs
		dst := buf[off : off+isz]
		var err error
		if p.csum() {
			err = in.EncodeChecksum(dst, f.csumSeed, ino)
		} else {
			err = in.Encode(dst)
		}
		if err != nil {
			return nil, fmt.Errorf("mkfs: encoding inode %d: %w", ino, err)
		}
	}

	// Zeroing that mke2fs does on a device that may hold old data: the
	// boot sectors and old superblock, the end of the device (old MD RAID
	// metadata), the ranges collected while building.
	if !f.zeroed {
		img.zero = append(img.zero, extentRange{0, 1})
		if p.blockSize == 1024 {
			img.zero = append(img.zero, extentRange{1, min(3, p.blocks-1)})
		}
		rsv := uint64(65536 / p.blockSize)
		start := p.blocks &^ (rsv - 1)
		if start > rsv {
			start -= rsv
		}
		if start > 0 {
			img.zero = append(img.zero, extentRange{start, p.blocks - start})
		}
		img.zero = append(img.zero, f.zero...)
	}

	for _, b := range img.blocks {
		img.written += int64(len(b))
	}

	// Superblock counts (s_kbytes_written as ext2fs_close2 counts it).
	sb := f.sb
	sb.SetFreeBlocksCount(f.freeBlocks)
	sb.FreeInodesCount = f.freeInodes
	sb.OverheadClusters = uint32(f.overhead)
	sb.JnlBlocks = f.jnlBlocks
	sb.OrphanFileInum = f.orphanIno
	if sb.KbytesWritten != 0 {
		sb.KbytesWritten += uint64(img.written>>10) + uint64((p.descBlocks+1)/(bs/1024))
	}

	// Group descriptor table, and its copies (ext2fs_flush2).
	ds := p.descSize
	gdt := make([]byte, uint64(p.descBlocks)*uint64(bs))
	for g := uint32(0); g < p.groups; g++ {
		copy(gdt[g*ds:], super.EncodeGroupDesc(sb, &f.gd[g], g))
	}
	for g := uint32(0); g < p.groups; g++ {
		l := p.groupMeta(g)
		if l.oldDesc != 0 {
			for i := uint32(0); i < p.descBlocks; i++ {
				img.blocks[l.oldDesc+uint64(i)] = gdt[i*bs : (i+1)*bs]
			}
		}
		if l.newDesc != 0 {
			m := g / p.descPerBlock()
			img.blocks[l.newDesc] = gdt[m*bs : (m+1)*bs]
		}
		if g > 0 && l.super != 0 {
			// Backups are written while the state says "not clean".
			c := *sb
			c.BlockGroupNr = uint16(min(g, 1<<16-1))
			c.State &^= super.StateValid
			img.supers = append(img.supers, superWrite{int64(l.super) * int64(bs), c.Encode()})
		}
	}
	sb.BlockGroupNr = 0
	img.supers = append(img.supers, superWrite{super.Offset, sb.Encode()})
	return img, nil
}

// writeTo performs the writes on d, merging adjacent blocks.
func (img *image) writeTo(d writerAt) error {
	bs := img.bs
	zeroBuf := make([]byte, 1<<20)
	for _, z := range img.zero {
		off, end := int64(z.start)*bs, int64(z.start+z.n)*bs
		for off < end {
			n := min(end-off, int64(len(zeroBuf)))
			if _, err := d.WriteAt(zeroBuf[:n], off); err != nil {
				return err
			}
			off += n
		}
	}
	blks := make([]uint64, 0, len(img.blocks))
	for b := range img.blocks {
		blks = append(blks, b)
	}
	sort.Slice(blks, func(i, j int) bool { return blks[i] < blks[j] })
	var run []byte
	var runStart uint64
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		_, err := d.WriteAt(run, int64(runStart)*bs)
		run = run[:0]
		return err
	}
	for _, b := range blks {
		data := img.blocks[b]
		if len(data) == 0 {
			continue
		}
		if len(run) > 0 && runStart+uint64(int64(len(run))/bs) != b || len(run) >= 1<<20 {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(run) == 0 {
			runStart = b
		}
		run = append(run, data...)
	}
	if err := flush(); err != nil {
		return err
	}
	for _, s := range img.supers {
		if _, err := d.WriteAt(s.b, s.off); err != nil {
			return err
		}
	}
	return nil
}

type writerAt interface {
	WriteAt(p []byte, off int64) (int, error)
}
