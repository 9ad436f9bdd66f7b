package main

import (
	"bytes"
	"fmt"
	"io"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// A breakdown says where a benchmark's CPU time goes, layer by layer
// (-breakdown): the run is CPU-profiled, and every sample is
// charged to the layer of the innermost frame that names one. Sampling
// costs a few per cent and changes nothing in the code measured, where
// timers around each layer would cost more than some layers take.

// layers, innermost rules first: a frame matching none (the runtime's
// scheduler, memmove) passes the sample on to its caller.
var layerRules = []struct {
	layer    string
	prefixes []string
}{
	{"checksums", []string{"hash/crc32.", "github.com/ext4go/ext4go/internal/csum."}},
	{"memory allocation", []string{"runtime.mallocgc", "runtime.newobject", "runtime.makeslice", "runtime.growslice", "runtime.(*mcache)", "runtime.(*mcentral)", "runtime.(*mheap)", "runtime.gcAssist"}},
	{"locks", []string{"sync.", "internal/sync.", "runtime.lock", "runtime.unlock", "runtime.futex", "runtime.semacquire", "runtime.semrelease"}},
	{"system calls (data, image)", []string{"syscall.", "internal/poll.", "os.", "github.com/ext4go/ext4go/internal/dev."}},
	{"bitmaps and group descriptors", []string{"github.com/ext4go/ext4go/internal/super.", "github.com/ext4go/ext4go.blockStore.", "github.com/ext4go/ext4go.(*FS).writeGroupDesc", "github.com/ext4go/ext4go/internal/mballoc.(*Allocator).markDiskLocked"}},
	{"allocator", []string{"github.com/ext4go/ext4go/internal/mballoc."}},
	{"extent tree", []string{"github.com/ext4go/ext4go/internal/extent.", "github.com/ext4go/ext4go.extentMap.", "github.com/ext4go/ext4go.(*extStore)."}},
	{"inode", []string{"github.com/ext4go/ext4go/internal/inode.", "github.com/ext4go/ext4go.(*FS).setInode", "github.com/ext4go/ext4go.editInode"}},
	{"journal", []string{"github.com/ext4go/ext4go/internal/txn.", "github.com/ext4go/ext4go/internal/journal.", "github.com/ext4go/ext4go/internal/jbd2."}},
	{"filesystem (other)", []string{"github.com/ext4go/ext4go."}},
	{"benchmark loop", []string{"main."}},
}

const gcLayer = "garbage collection"

// layerOf names the layer a sample's stack (innermost first) is charged to.
func layerOf(stack []string) string {
	for _, fn := range stack {
		if strings.HasPrefix(fn, "runtime.gcBgMarkWorker") || strings.HasPrefix(fn, "runtime.bgsweep") || strings.HasPrefix(fn, "runtime.bgscavenge") {
			return gcLayer
		}
	}
	for _, fn := range stack {
		for _, r := range layerRules {
			for _, p := range r.prefixes {
				if strings.HasPrefix(fn, p) {
					return r.layer
				}
			}
		}
	}
	return "other (scheduler, runtime)"
}

// cpuSampler profiles the CPU between start and stop.
type cpuSampler struct{ buf bytes.Buffer }

func (s *cpuSampler) start() error {
	if err := pprof.StartCPUProfile(&s.buf); err != nil {
		return fmt.Errorf("--breakdown needs the CPU profiler: %w (EXT4GO_CPUPROFILE set?)", err)
	}
	return nil
}

// stop ends the profile and returns CPU nanoseconds by layer.
func (s *cpuSampler) stop() (map[string]int64, error) {
	pprof.StopCPUProfile()
	p, err := profile.Parse(&s.buf)
	if err != nil {
		return nil, fmt.Errorf("reading the CPU profile: %w", err)
	}
	cpu := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			cpu = i
		}
	}
	if cpu < 0 {
		return nil, fmt.Errorf("CPU profile without cpu samples")
	}
	out := map[string]int64{}
	var stack []string
	for _, smp := range p.Sample {
		stack = stack[:0]
		for _, loc := range smp.Location {
			// Inlined frames come innermost first within a location.
			for _, ln := range loc.Line {
				if ln.Function != nil {
					stack = append(stack, ln.Function.Name)
				}
			}
		}
		out[layerOf(stack)] += smp.Value[cpu]
	}
	return out, nil
}

// printBreakdown prints CPU ns per operation by layer, largest first.
func printBreakdown(w io.Writer, ns map[string]int64, ops int64) {
	type row struct {
		layer string
		ns    int64
	}
	var rows []row
	var total int64
	for l, v := range ns {
		rows = append(rows, row{l, v})
		total += v
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].ns > rows[j].ns || rows[i].ns == rows[j].ns && rows[i].layer < rows[j].layer
	})
	n := float64(max(ops, 1))
	fmt.Fprintf(w, "  %-32s %10s %7s\n", "layer (CPU time)", "ns/op", "share")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-32s %10.0f %6.1f%%\n", r.layer, float64(r.ns)/n, 100*float64(r.ns)/float64(max(total, 1)))
	}
	fmt.Fprintf(w, "  %-32s %10.0f\n", "total", float64(total)/n)
}
