package ext4go

import (
	"errors"
	"fmt"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/fserr"
	"github.com/ext4go/ext4go/internal/jbd2"
)

// Error types and sentinels. A *ChecksumError also matches ErrCorrupt.
type (
	CorruptError     = fserr.CorruptError
	ChecksumError    = fserr.ChecksumError
	UnsupportedError = fserr.UnsupportedError
	// JournalRecoveryError is a journal that needs recovery and that the
	// kernel's recovery refuses as a whole (a descriptor or revoke block
	// that fails its checksum in a transaction that did commit, a revoke
	// block whose count overruns it, a log that runs on past its own
	// start): it names the transaction (Seq), the journal block
	// (LogBlock) and the pass, and wraps a *CorruptError whose Block is
	// that journal block's filesystem block. Nothing of such a journal is
	// replayed, as neither the kernel (which refuses the mount) nor e2fsck
	// (which discards the journal) replays any of it. An Open fails with
	// it (and ErrJournalReplay); Options.IgnoreJournal reads the on-disk
	// state, which is what e2fsck leaves.
	JournalRecoveryError = jbd2.RecoveryError
)

var (
	ErrCorrupt     = fserr.ErrCorrupt
	ErrChecksum    = fserr.ErrChecksum
	ErrUnsupported = fserr.ErrUnsupported
	// ErrBusy is returned by Open when another writer holds the image
	// (or, for a writable open, any reader does).
	ErrBusy = dev.ErrBusy
)

// InUseError is returned by a writable Open of an image the kernel has: a
// mounted block device, or an image file backing a loop device. Writing
// under a mount loses the change (the kernel writes its own state back) or
// corrupts the filesystem. It matches ErrBusy.
type InUseError struct {
	Path  string
	Usage string // who has it: "mounted on /mnt/x (through /dev/loop3)"
	// Mounted is false when the image is only attached to a loop device.
	Mounted bool
}

func (e *InUseError) Error() string {
	what := "unmount it first"
	if !e.Mounted {
		what = "detach it first (losetup -d)"
	}
	return fmt.Sprintf("%s is %s; %s", e.Path, e.Usage, what)
}

func (e *InUseError) Is(target error) bool { return target == ErrBusy }

// InUse reports who has the image at path open in the kernel (mounts, and
// loop devices backed by it): nil when nothing does. A read of an image
// mounted read-write may show a stale state; writing to it is refused.
func InUse(path string) (usage string, writableMount bool, err error) {
	u, err := dev.InUse(path)
	if err != nil || u == nil {
		return "", false, err
	}
	return u.String(), u.Writable(), nil
}

// checkInUse refuses a writable open of an image the kernel has.
func checkInUse(path string) error {
	u, err := dev.InUse(path)
	if err != nil || u == nil {
		return nil // a path InUse cannot check is left to the open
	}
	return &InUseError{Path: path, Usage: u.String(), Mounted: len(u.Mounts) > 0}
}

// ErrNotExt4 matches the error of opening something that holds no ext2,
// ext3 or ext4 filesystem (no superblock magic, or too small for one). Such
// an error matches ErrCorrupt too: a filesystem whose superblock was
// overwritten looks the same.
var ErrNotExt4 = errors.New("not an ext4 filesystem")

type notExt4Error struct{ detail string }

func (e *notExt4Error) Error() string { return "not an ext4 filesystem: " + e.detail }
func (e *notExt4Error) Is(target error) bool {
	return target == ErrNotExt4 || target == ErrCorrupt
}
