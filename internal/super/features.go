package super

import "fmt"

// Compatible features (s_feature_compat): an implementation that does not
// know one may still read and write the filesystem.
const (
	CompatDirPrealloc   uint32 = 0x0001
	CompatImagicInodes  uint32 = 0x0002
	CompatHasJournal    uint32 = 0x0004
	CompatExtAttr       uint32 = 0x0008
	CompatResizeInode   uint32 = 0x0010
	CompatDirIndex      uint32 = 0x0020
	CompatLazyBG        uint32 = 0x0040 // e2fsprogs only
	CompatExcludeInode  uint32 = 0x0080 // e2fsprogs only (snapshots)
	CompatExcludeBitmap uint32 = 0x0100 // e2fsprogs only (snapshots)
	CompatSparseSuper2  uint32 = 0x0200
	CompatFastCommit    uint32 = 0x0400
	CompatStableInodes  uint32 = 0x0800
	CompatOrphanFile    uint32 = 0x1000
)

// Incompatible features (s_feature_incompat): an implementation that does not
// know one must not touch the filesystem.
const (
	IncompatCompression uint32 = 0x0001
	IncompatFiletype    uint32 = 0x0002
	IncompatRecover     uint32 = 0x0004 // needs_recovery
	IncompatJournalDev  uint32 = 0x0008
	IncompatMetaBG      uint32 = 0x0010
	IncompatExtents     uint32 = 0x0040
	Incompat64Bit       uint32 = 0x0080
	IncompatMMP         uint32 = 0x0100
	IncompatFlexBG      uint32 = 0x0200
	IncompatEAInode     uint32 = 0x0400
	IncompatDirData     uint32 = 0x1000
	IncompatCsumSeed    uint32 = 0x2000 // metadata_csum_seed
	IncompatLargeDir    uint32 = 0x4000
	IncompatInlineData  uint32 = 0x8000
	IncompatEncrypt     uint32 = 0x10000
	IncompatCasefold    uint32 = 0x20000
)

// Read-only compatible features (s_feature_ro_compat): an implementation
// that does not know one may read but not write the filesystem.
const (
	ROCompatSparseSuper   uint32 = 0x0001
	ROCompatLargeFile     uint32 = 0x0002
	ROCompatBtreeDir      uint32 = 0x0004 // never used
	ROCompatHugeFile      uint32 = 0x0008
	ROCompatGDTCsum       uint32 = 0x0010 // uninit_bg
	ROCompatDirNlink      uint32 = 0x0020
	ROCompatExtraIsize    uint32 = 0x0040
	ROCompatHasSnapshot   uint32 = 0x0080 // e2fsprogs only
	ROCompatQuota         uint32 = 0x0100
	ROCompatBigalloc      uint32 = 0x0200
	ROCompatMetadataCsum  uint32 = 0x0400
	ROCompatReplica       uint32 = 0x0800
	ROCompatReadonly      uint32 = 0x1000
	ROCompatProject       uint32 = 0x2000
	ROCompatSharedBlocks  uint32 = 0x4000
	ROCompatVerity        uint32 = 0x8000
	ROCompatOrphanPresent uint32 = 0x10000
)

// Known feature sets. UnknownCompat, UnknownIncompat and UnknownROCompat
// report the bits of a superblock outside these masks. They start as every
// feature this package has a name for; the filesystem layer narrows them at
// initialisation to what it implements, before any superblock is examined
// (they are plain variables, not guarded by a lock).
var (
	KnownCompat = CompatDirPrealloc | CompatImagicInodes | CompatHasJournal |
		CompatExtAttr | CompatResizeInode | CompatDirIndex | CompatLazyBG |
		CompatExcludeInode | CompatExcludeBitmap | CompatSparseSuper2 |
		CompatFastCommit | CompatStableInodes | CompatOrphanFile
	KnownIncompat = IncompatCompression | IncompatFiletype | IncompatRecover |
		IncompatJournalDev | IncompatMetaBG | IncompatExtents | Incompat64Bit |
		IncompatMMP | IncompatFlexBG | IncompatEAInode | IncompatDirData |
		IncompatCsumSeed | IncompatLargeDir | IncompatInlineData |
		IncompatEncrypt | IncompatCasefold
	KnownROCompat = ROCompatSparseSuper | ROCompatLargeFile | ROCompatBtreeDir |
		ROCompatHugeFile | ROCompatGDTCsum | ROCompatDirNlink |
		ROCompatExtraIsize | ROCompatHasSnapshot | ROCompatQuota |
		ROCompatBigalloc | ROCompatMetadataCsum | ROCompatReplica |
		ROCompatReadonly | ROCompatProject | ROCompatSharedBlocks |
		ROCompatVerity | ROCompatOrphanPresent
)

// Feature kinds, in the order dumpe2fs lists them (and the order of the
// three words in the superblock).
const (
	KindCompat = iota
	KindIncompat
	KindROCompat
)

// featureNames holds the names e2fsprogs (lib/e2p/feature.c) prints. Bits it
// has no name for print as FEATURE_<C|I|R><bit>, as dumpe2fs does.
var featureNames = [3]map[uint32]string{
	KindCompat: {
		CompatDirPrealloc:   "dir_prealloc",
		CompatHasJournal:    "has_journal",
		CompatImagicInodes:  "imagic_inodes",
		CompatExtAttr:       "ext_attr",
		CompatDirIndex:      "dir_index",
		CompatResizeInode:   "resize_inode",
		CompatLazyBG:        "lazy_bg",
		CompatExcludeBitmap: "snapshot_bitmap",
		CompatSparseSuper2:  "sparse_super2",
		CompatFastCommit:    "fast_commit",
		CompatStableInodes:  "stable_inodes",
		CompatOrphanFile:    "orphan_file",
	},
	KindIncompat: {
		IncompatCompression: "compression",
		IncompatFiletype:    "filetype",
		IncompatRecover:     "needs_recovery",
		IncompatJournalDev:  "journal_dev",
		IncompatExtents:     "extent",
		IncompatMetaBG:      "meta_bg",
		Incompat64Bit:       "64bit",
		IncompatMMP:         "mmp",
		IncompatFlexBG:      "flex_bg",
		IncompatEAInode:     "ea_inode",
		IncompatDirData:     "dirdata",
		IncompatCsumSeed:    "metadata_csum_seed",
		IncompatLargeDir:    "large_dir",
		IncompatInlineData:  "inline_data",
		IncompatEncrypt:     "encrypt",
		IncompatCasefold:    "casefold",
	},
	KindROCompat: {
		ROCompatSparseSuper:   "sparse_super",
		ROCompatLargeFile:     "large_file",
		ROCompatHugeFile:      "huge_file",
		ROCompatGDTCsum:       "uninit_bg",
		ROCompatDirNlink:      "dir_nlink",
		ROCompatExtraIsize:    "extra_isize",
		ROCompatQuota:         "quota",
		ROCompatBigalloc:      "bigalloc",
		ROCompatMetadataCsum:  "metadata_csum",
		ROCompatReplica:       "replica",
		ROCompatReadonly:      "read-only",
		ROCompatProject:       "project",
		ROCompatSharedBlocks:  "shared_blocks",
		ROCompatVerity:        "verity",
		ROCompatOrphanPresent: "orphan_present",
	},
}

// FeatureName returns the dumpe2fs name of a single feature bit of the given
// kind (KindCompat, KindIncompat or KindROCompat).
func FeatureName(kind int, bit uint32) string {
	if kind >= 0 && kind < len(featureNames) {
		if n, ok := featureNames[kind][bit]; ok {
			return n
		}
	}
	n := 0
	for b := bit; b > 1; b >>= 1 {
		n++
	}
	return fmt.Sprintf("FEATURE_%c%d", "CIR?"[min(uint(kind), 3)], n)
}

// FeatureNames lists the features set in sb the way dumpe2fs prints its
// "Filesystem features" line: compat, then incompat, then ro_compat bits,
// each in bit order.
func (sb *Superblock) FeatureNames() []string {
	var names []string
	for kind, word := range [3]uint32{sb.FeatureCompat, sb.FeatureIncompat, sb.FeatureROCompat} {
		for i := range 32 {
			if bit := uint32(1) << i; word&bit != 0 {
				names = append(names, FeatureName(kind, bit))
			}
		}
	}
	return names
}

// HasCompat reports whether all the given compat feature bits are set.
func (sb *Superblock) HasCompat(f uint32) bool { return sb.FeatureCompat&f == f }

// HasIncompat reports whether all the given incompat feature bits are set.
func (sb *Superblock) HasIncompat(f uint32) bool { return sb.FeatureIncompat&f == f }

// HasROCompat reports whether all the given ro_compat feature bits are set.
func (sb *Superblock) HasROCompat(f uint32) bool { return sb.FeatureROCompat&f == f }

// UnknownCompat returns the compat bits outside KnownCompat.
func (sb *Superblock) UnknownCompat() uint32 { return sb.FeatureCompat &^ KnownCompat }

// UnknownIncompat returns the incompat bits outside KnownIncompat; a
// filesystem with any must not be opened.
func (sb *Superblock) UnknownIncompat() uint32 { return sb.FeatureIncompat &^ KnownIncompat }

// UnknownROCompat returns the ro_compat bits outside KnownROCompat; a
// filesystem with any may only be opened read-only.
func (sb *Superblock) UnknownROCompat() uint32 { return sb.FeatureROCompat &^ KnownROCompat }

// HasMetadataCsum reports the metadata_csum feature: crc32c checksums on all
// metadata, seeded by ChecksumSeed.
func (sb *Superblock) HasMetadataCsum() bool { return sb.HasROCompat(ROCompatMetadataCsum) }

// HasGDTCsum reports the uninit_bg (gdt_csum) feature: crc16 group
// descriptor checksums. metadata_csum supersedes it; see HasGroupDescCsum.
func (sb *Superblock) HasGDTCsum() bool { return sb.HasROCompat(ROCompatGDTCsum) }

// HasGroupDescCsum reports whether group descriptors carry a checksum at all
// (kernel: ext4_has_group_desc_csum), which also enables the uninit flags.
func (sb *Superblock) HasGroupDescCsum() bool {
	return sb.HasMetadataCsum() || sb.HasGDTCsum()
}

// Is64Bit reports the 64bit feature: 64-bit block numbers and (usually)
// 64-byte group descriptors.
func (sb *Superblock) Is64Bit() bool { return sb.HasIncompat(Incompat64Bit) }

// IsBigalloc reports the bigalloc feature: allocation in clusters of
// several blocks.
func (sb *Superblock) IsBigalloc() bool { return sb.HasROCompat(ROCompatBigalloc) }
