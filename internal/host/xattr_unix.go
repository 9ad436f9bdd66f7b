//go:build linux || darwin || freebsd

package host

import (
	"errors"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// noXattrs reports the error of a filesystem that keeps no extended
// attributes (macOS tells ENOTSUP from EOPNOTSUPP; Linux and FreeBSD do
// not).
func noXattrs(err error) bool {
	return errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP)
}

// readXattrs reads every attribute with the list and get calls given (by
// path or by descriptor), sorted by name: list returns the host's names,
// get the value of one of them. A filesystem without attributes has none;
// one removed meanwhile is left out.
func readXattrs(list func([]byte) (int, error), names func([]byte) []string, get func(string, []byte) (int, error)) ([]Xattr, error) {
	raw, err := readSized(list)
	if noXattrs(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Xattr
	for _, n := range names(raw) {
		v, err := readSized(func(b []byte) (int, error) { return get(n, b) })
		if errors.Is(err, errNoAttr) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, &xattrError{n, err}
		}
		out = append(out, Xattr{ext4Name(n), v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type xattrError struct {
	name string
	err  error
}

func (e *xattrError) Error() string { return e.name + ": " + e.err.Error() }
func (e *xattrError) Unwrap() error { return e.err }

// readSized calls a listxattr/getxattr-style function with a buffer large
// enough for its result.
func readSized(call func([]byte) (int, error)) ([]byte, error) {
	for {
		n, err := call(nil)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return []byte{}, nil
		}
		b := make([]byte, n)
		m, err := call(b)
		if errors.Is(err, unix.ERANGE) {
			continue // grew meanwhile
		}
		if err != nil {
			return nil, err
		}
		return b[:m], nil
	}
}

// splitNul splits a Linux-style list of NUL-terminated names.
func splitNul(b []byte) []string {
	var out []string
	for _, n := range strings.Split(string(b), "\x00") {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}
