package main

import (
	"fmt"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"
)

func init() {
	register(&command{name: "info", usage: "[--force] IMAGE", summary: "summarise the filesystem, like dumpe2fs -h", run: runInfo})
	register(&command{name: "frag", usage: "[-v] [--force] IMAGE [PATH]", summary: "extents per file, like filefrag (all files when PATH is a directory)", run: runFrag})
}

func runInfo(e *env, args []string) error {
	fsys, _, err := openRead(e, "info", nil, args, 1, 1)
	if err != nil {
		return err
	}
	defer fsys.Close()
	in := fsys.Info()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
	tm := func(t time.Time) string {
		if t.IsZero() {
			return "n/a"
		}
		return t.UTC().Format(time.ANSIC)
	}
	row("Filesystem volume name", orNone(in.Label))
	row("Last mounted on", orNone(in.LastMounted))
	row("Filesystem UUID", in.UUID)
	row("Filesystem magic number", "0xEF53")
	row("Filesystem revision #", in.RevLevel)
	row("Filesystem features", strings.Join(in.Features, " "))
	row("Filesystem state", in.State)
	row("Errors behavior", in.ErrorBehavior)
	row("Inode count", in.InodesCount)
	row("Block count", in.BlocksCount)
	row("Reserved block count", in.ReservedBlocks)
	row("Free blocks", in.FreeBlocks)
	row("Free inodes", in.FreeInodes)
	row("First block", in.FirstDataBlock)
	row("Block size", in.BlockSize)
	if in.ClusterSize != in.BlockSize {
		row("Cluster size", in.ClusterSize)
	}
	row("Group count", in.Groups)
	row("Blocks per group", in.BlocksPerGroup)
	row("Inodes per group", in.InodesPerGroup)
	if in.FlexBGSize > 0 {
		row("Flex block group size", in.FlexBGSize)
	}
	row("Reserved GDT blocks", in.ReservedGDTBlocks)
	row("Filesystem created", tm(in.Created))
	row("Last mount time", tm(in.LastMount))
	row("Last write time", tm(in.LastWrite))
	row("Mount count", in.MountCount)
	row("Maximum mount count", in.MaxMountCount)
	row("Last checked", tm(in.LastCheck))
	row("Inode size", in.InodeSize)
	if in.InodeSize > 128 {
		row("Required extra isize", in.MinExtraIsize)
		row("Desired extra isize", in.WantExtraIsize)
	}
	row("Default directory hash", in.HashVersion)
	row("Directory Hash Seed", in.HashSeed)
	if in.JournalInode != 0 {
		row("Journal inode", in.JournalInode)
	}
	if in.FirstOrphan != 0 {
		row("First orphan inode", in.FirstOrphan)
	}
	if j, err := fsys.Journal(); err != nil {
		row("Journal", "unreadable: "+err.Error())
	} else if j != nil {
		row("Journal size", fmt.Sprintf("%d blocks", j.Blocks))
		if len(j.Features) > 0 {
			row("Journal features", strings.Join(j.Features, " "))
		}
		row("Journal sequence", fmt.Sprintf("0x%08x", j.Sequence))
		switch {
		case j.Start == 0:
			row("Journal log", "empty (nothing to replay)")
		case j.ReplayError != nil:
			row("Journal log", fmt.Sprintf("starts at block %d; cannot be replayed: %v", j.Start, j.ReplayError))
		default:
			s := fmt.Sprintf("starts at block %d; needs recovery: %d transactions, %d blocks, %d revoke records",
				j.Start, j.Transactions, j.LoggedBlocks, j.RevokeRecords)
			if j.FastCommits > 0 {
				s += fmt.Sprintf(", %d fast-commit records", j.FastCommits)
			}
			row("Journal log", s)
		}
	}
	if r := fsys.Replay(); r != nil {
		s := fmt.Sprintf("%d transactions, %d blocks, %d revoked copies skipped, %d bad copies skipped",
			r.Transactions, r.Blocks, r.Revoked, r.BadBlocks)
		if r.FastCommits > 0 {
			s += fmt.Sprintf(", %d fast-commit records applied", r.FastCommits)
		}
		row("Journal replayed in memory", s)
	}
	if in.Checksummed {
		row("Checksum type", "crc32c")
		row("Checksum", fmt.Sprintf("0x%08x", in.Checksum))
		row("Checksum seed", fmt.Sprintf("0x%08x", in.ChecksumSeed))
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func runFrag(e *env, args []string) error {
	fsys, o, err := openRead(e, "frag", []optDef{{short: 'v', help: "list every extent"}}, args, 1, 2)
	if err != nil {
		return err
	}
	defer fsys.Close()
	verbose := o.has("v")
	name := "."
	if len(o.args) == 1 {
		name = imagePath(o.args[0])
	}
	var files, extents, multi int
	one := func(p string) error {
		ext, err := fsys.Extents(p)
		if err != nil {
			return err
		}
		files++
		extents += len(ext)
		if len(ext) > 1 {
			multi++
		}
		fmt.Fprintf(e.stdout, "%s: %d extent%s found\n", displayPath(p), len(ext), plural(len(ext)))
		if verbose && len(ext) > 0 {
			tw := tabwriter.NewWriter(e.stdout, 0, 0, 1, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, " ext:\tlogical:\tphysical:\tlength:\tflags:\t")
			for i, x := range ext {
				fl := ""
				if x.Unwritten {
					fl = "unwritten"
				}
				fmt.Fprintf(tw, "%d:\t%d..%d:\t%d..%d:\t%d:\t%s\t\n", i, x.Logical, x.Logical+x.Length-1, x.Physical, x.Physical+x.Length-1, x.Length, fl)
			}
			tw.Flush()
		}
		return nil
	}
	fi, err := fsys.Lstat(name)
	if err != nil {
		if len(o.args) == 1 {
			return operandError(o.args[0], err)
		}
		return err
	}
	if !fi.IsDir() {
		return one(name)
	}
	err = fsys.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() || d.IsDir() {
			return one(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	pct := 0.0
	if files > 0 {
		pct = 100 * float64(multi) / float64(files)
	}
	fmt.Fprintf(e.stdout, "%d files, %d extents, %d non-contiguous (%.1f%%)\n", files, extents, multi, pct)
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
