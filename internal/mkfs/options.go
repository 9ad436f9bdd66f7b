package mkfs

import (
	"fmt"
	"strings"
	"time"

	"github.com/ext4go/ext4go/internal/super"
)

// Options are the mke2fs options this package understands. The zero value
// makes a default ext4 filesystem filling the device, like "mke2fs -t ext4
// DEVICE" (with lazy_itable_init and, on devices that read back zeros,
// lazy_journal_init).
type Options struct {
	// FsType is "ext4" (the default), "ext3" or "ext2" (mke2fs -t): the
	// feature set of /etc/mke2fs.conf. Base features for all three:
	// sparse_super, large_file, filetype, resize_inode, dir_index, ext_attr;
	// ext3 adds has_journal; ext4 adds has_journal, extent, huge_file,
	// flex_bg, metadata_csum, 64bit, dir_nlink, extra_isize.
	FsType string

	// Size is the filesystem size in bytes, rounded down to 4 KiB and then
	// to the block size; 0 means the size of the device. An image file
	// shorter than Size is grown (sparsely) by Format.
	Size int64

	// BlockSize is 1024, 2048 or 4096 (mke2fs -b); 0 picks 1024 for the
	// "floppy" (< 3 MiB) and "small" (< 512 MiB) usage types and 4096
	// otherwise.
	BlockSize int

	// InodeSize is the on-disk inode size (mke2fs -I): a power of two from
	// 128 to the block size; 0 means 256 (128 for usage type hurd).
	InodeSize int

	// UsageTypes is mke2fs -T: a comma-separated list of the usage types of
	// e2fsprogs' default mke2fs.conf (floppy, small, default, big, huge,
	// news, largefile, largefile4, hurd), applied in order, instead of the
	// type the size picks. They set the block size, inode ratio and (hurd)
	// inode size where the options above leave them 0.
	UsageTypes string

	// BytesPerInode is the inode ratio (mke2fs -i); 0 picks it from the usage
	// type: 8192 floppy, 4096 small, 16384 default, 32768 big (>= 4 TiB),
	// 65536 huge (>= 16 TiB); never less than the block size.
	BytesPerInode int

	// InodeCount asks for at least this many inodes (mke2fs -N) instead of
	// deriving the count from BytesPerInode.
	InodeCount uint64

	// FlexBGSize is the number of groups packed into a flex group (mke2fs -G),
	// a power of two; 0 means 16 when flex_bg is on.
	FlexBGSize int

	// ReservedPercent is the share of blocks reserved for root (mke2fs -m),
	// 0 to 50; nil means 5.
	ReservedPercent *float64

	// Label is the volume label (mke2fs -L), at most 16 bytes.
	Label string

	// UUID is the filesystem UUID (mke2fs -U); all zeros picks a random one.
	UUID [16]byte
	// NullUUID keeps the UUID all zeros (mke2fs -U clear).
	NullUUID bool

	// HashSeed is the directory hash seed (mke2fs -E hash_seed=); all zeros
	// picks a random one.
	HashSeed [16]byte

	// Features edits the feature set (mke2fs -O): a comma-separated list of
	// feature names, each to add, or with a leading '^' to remove; "none"
	// removes all. Supported beyond the defaults: metadata_csum_seed,
	// orphan_file, inline_data, meta_bg (with ^resize_inode), sparse_super2,
	// uninit_bg, largedir, encrypt, ea_inode, stable_inodes. quota, project,
	// bigalloc, mmp, casefold, fast_commit, verity and journal_dev are
	// refused with an *fserr.UnsupportedError.
	Features string

	// JournalBlocks and JournalMiB set the journal size (mke2fs -J size= is
	// JournalMiB): 1024 to 10240000 blocks, at most half the free space.
	// Both 0 picks mke2fs's default for the filesystem size (1024 blocks
	// below 32Ki blocks up to 262144 from 32Gi blocks). Setting either turns
	// has_journal on; at most one may be set. As with mke2fs, a filesystem
	// under 2048 blocks gets no journal (nor orphan file) even when asked.
	JournalBlocks uint32
	JournalMiB    int

	// NoJournal turns has_journal off (mke2fs -O ^has_journal).
	NoJournal bool

	// RootUID and RootGID own the root directory (mke2fs -E root_owner=).
	RootUID, RootGID uint32

	// CreationTime is the time stamped on the superblock and on the inodes
	// mke2fs creates (E2FSPROGS_FAKE_TIME); the zero value means now.
	CreationTime time.Time

	// ResizeMax is the largest size in blocks the filesystem must be able to
	// grow to online (mke2fs -E resize=); it sets the number of reserved GDT
	// blocks. 0 keeps mke2fs's default: room to grow 1024 times, capped at
	// 2^32 blocks and at one indirect block of GDT blocks.
	ResizeMax uint64

	// OrphanFileBlocks sizes the orphan file (mke2fs -E orphan_file_size=
	// in blocks) when the orphan_file feature is on; 0 picks mke2fs's
	// default (32 blocks below 128Ki blocks, 1/4096 of the filesystem up to
	// 2Mi blocks, then 512).
	OrphanFileBlocks uint32

	// NoLazyInit writes zeros over the whole inode tables and marks every
	// group ITABLE_ZEROED on a device that does not read back zeros (mke2fs
	// -E lazy_itable_init=0). By default only the part of the tables in use
	// is zeroed there, and the kernel zeroes the rest when it mounts. On a
	// device that reads back zeros nothing needs writing either way.
	NoLazyInit bool

	// AssumeZeroed promises that the device already reads back zeros (mke2fs
	// -E assume_storage_prezeroed=1), like a freshly created sparse file, so
	// nothing needs zeroing. Format and devices implementing Zeroer get this
	// behaviour without it.
	AssumeZeroed bool
}

// A feature is one ext4 feature flag as mke2fs -O names it.
type feature struct {
	kind int // super.KindCompat, KindIncompat or KindROCompat
	bit  uint32
	// why refuses the feature; empty when mkfs supports it.
	why string
}

// features maps every name e2p_string2feature accepts that mke2fs allows on
// its command line (ok_features in misc/mke2fs.c) to its flag.
var features = map[string]feature{
	"has_journal":        {super.KindCompat, super.CompatHasJournal, ""},
	"ext_attr":           {super.KindCompat, super.CompatExtAttr, ""},
	"resize_inode":       {super.KindCompat, super.CompatResizeInode, ""},
	"dir_index":          {super.KindCompat, super.CompatDirIndex, ""},
	"sparse_super2":      {super.KindCompat, super.CompatSparseSuper2, ""},
	"fast_commit":        {super.KindCompat, super.CompatFastCommit, "fast commit journal area"},
	"stable_inodes":      {super.KindCompat, super.CompatStableInodes, ""},
	"orphan_file":        {super.KindCompat, super.CompatOrphanFile, ""},
	"filetype":           {super.KindIncompat, super.IncompatFiletype, ""},
	"extent":             {super.KindIncompat, super.IncompatExtents, ""},
	"extents":            {super.KindIncompat, super.IncompatExtents, ""},
	"journal_dev":        {super.KindIncompat, super.IncompatJournalDev, "external journal devices"},
	"meta_bg":            {super.KindIncompat, super.IncompatMetaBG, ""},
	"flex_bg":            {super.KindIncompat, super.IncompatFlexBG, ""},
	"ea_inode":           {super.KindIncompat, super.IncompatEAInode, ""},
	"large_xattr":        {super.KindIncompat, super.IncompatEAInode, ""},
	"mmp":                {super.KindIncompat, super.IncompatMMP, "the multiple mount protection block"},
	"64bit":              {super.KindIncompat, super.Incompat64Bit, ""},
	"metadata_csum_seed": {super.KindIncompat, super.IncompatCsumSeed, ""},
	"large_dir":          {super.KindIncompat, super.IncompatLargeDir, ""},
	"largedir":           {super.KindIncompat, super.IncompatLargeDir, ""},
	"inline_data":        {super.KindIncompat, super.IncompatInlineData, ""},
	"encrypt":            {super.KindIncompat, super.IncompatEncrypt, ""},
	"casefold":           {super.KindIncompat, super.IncompatCasefold, "the casefold encoding tables"},
	"fname_encoding":     {super.KindIncompat, super.IncompatCasefold, "the casefold encoding tables"},
	"large_file":         {super.KindROCompat, super.ROCompatLargeFile, ""},
	"huge_file":          {super.KindROCompat, super.ROCompatHugeFile, ""},
	"dir_nlink":          {super.KindROCompat, super.ROCompatDirNlink, ""},
	"extra_isize":        {super.KindROCompat, super.ROCompatExtraIsize, ""},
	"sparse_super":       {super.KindROCompat, super.ROCompatSparseSuper, ""},
	"uninit_bg":          {super.KindROCompat, super.ROCompatGDTCsum, ""},
	"uninit_groups":      {super.KindROCompat, super.ROCompatGDTCsum, ""},
	"gdt_csum":           {super.KindROCompat, super.ROCompatGDTCsum, ""},
	"bigalloc":           {super.KindROCompat, super.ROCompatBigalloc, "clusters (bigalloc)"},
	"quota":              {super.KindROCompat, super.ROCompatQuota, "quota inodes"},
	"project":            {super.KindROCompat, super.ROCompatProject, "project quota inodes"},
	"metadata_csum":      {super.KindROCompat, super.ROCompatMetadataCsum, ""},
	"verity":             {super.KindROCompat, super.ROCompatVerity, "verity"},
}

// featureSet holds the three feature words in superblock order.
type featureSet [3]uint32

func (f *featureSet) has(kind int, bit uint32) bool { return f[kind]&bit != 0 }

const (
	baseFeatures = "sparse_super,large_file,filetype,resize_inode,dir_index,ext_attr"
	ext3Features = "has_journal"
	ext4Features = "has_journal,extent,huge_file,flex_bg,metadata_csum,64bit,dir_nlink,extra_isize"
)

// edit applies a mke2fs -O style list to f (e2p_edit_feature2): words
// separated by commas or blanks, '^' or '-' to clear, optional '+' to set,
// "none" or "clear" to clear everything.
func (f *featureSet) edit(list string) error {
	words := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
	for _, w := range words {
		if w == "none" || w == "clear" {
			*f = featureSet{}
			continue
		}
		neg := false
		switch w[0] {
		case '^', '-':
			neg, w = true, w[1:]
		case '+':
			w = w[1:]
		}
		ft, ok := features[strings.ToLower(w)]
		if !ok {
			return optErr("Features", "unknown feature %q", w)
		}
		if neg {
			f[ft.kind] &^= ft.bit
		} else {
			f[ft.kind] |= ft.bit
		}
	}
	return nil
}

// OptionError reports an option mkfs cannot honour; nothing has been written
// when it is returned.
type OptionError struct {
	Option string // the Options field, e.g. "BlockSize"
	Detail string
}

func (e *OptionError) Error() string { return "mkfs: option " + e.Option + ": " + e.Detail }

func optErr(option, format string, a ...any) error {
	return &OptionError{Option: option, Detail: fmt.Sprintf(format, a...)}
}
