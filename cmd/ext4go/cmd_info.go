package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "info", usage: "[--force] IMAGE", summary: "summarise the filesystem, like dumpe2fs -h", run: runInfo})
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
	// The error records, as dumpe2fs -h prints them (e2fsprogs:
	// list_super2).
	if in.ErrorCount != 0 {
		row("FS Error count", in.ErrorCount)
	}
	for _, r := range []struct {
		which string
		rec   *ext4go.ErrorRecord
	}{{"First", in.FirstError}, {"Last", in.LastError}} {
		if r.rec == nil {
			continue
		}
		row(r.which+" error time", tm(r.rec.Time))
		row(r.which+" error function", r.rec.Function)
		row(r.which+" error line #", r.rec.Line)
		if r.rec.Ino != 0 {
			row(r.which+" error inode #", r.rec.Ino)
		}
		if r.rec.Block != 0 {
			row(r.which+" error block #", r.rec.Block)
		}
		if r.rec.Err != "" {
			row(r.which+" error err", r.rec.Err)
		}
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
		if r.FailedCommit != 0 {
			s += fmt.Sprintf("; stopped at transaction %d, whose commit block fails its checksum", r.FailedCommit)
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
