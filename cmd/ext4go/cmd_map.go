package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/fsmap"
)

func init() {
	register(&command{name: "map", usage: "[--force] -o FILE.svg IMAGE [PATH]",
		summary: "draw the block groups as SVG: metadata, used and free blocks, free-space fragmentation; with PATH, where its blocks are",
		run:     runMap})
}

func runMap(e *env, args []string) error {
	fsys, o, err := openRead(e, "map", []optDef{
		{short: 'o', long: "output", arg: "FILE.svg", help: "write the picture to FILE.svg ('-': standard output); rsvg-convert FILE.svg -o FILE.png makes a PNG of it"},
	}, args, 1, 2)
	if err != nil {
		return err
	}
	defer fsys.Close()
	out, _ := o.str("o")
	switch {
	case out == "":
		return usagef("missing -o FILE.svg ('-o -' writes the SVG to standard output)")
	case strings.EqualFold(filepath.Ext(out), ".png"):
		base := strings.TrimSuffix(out, filepath.Ext(out))
		return usagef("map writes SVG, not PNG: -o %s.svg, then rsvg-convert %s.svg -o %s", base, base, out)
	}
	if err := checkMapOutput(out, o.image); err != nil {
		return err
	}
	m, err := mapImage(fsys)
	if err != nil {
		return fmt.Errorf("%s: %w", o.image, err)
	}
	label := ""
	if len(o.args) == 1 {
		label = o.args[0]
		if err := highlightTree(fsys, m, imagePath(label)); err != nil {
			return operandError(label, err)
		}
	}
	// The picture is made whole before anything is written, so a failure
	// reading the image leaves no file behind.
	var svg bytes.Buffer
	if err := m.WriteSVG(&svg, fsmap.Labels{Image: o.image, Highlight: label}); err != nil {
		return err
	}
	if out == "-" {
		_, err := e.stdout.Write(svg.Bytes())
		return err
	}
	return os.WriteFile(out, svg.Bytes(), 0o666)
}

// mapImage collects the filesystem's block usage: its metadata from the
// block groups, its free extents from the bitmaps.
func mapImage(fsys *ext4go.FS) (*fsmap.Map, error) {
	in := fsys.Info()
	m, err := fsmap.New(fsmap.Geometry{BlockSize: in.BlockSize, BlocksCount: in.BlocksCount,
		FirstDataBlock: uint64(in.FirstDataBlock), BlocksPerGroup: in.BlocksPerGroup})
	if err != nil {
		return nil, err
	}
	groups, err := fsys.BlockGroups()
	if err != nil {
		return nil, fmt.Errorf("reading the block groups: %w", err)
	}
	for _, g := range groups {
		for _, r := range g.Metadata {
			if k, ok := mapKinds[r.Kind]; ok {
				m.AddMetadata(k, r.Start, r.Length)
			}
		}
	}
	err = fsys.FreeExtents(func(start, length uint64) error {
		m.AddFree(start, length)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the block bitmaps: %w", err)
	}
	return m, nil
}

// mapKinds are the kinds of metadata as the picture groups them.
var mapKinds = map[ext4go.BlockKind]fsmap.Kind{
	ext4go.KindSuperblock:       fsmap.KindSuper,
	ext4go.KindGroupDescriptors: fsmap.KindSuper,
	ext4go.KindReservedGDT:      fsmap.KindReservedGDT,
	ext4go.KindBlockBitmap:      fsmap.KindBitmap,
	ext4go.KindInodeBitmap:      fsmap.KindBitmap,
	ext4go.KindInodeTable:       fsmap.KindInodeTable,
	ext4go.KindJournal:          fsmap.KindJournal,
}

// highlightTree adds the data extents of the named file, or of every
// file, directory and symbolic link under the named directory, to the
// highlight; an inode with several names counts once.
func highlightTree(fsys *ext4go.FS, m *fsmap.Map, name string) error {
	seen := map[uint32]bool{}
	add := func(p string, ino uint32) error {
		if seen[ino] {
			return nil
		}
		seen[ino] = true
		ext, err := fsys.Extents(p)
		if err != nil {
			return err
		}
		for _, x := range ext {
			m.AddHighlight(x.Physical, x.Length)
		}
		return nil
	}
	fi, err := fsys.Lstat(name)
	if err != nil {
		return err
	}
	top := fi.Sys().(*ext4go.Stat).Ino
	if !fi.IsDir() {
		return add(name, top)
	}
	return fsys.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		ino := top
		if p != name {
			ino = d.(interface{ Ino() uint32 }).Ino()
		}
		if t := d.Type(); t.IsRegular() || t.IsDir() || t&fs.ModeSymlink != 0 {
			return add(p, ino)
		}
		return nil
	})
}

// checkMapOutput refuses an output that would destroy data: the image
// itself (a slip of the operands' order) or a block device. Other
// devices and pipes (/dev/stdout) are written to.
func checkMapOutput(out, image string) error {
	if out == "-" {
		return nil
	}
	ofi, err := os.Stat(out)
	if err != nil {
		return nil // a new file; creating it says what is wrong, if anything
	}
	if ifi, err := os.Stat(image); err == nil && os.SameFile(ofi, ifi) {
		return usagef("-o %s is the image itself", out)
	}
	switch {
	case ofi.Mode()&fs.ModeDevice != 0 && ofi.Mode()&fs.ModeCharDevice == 0:
		return usagef("-o %s is a block device, not a file for the picture", out)
	case ofi.IsDir():
		return usagef("-o %s is a directory", out)
	}
	return nil
}
