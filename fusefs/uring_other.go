//go:build darwin || freebsd

package fusefs

import (
	"errors"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// FUSE over io_uring is Linux's (uring_linux.go): Options.Uring fails here.

var errUringLinux = errors.New("fusefs: FUSE over io_uring needs Linux 6.14+")

type uringTransport struct{}

func uringAvailable() error { return errUringLinux }

func startUring(*fuse.Server, fuse.RawFileSystem, *fuse.MountOptions, string, bool) (*uringTransport, error) {
	return nil, errUringLinux
}

func abortConnection(string) error { return errUringLinux }

func (t *uringTransport) requests() int64 { return 0 }
func (t *uringTransport) waitIfStarted()  {}
