package mkfs

import (
	"encoding/binary"

	"github.com/ext4go/ext4go/internal/csum"
	"github.com/ext4go/ext4go/internal/super"
)

// Fixed superblock values mke2fs writes.
const (
	extraIsize      = 32  // sizeof(struct ext2_inode_large) - 128
	largeInodeSize  = 160 // sizeof(struct ext2_inode_large)
	jnlBackupBlocks = 1   // EXT3_JNL_BACKUP_BLOCKS
	hashHalfMD4     = 1   // EXT2_HASH_HALF_MD4
	encAES256XTS    = 1   // EXT4_ENCRYPTION_MODE_AES_256_XTS
	encAES256CTS    = 4   // EXT4_ENCRYPTION_MODE_AES_256_CTS
)

// superblock returns the superblock as ext2fs_initialize and mke2fs's main
// fill it in; counts and the journal backup are completed by finish.
func (p *plan) superblock() *super.Superblock {
	sb := &super.Superblock{
		InodesCount:      p.inodes,
		FirstDataBlock:   p.firstData,
		LogBlockSize:     p.logBlock,
		LogClusterSize:   p.logBlock,
		BlocksPerGroup:   p.bpg,
		ClustersPerGroup: p.bpg,
		InodesPerGroup:   p.ipg,
		MaxMntCount:      -1,
		Magic:            super.Magic,
		State:            super.StateValid,
		Errors:           super.ErrorsContinue,
		CreatorOS:        super.OSLinux,
		RevLevel:         super.DynamicRev,
		FirstIno:         p.firstIno,
		InodeSizeRaw:     uint16(p.inodeSize),
		FeatureCompat:    p.feat[super.KindCompat],
		FeatureIncompat:  p.feat[super.KindIncompat],
		FeatureROCompat:  p.feat[super.KindROCompat],
		UUID:             p.uuid,
		DefHashVersion:   hashHalfMD4,
		DefaultMountOpts: super.DefmXattrUser | super.DefmACL,
		// char is signed on the machines e2fsprogs is built for here (x86),
		// so ext2fs_initialize marks the directory hash signed.
		Flags:            super.FlagSignedHash,
		LogGroupsPerFlex: p.logFlex,
		BackupBGs:        p.backupBGs,
	}
	sb.SetBlocksCount(p.blocks)
	sb.SetRBlocksCount(p.rBlocks)
	sb.ReservedGDTBlocks = uint16(p.rsvGDT)
	sb.SetLabel(p.label)
	for i := range sb.HashSeed {
		sb.HashSeed[i] = binary.LittleEndian.Uint32(p.hashSeed[4*i:])
	}
	if p.has(super.KindIncompat, super.Incompat64Bit) {
		sb.DescSizeRaw = super.MinDescSize64
	}
	if p.inodeSize >= largeInodeSize {
		sb.MinExtraIsize = extraIsize
		sb.WantExtraIsize = extraIsize
	}
	t := p.nowTime.Unix()
	sb.MkfsTime, sb.MkfsTimeHi = uint32(t), uint8(uint64(t)>>32)
	sb.Lastcheck, sb.LastcheckHi = uint32(t), uint8(uint64(t)>>32)
	sb.Wtime, sb.WtimeHi = uint32(t), uint8(uint64(t)>>32)
	if p.has(super.KindCompat, super.CompatHasJournal) {
		sb.JournalInum = super.JournalIno
	}
	if p.csum() {
		sb.ChecksumType = super.ChecksumCRC32C
	}
	if p.has(super.KindIncompat, super.IncompatCsumSeed) {
		sb.ChecksumSeedRaw = csum.CRC32C(^uint32(0), p.uuid[:])
	}
	if p.has(super.KindIncompat, super.IncompatEncrypt) {
		sb.EncryptAlgos = [4]byte{encAES256XTS, encAES256CTS}
	}
	if p.has(super.KindIncompat, super.IncompatFlexBG) || p.has(super.KindROCompat, super.ROCompatHugeFile) ||
		p.has(super.KindROCompat, super.ROCompatGDTCsum) || p.has(super.KindROCompat, super.ROCompatDirNlink) ||
		p.csum() || p.has(super.KindROCompat, super.ROCompatExtraIsize) {
		sb.KbytesWritten = 1
	}
	return sb
}
