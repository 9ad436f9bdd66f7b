package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"text/tabwriter"

	"github.com/ext4go/ext4go"
)

func init() {
	register(&command{name: "frag", usage: "[-v] [--json] [--force] IMAGE [PATH]", summary: "extents per file, like filefrag (all files when PATH is a directory), and a summary", run: runFrag})
}

func runFrag(e *env, args []string) error {
	fsys, o, err := openRead(e, "frag", []optDef{{short: 'v', help: "list every extent"}, jsonOption}, singleDashJSON(args), 1, 2)
	if err != nil {
		return err
	}
	defer fsys.Close()
	verbose, asJSON := o.has("v"), o.has("json")
	name := "."
	if len(o.args) == 1 {
		name = imagePath(o.args[0])
	}
	sum := newFragSummary(fsys.Info())
	var listed []fragFileJSON
	one := func(p string, ino uint32, isDir bool) error {
		// By inode number, found in the walk's entries: resolving every
		// path again was most of the time in a large directory.
		var ext []ext4go.Extent
		var fr ext4go.Fragmentation
		if f, err := fsys.OpenInode(ino, 0); err == nil {
			ext, err = f.Extents()
			if err == nil {
				fr, err = f.Fragmentation()
			}
			f.Close()
			if err != nil {
				return err
			}
		} else {
			// A name of a reserved inode (a corrupt directory), or a
			// name that changed: by path, as asked.
			if ext, err = fsys.Extents(p); err != nil {
				return err
			}
			if fr, err = fsys.Fragmentation(p); err != nil {
				return err
			}
		}
		sum.add(ino, isDir, ext, fr)
		if asJSON {
			j := fragFileJSON{Path: displayPath(p), Ino: ino, Extents: len(ext), NonContiguous: fr.NonContiguous}
			if verbose {
				for _, x := range ext {
					j.List = append(j.List, extentJSON{Logical: x.Logical, Physical: x.Physical, Length: x.Length, Unwritten: x.Unwritten})
				}
			}
			listed = append(listed, j)
			return nil
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
	st := fi.Sys().(*ext4go.Stat)
	if !fi.IsDir() {
		if err := one(name, st.Ino, false); err != nil {
			return err
		}
		if !asJSON {
			return nil // one file: filefrag's line alone
		}
	} else {
		err = fsys.WalkDir(name, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			ino := st.Ino
			if de, ok := d.(interface{ Ino() uint32 }); ok && p != name {
				ino = de.Ino()
			} else if p != name {
				fi, err := d.Info()
				if err != nil {
					return err
				}
				ino = fi.Sys().(*ext4go.Stat).Ino
			}
			if d.Type().IsRegular() || d.IsDir() {
				return one(p, ino, d.IsDir())
			}
			sum.other(ino)
			return nil
		})
		if err != nil {
			return err
		}
		if name == "." {
			// The whole filesystem: e2fsck also counts the inodes no
			// directory names (the journal, ...) and divides by every
			// inode in use.
			res, err := fsys.ReservedFragmentation()
			if err != nil {
				return err
			}
			sum.addReserved(res)
		}
	}
	if asJSON {
		if listed == nil {
			listed = []fragFileJSON{}
		}
		return json.NewEncoder(e.stdout).Encode(map[string]any{"files": listed, "summary": sum.json()})
	}
	fmt.Fprintln(e.stdout, sum.line())
	return nil
}

// extentJSON is one extent of frag -v --json, keyed in snake_case as
// every other JSON ext4go prints.
type extentJSON struct {
	Logical   uint64 `json:"logical"`
	Physical  uint64 `json:"physical"`
	Length    uint64 `json:"length"`
	Unwritten bool   `json:"unwritten,omitempty"`
}

// fragFileJSON is one file of frag --json.
type fragFileJSON struct {
	Path          string       `json:"path"`
	Ino           uint32       `json:"ino"`
	Extents       int          `json:"extents"`
	NonContiguous bool         `json:"non_contiguous"`
	List          []extentJSON `json:"extent_list,omitempty"`
}

// fragSummary totals what frag saw. Each inode counts once, however many
// names it has.
type fragSummary struct {
	info    *ext4go.Info
	seen    map[uint32]bool
	files   int // regular files
	dirs    int
	inodes  int // every inode seen, of any type
	extents int // of the regular files
	most    int // extents of the most fragmented regular file
	// nonContig and nonContigDirs count as e2fsck -v does (pass 1
	// fs_fragmented, fs_fragmented_dir).
	nonContig, nonContigDirs int
	groups                   map[uint64]bool // groups holding file data
	wholeFS                  bool            // the reserved inodes were added
}

func newFragSummary(in *ext4go.Info) *fragSummary {
	return &fragSummary{info: in, seen: map[uint32]bool{}, groups: map[uint64]bool{}}
}

func (s *fragSummary) first(ino uint32) bool {
	if s.seen[ino] {
		return false
	}
	s.seen[ino] = true
	s.inodes++
	return true
}

func (s *fragSummary) other(ino uint32) { s.first(ino) }

func (s *fragSummary) add(ino uint32, isDir bool, ext []ext4go.Extent, fr ext4go.Fragmentation) {
	if !s.first(ino) {
		return
	}
	switch {
	case isDir:
		s.dirs++
		if fr.NonContiguous {
			s.nonContigDirs++
		}
	default:
		s.files++
		s.extents += len(ext)
		s.most = max(s.most, len(ext))
		if fr.NonContiguous {
			s.nonContig++
		}
	}
	bpg := uint64(s.info.BlocksPerGroup)
	first := uint64(s.info.FirstDataBlock)
	for _, x := range ext {
		if x.Length == 0 || x.Physical < first || bpg == 0 {
			continue
		}
		for g := (x.Physical - first) / bpg; g <= (x.Physical+x.Length-1-first)/bpg; g++ {
			s.groups[g] = true
		}
	}
}

// addReserved adds the inodes that no name reaches.
func (s *fragSummary) addReserved(res map[uint32]ext4go.Fragmentation) {
	s.wholeFS = true
	for _, fr := range res {
		if fr.NonContiguous {
			s.nonContig++
		}
	}
}

// counted is the number the percentages divide by: every inode in use
// for the whole filesystem (e2fsck: s_inodes_count - s_free_inodes_count),
// else the inodes seen.
func (s *fragSummary) counted() int {
	if s.wholeFS {
		return int(s.info.InodesCount - min(s.info.FreeInodes, s.info.InodesCount))
	}
	return s.inodes
}

// e2fsckPercent is k of n as e2fsck prints it: tenths of a percent,
// rounded half up, in integer arithmetic (show_stats).
func e2fsckPercent(k, n int) string {
	if n == 0 {
		return "0.0"
	}
	t := (10000*k/n + 5) / 10
	return fmt.Sprintf("%d.%d", t/10, t%10)
}

// e2fsckPercentNumber is e2fsckPercent as a JSON number.
func e2fsckPercentNumber(k, n int) float64 {
	v, _ := strconv.ParseFloat(e2fsckPercent(k, n), 64)
	return v
}

func (s *fragSummary) mean() float64 {
	if s.files == 0 {
		return 0
	}
	return float64(s.extents) / float64(s.files)
}

func (s *fragSummary) line() string {
	n := s.counted()
	return fmt.Sprintf("%d files, %d directories, %d extents (%.2f per file, at most %d), "+
		"%d non-contiguous files (%s%%), %d non-contiguous directories (%s%%), data in %d of %d groups",
		s.files, s.dirs, s.extents, s.mean(), s.most,
		s.nonContig, e2fsckPercent(s.nonContig, n), s.nonContigDirs, e2fsckPercent(s.nonContigDirs, n),
		len(s.groups), s.info.Groups)
}

func (s *fragSummary) json() map[string]any {
	n := s.counted()
	return map[string]any{
		"files": s.files, "directories": s.dirs, "inodes_counted": n,
		"extents": s.extents, "mean_extents_per_file": math.Round(s.mean()*100) / 100, "max_extents_per_file": s.most,
		"non_contiguous_files": s.nonContig, "non_contiguous_files_percent": e2fsckPercentNumber(s.nonContig, n),
		"non_contiguous_directories": s.nonContigDirs, "non_contiguous_directories_percent": e2fsckPercentNumber(s.nonContigDirs, n),
		"groups_with_data": len(s.groups), "groups": s.info.Groups,
	}
}

// countOf says n things, one or many: "1 entry", "3 entries".
func countOf(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
