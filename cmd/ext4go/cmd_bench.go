package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ext4go/ext4go/internal/mballoc"
	"github.com/ext4go/ext4go/internal/mballoc/bench"
)

// benchKinds are the benchmarks "ext4go bench KIND" runs; other files add
// theirs from an init function.
var benchKinds = map[string]benchKind{}

type benchKind struct {
	usage, summary string
	run            func(e *env, c *command, args []string) error
}

func init() {
	register(&command{
		name:    "bench",
		usage:   "KIND [OPTIONS]",
		summary: "run benchmarks: the block allocator (alloc), fallocate2 through ext4go or a mounted filesystem, reading every file of an image (read), aging a filesystem (age) and concurrent appenders (appenders) through ext4go or the kernel, lazy timestamps (lazytime)",
		run:     runBench,
	})
	benchKinds["alloc"] = benchKind{
		usage:   "alloc [-p 1,2,4,8,16] [--legacy] [--optimize-scan auto|on|off] [--json] [--duration D] [--count N] [--size BYTES] [--cpus N] [--run LIST] [--root DIR] [--stats]",
		summary: "the multi-block allocator on an in-memory filesystem, default against legacy",
		run:     benchAlloc,
	}
}

func runBench(e *env, args []string) error {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		c := commands["bench"]
		fmt.Fprintf(e.stdout, "usage: ext4go bench KIND [OPTIONS]\n%s\n\nkinds:\n", c.summary)
		for _, n := range benchKindNames() {
			fmt.Fprintf(e.stdout, "  %s\n      %s\n", benchKinds[n].usage, benchKinds[n].summary)
		}
		printExamples(e.stdout, "bench")
		return flag.ErrHelp
	}
	if len(args) == 0 {
		return usagef("missing benchmark kind (one of: %s)", strings.Join(benchKindNames(), ", "))
	}
	k, ok := benchKinds[args[0]]
	if !ok {
		return usagef("unknown benchmark kind %q (one of: %s)", args[0], strings.Join(benchKindNames(), ", "))
	}
	return k.run(e, &command{name: "bench " + args[0], usage: strings.TrimPrefix(k.usage, args[0]+" "), summary: k.summary}, args[1:])
}

func benchKindNames() []string {
	var n []string
	for k := range benchKinds {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func benchAlloc(e *env, c *command, args []string) error {
	fs := newFlags(c, e)
	plist := fs.String("p", "1,2,4,8,16", "comma-separated `counts` of concurrent workers for the throughput benchmarks")
	legacyOnly := fs.Bool("legacy", false, "run only the legacy (pre-2025) configuration instead of comparing both")
	scan := fs.String("optimize-scan", "off,on", "mb_optimize_scan: comma-separated `modes` (auto: on from 16 groups, on, off), each run in turn")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	dur := fs.Duration("duration", 2*time.Second, "time per throughput point")
	count := fs.Int("count", 1, "runs of each benchmark, configurations alternating: the median (throughput) or mean (quality) is reported")
	sizeStr := fs.String("size", "64G", "filesystem `size` (suffix K, M, G, T)")
	runList := fs.String("run", "fallocate2,append,fragmentation,smallfiles", "comma-separated benchmarks to run")
	cpus := fs.Int("cpus", 0, "size the allocator (stream goals, locality groups) as for this many CPUs; 0: GOMAXPROCS")
	root := fs.String("root", defaultBenchRoot(), "directory whose file sizes the smallfiles benchmark writes")
	stats := fs.Bool("stats", false, "print the allocator's mb_stats after each run (not with -json)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	var ps []int
	for _, f := range strings.Split(*plist, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p < 1 || p > 4096 {
			return usagef("bad -p value %q", f)
		}
		ps = append(ps, p)
	}
	var scanModes []mballoc.OptimizeScan
	for _, m := range strings.Split(*scan, ",") {
		switch strings.TrimSpace(m) {
		case "auto":
			scanModes = append(scanModes, mballoc.OptimizeScanAuto)
		case "on":
			scanModes = append(scanModes, mballoc.OptimizeScanOn)
		case "off":
			scanModes = append(scanModes, mballoc.OptimizeScanOff)
		default:
			return usagef("bad -optimize-scan value %q (auto, on or off)", m)
		}
	}
	size, err := parseSize(*sizeStr)
	if err != nil {
		return usagef("%v", err)
	}
	if *count < 1 || *dur <= 0 || *cpus < 0 {
		return usagef("-count and -duration must be positive, -cpus not negative")
	}
	runs := map[string]bool{}
	for _, r := range strings.Split(*runList, ",") {
		switch r = strings.TrimSpace(r); r {
		case "fallocate2", "append", "fragmentation", "smallfiles":
			runs[r] = true
		default:
			return usagef("unknown benchmark %q in -run (fallocate2, append, fragmentation, smallfiles)", r)
		}
	}
	out := &benchOut{e: e, json: *asJSON}
	for _, mode := range scanModes {
		configs := []bench.Options{{Legacy: true}, {Legacy: false}}
		if *legacyOnly {
			configs = configs[:1]
		}
		for i := range configs {
			configs[i].OptimizeScan, configs[i].Size, configs[i].Stats = mode, size, *stats && !*asJSON
			configs[i].CPUs = *cpus
		}
		a := allocBench{out: out, configs: configs, ps: ps, dur: *dur, count: *count, cpus: *cpus, size: *sizeStr, root: *root}
		if err := a.run(runs); err != nil {
			return err
		}
	}
	return nil
}

// allocBench runs the allocator benchmarks for one optimize_scan mode.
type allocBench struct {
	out        *benchOut
	configs    []bench.Options
	ps         []int
	dur        time.Duration
	count      int
	cpus       int
	size, root string
}

func (ab allocBench) run(runs map[string]bool) error {
	out, configs := ab.out, ab.configs
	scan := configs[0].OptimizeScan.String()
	sizing := fmt.Sprintf("%d CPUs", runtime.GOMAXPROCS(0))
	if ab.cpus > 0 {
		sizing += fmt.Sprintf(", allocator sized for %d", ab.cpus)
	}
	throughput := func(title string, f func(o bench.Options, p int, d time.Duration, ops int64) (bench.Row, error)) error {
		out.printf("%s\n", title)
		out.printf("(%s, %s filesystem, optimize_scan=%s, %v per point, median of %d%s)\n", sizing, ab.size, scan, ab.dur, ab.count, loadAvg())
		if len(configs) == 2 {
			out.printf("%6s %16s %18s %9s %22s\n", "P", "base (legacy)", "patched (default)", "change", "CPU ns/op legacy/dflt")
		} else {
			out.printf("%6s %16s %12s\n", "P", "legacy", "CPU ns/op")
		}
		for _, p := range ab.ps {
			res, err := interleaved(f, configs, p, ab.dur, ab.count)
			if err != nil {
				return err
			}
			for _, r := range res {
				out.row(r)
			}
			if len(res) == 2 {
				out.printf("%6d %16.0f %18.0f %+8.1f%% %13d / %d\n", p, res[0].OpsPerSec, res[1].OpsPerSec,
					pct(res[0].OpsPerSec, res[1].OpsPerSec), res[0].CPUPerOp.Nanoseconds(), res[1].CPUPerOp.Nanoseconds())
			} else {
				out.printf("%6d %16.0f %12d\n", p, res[0].OpsPerSec, res[0].CPUPerOp.Nanoseconds())
			}
			out.stats(res)
		}
		out.printf("\n")
		return nil
	}
	if runs["fallocate2"] {
		if err := throughput("fallocate2 at the allocator: 8 KiB fallocates (not normalized) to 1 MiB files, then truncate; ops/s", bench.Fallocate2); err != nil {
			return err
		}
	}
	if runs["append"] {
		if err := throughput("append: the same with normalized, preallocating requests (buffered writes); ops/s", bench.Append); err != nil {
			return err
		}
	}
	quality := func(title string, f func(o bench.Options) ([]bench.Row, error)) error {
		out.printf("%s\n", title)
		if ab.count > 1 {
			out.printf("(mean of %d runs)\n", ab.count)
		}
		all := make([][]bench.Row, len(configs))
		for i := 0; i < ab.count; i++ {
			for k, o := range configs {
				rows, err := f(o)
				if err != nil {
					return err
				}
				if all[k] == nil {
					all[k] = rows
					continue
				}
				for j := range rows {
					all[k][j].Value += rows[j].Value
				}
			}
		}
		for _, rows := range all {
			for j := range rows {
				rows[j].Value /= float64(ab.count)
				out.row(rows[j])
			}
		}
		if len(all) == 2 {
			out.printf("  %-24s %12s %12s\n", "metric", "legacy", "default")
			for i := range all[0] {
				out.printf("  %-24s %12.4g %12.4g\n", all[0][i].Metric, all[0][i].Value, all[1][i].Value)
			}
		} else {
			for _, r := range all[0] {
				out.printf("  %-24s %12.4g\n", r.Metric, r.Value)
			}
		}
		for _, rows := range all {
			out.stats(rows[:1])
		}
		out.printf("\n")
		return nil
	}
	if runs["fragmentation"] {
		if err := quality(fmt.Sprintf("fragmentation: 8 concurrent streams appending 64 KiB up to 32 MiB each (%s, optimize_scan=%s)", sizing, scan), bench.Fragmentation); err != nil {
			return err
		}
	}
	if runs["smallfiles"] {
		sizes, err := bench.FileSizes(ab.root)
		if err != nil {
			return fmt.Errorf("smallfiles: %w", err)
		}
		title := fmt.Sprintf("smallfiles: the %d files under %s written as small closed files (optimize_scan=%s)", len(sizes), ab.root, scan)
		if err := quality(title, func(o bench.Options) ([]bench.Row, error) { return bench.SmallFiles(o, sizes) }); err != nil {
			return err
		}
	}
	return nil
}

func defaultBenchRoot() string {
	if _, err := os.Stat("/usr/local/go"); err == nil {
		return "/usr/local/go"
	}
	return runtime.GOROOT()
}

// interleaved runs f count times for each configuration, alternating the
// configurations so that a change in the machine's load hits both alike,
// and returns each configuration's median run.
func interleaved(f func(bench.Options, int, time.Duration, int64) (bench.Row, error), configs []bench.Options, p int, d time.Duration, count int) ([]bench.Row, error) {
	runs := make([][]bench.Row, len(configs))
	for i := 0; i < count; i++ {
		for k, o := range configs {
			r, err := f(o, p, d, 0)
			if err != nil {
				return nil, err
			}
			runs[k] = append(runs[k], r)
		}
	}
	res := make([]bench.Row, len(configs))
	for k, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return rs[i].OpsPerSec < rs[j].OpsPerSec })
		res[k] = rs[len(rs)/2]
	}
	return res, nil
}

// loadAvg returns ", load average X" where /proc/loadavg can be read: the
// figures mean little on a busy machine.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return ", load average " + f[0]
	}
	return ""
}

func pct(base, patched float64) float64 {
	if base == 0 {
		return 0
	}
	return (patched - base) / base * 100
}

// benchOut prints either the human table (printf) or JSON lines (row).
type benchOut struct {
	e    *env
	json bool
}

func (o *benchOut) printf(f string, a ...any) {
	if !o.json {
		fmt.Fprintf(o.e.stdout, f, a...)
	}
}

func (o *benchOut) row(r bench.Row) {
	if o.json {
		b, _ := json.Marshal(r)
		fmt.Fprintf(o.e.stdout, "%s\n", b)
	}
}

func (o *benchOut) stats(rows []bench.Row) {
	if o.json {
		return
	}
	for _, r := range rows {
		if r.Stats != nil {
			fmt.Fprintf(o.e.stdout, "  mb_stats (%s, %s):\n", r.Bench, r.Config)
			r.Stats.WriteTo(o.e.stdout)
		}
	}
}
