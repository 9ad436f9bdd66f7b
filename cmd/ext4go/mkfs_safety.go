package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/dev"
)

// countFlag is a flag that counts its uses (-F, -F -F).
type countFlag struct{ n int }

func (c *countFlag) String() string   { return strconv.Itoa(c.n) }
func (c *countFlag) Set(string) error { c.n++; return nil }
func (c *countFlag) IsBoolFlag() bool { return true }

// existingContent names what the start of an existing image or device
// holds, as mke2fs's check_plausibility does before it overwrites
// anything: a filesystem, a partition table, swap; "" for none of these.
func existingContent(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 64<<10+512)
	n, _ := io.ReadFull(f, b)
	b = b[:n]
	at := func(off int, magic string) bool {
		return off+len(magic) <= len(b) && string(b[off:off+len(magic)]) == magic
	}
	switch {
	case len(b) >= 1024+0x3a && binary.LittleEndian.Uint16(b[1024+0x38:]) == 0xEF53:
		what := "an ext2/ext3/ext4 filesystem"
		if fsys, err := ext4go.Open(path, &ext4go.Options{IgnoreChecksums: true, IgnoreJournal: true}); err == nil {
			info := fsys.Info()
			fsys.Close()
			what = "an ext4 filesystem"
			if info.Label != "" {
				what += fmt.Sprintf(" labelled %q", info.Label)
			}
			if info.LastMounted != "" {
				what += " last mounted on " + info.LastMounted
			}
		}
		return what
	case at(512, "EFI PART"):
		return "a GPT partition table"
	case at(0, "XFSB"):
		return "an XFS filesystem"
	case at(0x10040, "_BHRfS_M"):
		return "a btrfs filesystem"
	case at(4096-10, "SWAPSPACE2") || at(4096-10, "SWAP-SPACE"):
		return "swap space"
	case len(b) >= 512 && b[510] == 0x55 && b[511] == 0xAA && hasPartitions(b[446:510]):
		return "a DOS partition table"
	}
	return ""
}

// hasPartitions reports whether an MBR partition table has an entry.
func hasPartitions(table []byte) bool {
	return !bytes.Equal(table, make([]byte, len(table)))
}

// checkMkfsTarget refuses what mke2fs refuses: an image in use (unless
// forced twice), one that holds a filesystem or partition table (unless
// forced), a missing file with no size.
func checkMkfsTarget(image string, force int, sized bool) (exists bool, err error) {
	if dev.IsDevicePath(image) {
		// A Windows disk or volume, which stat does not describe.
		if what := existingContent(image); what != "" && force < 1 {
			return true, fmt.Errorf("%s contains %s; use -F to overwrite it", image, what)
		}
		return true, nil
	}
	st, err := os.Stat(image)
	if os.IsNotExist(err) {
		if !sized {
			return false, fmt.Errorf("the file %s does not exist and no size was specified (give -size, or -d/-tar to size it to the content)", image)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if usage, _, err := ext4go.InUse(image); err == nil && usage != "" && force < 2 {
		return true, fmt.Errorf("%s is %s; will not make a filesystem here! (unmount it first; -F twice forces)", image, usage)
	}
	if what := existingContent(image); what != "" && force < 1 {
		return true, fmt.Errorf("%s contains %s; use -F to overwrite it", image, what)
	}
	if st.Mode().IsRegular() && st.Size() == 0 && !sized {
		return true, fmt.Errorf("%s is empty and no size was specified (give -size)", image)
	}
	return true, nil
}

// mkfsDryRun shows what mkfs would make (mke2fs -n): it makes the
// filesystem in a scratch sparse file of the same size and describes it;
// image is not written.
func mkfsDryRun(e *env, image string, o ext4go.MkfsOptions, exists bool) error {
	if o.Size == 0 && exists {
		f, err := os.Open(image)
		if err != nil {
			return err
		}
		end, err := f.Seek(0, io.SeekEnd)
		f.Close()
		if err != nil {
			return err
		}
		o.Size = end
	}
	scratch, err := os.CreateTemp("", "ext4go-mkfs-n-")
	if err != nil {
		return err
	}
	name := scratch.Name()
	scratch.Close()
	os.Remove(name) // Mkfs creates it at o.Size
	defer os.Remove(name)
	if err := ext4go.Mkfs(name, o); err != nil {
		return err
	}
	fsys, err := ext4go.Open(name, nil)
	if err != nil {
		return err
	}
	defer fsys.Close()
	in := fsys.Info()
	fmt.Fprintf(e.stdout, "would make on %s (nothing written):\n", image)
	fmt.Fprintf(e.stdout, "Creating filesystem with %d %dk blocks and %d inodes\n", in.BlocksCount, in.BlockSize/1024, in.InodesCount)
	fmt.Fprintf(e.stdout, "Filesystem UUID: %s\n", in.UUID)
	fmt.Fprintf(e.stdout, "Block groups: %d, %d blocks and %d inodes per group\n", in.Groups, in.BlocksPerGroup, in.InodesPerGroup)
	fmt.Fprintf(e.stdout, "Filesystem features: %s\n", strings.Join(in.Features, " "))
	return nil
}
