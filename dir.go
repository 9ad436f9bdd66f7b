package ext4go

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/ext4go/ext4go/internal/dir"
	"github.com/ext4go/ext4go/internal/inode"
	"github.com/ext4go/ext4go/internal/super"
)

// maxSymlinkLen is the longest symlink target Linux stores (PATH_MAX - 1
// plus room; ext4 allows up to a block).
const maxSymlinkLen = 65536

func (f *FS) dirFormat() dir.Format {
	sb := f.sb
	return dir.Format{
		BlockSize:    int(f.blockSize),
		FileType:     sb.HasIncompat(super.IncompatFiletype),
		Csum:         f.csum,
		NoVerify:     f.opts.IgnoreChecksums,
		LargeDir:     sb.HasIncompat(super.IncompatLargeDir),
		HashSeed:     sb.HashSeed,
		HashUnsigned: sb.Flags&super.FlagUnsignedHash != 0,
		InodesCount:  sb.InodesCount,
	}
}

// dirOf describes directory n for the dir package's walkers.
func (f *FS) dirOf(n *node) (*dir.Dir, error) {
	if n.in().HasFlag(inode.FlagEncrypt) {
		return nil, &UnsupportedError{Feature: "encrypted directories", Detail: fmt.Sprintf("inode %d", n.ino)}
	}
	ms := f.mapState(n)
	if d := ms.dir.Load(); d != nil {
		return d, nil
	}
	runs, err := ms.runs, ms.err
	if err != nil {
		return nil, err
	}
	nblocks := uint64(n.size()) / uint64(f.blockSize)
	if uint64(n.size())%uint64(f.blockSize) != 0 {
		return nil, &CorruptError{What: "directory", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("size %d is not a multiple of the block size", n.size())}
	}
	if nblocks > 1<<32-1 {
		return nil, &CorruptError{What: "directory", Block: -1, Ino: n.ino, Detail: "too large"}
	}
	// The walkers visit every block below NBlocks, holes one by one, so a
	// corrupt i_size or a far-off extent would make each listing and
	// lookup step through billions of holes. Blocks past the last mapped
	// one hold nothing: stop there. A directory that is mostly holes
	// (the kernel never makes one; e2fsck reports holes) is refused.
	var mapped, end uint64
	for _, r := range runs {
		mapped += r.length
		end = r.logical + r.length
	}
	nblocks = min(nblocks, end)
	if holes := nblocks - min(mapped, nblocks); holes > 1024 && holes > 8*mapped {
		return nil, &CorruptError{What: "directory", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("%d of its %d blocks are holes", holes, nblocks)}
	}
	// physical is lblk's block; false for a hole.
	physical := func(lblk uint32) (uint64, bool) {
		i := sort.Search(len(runs), func(i int) bool { return runs[i].logical+runs[i].length > uint64(lblk) })
		if i == len(runs) || runs[i].logical > uint64(lblk) || runs[i].unwritten {
			return 0, false
		}
		return runs[i].physical + uint64(lblk) - runs[i].logical, true
	}
	read := func(lblk uint32) ([]byte, error) {
		p, ok := physical(lblk)
		if !ok {
			return nil, nil
		}
		return f.readBlock(p, "directory block")
	}
	view := func(lblk uint32, fn func(b []byte) error) error {
		p, ok := physical(lblk)
		if !ok {
			return fn(nil)
		}
		return f.viewDirBlock(p, fn)
	}
	d := &dir.Dir{
		Format:   f.dirFormat(),
		Read:     read,
		View:     view,
		NBlocks:  uint32(nblocks),
		Indexed:  n.in().HasFlag(inode.FlagIndex) && f.sb.HasCompat(super.CompatDirIndex),
		CsumSeed: inode.Seed(f.seed, n.ino, n.in().Generation),
		Ino:      n.ino,
	}
	// Kept with the runs it reads through: the size and flags it took
	// change only with a setInode, which drops both.
	ms.dir.CompareAndSwap(nil, d)
	return d, nil
}

// dirEntries returns the entries of directory n other than "." and "..".
func (f *FS) dirEntries(n *node) ([]dir.Entry, error) {
	if n.hasInlineData() {
		in, err := f.inlineDir(n)
		if err != nil {
			return nil, err
		}
		return in.Entries(), nil
	}
	d, err := f.dirOf(n)
	if err != nil {
		return nil, err
	}
	var out []dir.Entry
	err = d.Iterate(func(_ uint32, _ int, e dir.Entry) error {
		if e.Inode == 0 || string(e.Name) == "." || string(e.Name) == ".." {
			return nil
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// readDir returns fs.DirEntry values for directory n: all it can read,
// and a *SkippedEntriesError naming the entries it left out, or nil.
// An entry is listed without its inode being read, as the kernel's
// readdir lists it (a lookup or stat of a bad one fails), unless its file
// type is unknown: then the type comes from the inode, and an entry whose
// inode cannot be read is left out.
func (f *FS) readDir(n *node) ([]fs.DirEntry, error) {
	var skipped []SkippedEntry
	skip := func(lblk uint32, e *dir.Entry, err error) error {
		s := SkippedEntry{Block: int64(lblk), Err: err}
		if e != nil {
			s.Name, s.Ino = string(e.Name), e.Inode
		}
		skipped = append(skipped, s)
		return nil
	}
	var ents []dir.Entry
	if n.hasInlineData() {
		in, err := f.inlineDir(n)
		if err != nil {
			return nil, err
		}
		ents = in.Entries()
	} else {
		d, err := f.dirOf(n)
		if err != nil {
			return nil, err
		}
		err = d.IterateSkipping(func(_ uint32, _ int, e dir.Entry) error {
			if string(e.Name) != "." && string(e.Name) != ".." {
				ents = append(ents, e)
			}
			return nil
		}, skip)
		if err != nil {
			return nil, err
		}
	}
	fileType := f.sb.HasIncompat(super.IncompatFiletype)
	out := make([]fs.DirEntry, 0, len(ents))
	for _, e := range ents {
		// A name no path can hold; the VFS fails getdents on it with EIO
		// (verify_dirent_name), and hides what follows: here only it.
		if len(e.Name) == 0 || bytes.IndexByte(e.Name, '/') >= 0 {
			skipped = append(skipped, SkippedEntry{Name: string(e.Name), Ino: e.Inode, Block: -1,
				Err: &CorruptError{What: "directory entry", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("name %q is empty or holds a slash", e.Name)}})
			continue
		}
		de := &dirEntry{fsys: f, name: string(e.Name), ino: e.Inode}
		if t, ok := direntType(e.FileType); fileType && ok {
			de.typ = t
		} else {
			// No (or a bad) type in the entry: ask the inode.
			c, err := f.inode(e.Inode)
			if err != nil {
				skipped = append(skipped, SkippedEntry{Name: de.name, Ino: e.Inode, Block: -1, Err: err})
				continue
			}
			de.typ = goMode(c.in().Mode).Type()
		}
		out = append(out, de)
	}
	if len(skipped) > 0 {
		return out, &SkippedEntriesError{Dir: n.ino, Entries: skipped}
	}
	return out, nil
}

// SkippedEntriesError comes with the entries ReadDir could read of a
// directory some of whose entries it could not: an entry naming an inode
// number outside the filesystem, one without a file type whose inode
// cannot be read, one whose name no path can hold, or the rest of a
// directory block from a damaged entry on (or all of a block that fails
// its checksum or cannot be read). The kernel's readdir goes past such
// entries too, reporting them in its log. errors.Is and errors.As look
// at every cause (corruptions, or a block's read error).
type SkippedEntriesError struct {
	Dir     uint32 // the directory's inode number
	Entries []SkippedEntry
}

// SkippedEntry is one entry, or the part of a directory block, that a
// listing left out.
type SkippedEntry struct {
	// Name and Ino are the entry's name and inode number; Name is "" and
	// Ino 0 for a part of a block whose entries cannot be told.
	Name string
	Ino  uint32
	// Block is the directory's logical block holding it; -1 when not
	// known.
	Block int64
	Err   error // why it was left out
}

func (s SkippedEntry) String() string {
	if s.Name == "" && s.Ino == 0 {
		return fmt.Sprintf("entries of block %d: %v", s.Block, s.Err)
	}
	return fmt.Sprintf("entry %q (inode %d): %v", s.Name, s.Ino, s.Err)
}

func (e *SkippedEntriesError) Error() string {
	const shown = 3
	var b strings.Builder
	fmt.Fprintf(&b, "directory inode %d: %d left out of the listing: ", e.Dir, len(e.Entries))
	for i, s := range e.Entries {
		if i == shown {
			fmt.Fprintf(&b, "; and %d more", len(e.Entries)-shown)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s.String())
	}
	return b.String()
}

// Unwrap returns the causes, for errors.Is and errors.As.
func (e *SkippedEntriesError) Unwrap() []error {
	out := make([]error, len(e.Entries))
	for i, s := range e.Entries {
		out[i] = s.Err
	}
	return out
}

// direntType maps a dirent file type (EXT4_FT_*) to fs.FileMode type bits.
func direntType(ft uint8) (fs.FileMode, bool) {
	switch ft {
	case 1:
		return 0, true
	case 2:
		return fs.ModeDir, true
	case 3:
		return fs.ModeDevice | fs.ModeCharDevice, true
	case 4:
		return fs.ModeDevice, true
	case 5:
		return fs.ModeNamedPipe, true
	case 6:
		return fs.ModeSocket, true
	case 7:
		return fs.ModeSymlink, true
	}
	return 0, false
}

func sortEntries(ents []fs.DirEntry) {
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
}

// lookup finds name in directory n, through the htree index where there is
// one (falling back to a linear scan if the index is bad, as the kernel
// does).
func (f *FS) lookup(n *node, name string) (uint32, error) {
	var ino uint32
	if n.hasInlineData() {
		in, err := f.inlineDir(n)
		if err != nil {
			return 0, err
		}
		switch name {
		case ".":
			return n.ino, nil
		case "..":
			return in.Parent, nil
		}
		for _, e := range in.Entries() {
			if e.Inode != 0 && string(e.Name) == name {
				ino = e.Inode
				break
			}
		}
		if ino == 0 {
			return 0, fs.ErrNotExist
		}
	} else {
		d, err := f.dirOf(n)
		if err != nil {
			return 0, err
		}
		res, err := d.Lookup([]byte(name))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, fs.ErrNotExist
		}
		if err != nil {
			return 0, err
		}
		ino = res.Inode
	}
	return ino, nil
}

// isFastSymlink reports whether symlink n keeps its target in i_block.
func (f *FS) isFastSymlink(n *node) bool {
	return n.in().IsFastSymlink(uint32(f.blockSize), f.sb.ClusterSize(), f.hugeFile, f.sb.HasIncompat(super.IncompatEAInode))
}

// readLink returns the target of symlink n. It holds n's lock shared, so
// that the block of a slow symlink is not freed and reused meanwhile.
func (f *FS) readLink(n *node) (string, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.freed.Load() {
		return "", fs.ErrNotExist // its target block may be another file's now
	}
	size := n.size()
	if size > maxSymlinkLen || size > f.blockSize && !n.hasInlineData() {
		return "", &CorruptError{What: "symlink", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("target length %d", size)}
	}
	if n.in().HasFlag(inode.FlagEncrypt) {
		return "", &UnsupportedError{Feature: "encrypted symlinks", Detail: fmt.Sprintf("inode %d", n.ino)}
	}
	var target []byte
	if !n.hasInlineData() && f.isFastSymlink(n) {
		if size > int64(len(n.in().Block)) {
			return "", &CorruptError{What: "fast symlink", Block: -1, Ino: n.ino, Detail: fmt.Sprintf("target length %d does not fit i_block", size)}
		}
		target = n.in().Block[:size]
	} else {
		target = make([]byte, size)
		m, err := f.readAt(n, target, 0)
		if err != nil && m != len(target) {
			return "", err
		}
	}
	s := string(target)
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s, nil
}
