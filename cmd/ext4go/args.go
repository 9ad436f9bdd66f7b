package main

import (
	"io/fs"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Argument syntax shared by the write commands: modes as fs.FileMode,
// truncate's sizes, touch's dates.

// fileMode converts permission and set-id/sticky bits to an fs.FileMode.
func fileMode(perm uint32) fs.FileMode {
	m := fs.FileMode(perm & 0o777)
	if perm&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if perm&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if perm&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m
}

// sizeSpec is coreutils truncate's SIZE: an absolute size or, with op,
// one relative to the current size.
type sizeSpec struct {
	op byte // 0, '+', '-', '<' (at most), '>' (at least), '/' (round down to a multiple), '%' (round up)
	n  int64
}

func parseSizeSpec(s string) (sizeSpec, error) {
	var sp sizeSpec
	if s != "" && strings.IndexByte("+-<>/%", s[0]) >= 0 {
		sp.op = s[0]
		s = s[1:]
	}
	n, err := parseByteSize(s)
	if err != nil {
		return sp, usagef("%v", err)
	}
	if (sp.op == '/' || sp.op == '%') && n == 0 {
		return sp, usagef("division by zero in size")
	}
	sp.n = n
	return sp, nil
}

// apply returns the new size of a file of size cur.
func (sp sizeSpec) apply(cur int64) (int64, error) {
	switch sp.op {
	case 0:
		return sp.n, nil
	case '+':
		if cur > math.MaxInt64-sp.n {
			return 0, syscall.EFBIG
		}
		return cur + sp.n, nil
	case '-':
		return max(cur-sp.n, 0), nil
	case '<':
		return min(cur, sp.n), nil
	case '>':
		return max(cur, sp.n), nil
	case '/':
		return cur / sp.n * sp.n, nil
	default: // '%'
		r := (cur + sp.n - 1) / sp.n * sp.n
		if r < cur {
			return 0, syscall.EFBIG
		}
		return r, nil
	}
}

// parseTime parses touch -d: RFC 3339 (with or without the zone, "T" or a
// space between date and time, fractions of seconds), a bare date, or
// "@SECONDS[.FRACTION]" since the epoch. Times without a zone are local.
func parseTime(s string) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "@"); ok {
		secs, frac, _ := strings.Cut(rest, ".")
		sec, err := strconv.ParseInt(secs, 10, 64)
		if err != nil || len(frac) > 9 || strings.Trim(frac, "0123456789") != "" {
			return time.Time{}, usagef("invalid date '%s'", s)
		}
		ns := int64(0)
		if frac != "" {
			ns, _ = strconv.ParseInt((frac + "000000000")[:9], 10, 64)
			if sec < 0 {
				ns = -ns
			}
		}
		return time.Unix(sec, ns), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("invalid date '%s' (want RFC 3339, e.g. 2024-05-01T12:00:00Z, or @SECONDS)", s)
}
