package main

import (
	"archive/tar"
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/mkfs"
)

func init() {
	register(&command{
		name:    "mkfs",
		usage:   "[-t TYPE] [--size SIZE] [-b BLOCKSIZE] [-I INODESIZE] [-i BYTES-PER-INODE] [-N INODES] [-G FLEX] [-m PCT] [-L LABEL] [-U UUID] [-E OPTS] [-O FEATURES] [-J MiB] [-d DIR | --tar FILE|-] [--uid N] [--gid N] [--map FILE] [--whiteouts] [--margin PCT] [-q] [-F] [-n] IMAGE [SIZE]",
		summary: "make a new filesystem, optionally filled from a directory or a tar stream (gzip/zstd detected)",
		run:     runMkfs,
	})
}

func runMkfs(e *env, args []string) error {
	c := commands["mkfs"]
	fl := newFlags(c, e)
	fsType := fl.String("t", "ext4", "filesystem type: ext4, ext3 or ext2")
	sizeFlag := fl.String("size", "", "image size (512M, 1.5G, 20GiB; a bare number is KiB, or blocks with -b, as mke2fs's fs-size, which may follow IMAGE instead); default: the device, or fit the content with --margin")
	bs := fl.Int("b", 0, "block size: 1024, 2048 or 4096 (default as mke2fs; 4096 when sizing to the content)")
	inodeSize := fl.Int("I", 0, "inode size (default 256)")
	usageTypes := fl.String("T", "", "usage types of mke2fs.conf, comma-separated (floppy, small, default, big, huge, news, largefile, largefile4, hurd)")
	ratio := fl.Int("i", 0, "bytes per inode")
	inodes := fl.Uint64("N", 0, "number of inodes")
	flex := fl.Int("G", 0, "groups per flex group")
	reserved := fl.Float64("m", -1, "reserved blocks percentage (default 5)")
	label := fl.String("L", "", "volume label")
	uuidFlag := fl.String("U", "", "filesystem UUID, or random (the default), time (a time-based UUID) or clear (all zeros)")
	ext := fl.String("E", "", "extended options: hash_seed=UUID, root_owner=UID:GID, resize=BLOCKS, orphan_file_size=BLOCKS")
	features := fl.String("O", "", "features to add, or remove with ^ (comma-separated)")
	journal := fl.String("J", "", "journal size in MiB, as N or size=N (default: mke2fs's)")
	srcDir := fl.String("d", "", "copy this directory's contents into the new filesystem")
	srcTar := fl.String("tar", "", "extract this tar file (- for standard input) into the new filesystem")
	uid := fl.Int("uid", -1, "owner of every file (default: the source's)")
	gid := fl.Int("gid", -1, "group of every file (default: the source's)")
	mapFile := fl.String("map", "", "file of 'uid FROM TO' and 'gid FROM TO' lines translating owners")
	whiteouts := fl.Bool("whiteouts", false, "turn OCI whiteouts (.wh.*) into overlayfs whiteouts")
	margin := fl.Int("margin", 20, "free space to leave, in percent of the content, when sizing to it")
	quiet := fl.Bool("q", false, "no progress bar")
	force := &countFlag{}
	fl.Var(force, "F", "overwrite an existing filesystem or partition table; twice: even one that is mounted")
	dryRun := fl.Bool("n", false, "show what would be made, write nothing")
	if err := fl.Parse(args); err != nil {
		return err
	}
	switch fl.NArg() {
	case 1:
	case 2: // mke2fs's DEVICE [FS-SIZE]
		if *sizeFlag != "" {
			return usagef("the size is given twice: --size %s and %s after IMAGE", *sizeFlag, fl.Arg(1))
		}
		*sizeFlag = fl.Arg(1)
	default:
		return usagef("want IMAGE and at most a SIZE")
	}
	if *srcDir != "" && *srcTar != "" {
		return usagef("-d and -tar exclude each other")
	}
	image := fl.Arg(0)
	exists, err := checkMkfsTarget(image, force.n, *sizeFlag != "" || *srcDir != "" || *srcTar != "")
	if err != nil && !(*dryRun && exists) {
		return err
	}
	o := ext4go.MkfsOptions{FsType: *fsType, BlockSize: *bs, InodeSize: *inodeSize, BytesPerInode: *ratio,
		InodeCount: *inodes, FlexBGSize: *flex, Label: *label, Features: *features, UsageTypes: *usageTypes}
	if *journal != "" {
		mib, err := strconv.Atoi(strings.TrimPrefix(*journal, "size="))
		if err != nil || mib <= 0 {
			return usagef("-J wants a size in MiB (N or size=N), not %q", *journal)
		}
		o.JournalMiB = mib
	}
	if *reserved >= 0 {
		o.ReservedPercent = reserved
	}
	switch strings.ToLower(*uuidFlag) {
	case "", "random":
	case "clear":
		o.NullUUID = true
	case "time":
		o.UUID = timeUUID(time.Now())
	default:
		u, err := parseUUID(*uuidFlag)
		if err != nil {
			return usagef("-U: %v (or random, time, clear)", err)
		}
		o.UUID = u
	}
	for _, kv := range strings.Split(*ext, ",") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "hash_seed":
			u, err := parseUUID(v)
			if err != nil {
				return usagef("-E hash_seed: %v", err)
			}
			o.HashSeed = u
		case "root_owner":
			us, gs, ok := strings.Cut(v, ":")
			u, err1 := strconv.ParseUint(us, 10, 32)
			g, err2 := strconv.ParseUint(gs, 10, 32)
			if !ok || err1 != nil || err2 != nil {
				return usagef("-E root_owner wants UID:GID")
			}
			o.RootUID, o.RootGID = uint32(u), uint32(g)
		case "resize":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return usagef("-E resize wants a block count")
			}
			o.ResizeMax = n
		case "orphan_file_size":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return usagef("-E orphan_file_size wants a block count")
			}
			o.OrphanFileBlocks = uint32(n)
		default:
			return usagef("-E: unknown extended option %q", k)
		}
	}
	bo := &ext4go.BuildOptions{UID: *uid, GID: *gid, Whiteouts: *whiteouts}
	if sde := os.Getenv("SOURCE_DATE_EPOCH"); sde != "" {
		sec, err := strconv.ParseInt(sde, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", sde)
		}
		o.CreationTime = time.Unix(sec, 0)
		bo.Time, bo.ClampTimes = o.CreationTime, true
		if o.UUID == ([16]byte{}) {
			o.UUID = derivedUUID("uuid", sec)
		}
		if o.HashSeed == ([16]byte{}) {
			o.HashSeed = derivedUUID("hash_seed", sec)
		}
	}
	if *mapFile != "" {
		var err error
		if bo.UIDMap, bo.GIDMap, err = readIDMap(*mapFile); err != nil {
			return err
		}
	}
	var tarIn io.Reader
	var spooled *os.File
	if *srcTar != "" {
		if *srcTar == "-" {
			tarIn = e.stdin
		} else {
			tf, err := os.Open(*srcTar)
			if err != nil {
				return err
			}
			defer tf.Close()
			tarIn = tf
		}
	}
	if *sizeFlag != "" {
		// mke2fs's fs-size: a bare number is KiB, or blocks of -b.
		bare := int64(1024)
		if *bs > 0 {
			bare = int64(*bs)
		}
		n, err := parseSizeIn(*sizeFlag, bare, true)
		if err == nil && n == 0 {
			err = fmt.Errorf("size '%s' is zero", *sizeFlag)
		}
		if err != nil {
			return usagef("--size: %v", err)
		}
		o.Size = n
	} else if (*srcDir != "" || *srcTar != "") && !exists {
		// A new image is sized to its content; an existing file or device
		// keeps its size, as with mke2fs.
		if o.BlockSize == 0 {
			o.BlockSize = 4096
		}
		isz := max(o.InodeSize, 256)
		var est ext4go.Estimate
		var err error
		if *srcDir != "" {
			est, err = ext4go.EstimateDir(*srcDir, o.BlockSize)
		} else {
			// Size a tar by extracting it once into a scratch image is
			// costly; instead spool it and count what it holds.
			spooled, est, err = spoolTar(tarIn, o.BlockSize)
			if spooled != nil {
				defer os.Remove(spooled.Name())
				defer spooled.Close()
				tarIn = spooled
			}
		}
		if err != nil {
			return err
		}
		journalBytes := int64(0)
		if *fsType != "ext2" && !strings.Contains(*features, "^has_journal") {
			journalBytes = int64(max(o.JournalMiB, 4)) << 20
			if o.JournalMiB == 0 {
				journalBytes = defaultJournalBytes(est, o.BlockSize)
			}
		}
		o.Size = ext4go.SizeFor(est, o.BlockSize, isz, journalBytes, *margin)
		if o.InodeCount == 0 && o.BytesPerInode == 0 {
			o.InodeCount = est.Inodes + est.Inodes/5 + 64
		}
		if !*quiet {
			fmt.Fprintf(e.stderr, "content: %d inodes, %d blocks; image size %s (margin %d%%)\n", est.Inodes, est.Blocks, humanBytes(o.Size), *margin)
		}
	}
	if *dryRun {
		return mkfsOptionError(mkfsDryRun(e, image, o, exists))
	}
	if err := ext4go.Mkfs(image, o); err != nil {
		return mkfsOptionError(err)
	}
	if *srcDir == "" && *srcTar == "" {
		return nil
	}
	err = fillImage(e, image, *srcDir, tarIn, bo, *quiet)
	if errors.Is(err, syscall.ENOSPC) && *sizeFlag != "" {
		err = fmt.Errorf("the content does not fit in --size %s: %w", *sizeFlag, err)
	}
	if err != nil && !exists {
		// A new image that cannot be filled is removed, as a failed cp
		// leaves no copy; an existing file or device keeps the empty
		// filesystem, as after mke2fs -d.
		os.Remove(image)
		err = fmt.Errorf("%w (%s removed)", err, image)
	}
	return err
}

// fillImage copies the directory srcDir, or else the tar stream tarIn,
// into the new filesystem in image.
func fillImage(e *env, image, srcDir string, tarIn io.Reader, bo *ext4go.BuildOptions, quiet bool) error {
	fsys, err := ext4go.OpenForBuild(image)
	if err != nil {
		return err
	}
	if !quiet && isTerminal(e.stderr) {
		bar := newProgressBar(e.stderr)
		bo.Progress = bar.update
		defer bar.done()
	}
	if srcDir != "" {
		err = fsys.AddDir(".", srcDir, bo)
	} else {
		err = fsys.AddTar(".", tarIn, bo)
	}
	if cerr := fsys.Close(); err == nil {
		err = cerr
	}
	return err
}

// mkfsOptionNames are the command's names of the library's options, for
// its errors.
var mkfsOptionNames = map[string]string{
	"BlockSize": "-b", "BytesPerInode": "-i", "Features": "-O", "FlexBGSize": "-G", "FsType": "-t",
	"InodeCount": "-N", "InodeSize": "-I", "JournalBlocks": "-J", "JournalMiB": "-J", "Label": "-L",
	"NoJournal": "-O ^has_journal", "OrphanFileBlocks": "-E orphan_file_size", "ReservedPercent": "-m",
	"ResizeMax": "-E resize", "Size": "--size", "UsageTypes": "-T", "UUID": "-U", "HashSeed": "-E hash_seed",
}

// mkfsOptionError names the option of an *mkfs.OptionError as the
// command spells it (-t, not FsType).
func mkfsOptionError(err error) error {
	var oe *mkfs.OptionError
	if errors.As(err, &oe) {
		name := mkfsOptionNames[oe.Option]
		if name == "" {
			name = oe.Option
		}
		return fmt.Errorf("%s: %s", name, oe.Detail)
	}
	return err
}

// timeUUID makes a time-based (version 1) UUID, as uuid_generate_time
// does, with a random clock sequence and a random node (multicast bit
// set, as RFC 4122 section 4.5 asks of a node that is no MAC address).
func timeUUID(now time.Time) (u [16]byte) {
	// 100-ns intervals since 1582-10-15, the Gregorian reform.
	const gregorianToUnix = 0x01B21DD213814000
	ts := uint64(now.UnixNano()/100) + gregorianToUnix
	binary.BigEndian.PutUint32(u[0:], uint32(ts))
	binary.BigEndian.PutUint16(u[4:], uint16(ts>>32))
	binary.BigEndian.PutUint16(u[6:], uint16(ts>>48)&0x0fff|0x1000)
	rand.Read(u[8:])
	u[8] = u[8]&0x3f | 0x80
	u[10] |= 0x01
	return u
}

// defaultJournalBytes follows mke2fs's default journal size for a
// filesystem of roughly the content's size (ext2fs_default_journal_size).
func defaultJournalBytes(est ext4go.Estimate, bs int) int64 {
	blocks := est.Blocks * 12 / 10
	for _, s := range journalSteps {
		if blocks < s.fsBlocks {
			return s.journalBlocks * int64(bs)
		}
	}
	return 262144 * int64(bs)
}

// journalSteps are ext2fs_default_journal_size's steps: a filesystem of
// fewer than fsBlocks blocks gets a journal of journalBlocks blocks.
var journalSteps = []struct {
	fsBlocks      uint64
	journalBlocks int64
}{
	{2048, 0},
	{32768, 1024},
	{256 * 1024, 4096},
	{512 * 1024, 8192},
	{4096 * 1024, 16384},
	{8192 * 1024, 32768},
	{16384 * 1024, 65536},
	{32768 * 1024, 131072},
}

// derivedUUID makes a stable UUID from SOURCE_DATE_EPOCH, so reproducible
// builds need not pass -U.
func derivedUUID(what string, sec int64) (u [16]byte) {
	h := sha256.Sum256([]byte(fmt.Sprintf("ext4go %s %d", what, sec)))
	copy(u[:], h[:16])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

func parseUUID(s string) (u [16]byte, err error) {
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("%q is not a UUID", s)
	}
	copy(u[:], b)
	return u, nil
}

// readIDMap reads 'uid FROM TO' / 'gid FROM TO' lines.
func readIDMap(name string) (map[uint32]uint32, map[uint32]uint32, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	uids, gids := map[uint32]uint32{}, map[uint32]uint32{}
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) != 3 {
			return nil, nil, fmt.Errorf("%s:%d: want 'uid|gid FROM TO'", name, ln)
		}
		from, err1 := strconv.ParseUint(fields[1], 10, 32)
		to, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, nil, fmt.Errorf("%s:%d: bad number", name, ln)
		}
		switch fields[0] {
		case "uid":
			uids[uint32(from)] = uint32(to)
		case "gid":
			gids[uint32(from)] = uint32(to)
		default:
			return nil, nil, fmt.Errorf("%s:%d: %q is neither uid nor gid", name, ln, fields[0])
		}
	}
	return uids, gids, sc.Err()
}

// isSparseEntry reports whether a tar entry holds a sparse file: old GNU
// ('S') or PAX (GNU.sparse.* records) format.
func isSparseEntry(hdr *tar.Header) bool {
	if hdr.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

// dataBlocksBytes reads an entry's contents and returns the bytes of the
// blocks of bs bytes that are not all zeros: what the image will store
// (the rest become holes, as AddTar writes them).
func dataBlocksBytes(r io.Reader, bs int) (int64, error) {
	buf := make([]byte, 1<<20)
	var n int64
	for {
		m, err := io.ReadFull(r, buf)
		for i := 0; i < m; i += bs {
			if !allZero(buf[i:min(i+bs, m)]) {
				n += int64(min(bs, m-i))
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// isTerminal reports whether w is a terminal (terminal_*.go), for the
// progress bar.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && fileIsTerminal(f)
}

// progressBar draws one updating line on a terminal.
type progressBar struct {
	w     io.Writer
	start time.Time
}

func newProgressBar(w io.Writer) *progressBar { return &progressBar{w: w, start: time.Now()} }

func (p *progressBar) update(done, total int64) {
	if total <= 0 {
		return
	}
	const width = 40
	frac := float64(done) / float64(total)
	fill := int(frac * width)
	fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %s / %s  %s", strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		frac*100, humanBytes(done), humanBytes(total), time.Since(p.start).Round(time.Second))
}

func (p *progressBar) done() { fmt.Fprintln(p.w) }

// spoolTar copies the (decompressed) tar stream r into a temporary file and
// estimates what it needs, so an image can be sized before extraction.
func spoolTar(r io.Reader, bs int) (*os.File, ext4go.Estimate, error) {
	var est ext4go.Estimate
	dr, err := ext4go.Decompress(r)
	if err != nil {
		return nil, est, err
	}
	tmp, err := os.CreateTemp("", "ext4go-tar-")
	if err != nil {
		return nil, est, err
	}
	if _, err := io.Copy(tmp, dr); err != nil {
		return tmp, est, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return tmp, est, err
	}
	tr := tar.NewReader(tmp)
	dirs := map[string]int64{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tmp, est, fmt.Errorf("tar: %w", err)
		}
		est.Inodes++
		name := path.Clean("/" + hdr.Name)
		dirs[path.Dir(name)] += int64(8 + (len(path.Base(name))+3)&^3)
		switch hdr.Typeflag {
		case tar.TypeReg, tar.TypeRegA, tar.TypeGNUSparse:
			size := hdr.Size
			if isSparseEntry(hdr) {
				// A sparse file is sized by its data, not its length: a
				// 1 GiB file holding 100 KB takes 100 KB.
				if size, err = dataBlocksBytes(tr, bs); err != nil {
					return tmp, est, fmt.Errorf("tar: %s: %w", hdr.Name, err)
				}
			}
			est.Blocks += uint64((size + int64(bs) - 1) / int64(bs))
			est.DataBytes += size
		case tar.TypeSymlink:
			if len(hdr.Linkname) >= 60 {
				est.Blocks++
			}
		case tar.TypeDir:
			dirs[name] += 24
		}
		if len(hdr.PAXRecords) > 0 {
			est.Blocks++
		}
	}
	for _, b := range dirs {
		est.Blocks += uint64(b*2/int64(bs)) + 1
	}
	_, err = tmp.Seek(0, io.SeekStart)
	return tmp, est, err
}
