//go:build !linux

package fusefs

import "github.com/hanwen/go-fuse/v2/fuse"

type uringTransport struct{}

func uringAvailable() error { return ErrNoUring }

func startUring(*fuse.Server, fuse.RawFileSystem, *fuse.MountOptions, string) (*uringTransport, error) {
	return nil, ErrNoUring
}

func (*uringTransport) waitIfStarted()  {}
func (*uringTransport) requests() int64 { return 0 }

func abortConnection(string) error { return ErrNoUring }
