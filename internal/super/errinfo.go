package super

import (
	"bytes"
	"time"
)

// Error codes of s_first_error_errcode and s_last_error_errcode (kernel:
// EXT4_ERR_* in fs/ext4/ext4.h; e2fsprogs: e2p_errcode2str). They are not
// errnos: the kernel maps the errno of the error to one of these
// (ext4_errno_to_code) because errnos differ between architectures.
const (
	ErrCodeUnknown      = 1
	ErrCodeEIO          = 2
	ErrCodeENOMEM       = 3
	ErrCodeEFSBADCRC    = 4
	ErrCodeEFSCORRUPTED = 5
	ErrCodeENOSPC       = 6
	ErrCodeENOKEY       = 7
	ErrCodeEROFS        = 8
	ErrCodeEFBIG        = 9
	ErrCodeEEXIST       = 10
	ErrCodeERANGE       = 11
	ErrCodeEOVERFLOW    = 12
	ErrCodeEBUSY        = 13
	ErrCodeENOTDIR      = 14
	ErrCodeENOTEMPTY    = 15
	ErrCodeESHUTDOWN    = 16
	ErrCodeEFAULT       = 17
)

// Errnos of the kernel's ext4 error codes that Linux spells differently:
// EFSCORRUPTED is EUCLEAN (117) and EFSBADCRC is EBADMSG (74), fixed here
// so that the mapping is the same on every GOOS.
const (
	ErrnoEFSCORRUPTED = 117
	ErrnoEFSBADCRC    = 74
)

var errCodeNames = [...]string{
	ErrCodeUnknown: "UNKNOWN", ErrCodeEIO: "EIO", ErrCodeENOMEM: "ENOMEM",
	ErrCodeEFSBADCRC: "EFSBADCRC", ErrCodeEFSCORRUPTED: "EFSCORRUPTED",
	ErrCodeENOSPC: "ENOSPC", ErrCodeENOKEY: "ENOKEY", ErrCodeEROFS: "EROFS",
	ErrCodeEFBIG: "EFBIG", ErrCodeEEXIST: "EEXIST", ErrCodeERANGE: "ERANGE",
	ErrCodeEOVERFLOW: "EOVERFLOW", ErrCodeEBUSY: "EBUSY", ErrCodeENOTDIR: "ENOTDIR",
	ErrCodeENOTEMPTY: "ENOTEMPTY", ErrCodeESHUTDOWN: "ESHUTDOWN", ErrCodeEFAULT: "EFAULT",
}

// ErrCodeName is the name dumpe2fs prints for an error code ("EFSCORRUPTED"),
// or its number (e2fsprogs: e2p_errcode2str).
func ErrCodeName(code uint8) string {
	if int(code) < len(errCodeNames) && errCodeNames[code] != "" {
		return errCodeNames[code]
	}
	return itoa(int(code))
}

func itoa(n int) string {
	var b [4]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// ErrnoToCode maps a Linux errno (0 meaning EFSCORRUPTED, as the kernel
// defaults it) to its ext4 error code (kernel: ext4_errno_to_code). The
// numbers are Linux's on every GOOS; errnos without a code are UNKNOWN.
func ErrnoToCode(errno int) uint8 {
	switch errno {
	case 0, ErrnoEFSCORRUPTED:
		return ErrCodeEFSCORRUPTED
	case ErrnoEFSBADCRC:
		return ErrCodeEFSBADCRC
	case 5:
		return ErrCodeEIO
	case 12:
		return ErrCodeENOMEM
	case 28:
		return ErrCodeENOSPC
	case 126:
		return ErrCodeENOKEY
	case 30:
		return ErrCodeEROFS
	case 27:
		return ErrCodeEFBIG
	case 17:
		return ErrCodeEEXIST
	case 34:
		return ErrCodeERANGE
	case 75:
		return ErrCodeEOVERFLOW
	case 16:
		return ErrCodeEBUSY
	case 20:
		return ErrCodeENOTDIR
	case 39:
		return ErrCodeENOTEMPTY
	case 108:
		return ErrCodeESHUTDOWN
	case 14:
		return ErrCodeEFAULT
	}
	return ErrCodeUnknown
}

// ErrorRecord is one of the superblock's two error records, s_first_error_*
// or s_last_error_*: where and when an error was found.
type ErrorRecord struct {
	Time  time.Time // zero time (Unix 0) when there is none
	Ino   uint32
	Block uint64
	Func  string // at most 32 bytes on disk
	Line  uint32
	Code  uint8 // ErrCode*
}

// IsZero reports whether the record is empty (no time: dumpe2fs prints a
// record only when its time is set).
func (r ErrorRecord) IsZero() bool { return r.Time.Unix() == 0 }

// FirstError returns the s_first_error_* record.
func (sb *Superblock) FirstError() ErrorRecord {
	return ErrorRecord{
		Time: stamp(sb.FirstErrorTime, sb.FirstErrorTimeHi), Ino: sb.FirstErrorIno,
		Block: sb.FirstErrorBlock, Func: cstring(sb.FirstErrorFunc[:]),
		Line: sb.FirstErrorLine, Code: sb.FirstErrorErrcode,
	}
}

// LastError returns the s_last_error_* record.
func (sb *Superblock) LastError() ErrorRecord {
	return ErrorRecord{
		Time: stamp(sb.LastErrorTime, sb.LastErrorTimeHi), Ino: sb.LastErrorIno,
		Block: sb.LastErrorBlock, Func: cstring(sb.LastErrorFunc[:]),
		Line: sb.LastErrorLine, Code: sb.LastErrorErrcode,
	}
}

// SetFirstError sets the s_first_error_* record.
func (sb *Superblock) SetFirstError(r ErrorRecord) {
	sb.FirstErrorTime, sb.FirstErrorTimeHi = unstamp(r.Time)
	sb.FirstErrorIno, sb.FirstErrorBlock, sb.FirstErrorLine = r.Ino, r.Block, r.Line
	sb.FirstErrorFunc = funcName(r.Func)
	sb.FirstErrorErrcode = r.Code
}

// SetLastError sets the s_last_error_* record.
func (sb *Superblock) SetLastError(r ErrorRecord) {
	sb.LastErrorTime, sb.LastErrorTimeHi = unstamp(r.Time)
	sb.LastErrorIno, sb.LastErrorBlock, sb.LastErrorLine = r.Ino, r.Block, r.Line
	sb.LastErrorFunc = funcName(r.Func)
	sb.LastErrorErrcode = r.Code
}

// funcName is the 32-byte s_*_error_func of s: truncated, NUL-padded, not
// necessarily NUL-terminated (kernel: strncpy into it).
func funcName(s string) (b [32]byte) {
	copy(b[:], s)
	if i := bytes.IndexByte(b[:], 0); i >= 0 {
		clear(b[i:])
	}
	return b
}

// RecordError notes an error in the superblock as the kernel does when it
// writes its saved error out (kernel: __save_error_info, then
// ext4_update_super): the state gets StateError, the error count grows by
// one, the first record is set if it has no time yet, and the last record
// always. r.Code 0 is taken as EFSCORRUPTED.
func (sb *Superblock) RecordError(r ErrorRecord) {
	if r.Code == 0 {
		r.Code = ErrCodeEFSCORRUPTED
	}
	sb.State |= StateError
	if sb.FirstErrorTime == 0 && sb.FirstErrorTimeHi == 0 {
		sb.SetFirstError(r)
	}
	sb.SetLastError(r)
	if sb.ErrorCount != ^uint32(0) {
		sb.ErrorCount++
	}
}
