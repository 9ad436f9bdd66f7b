package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ext4go/ext4go/internal/lockstat"
)

func init() {
	benchKinds["appenders"] = benchKind{
		usage:   "appenders [-p N] [--size BYTES] [--write BYTES] [--fsync-every BYTES] [--fallocate] [--fs-size BYTES] [--keep IMAGE] [--device DEV | --memory] [--dir MOUNTPOINT] [--ceiling] [--json]",
		summary: "N concurrent appenders, each writing its own file in fixed-size appends up to --size (optionally fsyncing every so many bytes, or fallocating each chunk before writing it), then report extents per file, block groups touched and throughput; through ext4go on a fresh image (or on a freshly formatted device, --device, or in memory, --memory), or with -dir through system calls on a mounted one; --ceiling adds the same writes straight into one image file (or the device), the bound of any filesystem kept there",
		run:     benchAppenders,
	}
}

// appendersResult is what bench appenders reports.
type appendersResult struct {
	Bench      string      `json:"bench"`
	Config     string      `json:"config"`
	Mode       string      `json:"mode"` // plain, fsync or fallocate
	P          int         `json:"p"`
	FileSize   int64       `json:"file_size"`
	WriteSize  int64       `json:"write_size"`
	FsyncEvery int64       `json:"fsync_every,omitempty"`
	Seconds    float64     `json:"seconds"`
	MiBPerSec  float64     `json:"mib_per_sec"`
	Layout     layoutStats `json:"layout"`
	Free       *freeSpace  `json:"free_space"`
	KeptImage  string      `json:"image,omitempty"`
	// Ceiling is what the same appenders reach writing the same bytes
	// straight into one image file with pwrite (--ceiling): the bound any
	// filesystem kept in an image file meets here.
	Ceiling *ceilingResult `json:"ceiling,omitempty"`
	// LocksPerAppend counts the shared locks and counters taken per
	// append while the appenders ran, the final sync not included
	// (--locks, an ext4go built with -tags lockstat).
	LocksPerAppend map[string]float64 `json:"locks_per_append,omitempty"`
	// Finished holds when each appender was done, in seconds from the
	// start (the final sync not included): how evenly the appenders
	// shared the machine.
	Finished []float64 `json:"finished"`
	locks    lockstat.Counts
	appends  int64
}

type ceilingResult struct {
	Seconds   float64   `json:"seconds"`
	MiBPerSec float64   `json:"mib_per_sec"`
	Finished  []float64 `json:"finished"` // as appendersResult.Finished
}

func benchAppenders(e *env, c *command, args []string) error {
	fl := newFlags(c, e)
	p := fl.Int("p", 8, "concurrent appenders, one file each")
	sizeFlag := fl.String("size", "32M", "bytes each appender writes")
	writeFlag := fl.String("write", "64K", "bytes of each append")
	fsyncFlag := fl.String("fsync-every", "", "fsync each file after every so many bytes (e.g. 1M)")
	falloc := fl.Bool("fallocate", false, "fallocate each chunk before writing it (fallocate appends)")
	fsSizeFlag := fl.String("fs-size", "1G", "size of the fresh image (without -dir)")
	keep := fl.String("keep", "", "write the image here and keep it (without -dir)")
	device := fl.String("device", "", "run through ext4go on the fresh ext4 filesystem on this block device (or image file), made by the caller, instead of on an image of ext4go's own: a loop device takes the writes without the host's lock on one file (its filesystem is changed, and with --ceiling overwritten)")
	memory := fl.Bool("memory", false, "run through ext4go on a fresh image held in memory: what ext4go reaches without the host's storage, whose lock on one image file bounds the other modes (--ceiling then copies into memory)")
	dirFlag := fl.String("dir", "", "run with system calls on the filesystem mounted here (its root; a fresh one) instead of through ext4go")
	ceiling := fl.Bool("ceiling", false, "then write the same bytes with the same appenders straight into one image file of -fs-size with pwrite, and report that too: the bound of any filesystem in an image file (the host serialises writes to one file)")
	asJSON := fl.Bool("json", false, "print the result as one JSON object")
	locks := fl.Bool("locks", false, "count the shared locks and counters each append takes, the final sync not included (an ext4go built with -tags lockstat; not with -dir)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *dirFlag == "" {
		defer collectLess()() // as bench fallocate2
	}
	if fl.NArg() > 0 {
		return usagef("unexpected argument %q", fl.Arg(0))
	}
	if *p < 1 || *p > 1024 {
		return usagef("-p %d: want 1 to 1024 appenders", *p)
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usagef("bad -size: %v", err)
	}
	write, err := parseSize(*writeFlag)
	if err != nil {
		return usagef("bad -write: %v", err)
	}
	if write > 64<<20 {
		return usagef("-write %s: at most 64M", *writeFlag)
	}
	var fsyncEvery uint64
	if *fsyncFlag != "" {
		if fsyncEvery, err = parseSize(*fsyncFlag); err != nil {
			return usagef("bad -fsync-every: %v", err)
		}
	}
	if fsyncEvery > 0 && *falloc {
		return usagef("-fsync-every and -fallocate are separate modes: give one")
	}
	fsSize, err := parseSize(*fsSizeFlag)
	if err != nil {
		return usagef("bad -fs-size: %v", err)
	}
	if *dirFlag != "" && *keep != "" {
		return usagef("-keep keeps the image ext4go made; with -dir there is none")
	}
	if *memory && (*dirFlag != "" || *device != "") {
		return usagef("-memory runs ext4go on an image in memory: not with -dir or -device")
	}
	if *device != "" && (*dirFlag != "" || *keep != "") {
		return usagef("-device runs ext4go on the filesystem there: not with -dir or -keep")
	}
	if *locks && *dirFlag != "" {
		return usagef("--locks counts ext4go's locks: not with --dir")
	}
	if *locks && !lockstat.Enabled {
		return fmt.Errorf("--locks: this ext4go was built without lock counting; build it with 'go build -tags lockstat ./cmd/ext4go'")
	}
	if *dirFlag != "" && *ceiling {
		return usagef("-ceiling measures an image file; with -dir there is none")
	}
	if *device != "" {
		if fsSize, err = deviceSize(*device); err != nil {
			return err
		}
	}
	if *dirFlag == "" && size*uint64(*p) > fsSize/10*9 {
		return usagef("%d appenders of %s do not fit a %s filesystem", *p, *sizeFlag, formatBytes(float64(fsSize)))
	}
	var target benchTarget
	var cleanup func()
	if *device != "" || *memory {
		var t *libTarget
		if *memory {
			t, err = newMemTarget(int64(fsSize), *keep)
		} else {
			t, err = openLibTarget(*device)
		}
		if err == nil {
			target, cleanup = t, t.cleanup
		}
	} else {
		target, cleanup, err = openBenchTarget(*dirFlag, int64(fsSize), *keep)
	}
	if err != nil {
		return err
	}
	defer cleanup()
	res, err := runAppenders(target, *p, int64(size), int64(write), int64(fsyncEvery), *falloc)
	if err != nil {
		return err
	}
	res.KeptImage = *keep
	if *locks {
		res.LocksPerAppend = map[string]float64{}
		for _, s := range lockstat.Sites() {
			res.LocksPerAppend[s.Name()] = float64(res.locks[s]) / float64(max(res.appends, 1))
		}
	}
	if *ceiling && *memory {
		cleanup() // the image's memory goes before the ceiling's comes
		b, err := anonMemory(int64(fsSize))
		if err != nil {
			return err
		}
		mem := newMemDevice(b)
		res.Ceiling, err = rawAppendersInto(mem, nil, *p, int64(fsSize), int64(size), int64(write))
		mem.free()
		if err != nil {
			return err
		}
	} else if *ceiling && *device != "" {
		cleanup() // the filesystem is done with: its bytes are overwritten
		f, err := os.OpenFile(*device, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		res.Ceiling, err = rawAppendersInto(f, f.Sync, *p, int64(fsSize), int64(size), int64(write))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	} else if *ceiling {
		dir := os.TempDir()
		if *keep != "" {
			dir = filepath.Dir(*keep)
		}
		if res.Ceiling, err = rawAppenders(dir, *p, int64(fsSize), int64(size), int64(write)); err != nil {
			return err
		}
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	fmt.Fprintf(e.stdout, "appenders %s %s: %d x %s in %s appends", res.Config, res.Mode, res.P, formatBytes(float64(res.FileSize)), formatBytes(float64(res.WriteSize)))
	if res.FsyncEvery > 0 {
		fmt.Fprintf(e.stdout, ", fsync every %s", formatBytes(float64(res.FsyncEvery)))
	}
	fmt.Fprintf(e.stdout, ": %.2f s, %.1f MiB/s (with the final sync)\n", res.Seconds, res.MiBPerSec)
	printLayout(e, res.Layout, res.Free)
	if c := res.Ceiling; c != nil {
		fmt.Fprintf(e.stdout, "  ceiling: the same bytes by %d appenders straight into the storage (image file, device or memory): %.2f s, %.1f MiB/s (ext4go %.2fx of it)\n",
			res.P, c.Seconds, c.MiBPerSec, res.MiBPerSec/c.MiBPerSec)
	}
	if *locks {
		printLocks(e.stdout, res.locks, res.appends)
	}
	return nil
}

// rawAppenders writes what runAppenders writes through a filesystem, p
// appenders of size bytes in write-byte pieces, straight into disjoint
// ranges of one fresh sparse file of fsSize bytes in dir, then syncs it:
// the storage's own bound for a filesystem kept in an image file.
func rawAppenders(dir string, p int, fsSize, size, write int64) (*ceilingResult, error) {
	f, err := os.CreateTemp(dir, "ext4go-ceiling-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := f.Truncate(fsSize); err != nil {
		return nil, err
	}
	return rawAppendersInto(f, f.Sync, p, fsSize, size, write)
}

// rawAppendersInto is rawAppenders into f, of fsSize bytes (an image file,
// a device or memory), ending with syncFn if not nil.
func rawAppendersInto(f io.WriterAt, syncFn func() error, p int, fsSize, size, write int64) (*ceilingResult, error) {
	buf := benchData(int(write))
	span := fsSize / int64(p) / write * write
	errs := make([]error, p)
	finished := make([]float64, p)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range p {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := int64(i) * span
			for off := int64(0); off < size && errs[i] == nil; off += write {
				n := min(write, size-off)
				_, errs[i] = f.WriteAt(buf[:n], base+off)
			}
			finished[i] = time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if syncFn != nil {
		if err := syncFn(); err != nil {
			return nil, err
		}
	}
	secs := time.Since(start).Seconds()
	return &ceilingResult{Seconds: secs, MiBPerSec: float64(size) * float64(p) / (1 << 20) / secs, Finished: finished}, nil
}

// runAppenders runs p appenders, each in its own goroutine on its own
// file, and measures the files afterwards.
func runAppenders(t benchTarget, p int, size, write, fsyncEvery int64, falloc bool) (*appendersResult, error) {
	res := &appendersResult{Bench: "appenders", Config: t.config(), Mode: "plain", P: p, FileSize: size, WriteSize: write, FsyncEvery: fsyncEvery}
	switch {
	case falloc:
		res.Mode = "fallocate"
	case fsyncEvery > 0:
		res.Mode = "fsync"
	}
	names := make([]string, p)
	files := make([]benchFile, p)
	for i := range names {
		names[i] = fmt.Sprintf("appender-%d", i)
		f, err := t.create(names[i])
		if err != nil {
			for _, f := range files[:i] {
				f.close()
			}
			return nil, err
		}
		files[i] = f
	}
	buf := benchData(int(write))
	errs := make([]error, p)
	res.Finished = make([]float64, p)
	var wg sync.WaitGroup
	locksBefore := lockstat.Snapshot()
	start := time.Now()
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = appendFile(f, buf, size, fsyncEvery, falloc)
			if err := f.close(); errs[i] == nil {
				errs[i] = err
			}
			res.Finished[i] = time.Since(start).Seconds()
		}()
	}
	wg.Wait()
	locksAfter := lockstat.Snapshot()
	for _, s := range lockstat.Sites() {
		res.locks[s] = locksAfter[s] - locksBefore[s]
	}
	res.appends = int64(p) * ((size + write - 1) / write)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", names[i], err)
		}
	}
	if err := t.sync(); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	res.MiBPerSec = float64(size) * float64(p) / (1 << 20) / res.Seconds
	var err error
	if res.Free, res.Layout, err = measureTarget(t, names); err != nil {
		return nil, err
	}
	return res, nil
}

// appendFile appends buf to f until it holds size bytes (the last append
// cut short), fsyncing after every fsyncEvery bytes, or fallocating each
// chunk before it is written.
func appendFile(f benchFile, buf []byte, size, fsyncEvery int64, falloc bool) error {
	var off, synced int64
	for off < size {
		n := min(int64(len(buf)), size-off)
		if falloc {
			if err := f.fallocate(off, n); err != nil {
				return fmt.Errorf("fallocate at %d: %w", off, err)
			}
		}
		if err := f.writeAt(buf[:n], off); err != nil {
			return fmt.Errorf("write at %d: %w", off, err)
		}
		off += n
		if fsyncEvery > 0 && off-synced >= fsyncEvery {
			if err := f.sync(); err != nil {
				return fmt.Errorf("fsync at %d: %w", off, err)
			}
			synced = off
		}
	}
	return nil
}
