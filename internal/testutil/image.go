//go:build linux

package testutil

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// ImageOptions says how BuildImage formats an image.
type ImageOptions struct {
	FsType    string // mke2fs -t; default "ext4"
	BlockSize int    // mke2fs -b; default 4096
	// Features is the -O value, e.g. "^metadata_csum" or "inline_data".
	Features string
	// Size of the image in bytes; 0 picks one from the source tree.
	Size int64
	// Deterministic adds DeterministicArgs (fixed UUID and hash seed).
	Deterministic bool
	// Args are extra mke2fs arguments. Unless they hold -N or -i, BuildImage
	// passes -N with enough inodes for the tree.
	Args []string
}

// BuildImage formats a new image in t.TempDir() populated from srcDir with
// "mke2fs -d", then repairs the times mke2fs -d cannot store (FixupTimes)
// and returns the image's path. e2fsck is not run; call RequireFsckClean.
func BuildImage(t testing.TB, srcDir string, o ImageOptions) string {
	t.Helper()
	if o.FsType == "" {
		o.FsType = "ext4"
	}
	if o.BlockSize == 0 {
		o.BlockSize = 4096
	}
	entries, blocks := treeUsage(t, srcDir, int64(o.BlockSize))
	size := o.Size
	if size == 0 {
		// Data, one xattr block per entry at most, inode tables (256-byte
		// inodes), a journal and group metadata: generous, and free on a
		// sparse file.
		size = blocks*int64(o.BlockSize)*5/4 + entries*(256+int64(o.BlockSize)/4) + 48<<20
		size = (size + 1<<20 - 1) &^ (1<<20 - 1)
	}
	args := []string{"-t", o.FsType, "-b", strconv.Itoa(o.BlockSize)}
	if o.Features != "" {
		args = append(args, "-O", o.Features)
	}
	if !slices.Contains(o.Args, "-N") && !slices.Contains(o.Args, "-i") {
		args = append(args, "-N", strconv.FormatInt(entries+256, 10))
	}
	if o.Deterministic {
		args = append(args, DeterministicArgs()...)
	}
	args = append(args, o.Args...)
	args = append(args, "-d", srcDir)
	image := filepath.Join(t.TempDir(), "fs.img")
	Mke2fs(t, image, size, args...)
	FixupTimes(t, image, srcDir)
	return image
}

// treeUsage counts the entries under dir and the blocks of size bs their
// data needs (holes excluded), for sizing an image.
func treeUsage(t testing.TB, dir string, bs int64) (entries, blocks int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		entries++
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			blocks += (st.Blocks*512 + bs - 1) / bs
		}
		if fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			blocks += 1 + fi.Size()/bs
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testutil: %v", err)
	}
	return entries, blocks
}

// FixupTimes gives every inode of image the mtime of its source in srcDir
// where "mke2fs -d" (e2fsprogs 1.47.0) stored it wrongly: it keeps whole
// seconds only and wraps seconds outside the signed 32-bit range. It sets
// the seconds and the extra field (nanoseconds << 2 | epoch bits) with
// debugfs set_inode_field. The image needs inodes of at least 256 bytes for
// the extra field. Paths holding a newline cannot be addressed by a debugfs
// request; the test fails if one needs fixing.
func FixupTimes(t testing.TB, image, srcDir string) {
	t.Helper()
	var reqs []string
	err := filepath.WalkDir(srcDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(srcDir, p)
		if err != nil || rel == "." {
			return err // the root's times are not copied at all
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m, ok := statMeta(fi)
		if !ok {
			return nil
		}
		if err := exactTimes(&m, p); err != nil {
			return err
		}
		sec, nsec := m.Mtime.Unix(), int64(m.Mtime.Nanosecond())
		if nsec == 0 && sec == int64(int32(sec)) {
			return nil // stored exactly
		}
		q, ok := DebugfsQuote("/" + filepath.ToSlash(rel))
		if !ok {
			return fmt.Errorf("mtime of %q needs fixing but debugfs cannot address it", rel)
		}
		// "mtime @SEC" sets the seconds incl. epoch bits but clears ns;
		// then write the whole extra field.
		reqs = append(reqs,
			fmt.Sprintf("sif %s mtime @%d", q, sec),
			fmt.Sprintf("sif %s mtime_extra %d", q, extraTime(sec, nsec)))
		return nil
	})
	if err != nil {
		t.Fatalf("testutil: FixupTimes: %v", err)
	}
	if len(reqs) > 0 {
		DebugfsWrite(t, image, reqs...)
	}
}

// extraTime encodes the ext4 i_*time_extra field: the bits 32..33 of the
// seconds (counted from the signed 32-bit low part) and the nanoseconds.
// kernel: ext4_encode_extra_time.
func extraTime(sec, nsec int64) uint32 {
	epoch := uint32((sec-int64(int32(sec)))>>32) & 3
	return uint32(nsec)<<2 | epoch
}
