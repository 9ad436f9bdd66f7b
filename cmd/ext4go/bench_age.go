package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"
)

func init() {
	benchKinds["age"] = benchKind{
		usage:   "age [--size BYTES] [--fill PCT] [--seed N] [--sync-every OPS] [--keep IMAGE] [--dir MOUNTPOINT] [--json]",
		summary: "age a fresh filesystem: creates of heavy-tailed sizes, appends, truncates and deletes (the same sequence for a seed) until the files fill it to PCT, then report the free space (e2freefrag's histogram, mean free extent), extents per file and block groups touched; through ext4go on a fresh image, or with -dir through system calls on a mounted one (scripts/bench-age.sh makes it)",
		run:     benchAge,
	}
}

// ageOpKind is what one step of the aging workload does.
type ageOpKind uint8

const (
	ageCreate   ageOpKind = iota // create a file of size bytes
	ageAppend                    // append size bytes to a file
	ageTruncate                  // truncate a file to size bytes
	ageRemove                    // remove a file
	ageKinds
)

var ageOpNames = [ageKinds]string{"creates", "appends", "truncates", "removes"}

// ageOp is one step of the aging workload, on file number file.
type ageOp struct {
	kind ageOpKind
	file int
	size int64
}

// agePlan is the aging workload: the operations, decided from the seed
// alone before anything runs, so that every filesystem given the same
// seed and budget does the same.
type agePlan struct {
	ops       []ageOp
	counts    [ageKinds]int
	written   int64 // bytes written by creates and appends
	liveFiles int
	liveBytes int64 // bytes in the files left at the end
}

// The aging workload's mix: how likely each kind of step is while files
// exist, and the size distributions (log-normal: small files dominate by
// count, the few big ones by bytes, as on real filesystems).
const (
	ageCreateShare   = 0.45
	ageAppendShare   = 0.20
	ageTruncateShare = 0.10 // the rest removes

	ageCreateMedian = 8 << 10 // bytes
	ageCreateSigma  = 2.0     // of the size's natural log: 1% of creates are over 1.3 MiB
	ageAppendMedian = 4 << 10
	ageAppendSigma  = 1.5
	ageMaxFile      = 64 << 20 // no file grows past this (nor past a 16th of the budget)
)

// makeAgePlan decides the operations for seed until the files hold budget
// bytes (counted in whole blocks of blockSize, as they take space).
func makeAgePlan(seed uint64, budget, blockSize int64) agePlan {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	maxFile := min(int64(ageMaxFile), max(budget/16, blockSize))
	logNormal := func(median, sigma float64) int64 {
		v := math.Exp(math.Log(median) + sigma*rng.NormFloat64())
		return max(1, min(int64(v), maxFile))
	}
	onDisk := func(n int64) int64 { return (n + blockSize - 1) / blockSize * blockSize }
	var p agePlan
	sizes := map[int]int64{} // live file -> size
	var live []int           // live files, in an order that depends on the seed only
	next := 0
	for p.liveBytes < budget {
		r := rng.Float64()
		var op ageOp
		switch {
		case len(live) == 0 || r < ageCreateShare:
			size := min(logNormal(ageCreateMedian, ageCreateSigma), budget-p.liveBytes)
			op = ageOp{ageCreate, next, size}
			sizes[next] = size
			live = append(live, next)
			next++
			p.written += size
			p.liveBytes += onDisk(size)
		case r < ageCreateShare+ageAppendShare:
			f := live[rng.IntN(len(live))]
			n := min(logNormal(ageAppendMedian, ageAppendSigma), maxFile-sizes[f])
			if n <= 0 {
				continue
			}
			op = ageOp{ageAppend, f, n}
			p.liveBytes += onDisk(sizes[f]+n) - onDisk(sizes[f])
			sizes[f] += n
			p.written += n
		case r < ageCreateShare+ageAppendShare+ageTruncateShare:
			f := live[rng.IntN(len(live))]
			size := rng.Int64N(sizes[f] + 1)
			op = ageOp{ageTruncate, f, size}
			p.liveBytes += onDisk(size) - onDisk(sizes[f])
			sizes[f] = size
		default:
			i := rng.IntN(len(live))
			f := live[i]
			live[i] = live[len(live)-1]
			live = live[:len(live)-1]
			op = ageOp{ageRemove, f, 0}
			p.liveBytes -= onDisk(sizes[f])
			delete(sizes, f)
		}
		p.ops = append(p.ops, op)
		p.counts[op.kind]++
	}
	p.liveFiles = len(live)
	return p
}

// digest identifies the plan, so that two runs can be seen to have done
// the same operations.
func (p *agePlan) digest() uint64 {
	h := fnv.New64a()
	var b [17]byte
	for _, op := range p.ops {
		b[0] = byte(op.kind)
		for i := 0; i < 8; i++ {
			b[1+i] = byte(uint64(op.file) >> (8 * i))
			b[9+i] = byte(uint64(op.size) >> (8 * i))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}

// ageDirs is how many directories the files are spread over (file n in
// d<n mod ageDirs>), so that directory placement takes part as it does on
// a real filesystem.
const ageDirs = 8

func ageFileName(n int) string { return fmt.Sprintf("d%d/f%06d", n%ageDirs, n) }

// ageResult is what bench age reports.
type ageResult struct {
	Bench     string         `json:"bench"`
	Config    string         `json:"config"`
	Seed      uint64         `json:"seed"`
	FillPct   float64        `json:"fill_pct"`
	StartFree uint64         `json:"start_free_blocks"`
	Ops       int            `json:"ops"`
	OpCounts  map[string]int `json:"op_counts"`
	Digest    string         `json:"plan_digest"`
	Written   int64          `json:"bytes_written"`
	LiveFiles int            `json:"live_files"`
	LiveBytes int64          `json:"live_bytes"`
	Seconds   float64        `json:"seconds"`
	Free      *freeSpace     `json:"free_space"`
	Layout    layoutStats    `json:"layout"`
	SyncEvery int            `json:"sync_every_ops"`
	KeptImage string         `json:"image,omitempty"`
	blockSize uint32
}

func benchAge(e *env, c *command, args []string) error {
	fl := newFlags(c, e)
	sizeFlag := fl.String("size", "1G", "size of the fresh image (without -dir)")
	fill := fl.Float64("fill", 80, "fill the filesystem's free space to this `percent` (1 to 95) with files")
	seed := fl.Uint64("seed", 1, "seed of the operation sequence")
	syncEvery := fl.Int("sync-every", 1000, "sync the filesystem after this many operations (the kernel allocates delayed data when it writes back, as its flusher would on a longer run); 0: only at the end")
	keep := fl.String("keep", "", "write the image here and keep it (without -dir)")
	dirFlag := fl.String("dir", "", "run with system calls on the filesystem mounted here (its root; a fresh one) instead of through ext4go")
	asJSON := fl.Bool("json", false, "print the result as one JSON object")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return usagef("unexpected argument %q", fl.Arg(0))
	}
	size, err := parseSize(*sizeFlag)
	if err != nil {
		return usagef("bad -size: %v", err)
	}
	if size < 8<<20 {
		return usagef("-size %s is too small for the bench (at least 8M)", *sizeFlag)
	}
	if !(*fill >= 1 && *fill <= 95) {
		return usagef("-fill %v: want a percentage from 1 to 95", *fill)
	}
	if *syncEvery < 0 {
		return usagef("-sync-every must not be negative")
	}
	if *dirFlag != "" && *keep != "" {
		return usagef("-keep keeps the image ext4go made; with -dir there is none")
	}
	target, cleanup, err := openBenchTarget(*dirFlag, int64(size), *keep)
	if err != nil {
		return err
	}
	defer cleanup()
	res, err := runAge(target, *seed, *fill, *syncEvery)
	if err != nil {
		return err
	}
	res.KeptImage = *keep
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(res)
	}
	printAge(e, res)
	return nil
}

// openBenchTarget opens the filesystem a workload bench runs on: the
// mounted one at dir, or a fresh image of size bytes (kept at keep if
// given). cleanup releases it.
func openBenchTarget(dir string, size int64, keep string) (benchTarget, func(), error) {
	if dir != "" {
		t, err := newDirTarget(dir)
		if err != nil {
			return nil, nil, err
		}
		return t, t.cleanup, nil
	}
	t, err := newLibTarget(size, keep)
	if err != nil {
		return nil, nil, err
	}
	return t, t.cleanup, nil
}

// runAge plans the workload from the target's free space and runs it.
func runAge(t benchTarget, seed uint64, fill float64, syncEvery int) (*ageResult, error) {
	free, bs, err := t.freeBlocks()
	if err != nil {
		return nil, err
	}
	budget := int64(float64(free) * fill / 100 * float64(bs))
	plan := makeAgePlan(seed, budget, int64(bs))
	res := &ageResult{Bench: "age", Config: t.config(), Seed: seed, FillPct: fill, StartFree: free, Ops: len(plan.ops),
		OpCounts: map[string]int{}, Digest: fmt.Sprintf("%016x", plan.digest()), Written: plan.written,
		LiveFiles: plan.liveFiles, LiveBytes: plan.liveBytes, SyncEvery: syncEvery, blockSize: bs}
	for k, n := range plan.counts {
		res.OpCounts[ageOpNames[k]] = n
	}
	for d := 0; d < ageDirs; d++ {
		if err := t.mkdir(fmt.Sprintf("d%d", d)); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	live := map[int]int64{} // file -> size, as the plan has it
	buf := benchData(1 << 20)
	for i, op := range plan.ops {
		if err := runAgeOp(t, op, live, buf); err != nil {
			return nil, fmt.Errorf("operation %d (%s of %s, %d bytes): %w", i, ageOpNames[op.kind], ageFileName(op.file), op.size, err)
		}
		if syncEvery > 0 && (i+1)%syncEvery == 0 {
			if err := t.sync(); err != nil {
				return nil, err
			}
		}
	}
	if err := t.sync(); err != nil {
		return nil, err
	}
	res.Seconds = time.Since(start).Seconds()
	names := make([]string, 0, len(live))
	for f := range live {
		names = append(names, ageFileName(f))
	}
	if res.Free, res.Layout, err = measureTarget(t, names); err != nil {
		return nil, err
	}
	return res, nil
}

// runAgeOp does one operation of the plan; live tracks the files' sizes.
func runAgeOp(t benchTarget, op ageOp, live map[int]int64, buf []byte) error {
	name := ageFileName(op.file)
	switch op.kind {
	case ageCreate:
		f, err := t.create(name)
		if err != nil {
			return err
		}
		err = writeRange(f, buf, 0, op.size)
		if cerr := f.close(); err == nil {
			err = cerr
		}
		live[op.file] = op.size
		return err
	case ageAppend, ageTruncate:
		f, err := t.openWrite(name)
		if err != nil {
			return err
		}
		if op.kind == ageAppend {
			err = writeRange(f, buf, live[op.file], op.size)
			live[op.file] += op.size
		} else {
			err = f.truncate(op.size)
			live[op.file] = op.size
		}
		if cerr := f.close(); err == nil {
			err = cerr
		}
		return err
	case ageRemove:
		delete(live, op.file)
		return t.remove(name)
	}
	return errors.New("unknown operation")
}

// writeRange writes n bytes at off in writes of up to len(buf) bytes.
func writeRange(f benchFile, buf []byte, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(buf)))
		if err := f.writeAt(buf[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

func printAge(e *env, r *ageResult) {
	w := e.stdout
	fmt.Fprintf(w, "age %s: seed %d, fill %.0f%% of %d free blocks of %s: %d ops (%d creates, %d appends, %d truncates, %d removes), plan %s, sync every %d ops\n",
		r.Config, r.Seed, r.FillPct, r.StartFree, formatBytes(float64(r.blockSize)), r.Ops, r.OpCounts["creates"], r.OpCounts["appends"],
		r.OpCounts["truncates"], r.OpCounts["removes"], r.Digest, r.SyncEvery)
	fmt.Fprintf(w, "  %s written, %d files of %s left, %.1f s\n", formatBytes(float64(r.Written)), r.LiveFiles, formatBytes(float64(r.LiveBytes)), r.Seconds)
	printFreeSpace(e, r.Free)
	printLayout(e, r.Layout, r.Free)
}

// printFreeSpace prints the free space as e2freefrag does.
func printFreeSpace(e *env, f *freeSpace) {
	w := e.stdout
	fmt.Fprintf(w, "  free: %d of %d blocks (%.1f%%) in %d extents, mean free extent %s\n", f.FreeBlocks, f.Blocks,
		float64(f.FreeBlocks)*100/float64(max(f.Blocks, 1)), f.FreeExtents, formatBytes(f.MeanFreeExtent))
	fmt.Fprintf(w, "  %-18s %12s %12s %8s\n", "free extent size", "extents", "blocks", "percent")
	for _, b := range f.Histogram {
		fmt.Fprintf(w, "  %7s...%7s- %12d %12d %7.2f%%\n", formatBytes(float64(b.MinBytes)), formatBytes(float64(2*b.MinBytes)),
			b.Extents, b.Blocks, float64(b.Blocks)*100/float64(max(f.FreeBlocks, 1)))
	}
}

func printLayout(e *env, l layoutStats, f *freeSpace) {
	groups := (f.Blocks - uint64(f.FirstDataBlock) + uint64(f.BlocksPerGroup) - 1) / uint64(f.BlocksPerGroup)
	fmt.Fprintf(e.stdout, "  files: %d with data, extents per file mean %.2f max %d, %.1f%% non-contiguous, %d of %d groups touched\n",
		l.Files, l.MeanExtents, l.MaxExtents, l.NonContiguous, l.GroupsTouched, groups)
}
