package main

import (
	"errors"
	"io"
	"math"
	"os"

	"github.com/ext4go/ext4go"
)

func init() {
	registerWrite(&writeCommand{
		name: "fallocate", usage: "[-n] [-p | -z | -d] [-o OFFSET] -l LENGTH IMAGE PATH",
		summary: "preallocate, punch or zero a range of a file (as util-linux fallocate)",
		opts: []optDef{
			{'o', "offset", "OFFSET", "start of the range (default 0)"},
			{'l', "length", "LENGTH", "length of the range"},
			{'n', "keep-size", "", "do not change the file size"},
			{'p', "punch-hole", "", "free the range (implies -n)"},
			{'z', "zero-range", "", "make the range read as zeros, keeping it allocated"},
			{'d', "dig-holes", "", "punch out every all-zero block (in the range, or the whole file)"},
		},
		parse: parseFallocate,
	})
}

func parseFallocate(o *opts) (action, error) {
	if err := wantArgs(o, 1, 1, "PATH"); err != nil {
		return nil, err
	}
	var off, length int64
	var err error
	if s, ok := o.str("o"); ok {
		if off, err = parseByteSize(s); err != nil {
			return nil, usagef("invalid offset value specified: %v", err)
		}
	}
	s, hasLen := o.str("l")
	if hasLen {
		if length, err = parseByteSize(s); err != nil {
			return nil, usagef("invalid length value specified: %v", err)
		}
		if length == 0 {
			return nil, usagef("invalid length value specified")
		}
	}
	dig := o.has("d")
	mode := 0
	switch {
	case o.has("p") && o.has("z"), dig && (o.has("p") || o.has("z")):
		return nil, usagef("-p, -z and -d are mutually exclusive")
	case o.has("p"):
		mode = ext4go.FallocPunchHole | ext4go.FallocKeepSize
	case o.has("z"):
		mode = ext4go.FallocZeroRange
	}
	if o.has("n") {
		mode |= ext4go.FallocKeepSize
	}
	if !hasLen && !dig {
		return nil, usagef("no length argument specified")
	}
	p := o.args[0]
	return func(x *wctx) error {
		if dig {
			return digHoles(x.fsys, p, off, length)
		}
		return fallocatePath(x.fsys, p, mode, off, length)
	}, nil
}

// fallocatePath applies fallocate(2) mode to [off, off+length) of p; as
// util-linux, only plain allocation creates a missing file.
func fallocatePath(fsys *ext4go.FS, p string, mode int, off, length int64) error {
	name := imagePath(p)
	flag := os.O_RDWR
	if mode == 0 {
		flag |= os.O_CREATE
	}
	f, err := fsys.OpenFile(name, flag, 0o644)
	if err != nil {
		return failf("cannot open", p, err)
	}
	err = f.Fallocate(mode, off, length)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failf("fallocate failed on", p, err)
	}
	return nil
}

// digHoles punches every all-zero filesystem block of p's data within
// [off, off+length) (length 0: to the end), as fallocate --dig-holes.
func digHoles(fsys *ext4go.FS, p string, off, length int64) error {
	name := imagePath(p)
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return failf("cannot open", p, err)
	}
	defer f.Close()
	fail := func(err error) error { return failf("fallocate failed on", p, err) }
	ranges, err := f.DataRanges()
	if err != nil {
		return fail(err)
	}
	bs := int64(fsys.BlockSize())
	end := int64(math.MaxInt64)
	if length > 0 && off <= math.MaxInt64-length {
		end = off + length
	}
	buf := make([]byte, bs)
	var holeStart, holeEnd int64 = -1, -1
	punch := func() error {
		if holeStart >= 0 && holeEnd > holeStart {
			if err := f.Fallocate(ext4go.FallocPunchHole|ext4go.FallocKeepSize, holeStart, holeEnd-holeStart); err != nil {
				return err
			}
		}
		holeStart, holeEnd = -1, -1
		return nil
	}
	for _, r := range ranges {
		// Whole blocks only: round the range's start up, its end down.
		lo := max((max(r.Off, off)+bs-1)/bs*bs, 0)
		hi := min(r.Off+r.Len, end) / bs * bs
		for b := lo; b+bs <= hi; b += bs {
			n, err := f.ReadAt(buf, b)
			if err != nil && !errors.Is(err, io.EOF) {
				return fail(err)
			}
			if n == len(buf) && isZero(buf) {
				if holeEnd != b {
					if err := punch(); err != nil {
						return fail(err)
					}
					holeStart = b
				}
				holeEnd = b + bs
			}
		}
	}
	if err := punch(); err != nil {
		return fail(err)
	}
	return nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
