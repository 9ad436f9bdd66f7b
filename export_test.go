package ext4go

import (
	"syscall"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/mballoc"
)

// StaleWrites is the number of changes refused because they reached a node
// that no longer owned its inode (see lifetime.go); tests require zero.
func StaleWrites() int64 { return staleWrites.Load() }

// SetFault makes fsys ask fail before every block allocation ("block"),
// inode allocation ("inode"), metadata block read ("read") and file data
// write ("write"); when it says yes
// the step fails as it would for real: no space, or an I/O error. nil
// removes the hook.
func SetFault(fsys *FS, fail func(kind string) bool) {
	if fail == nil {
		fsys.fault.Store(nil)
		return
	}
	fn := func(kind string) error {
		if !fail(kind) {
			return nil
		}
		switch kind {
		case "block":
			return &mballoc.NoSpaceError{}
		case "inode":
			return syscall.ENOSPC
		}
		return syscall.EIO
	}
	fsys.fault.Store(&fn)
}

// Device is the storage OpenDevice opens (a dev.Device).
type Device = dev.Device

// OpenDevice opens the filesystem on d (tests wrap a real image's device,
// e.g. to record its writes).
func OpenDevice(d Device, opts *Options) (*FS, error) { return newFS(d, opts, false) }

// OpenImageDevice opens an image file as a Device, writable or not.
func OpenImageDevice(path string, writable bool) (Device, error) { return dev.Open(path, writable) }
