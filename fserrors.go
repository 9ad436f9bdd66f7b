package ext4go

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ext4go/ext4go/internal/super"
)

// ErrorsMode is what a writable filesystem does once a change finds it
// corrupt (the kernel's errors= mount option, default the superblock's
// s_errors as tune2fs -e sets it). Whatever the mode, the error is
// recorded in the superblock first (state "with errors", error count,
// first and last error), so that the next e2fsck -p checks the
// filesystem instead of skipping it as clean.
type ErrorsMode uint8

const (
	// ErrorsDefault takes the mode from the superblock's s_errors
	// (continue, remount-ro or panic; anything else is remount-ro, as
	// the kernel reads it).
	ErrorsDefault ErrorsMode = iota
	// ErrorsContinue records the error and lets later changes go on
	// (errors=continue).
	ErrorsContinue
	// ErrorsRemountRO records the error, then refuses every later change
	// with an *ErrorsReadOnlyError (matching ErrReadOnly and
	// ErrErrorsReadOnly) until Close (errors=remount-ro). The changes
	// made before, and the delayed data and times they left, are still
	// written back by Sync and Close: the change that found the
	// corruption failed whole, so what went before is consistent.
	ErrorsRemountRO
	// ErrorsPanic is the library's errors=panic: a library must not
	// bring its program down, so it is ErrorsRemountRO, and besides Sync
	// and Close return the *ErrorsReadOnlyError (after writing back what
	// went before), so that a caller who checks only those sees that
	// the filesystem was found corrupt.
	ErrorsPanic
)

func (m ErrorsMode) String() string {
	switch m {
	case ErrorsDefault:
		return "default"
	case ErrorsContinue:
		return "continue"
	case ErrorsRemountRO:
		return "remount-ro"
	case ErrorsPanic:
		return "panic"
	}
	return fmt.Sprintf("ErrorsMode(%d)", m)
}

// ParseErrorsMode parses the value of an errors= mount option:
// "continue", "remount-ro" or "panic" ("" and "default" are ErrorsDefault).
func ParseErrorsMode(s string) (ErrorsMode, error) {
	switch s {
	case "", "default":
		return ErrorsDefault, nil
	case "continue":
		return ErrorsContinue, nil
	case "remount-ro":
		return ErrorsRemountRO, nil
	case "panic":
		return ErrorsPanic, nil
	}
	return 0, fmt.Errorf("errors=%s: want continue, remount-ro or panic", s)
}

// ErrErrorsReadOnly matches the error of a change refused because an
// earlier change found the filesystem corrupt under ErrorsRemountRO or
// ErrorsPanic.
var ErrErrorsReadOnly = errors.New("filesystem read-only after an error")

// ErrorsReadOnlyError is the error of a change refused after an earlier
// change found the filesystem corrupt (Options.Errors remount-ro or
// panic). It matches ErrErrorsReadOnly and ErrReadOnly (EROFS through
// FUSE), not ErrCorrupt: Cause is the earlier change's error.
type ErrorsReadOnlyError struct {
	Mode  ErrorsMode
	Cause error
}

func (e *ErrorsReadOnlyError) Error() string {
	return fmt.Sprintf("filesystem read-only after an error (errors=%s): %v", e.Mode, e.Cause)
}

func (e *ErrorsReadOnlyError) Is(target error) bool {
	return target == ErrErrorsReadOnly || target == ErrReadOnly
}

// FSError is an error a change found and recorded in the superblock, as
// Options.OnError receives it.
type FSError struct {
	Time  time.Time
	Func  string // the operation, as recorded in s_last_error_func
	Ino   uint32 // 0 if none
	Block uint64 // 0 if none
	Err   error
	// ReadOnly: the filesystem refuses changes from now on
	// (errors=remount-ro or panic).
	ReadOnly bool
}

// KernelStyle formats e as the kernel logs its errors (kernel:
// __ext4_error_inode, __ext4_error), for device (the image's path) and
// comm (the program's name):
//
//	EXT4-fs error (device img): FS.Remove:0: inode #12: block 345: comm ext4go: corrupt ...
func (e *FSError) KernelStyle(device, comm string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "EXT4-fs error (device %s): %s:0: ", device, e.Func)
	if e.Ino != 0 {
		fmt.Fprintf(&b, "inode #%d: ", e.Ino)
	}
	if e.Block != 0 {
		fmt.Fprintf(&b, "block %d: ", e.Block)
	}
	fmt.Fprintf(&b, "comm %s: %v", comm, e.Err)
	return b.String()
}

// errorsMode is the mode in effect: the option, else the superblock's
// (kernel: ext4_fill_super's s_errors, then parse_options' errors=).
func (f *FS) errorsMode() ErrorsMode {
	if m := f.opts.Errors; m != ErrorsDefault {
		return m
	}
	switch f.sb.Errors {
	case super.ErrorsContinue:
		return ErrorsContinue
	case super.ErrorsPanic:
		return ErrorsPanic
	}
	return ErrorsRemountRO
}

// refuseChange says why a change may not be made: ErrReadOnly for a
// read-only open, an *ErrorsReadOnlyError after a change found corruption
// under errors=remount-ro or panic; nil when it may.
func (f *FS) refuseChange() error {
	if f.w == nil {
		return ErrReadOnly
	}
	if e := f.w.errorsRO.Load(); e != nil {
		return e
	}
	return nil
}

// noteError records *errp in the superblock when it says that a change
// (named fn, e.g. "FS.Remove") found the filesystem corrupt, and applies
// the errors= mode; other errors pass. The public methods that change the
// filesystem defer it first thing, so that it runs after they have
// released their locks: the change itself failed whole before this, and
// this is a transaction of its own (kernel: ext4_error_inode and friends,
// __ext4_error_inode → ext4_handle_error → save_error_info; the kernel
// saves where it detects, ext4go where the failure leaves the library).
func (f *FS) noteError(fn string, errp *error) {
	err := *errp
	if err == nil || f.w == nil || f.closed.Load() || f.reproducible || f.opts.replaying || !errors.Is(err, ErrCorrupt) {
		return
	}
	if errors.Is(err, ErrErrorsReadOnly) {
		return
	}
	var (
		ino   uint32
		block int64 = -1
		errno       = super.ErrnoEFSCORRUPTED
		key   error
	)
	var ce *CorruptError
	var ke *ChecksumError
	switch {
	case errors.As(err, &ke):
		ino, block, errno, key = ke.Ino, ke.Block, super.ErrnoEFSBADCRC, ke
	case errors.As(err, &ce):
		ino, block, key = ce.Ino, ce.Block, ce
	}
	w := f.w
	w.errorsMu.Lock()
	defer w.errorsMu.Unlock()
	// A public method that calls another (WriteFile → OpenFile, Write)
	// records the inner one's error once.
	if key != nil && w.lastNoted == key { // pointers: comparable
		return
	}
	w.lastNoted = key
	now := f.now()
	e := &FSError{Time: now, Func: fn, Ino: ino, Err: err}
	if block > 0 {
		e.Block = uint64(block)
	}
	w.sbMu.Lock()
	f.sb.RecordError(super.ErrorRecord{Time: now, Ino: ino, Block: e.Block, Func: fn, Code: super.ErrnoToCode(errno)})
	w.sbMu.Unlock()
	// Written out at once, through the journal when there is one (kernel:
	// update_super_work for errors=continue; ext4_commit_super writes in
	// place for the others, having aborted the journal, which ext4go does
	// not: the changes before this one are whole and stay). A failure
	// here leaves the record in memory for the next superblock write.
	if werr := f.writeSuperNow(); werr != nil {
		f.setError(werr)
	}
	if m := f.errorsMode(); m != ErrorsContinue {
		w.errorsRO.CompareAndSwap(nil, &ErrorsReadOnlyError{Mode: m, Cause: err})
		e.ReadOnly = true
	}
	if hook := f.opts.OnError; hook != nil {
		hook(e)
	}
}

// writeSuperNow writes the superblock in a transaction of its own and
// commits it.
func (f *FS) writeSuperNow() error {
	h, err := f.begin()
	if err != nil {
		return err
	}
	err = f.writeSuper(h)
	if e := h.End(); err == nil {
		err = e
	}
	if err != nil {
		return err
	}
	return f.tm.Commit()
}

// panicError is the error Sync and Close return under ErrorsPanic once a
// change found corruption.
func (f *FS) panicError() error {
	if f.w == nil {
		return nil
	}
	if e := f.w.errorsRO.Load(); e != nil && e.Mode == ErrorsPanic {
		return e
	}
	return nil
}
