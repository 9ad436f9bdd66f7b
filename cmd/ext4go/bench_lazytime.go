package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/benchknob"
	"github.com/ext4go/ext4go/internal/mkfs"
)

func init() {
	benchKinds["lazytime"] = benchKind{
		usage: "lazytime [-p N] [--duration D] [--count N] [--file-size BYTES] [--writes N] [--wait D] [--run off,on,blocking] [--json]",
		summary: "N goroutines, each on its own preallocated file, loop ftruncate (same size) + --writes random 4 KiB overwrites, through ext4go: " +
			"lazytime off, on (a write skips busy inode-table neighbours, as the kernel's find_inode_nowait), and on with the neighbour copy waiting for busy neighbours (up to --wait); ops/s",
		run: benchLazytime,
	}
}

// lazytimeResult is one configuration's run of bench lazytime.
type lazytimeResult struct {
	Bench     string  `json:"bench"`
	Config    string  `json:"config"` // off, on or blocking
	P         int     `json:"p"`
	FileSize  int64   `json:"file_size"`
	Writes    int     `json:"writes_per_truncate"`
	Wait      string  `json:"wait,omitempty"`
	Seconds   float64 `json:"seconds"`
	Ops       int64   `json:"ops"` // ftruncates plus writes
	OpsPerSec float64 `json:"ops_per_sec"`
	CPUNsOp   int64   `json:"cpu_ns_per_op"`
	// Blocking only: busy neighbours waited for, and waits that ran
	// out at the bound.
	Waits    int64 `json:"neighbour_waits,omitempty"`
	Timeouts int64 `json:"neighbour_wait_timeouts,omitempty"`
}

func benchLazytime(e *env, c *command, args []string) error {
	fl := newFlags(c, e)
	p := fl.Int("p", 32, "goroutines, one file each")
	dur := fl.Duration("duration", 3*time.Second, "time per run")
	count := fl.Int("count", 1, "runs of each configuration, alternating; the median is reported")
	sizeFlag := fl.String("file-size", "1M", "size of each file (written whole first, so every overwrite finds mapped blocks)")
	writes := fl.Int("writes", 1, "random 4 KiB overwrites after each ftruncate")
	wait := fl.Duration("wait", 10*time.Millisecond, "in the blocking configuration, how long the neighbour copy waits for a busy neighbour (bounded: waiting there can deadlock)")
	runList := fl.String("run", "off,on,blocking", "comma-separated configurations to run")
	asJSON := fl.Bool("json", false, "print one JSON object per configuration")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return usagef("unexpected argument %q", fl.Arg(0))
	}
	if *p < 1 || *p > 1024 || *dur <= 0 || *count < 1 || *writes < 0 || *wait <= 0 {
		return usagef("-p must be 1 to 1024, -duration, -count and -wait positive, -writes not negative")
	}
	size, err := parseSize(*sizeFlag)
	if err != nil || size < 4096 || size > 256<<20 {
		return usagef("bad -file-size %q (4K to 256M)", *sizeFlag)
	}
	var configs []string
	for _, r := range strings.Split(*runList, ",") {
		switch r = strings.TrimSpace(r); r {
		case "off", "on", "blocking":
			configs = append(configs, r)
		default:
			return usagef("unknown configuration %q in -run (off, on, blocking)", r)
		}
	}
	results := map[string][]lazytimeResult{}
	for range *count {
		for _, cfg := range configs {
			r, err := runLazytimeBench(cfg, *p, int64(size), *writes, *dur, *wait)
			if err != nil {
				return fmt.Errorf("lazytime %s: %w", cfg, err)
			}
			results[cfg] = append(results[cfg], r)
		}
	}
	if !*asJSON {
		fmt.Fprintf(e.stdout, "lazytime: %d goroutines, each on its own %s file: ftruncate + %d random 4 KiB overwrite(s); ops/s (ftruncates and writes), median of %d, %v each, %d CPUs%s\n",
			*p, formatBytes(float64(size)), *writes, *count, *dur, runtime.GOMAXPROCS(0), loadAvg())
		fmt.Fprintf(e.stdout, "%-16s %14s %14s %10s  %s\n", "config", "ops/s", "CPU ns/op", "vs off", "neighbour waits (timed out)")
	}
	var off float64
	for _, cfg := range configs {
		rs := results[cfg]
		slices.SortFunc(rs, func(a, b lazytimeResult) int {
			switch {
			case a.OpsPerSec < b.OpsPerSec:
				return -1
			case a.OpsPerSec > b.OpsPerSec:
				return 1
			}
			return 0
		})
		med := rs[len(rs)/2]
		if *asJSON {
			if err := json.NewEncoder(e.stdout).Encode(med); err != nil {
				return err
			}
			continue
		}
		if cfg == "off" {
			off = med.OpsPerSec
		}
		vs := ""
		if off > 0 {
			vs = fmt.Sprintf("%.2fx", med.OpsPerSec/off)
		}
		name := cfg
		if cfg == "blocking" {
			name += " (" + med.Wait + ")"
		}
		waits := ""
		if cfg == "blocking" {
			waits = fmt.Sprintf("%d (%d)", med.Waits, med.Timeouts)
		}
		fmt.Fprintf(e.stdout, "%-16s %14.0f %14d %10s  %s\n", name, med.OpsPerSec, med.CPUNsOp, vs, waits)
	}
	return nil
}

// runLazytimeBench runs one configuration on a fresh image: off (no
// lazytime), on, or blocking (lazytime, and the neighbour copy waits up to
// wait for a busy neighbour's lock).
func runLazytimeBench(cfg string, p int, size int64, writes int, dur, wait time.Duration) (lazytimeResult, error) {
	res := lazytimeResult{Bench: "lazytime", Config: cfg, P: p, FileSize: size, Writes: writes}
	tmp, err := os.MkdirTemp("", "ext4go-bench-lazytime-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(tmp)
	image := filepath.Join(tmp, "bench.img")
	fsSize := max(int64(p)*size*2, 64<<20)
	if err := mkfs.Format(image, mkfs.Options{Size: fsSize}); err != nil {
		return res, fmt.Errorf("mkfs: %w", err)
	}
	if cfg == "blocking" {
		res.Wait = wait.String()
		benchknob.LazytimeNeighbourWait.Store(int64(wait))
	}
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true, Lazytime: cfg != "off"})
	benchknob.LazytimeNeighbourWait.Store(0) // read at open
	if err != nil {
		return res, err
	}
	defer fsys.Close()
	// The files, one after another so that their inodes share
	// inode-table blocks, written whole (every block mapped and written).
	files := make([]*ext4go.File, p)
	data := benchData(int(min(size, 1<<20)))
	for i := range files {
		f, err := fsys.OpenFile(fmt.Sprintf("file-%03d", i), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return res, err
		}
		defer f.Close()
		for off := int64(0); off < size; off += int64(len(data)) {
			if _, err := f.WriteAt(data[:min(int64(len(data)), size-off)], off); err != nil {
				return res, err
			}
		}
		files[i] = f
	}
	if err := fsys.Sync(); err != nil {
		return res, err
	}
	waits0, timeouts0 := benchknob.LazytimeNeighbourWaits.Load(), benchknob.LazytimeNeighbourTimeouts.Load()
	var ops atomic.Int64
	var stop atomic.Bool
	errs := make([]error, p)
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	for i, f := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 0x1a2))
			buf := benchData(4096)
			blocks := size / 4096
			var n int64
			for !stop.Load() {
				if err := f.Truncate(size); err != nil {
					errs[i] = err
					break
				}
				n++
				for range writes {
					if _, err := f.WriteAt(buf, rng.Int64N(blocks)*4096); err != nil {
						errs[i] = err
						break
					}
					n++
				}
			}
			ops.Add(n)
		}()
	}
	time.Sleep(dur)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	res.Waits = benchknob.LazytimeNeighbourWaits.Load() - waits0
	res.Timeouts = benchknob.LazytimeNeighbourTimeouts.Load() - timeouts0
	for i, err := range errs {
		if err != nil {
			return res, fmt.Errorf("file-%03d: %w", i, err)
		}
	}
	res.Seconds = elapsed.Seconds()
	res.Ops = ops.Load()
	res.OpsPerSec = float64(res.Ops) / res.Seconds
	if res.Ops > 0 {
		res.CPUNsOp = cpu.Nanoseconds() / res.Ops
	}
	for _, f := range files {
		f.Close()
	}
	return res, fsys.Close()
}
