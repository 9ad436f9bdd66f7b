package ext4go

import (
	"fmt"
	"time"

	"github.com/ext4go/ext4go/internal/super"
)

// Info summarises a filesystem, as dumpe2fs -h does.
type Info struct {
	Label, LastMounted string
	UUID               string
	RevLevel           uint32
	Features           []string
	State              string // "clean", "not clean", with " with errors" / " with orphans"
	ErrorBehavior      string // "Continue", "Remount read-only", "Panic"

	InodesCount, FreeInodes        uint32
	BlocksCount, FreeBlocks        uint64
	ReservedBlocks                 uint64
	FirstDataBlock                 uint32
	BlockSize, ClusterSize         uint32
	Groups                         uint32
	BlocksPerGroup, InodesPerGroup uint32
	FlexBGSize                     uint32 // groups per flex group; 0 without flex_bg
	ReservedGDTBlocks              uint16
	InodeSize                      uint32
	MinExtraIsize, WantExtraIsize  uint16
	Created, LastMount, LastWrite  time.Time
	LastCheck                      time.Time
	MountCount                     uint16
	MaxMountCount                  int16
	HashVersion                    string
	HashSeed                       string
	JournalInode                   uint32
	FirstOrphan                    uint32 // head of the orphan list (s_last_orphan), 0 if empty
	Checksummed                    bool
	Checksum, ChecksumSeed         uint32
	// ErrorCount is s_error_count, the errors recorded (by the kernel's
	// ext4_error or a change of ext4go) since e2fsck last cleared them;
	// FirstError and LastError are their records, nil when empty.
	ErrorCount            uint32
	FirstError, LastError *ErrorRecord
}

// ErrorRecord is where and when an error was recorded in the superblock
// (s_first_error_* or s_last_error_*), as dumpe2fs -h prints it.
type ErrorRecord struct {
	Time     time.Time
	Function string // the kernel's function, or ext4go's method ("FS.Remove")
	Line     uint32 // the kernel's source line; 0 from ext4go
	Ino      uint32 // 0 if none
	Block    uint64 // 0 if none
	Err      string // "EFSCORRUPTED", "EFSBADCRC", ...; "" if not recorded
}

func errorRecord(r super.ErrorRecord) *ErrorRecord {
	if r.IsZero() {
		return nil
	}
	e := &ErrorRecord{Time: r.Time, Function: r.Func, Line: r.Line, Ino: r.Ino, Block: r.Block}
	if r.Code != 0 {
		e.Err = super.ErrCodeName(r.Code)
	}
	return e
}

// Info returns a summary of the filesystem's superblock.
func (f *FS) Info() *Info {
	if f.w != nil {
		f.w.sbMu.Lock() // writers change the free counts, times and orphan head
		defer f.w.sbMu.Unlock()
	}
	sb := f.sb
	in := &Info{
		Label:             sb.Label(),
		LastMounted:       sb.LastMountedDir(),
		UUID:              formatUUID(sb.UUID),
		RevLevel:          sb.RevLevel,
		Features:          sb.FeatureNames(),
		InodesCount:       sb.InodesCount,
		FreeInodes:        sb.FreeInodesCount,
		BlocksCount:       sb.BlocksCount(),
		FreeBlocks:        sb.FreeBlocksCount(),
		ReservedBlocks:    sb.RBlocksCount(),
		FirstDataBlock:    sb.FirstDataBlock,
		BlockSize:         sb.BlockSize(),
		ClusterSize:       sb.ClusterSize(),
		Groups:            sb.GroupCount(),
		BlocksPerGroup:    sb.BlocksPerGroup,
		InodesPerGroup:    sb.InodesPerGroup,
		ReservedGDTBlocks: sb.ReservedGDTBlocks,
		InodeSize:         sb.InodeSize(),
		MinExtraIsize:     sb.MinExtraIsize,
		WantExtraIsize:    sb.WantExtraIsize,
		Created:           sb.CreateTime(),
		LastMount:         sb.MountTime(),
		LastWrite:         sb.WriteTime(),
		LastCheck:         sb.CheckTime(),
		MountCount:        sb.MntCount,
		MaxMountCount:     sb.MaxMntCount,
		HashVersion:       hashName(sb.DefHashVersion),
		HashSeed:          formatUUID(hashSeedBytes(sb.HashSeed)),
		Checksummed:       sb.HasMetadataCsum(),
		Checksum:          sb.Checksum,
		ChecksumSeed:      f.seed,
	}
	if sb.HasIncompat(super.IncompatFlexBG) {
		in.FlexBGSize = sb.FlexGroupSize()
	}
	if sb.HasCompat(super.CompatHasJournal) {
		in.JournalInode = sb.JournalInum
	}
	in.FirstOrphan = sb.LastOrphan
	in.ErrorCount = sb.ErrorCount
	in.FirstError, in.LastError = errorRecord(sb.FirstError()), errorRecord(sb.LastError())
	in.State = "not clean"
	if sb.State&super.StateValid != 0 {
		in.State = "clean"
	}
	if sb.State&super.StateError != 0 {
		in.State += " with errors"
	}
	if sb.State&super.StateOrphan != 0 {
		in.State += " with orphans"
	}
	switch sb.Errors {
	case super.ErrorsContinue:
		in.ErrorBehavior = "Continue"
	case super.ErrorsRO:
		in.ErrorBehavior = "Remount read-only"
	case super.ErrorsPanic:
		in.ErrorBehavior = "Panic"
	default:
		in.ErrorBehavior = fmt.Sprintf("Unknown (%d)", sb.Errors)
	}
	return in
}

func formatUUID(u [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

func hashSeedBytes(s [4]uint32) (b [16]byte) {
	for i, w := range s {
		b[4*i] = byte(w)
		b[4*i+1] = byte(w >> 8)
		b[4*i+2] = byte(w >> 16)
		b[4*i+3] = byte(w >> 24)
	}
	return b
}

func hashName(v uint8) string {
	switch v {
	case 0:
		return "legacy"
	case 1:
		return "half_md4"
	case 2:
		return "tea"
	case 3:
		return "legacy_unsigned"
	case 4:
		return "half_md4_unsigned"
	case 5:
		return "tea_unsigned"
	case 6:
		return "siphash"
	}
	return fmt.Sprintf("unknown (%d)", v)
}
