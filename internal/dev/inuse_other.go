//go:build !linux && !darwin

package dev

import (
	"fmt"
	"runtime"
)

// InUse cannot tell on this system who has an image: there is no mount
// table read here. It returns ErrInUseUnknown (callers go on as if
// nothing had it; an ext4go writer still holds the image's lock).
func InUse(path string) (*Usage, error) {
	return nil, fmt.Errorf("%s: %w on %s", path, ErrInUseUnknown, runtime.GOOS)
}
