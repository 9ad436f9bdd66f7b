//go:build !linux

package mountinfo

// Read fails: only Linux has /proc/self/mountinfo.
func Read() ([]Mount, error) { return nil, ErrNoMountinfo }
