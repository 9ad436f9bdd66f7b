// Package fserr defines the typed errors that every ext4go package returns
// for bad on-disk data, checksum mismatches and unsupported features, so that
// callers (and the public API, which re-exports them) can tell what went
// wrong and where with errors.Is and errors.As.
//
// Decoders that see only a byte slice do not know which block it came from;
// they leave Block at -1 and the caller fills it in with At.
package fserr

import (
	"errors"
	"fmt"
)

// Sentinels for errors.Is.
var (
	ErrCorrupt     = errors.New("corrupt filesystem")
	ErrChecksum    = errors.New("checksum mismatch")
	ErrUnsupported = errors.New("unsupported feature")
)

// CorruptError reports on-disk data that breaks the format's rules.
type CorruptError struct {
	What   string // the structure: "superblock", "group descriptor 3", "inode", "extent node", ...
	Block  int64  // filesystem block holding it; -1 if not known or not applicable
	Ino    uint32 // inode concerned; 0 if none
	Detail string // what rule is broken
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt %s%s: %s", e.What, where(e.Block, e.Ino), e.Detail)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// ChecksumError reports a stored checksum that does not match the data.
// It also matches ErrCorrupt.
type ChecksumError struct {
	What             string
	Block            int64
	Ino              uint32
	Stored, Computed uint32
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("%s%s: checksum mismatch (stored %#x, computed %#x)", e.What, where(e.Block, e.Ino), e.Stored, e.Computed)
}

func (e *ChecksumError) Is(target error) bool { return target == ErrChecksum || target == ErrCorrupt }

// UnsupportedError reports a feature ext4go does not implement (or not for
// the requested access, e.g. writing).
type UnsupportedError struct {
	Feature string // e.g. "incompat feature encrypt", "journal replay"
	Detail  string // optional
}

func (e *UnsupportedError) Error() string {
	if e.Detail == "" {
		return "unsupported: " + e.Feature
	}
	return "unsupported: " + e.Feature + ": " + e.Detail
}

func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

func where(block int64, ino uint32) string {
	switch {
	case block >= 0 && ino != 0:
		return fmt.Sprintf(" (inode %d, block %d)", ino, block)
	case block >= 0:
		return fmt.Sprintf(" (block %d)", block)
	case ino != 0:
		return fmt.Sprintf(" (inode %d)", ino)
	}
	return ""
}

// Corrupt returns a *CorruptError with an unknown block.
func Corrupt(what, format string, a ...any) error {
	return &CorruptError{What: what, Block: -1, Detail: fmt.Sprintf(format, a...)}
}

// At returns err with its location filled in where the decoder did not know
// it: a copy of a *CorruptError or *ChecksumError gets block (if its Block is
// -1) and ino (if its Ino is 0). Other errors are returned unchanged.
func At(err error, block int64, ino uint32) error {
	var ce *CorruptError
	if errors.As(err, &ce) && ce == err {
		c := *ce
		if c.Block < 0 {
			c.Block = block
		}
		if c.Ino == 0 {
			c.Ino = ino
		}
		return &c
	}
	var ke *ChecksumError
	if errors.As(err, &ke) && ke == err {
		k := *ke
		if k.Block < 0 {
			k.Block = block
		}
		if k.Ino == 0 {
			k.Ino = ino
		}
		return &k
	}
	return err
}
