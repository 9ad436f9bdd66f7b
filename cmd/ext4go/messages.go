package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Messages in the words and quoting of coreutils.

// pathError is a failure on a path, worded like coreutils:
// "cannot remove '/a': no such file or directory".
type pathError struct {
	what string // "cannot remove"
	path string
	err  error
}

func (e *pathError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.what, quotePath(e.path), errText(e.err))
}

func (e *pathError) Unwrap() error { return e.err }

// failf wraps err (without the operation and path ext4go puts around it)
// as a failure of what on p.
func failf(what, p string, err error) error {
	return &pathError{what: what, path: p, err: cause(err)}
}

// cause strips the *fs.PathError or *os.LinkError ext4go wraps errors in:
// messages name the path as the user typed it instead.
func cause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// errText words the common errors as the C library does.
func errText(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, fs.ErrNotExist):
		return "no such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "file exists"
	case errors.Is(err, fs.ErrInvalid):
		return "invalid argument"
	}
	return err.Error()
}

// quotePath quotes a path for a message, escaping control characters.
func quotePath(p string) string { return "'" + quoteName(p) + "'" }
