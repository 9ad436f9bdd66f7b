package mkfs

import (
	"crypto/rand"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/jbd2"
	"github.com/ext4go/ext4go/internal/super"
)

// plan is the resolved geometry of the new filesystem: what mke2fs's PRS and
// ext2fs_initialize compute before anything is allocated.
type plan struct {
	feat featureSet

	blockSize  uint32
	logBlock   uint32 // s_log_block_size
	firstData  uint32 // s_first_data_block
	reqBlocks  uint64 // blocks asked for (fs_param's count)
	blocks     uint64 // blocks after dropping a too small last group
	rBlocks    uint64 // reserved for root
	bpg        uint32 // blocks (= clusters) per group
	groups     uint32
	descSize   uint32
	descBlocks uint32 // fs->desc_blocks
	rsvGDT     uint32 // s_reserved_gdt_blocks
	inodeSize  uint32
	ipg        uint32 // inodes per group
	itb        uint32 // inode table blocks per group
	inodes     uint32
	firstIno   uint32
	logFlex    uint8 // s_log_groups_per_flex
	backupBGs  [2]uint32
	journal    uint32    // journal blocks; 0 = no journal
	orphan     uint32    // orphan file blocks; 0 = none
	nowTime    time.Time // creation time
	uuid       [16]byte
	hashSeed   [16]byte
	label      string
	rootUID    uint32
	rootGID    uint32
	zeroInit   bool // NoLazyInit: write zeros over inode tables and journal
}

func (p *plan) has(kind int, bit uint32) bool { return p.feat.has(kind, bit) }
func (p *plan) csum() bool                    { return p.has(super.KindROCompat, super.ROCompatMetadataCsum) }
func (p *plan) gdCsum() bool {
	return p.csum() || p.has(super.KindROCompat, super.ROCompatGDTCsum)
}
func (p *plan) extents() bool        { return p.has(super.KindIncompat, super.IncompatExtents) }
func (p *plan) metaBG() bool         { return p.has(super.KindIncompat, super.IncompatMetaBG) }
func (p *plan) descPerBlock() uint32 { return p.blockSize / p.descSize }
func (p *plan) addrPerBlock() uint32 { return p.blockSize / 4 }

// usage types of e2fsprogs 1.47's default /etc/mke2fs.conf: blocksize,
// inode_ratio and inode_size overrides (0: not set; a blocksize of -1, as
// largefile has, means the default).
type usageType struct {
	blockSize  int
	inodeRatio int
	inodeSize  int
}

var usageTypes = map[string]usageType{
	"floppy":     {1024, 8192, 0},
	"small":      {1024, 4096, 0},
	"default":    {0, 0, 0},
	"big":        {0, 32768, 0},
	"huge":       {0, 65536, 0},
	"news":       {0, 4096, 0},
	"largefile":  {-1, 1048576, 0},
	"largefile4": {-1, 4194304, 0},
	"hurd":       {4096, 0, 128},
}

// usageTypeNames lists the usage types -T accepts.
func usageTypeNames() string {
	return strings.Join(slices.Sorted(maps.Keys(usageTypes)), ", ")
}

// mergeUsageTypes applies a comma-separated list of usage types in order,
// a later one's settings overriding an earlier one's (mke2fs -T, read
// through the profile).
func mergeUsageTypes(list string) (usageType, error) {
	var ut usageType
	for _, name := range strings.Split(list, ",") {
		t, ok := usageTypes[name]
		if !ok {
			return usageType{}, optErr("UsageTypes", "unknown usage type %q (known: %s)", name, usageTypeNames())
		}
		if t.blockSize != 0 {
			ut.blockSize = t.blockSize
		}
		if t.inodeRatio != 0 {
			ut.inodeRatio = t.inodeRatio
		}
		if t.inodeSize != 0 {
			ut.inodeSize = t.inodeSize
		}
	}
	if ut.blockSize < 0 {
		ut.blockSize = 0
	}
	return ut, nil
}

const (
	defaultBlockSize  = 4096
	defaultInodeSize  = 256
	defaultInodeRatio = 16384
	defaultFlexSize   = 16
	maxU32            = 1<<32 - 1
	firstInode        = super.GoodOldFirstIno
)

// newPlan resolves o against a device of devSize bytes, like mke2fs's PRS
// followed by ext2fs_initialize. It reads nothing and writes nothing.
func newPlan(o Options, devSize int64) (*plan, error) {
	p := &plan{firstIno: firstInode, zeroInit: o.NoLazyInit}
	size := o.Size
	if size == 0 {
		size = devSize
	}
	if size < 0 {
		return nil, optErr("Size", "negative size %d", size)
	}
	size &^= 4095 // mke2fs counts the device in pages when it takes its size

	ut, err := p.pickFeatures(o, size)
	if err != nil {
		return nil, err
	}
	if err := p.pickBlockSize(o, size, ut); err != nil {
		return nil, err
	}
	if err := p.checkFeatures(); err != nil {
		return nil, err
	}
	inodes, err := p.pickInodes(o, ut)
	if err != nil {
		return nil, err
	}
	pct := 5.0
	if o.ReservedPercent != nil {
		pct = *o.ReservedPercent
		if pct < 0 || pct > 50 || math.IsNaN(pct) {
			return nil, optErr("ReservedPercent", "invalid reserved blocks percent %v (0 to 50)", pct)
		}
	}
	p.rBlocks = uint64(pct * float64(p.reqBlocks) / 100.0) // of the size asked for
	if len(o.Label) > 16 {
		return nil, optErr("Label", "label %q is longer than 16 bytes", o.Label)
	}
	p.label = o.Label
	p.rootUID, p.rootGID = o.RootUID, o.RootGID

	if err := p.initialize(inodes, o.ResizeMax); err != nil {
		return nil, err
	}
	if err := p.pickJournal(o); err != nil {
		return nil, err
	}
	if err := p.checkInodeCount(o); err != nil {
		return nil, err
	}

	p.nowTime = o.CreationTime
	if p.nowTime.IsZero() {
		p.nowTime = time.Now()
	}
	p.uuid = o.UUID
	if p.uuid == ([16]byte{}) && !o.NullUUID {
		p.uuid = randomUUID()
	}
	p.hashSeed = o.HashSeed
	if p.hashSeed == ([16]byte{}) {
		p.hashSeed = randomUUID()
	}
	return p, nil
}

// pickFeatures sets the feature set (base features, the filesystem type's,
// then Features and the journal options) and returns the usage type that
// mke2fs picks from the size (parse_fs_type).
func (p *plan) pickFeatures(o Options, size int64) (usageType, error) {
	fsType := o.FsType
	if fsType == "" {
		fsType = "ext4"
	}
	var typeFeatures string
	switch fsType {
	case "ext2":
	case "ext3":
		typeFeatures = ext3Features
	case "ext4":
		typeFeatures = ext4Features
	default:
		return usageType{}, optErr("FsType", "unknown filesystem type %q (want ext2, ext3 or ext4)", fsType)
	}
	switch o.BlockSize {
	case 0, 1024, 2048, 4096:
	default:
		return usageType{}, optErr("BlockSize", "block size %d is not 1024, 2048 or 4096", o.BlockSize)
	}
	// The size is counted in blocks of the size given on the command line,
	// or of 1 KiB, while the usage type is picked.
	unit := int64(1024)
	if o.BlockSize != 0 {
		unit = int64(o.BlockSize)
	}
	n, meg := uint64(size/unit), uint64(1024*1024/unit)
	usage := "huge"
	switch {
	case n < 3*meg:
		usage = "floppy"
	case n < 512*meg:
		usage = "small"
	case n < 4*1024*1024*meg:
		usage = "default"
	case n < 16*1024*1024*meg:
		usage = "big"
	}

	if err := p.feat.edit(baseFeatures + "," + typeFeatures); err != nil {
		return usageType{}, err
	}
	if err := p.feat.edit(o.Features); err != nil {
		return usageType{}, err
	}
	switch {
	case o.JournalBlocks != 0 && o.JournalMiB != 0:
		return usageType{}, optErr("JournalBlocks", "give JournalBlocks or JournalMiB, not both")
	case o.JournalMiB < 0:
		return usageType{}, optErr("JournalMiB", "negative journal size")
	case o.NoJournal && (o.JournalBlocks != 0 || o.JournalMiB != 0):
		return usageType{}, optErr("NoJournal", "conflicts with a journal size")
	case o.NoJournal:
		p.feat[super.KindCompat] &^= super.CompatHasJournal
	case o.JournalBlocks != 0 || o.JournalMiB != 0:
		p.feat[super.KindCompat] |= super.CompatHasJournal // like -J
	}
	if o.UsageTypes != "" {
		// -T replaces the type the size picks.
		return mergeUsageTypes(o.UsageTypes)
	}
	return usageTypes[usage], nil
}

// pickBlockSize sets the block size (explicit, else the usage type's, else
// 4096) and the block count.
func (p *plan) pickBlockSize(o Options, size int64, ut usageType) error {
	bs := o.BlockSize
	if bs == 0 {
		bs = defaultBlockSize
		if ut.blockSize != 0 {
			bs = ut.blockSize
		}
	}
	p.blockSize = uint32(bs)
	p.logBlock = uint32(bits.TrailingZeros32(p.blockSize)) - super.MinBlockLogSize
	p.reqBlocks = uint64(size) / uint64(bs)
	if p.reqBlocks == 0 {
		return optErr("Size", "size %d bytes is smaller than one block", size)
	}
	if p.reqBlocks > maxU32 {
		if !p.has(super.KindIncompat, super.Incompat64Bit) {
			return optErr("Size", "%d blocks of %d bytes do not fit in 32 bits without the 64bit feature", p.reqBlocks, bs)
		}
		p.feat[super.KindCompat] &^= super.CompatResizeInode
	}
	return nil
}

// checkFeatures refuses what mkfs cannot create and the combinations mke2fs
// refuses, in mke2fs's order.
func (p *plan) checkFeatures() error {
	for _, name := range slices.Sorted(maps.Keys(features)) {
		if ft := features[name]; ft.why != "" && p.feat.has(ft.kind, ft.bit) {
			return &fserr.UnsupportedError{Feature: "mkfs feature " + name, Detail: "mkfs does not create " + ft.why}
		}
	}
	if p.has(super.KindIncompat, super.Incompat64Bit) && !p.extents() {
		return optErr("Features", "64bit requires extent (mke2fs: Extents MUST be enabled for a 64-bit filesystem)")
	}
	if p.csum() {
		p.feat[super.KindROCompat] &^= super.ROCompatGDTCsum // metadata_csum supersedes uninit_bg
	}
	if p.metaBG() && p.has(super.KindCompat, super.CompatResizeInode) {
		return optErr("Features", "resize_inode and meta_bg are not compatible; add ^resize_inode")
	}
	if p.has(super.KindCompat, super.CompatResizeInode) && !p.has(super.KindROCompat, super.ROCompatSparseSuper) {
		return optErr("Features", "reserved online resize blocks (resize_inode) need sparse_super")
	}
	if p.has(super.KindIncompat, super.IncompatCsumSeed) && !p.csum() {
		return optErr("Features", "metadata_csum_seed requires metadata_csum")
	}
	if p.has(super.KindCompat, super.CompatOrphanFile) && !p.has(super.KindCompat, super.CompatHasJournal) {
		return optErr("Features", "cannot set orphan_file without a journal")
	}
	return nil
}

// pickInodes sets the inode size and flex group size and returns the inode
// count to ask ext2fs_initialize for.
func (p *plan) pickInodes(o Options, ut usageType) (uint32, error) {
	bs := int(p.blockSize)
	ratio := o.BytesPerInode
	if ratio == 0 {
		ratio = defaultInodeRatio
		if ut.inodeRatio != 0 {
			ratio = ut.inodeRatio
		}
		ratio = max(ratio, bs)
	} else if ratio < 1024 || ratio > 65536*1024 {
		return 0, optErr("BytesPerInode", "inode ratio %d out of range (min 1024, max %d)", ratio, 65536*1024)
	}
	isz := o.InodeSize
	if isz == 0 {
		isz = defaultInodeSize
		if ut.inodeSize != 0 {
			isz = ut.inodeSize
		}
	} else if isz < super.GoodOldInodeSize || isz > bs || isz&(isz-1) != 0 {
		return 0, optErr("InodeSize", "invalid inode size %d (a power of two, min %d, max %d)", isz, super.GoodOldInodeSize, bs)
	}
	p.inodeSize = uint32(isz)
	if p.has(super.KindIncompat, super.IncompatInlineData) && isz == super.GoodOldInodeSize {
		return 0, optErr("InodeSize", "%d byte inodes are too small for inline data", isz)
	}

	flex := o.FlexBGSize
	if flex != 0 {
		if flex < 1 || flex&(flex-1) != 0 || int64(flex) > 1<<31 { // int64: 1<<31 overflows a 32-bit int
			return 0, optErr("FlexBGSize", "flex_bg size %d must be a power of 2", flex)
		}
		if !p.has(super.KindIncompat, super.IncompatFlexBG) {
			return 0, optErr("FlexBGSize", "flex_bg feature not enabled, so flex_bg size may not be specified")
		}
	} else if p.has(super.KindIncompat, super.IncompatFlexBG) {
		flex = defaultFlexSize
	}
	if flex > 0 {
		p.logFlex = uint8(bits.TrailingZeros32(uint32(flex)))
	}

	inodes := o.InodeCount
	if inodes > maxU32 {
		return 0, optErr("InodeCount", "too many inodes (%d), specify < 2^32 inodes", inodes)
	}
	if inodes == 0 {
		inodes = p.reqBlocks * uint64(bs) / uint64(ratio)
		if inodes > maxU32 {
			if !p.has(super.KindIncompat, super.Incompat64Bit) {
				return 0, optErr("BytesPerInode", "too many inodes (%d), raise the inode ratio", inodes)
			}
			inodes = maxU32
		}
	}
	if inodes*uint64(isz) >= p.reqBlocks*uint64(bs) {
		return 0, optErr("InodeCount", "inode_size (%d) * inodes_count (%d) too big for a filesystem with %d blocks", isz, inodes, p.reqBlocks)
	}
	return uint32(inodes), nil
}

// pickJournal sizes the journal (figure_journal_size) and the orphan file.
func (p *plan) pickJournal(o Options) error {
	asked := o.JournalBlocks != 0 || o.JournalMiB != 0
	if p.has(super.KindCompat, super.CompatHasJournal) {
		def := defaultJournalBlocks(p.blocks)
		var j uint64
		switch {
		case o.JournalBlocks != 0:
			j = uint64(o.JournalBlocks)
		case o.JournalMiB != 0:
			j = uint64(o.JournalMiB) * 1024 / uint64(p.blockSize/1024) // jsize_to_blks
		default:
			j = uint64(max(def, 0))
		}
		p.journal = uint32(min(j, maxU32))
		if def < 0 {
			// Like mke2fs ("Filesystem too small for a journal"), even a
			// requested journal is silently left out, and with it the
			// orphan file, which mke2fs makes along with the journal.
			p.journal = 0
			p.feat[super.KindCompat] &^= super.CompatHasJournal | super.CompatOrphanFile
		} else if asked {
			if j < jbd2.MinJournalBlocks || j > 10240000 {
				return optErr("JournalBlocks", "journal of %d blocks; it must be between 1024 and 10240000 blocks", j)
			}
			if uint64(p.journal) > p.freeBlocksEstimate()/2 {
				return optErr("JournalBlocks", "total journal size too big for filesystem")
			}
		}
	}
	if p.has(super.KindCompat, super.CompatOrphanFile) {
		p.orphan = o.OrphanFileBlocks
		if p.orphan == 0 {
			p.orphan = defaultOrphanBlocks(p.blocks)
		}
	} else if o.OrphanFileBlocks != 0 {
		return optErr("OrphanFileBlocks", "needs the orphan_file feature")
	}
	return nil
}

// checkInodeCount makes sure the inodes mke2fs creates exist: the reserved
// ones, lost+found and the orphan file.
func (p *plan) checkInodeCount(o Options) error {
	need := p.firstIno + 1
	what := "lost+found"
	if p.orphan != 0 {
		need++
		what += " and the orphan file"
	}
	if p.inodes >= need {
		return nil
	}
	opt := "Size"
	switch {
	case o.InodeCount != 0:
		opt = "InodeCount"
	case o.BytesPerInode != 0:
		opt = "BytesPerInode"
	}
	return optErr(opt, "only %d inodes: not enough for the %d reserved inodes and %s", p.inodes, p.firstIno-1, what)
}

// initialize computes the group geometry as ext2fs_initialize does.
func (p *plan) initialize(inodesParam uint32, resizeMax uint64) error {
	bs := p.blockSize
	if bs == 1024 {
		p.firstData = 1
	}
	p.bpg = bs * 8
	p.bpg = min(p.bpg, 1<<16-8) // EXT2_MAX_BLOCKS_PER_GROUP
	p.descSize = super.MinDescSize
	if p.has(super.KindIncompat, super.Incompat64Bit) {
		p.descSize = super.MinDescSize64
	}
	if p.rBlocks >= p.reqBlocks {
		return optErr("ReservedPercent", "reserved blocks (%d) cover the whole filesystem", p.rBlocks)
	}
	p.blocks = p.reqBlocks
	rParam := p.rBlocks
	if p.has(super.KindCompat, super.CompatSparseSuper2) {
		p.backupBGs = [2]uint32{1, ^uint32(0)}
	}
	ipb := bs / p.inodeSize

	// A resize= option fixes s_reserved_gdt_blocks before initialize.
	var rsvParam uint32
	if resizeMax != 0 {
		if !p.has(super.KindCompat, super.CompatResizeInode) && p.metaBG() {
			return optErr("ResizeMax", "needs resize_inode, which meta_bg excludes")
		}
		if resizeMax <= p.reqBlocks {
			return optErr("ResizeMax", "the resize maximum must be greater than the filesystem size")
		}
		groups := ceilDiv(p.reqBlocks, uint64(p.bpg))
		descBlocks := ceilDiv(groups, uint64(p.descPerBlock()))
		rsv := int64(ceilDiv(ceilDiv(resizeMax, uint64(p.bpg)), uint64(p.descPerBlock()))) - int64(descBlocks)
		rsv = min(rsv, int64(p.addrPerBlock()))
		if rsv > 0 {
			p.feat[super.KindCompat] |= super.CompatResizeInode
			rsvParam = uint32(rsv)
		}
	}

	for {
		p.groups = uint32(ceilDiv(p.blocks-uint64(p.firstData), uint64(p.bpg)))
		if p.groups == 0 {
			return optErr("Size", "filesystem too small: no block group fits")
		}
		p.descBlocks = uint32(ceilDiv(uint64(p.groups), uint64(p.descPerBlock())))
		inodes := inodesParam
		if inodes == 0 {
			inodes = uint32(p.blocks / uint64(max(1, 4096/bs)))
		}
		inodes = max(inodes, p.firstIno+1)
		ipg := uint32(ceilDiv(uint64(inodes), uint64(p.groups)))
		if ipg > bs*8 {
			if p.bpg >= 256 {
				p.bpg -= 8
				p.blocks = p.reqBlocks
				continue
			}
			return optErr("InodeCount", "too many inodes for the filesystem")
		}
		ipg = min(ipg, 1<<16-ipb)
		for {
			p.itb = uint32(ceilDiv(uint64(ipg)*uint64(p.inodeSize), uint64(bs)))
			p.ipg = p.itb * bs / p.inodeSize
			p.ipg = max(p.ipg, 8) &^ 7
			p.itb = uint32(ceilDiv(uint64(p.ipg)*uint64(p.inodeSize), uint64(bs)))
			if uint64(p.ipg)*uint64(p.groups) > maxU32 {
				ipg--
				continue
			}
			break
		}
		p.inodes = p.ipg * p.groups

		p.rsvGDT = 0
		if p.has(super.KindCompat, super.CompatResizeInode) {
			if rsvParam != 0 {
				p.rsvGDT = rsvParam
			} else {
				p.rsvGDT = p.calcReservedGDT()
			}
		}
		if p.rsvGDT > p.addrPerBlock() {
			return optErr("ResizeMax", "too many reserved GDT blocks (%d)", p.rsvGDT)
		}
		overhead := 3 + p.itb + p.descBlocks + p.rsvGDT
		if overhead > p.bpg {
			return optErr("InodeCount", "too many inodes: group metadata (%d blocks) exceeds a group (%d blocks)", overhead, p.bpg)
		}

		if p.has(super.KindCompat, super.CompatSparseSuper2) {
			// mke2fs asks for groups 1 and ~0 (num_backup_sb=2); each pass
			// of initialize that gets this far clamps them to the groups
			// there are, before sizing the last group.
			b := &p.backupBGs
			if b[0] >= p.groups {
				b[0] = p.groups - 1
			}
			if b[1] >= p.groups {
				b[1] = p.groups - 1
			}
			if b[1] == b[0] {
				b[1] = 0
			}
			if b[0] > b[1] {
				b[0], b[1] = b[1], b[0]
			}
		}

		// Drop a last group too small for its own metadata.
		overhead = 2 + p.itb
		if p.hasSuper(p.groups - 1) {
			overhead += 1 + p.descBlocks + p.rsvGDT
		}
		rem := uint32((p.blocks - uint64(p.firstData)) % uint64(p.bpg))
		if p.groups == 1 && rem != 0 && rem < overhead {
			return optErr("Size", "filesystem too small: %d blocks cannot hold the metadata of one group (%d blocks)", p.blocks, overhead)
		}
		if rem != 0 && rem < overhead+50 {
			p.blocks -= uint64(rem)
			// Keep the reserved share: mke2fs rescales it to the new count.
			ratio := 100.0 * float64(rParam) / float64(p.reqBlocks)
			p.rBlocks = uint64(ratio * float64(p.blocks) / 100.0)
			continue
		}
		break
	}
	return nil
}

// calcReservedGDT is calc_reserved_gdt_blocks: room for 1024 times the
// filesystem (or 2^32 blocks), at most one block of pointers.
func (p *plan) calcReservedGDT() uint32 {
	maxBlocks := uint64(maxU32)
	if p.blocks < maxBlocks/1024 {
		maxBlocks = p.blocks * 1024
	}
	rsvGroups := ceilDiv(maxBlocks-uint64(p.firstData), uint64(p.bpg))
	rsv := int64(ceilDiv(rsvGroups, uint64(p.descPerBlock()))) - int64(p.descBlocks)
	if rsv < 0 {
		rsv = 0
	}
	return uint32(min(rsv, int64(p.addrPerBlock())))
}

// hasSuper is ext2fs_bg_has_super.
func (p *plan) hasSuper(g uint32) bool {
	switch {
	case g == 0:
		return true
	case p.has(super.KindCompat, super.CompatSparseSuper2):
		return g == p.backupBGs[0] || g == p.backupBGs[1]
	case g <= 1 || !p.has(super.KindROCompat, super.ROCompatSparseSuper):
		return true
	case g&1 == 0:
		return false
	}
	return isPower(g, 3) || isPower(g, 5) || isPower(g, 7)
}

func isPower(n, base uint32) bool {
	x := uint64(base)
	for x < uint64(n) {
		x *= uint64(base)
	}
	return x == uint64(n)
}

// freeBlocksEstimate is the free block count right after initialize, which
// mke2fs checks a requested journal size against.
func (p *plan) freeBlocksEstimate() uint64 {
	var free uint64
	for g := uint32(0); g < p.groups; g++ {
		n := uint64(p.groupBlocks(g))
		used := uint64(p.groupMeta(g).used)
		if p.logFlex == 0 {
			used += uint64(2 + p.itb) // with flex_bg these are charged when allocated
		}
		if n > used {
			free += n - used
		}
	}
	return free
}

// groupFirstBlock and groupLastBlock are ext2fs_group_{first,last}_block2.
func (p *plan) groupFirstBlock(g uint32) uint64 {
	return uint64(p.firstData) + uint64(g)*uint64(p.bpg)
}

func (p *plan) groupLastBlock(g uint32) uint64 {
	if g == p.groups-1 {
		return p.blocks - 1
	}
	return p.groupFirstBlock(g) + uint64(p.bpg) - 1
}

func (p *plan) groupBlocks(g uint32) uint32 {
	return uint32(p.groupLastBlock(g) - p.groupFirstBlock(g) + 1)
}

func (p *plan) groupOfBlock(b uint64) uint32 {
	return uint32((b - uint64(p.firstData)) / uint64(p.bpg))
}

// groupMetaLoc is ext2fs_super_and_bgd_loc2 for one group.
type groupMetaLoc struct {
	super   uint64 // superblock copy, or 0
	oldDesc uint64 // start of the contiguous descriptor table copy, or 0
	newDesc uint64 // meta_bg descriptor block, or 0
	used    uint32 // blocks taken by the above (and reserved GDT blocks)
}

func (p *plan) oldDescBlocks() uint32 {
	if p.metaBG() {
		return 0 // s_first_meta_bg is always 0 here
	}
	return p.descBlocks + p.rsvGDT
}

func (p *plan) groupMeta(g uint32) groupMetaLoc {
	var l groupMetaLoc
	start := p.groupFirstBlock(g)
	if start == 0 && p.blockSize == 1024 {
		start = 1
	}
	has := p.hasSuper(g)
	if has {
		l.super = start
		l.used++
	}
	if !p.metaBG() {
		if has {
			l.oldDesc = start + 1
			l.used += p.oldDescBlocks()
		}
		return l
	}
	dpb := p.descPerBlock()
	if r := g % dpb; r == 0 || r == 1 || r == dpb-1 {
		l.newDesc = start
		if has {
			l.newDesc++
		}
		l.used++
	}
	return l
}

// defaultJournalBlocks is ext2fs_default_journal_size.
func defaultJournalBlocks(blocks uint64) int {
	switch {
	case blocks < 2048:
		return -1
	case blocks < 32768:
		return 1024
	case blocks < 256*1024:
		return 4096
	case blocks < 512*1024:
		return 8192
	case blocks < 4096*1024:
		return 16384
	case blocks < 8192*1024:
		return 32768
	case blocks < 16384*1024:
		return 65536
	case blocks < 32768*1024:
		return 131072
	}
	return 262144
}

// defaultOrphanBlocks is ext2fs_default_orphan_file_blocks.
func defaultOrphanBlocks(blocks uint64) uint32 {
	switch {
	case blocks < 128*1024:
		return 32
	case blocks < 2*1024*1024:
		return uint32(blocks / 4096)
	}
	return 512
}

func ceilDiv(a, b uint64) uint64 { return (a + b - 1) / b }

// randomUUID returns a random (version 4) UUID, as uuid_generate does.
func randomUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails
	u[6] = u[6]&0x0F | 0x40
	u[8] = u[8]&0x3F | 0x80
	return u
}
