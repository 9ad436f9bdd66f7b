package mkfs

import (
	"errors"
	"fmt"
	"os"

	"github.com/ext4go/ext4go/internal/dev"
)

// Zeroer is a device that can make a byte range read back as zeros without
// writing it, as punching holes in an image file does. Mkfs uses it the way
// mke2fs uses a discard that zeroes: the inode tables and the journal body
// are then left unwritten.
type Zeroer interface {
	ZeroRange(off, n int64) error
}

// Truncater is a device whose size can be changed, an image file. Mkfs grows
// one that is smaller than Options.Size.
type Truncater interface {
	Truncate(size int64) error
}

// Validate checks o against a device of devSize bytes and reports the first
// problem, exactly as Mkfs would before writing anything.
func Validate(o Options, devSize int64) error {
	_, err := newPlan(o, devSize)
	return err
}

// Mkfs makes a new filesystem on d. Options.Size defaults to d.Size(); a d
// that is smaller is grown when it implements Truncater, else refused. When
// d implements Zeroer (or Options.AssumeZeroed is set) it is treated like a
// device whose discard zeroes; otherwise everything mke2fs zeroes on such a
// device is zeroed here. Bad options are reported before any write, as an
// *OptionError or an *fserr.UnsupportedError.
func Mkfs(d dev.Device, o Options) error {
	p, err := newPlan(o, d.Size())
	if err != nil {
		return err
	}
	z, canZero := d.(Zeroer)
	zeroed := o.AssumeZeroed || canZero
	img, err := makeImage(p, zeroed)
	if err != nil {
		return err // nothing written yet
	}

	fsBytes := int64(p.blocks) * int64(p.blockSize)
	if want := max(o.Size, fsBytes); d.Size() < want {
		t, ok := d.(Truncater)
		if !ok {
			return optErr("Size", "device holds %d bytes, the filesystem needs %d", d.Size(), want)
		}
		if err := t.Truncate(want); err != nil {
			return fmt.Errorf("mkfs: growing the image to %d bytes: %w", want, err)
		}
	}
	if canZero && !o.AssumeZeroed {
		if err := z.ZeroRange(0, fsBytes); errors.Is(err, errors.ErrUnsupported) {
			if img, err = makeImage(p, false); err != nil {
				return err
			}
		} else if err != nil {
			return fmt.Errorf("mkfs: zeroing the device: %w", err)
		}
	}
	if err := img.writeTo(d); err != nil {
		return fmt.Errorf("mkfs: writing: %w", err)
	}
	return d.Sync()
}

// makeImage builds the filesystem of p in memory.
func makeImage(p *plan, zeroed bool) (*image, error) {
	f, err := build(p, zeroed)
	if err != nil {
		return nil, err
	}
	return f.finish()
}

// Format makes a filesystem on the image file or block device at path. A
// missing file is created when o.Size is set; an image file is grown to
// o.Size if shorter and has its holes punched so that it reads back zeros,
// which keeps the result sparse. It takes the same exclusive claim as
// dev.Open: an advisory lock on files, O_EXCL on block devices.
func Format(path string, o Options) (err error) {
	if dev.IsDevicePath(path) {
		d, err := dev.Open(path, true)
		if err != nil {
			return err
		}
		defer d.Close()
		return Mkfs(d, o)
	}
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) && o.Size > 0 {
		// Validate first so that bad options leave no file behind.
		if err := Validate(o, o.Size); err != nil {
			return err
		}
		f, cerr := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		if cerr != nil {
			return cerr
		}
		f.Close()
		defer func() {
			if err != nil {
				os.Remove(path)
			}
		}()
		fi, err = os.Stat(path)
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		d, err := dev.Open(path, true)
		if err != nil {
			return err
		}
		defer d.Close()
		return Mkfs(d, o)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := dev.LockImage(f, true); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return Mkfs(&imageFile{f: f, size: fi.Size(), zeroFrom: fi.Size()}, o)
}

// imageFile is a regular image file as a Device that can grow and punch.
type imageFile struct {
	f    *os.File
	size int64
	// zeroFrom is the size the file had when opened: what lies past it
	// was added by growing the file and reads back as zeros already.
	zeroFrom int64
}

func (d *imageFile) ReadAt(p []byte, off int64) (int, error)  { return d.f.ReadAt(p, off) }
func (d *imageFile) WriteAt(p []byte, off int64) (int, error) { return d.f.WriteAt(p, off) }
func (d *imageFile) Size() int64                              { return d.size }
func (d *imageFile) Sync() error                              { return d.f.Sync() }
func (d *imageFile) Close() error                             { return d.f.Close() }

func (d *imageFile) Truncate(size int64) error {
	if err := d.f.Truncate(size); err != nil {
		return err
	}
	d.size = size
	return nil
}

// ZeroRange punches a hole, keeping the file size (punch_*.go); what
// lies past the size the file was opened with reads back as zeros and is
// left alone. Systems and filesystems without hole punching report
// errors.ErrUnsupported.
func (d *imageFile) ZeroRange(off, n int64) error {
	n = min(n, d.zeroFrom-off)
	if n <= 0 {
		return nil
	}
	return punchHole(d.f, off, n)
}
