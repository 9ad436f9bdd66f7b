package ext4go

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/ext4go/ext4go/internal/dev"
	"github.com/ext4go/ext4go/internal/super"
)

// cowDev is a device seen with base's blocks over it, taking writes in
// memory (blocks): the fast-commit replay's view. It never writes d.
type cowDev struct {
	dev.Device
	base   map[uint64][]byte // the full replay, read-only
	blocks map[uint64][]byte // what was written
	bs     int64
}

func (d *cowDev) block(blk int64) ([]byte, error) {
	if b, ok := d.blocks[uint64(blk)]; ok {
		return b, nil
	}
	if b, ok := d.base[uint64(blk)]; ok {
		return b, nil
	}
	b := make([]byte, d.bs)
	if _, err := d.Device.ReadAt(b, blk*d.bs); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

func (d *cowDev) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off >= d.Size() {
		return 0, io.EOF
	}
	want := len(p)
	if rest := d.Size() - off; int64(want) > rest {
		want = int(rest)
	}
	for done := 0; done < want; {
		blk := (off + int64(done)) / d.bs
		in := (off + int64(done)) % d.bs
		b, err := d.block(blk)
		if err != nil {
			return done, err
		}
		done += copy(p[done:want], b[in:])
	}
	if want < len(p) {
		return want, io.EOF
	}
	return want, nil
}

func (d *cowDev) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.Size() {
		return 0, fmt.Errorf("ext4go: write at %d+%d past the device end", off, len(p))
	}
	for done := 0; done < len(p); {
		blk := (off + int64(done)) / d.bs
		in := (off + int64(done)) % d.bs
		b, err := d.block(blk)
		if err != nil {
			return done, err
		}
		if _, own := d.blocks[uint64(blk)]; !own {
			b = slices.Clone(b)
			d.blocks[uint64(blk)] = b
		}
		done += copy(b[in:], p[done:])
	}
	return len(p), nil
}

func (d *cowDev) Sync() error { return nil }

func (d *cowDev) Close() error { return nil }

// patchSuper changes the view's primary superblock.
func (d *cowDev) patchSuper(fn func(*super.Superblock)) error {
	buf := make([]byte, super.Size)
	if _, err := d.ReadAt(buf, super.Offset); err != nil {
		return err
	}
	sb, err := super.DecodeNoVerify(buf)
	if err != nil {
		return err
	}
	fn(sb)
	_, err = d.WriteAt(sb.Encode(), super.Offset)
	return err
}
