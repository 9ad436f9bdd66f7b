// Command ext4go reads, changes and builds ext4 filesystem images.
//
// Each subcommand lives in its own file and registers itself in commands
// from an init function, so subcommands can be added without touching this
// file. Exit status: 0 on success, 1 on any error (usage errors included).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strings"
)

// command is one subcommand of ext4go.
type command struct {
	name    string
	usage   string // argument synopsis, e.g. "[-l] [-R] IMAGE [PATH]"
	summary string // one line
	run     func(env *env, args []string) error
}

// env is what a subcommand may use to talk to the outside world; tests
// replace its streams.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("ext4go: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

// usageError marks an error in the command line; run prints the usage with it.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func main() {
	os.Exit(profiled(func() int {
		return run(&env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	}))
}

// profiled runs cmd, writing the profiles the environment asks for (for go
// tool pprof), for measuring where a command spends its time and memory:
// EXT4GO_CPUPROFILE=FILE a CPU profile, EXT4GO_MEMPROFILE=FILE a heap
// profile (with every allocation's site) when the command ends,
// EXT4GO_MUTEXPROFILE=FILE and EXT4GO_BLOCKPROFILE=FILE where goroutines
// waited on locks and channels (every event sampled), EXT4GO_TRACE=FILE an
// execution trace (for go tool trace: which goroutine ran, waited or sat in
// a system call, when).
func profiled(cmd func() int) int {
	for _, p := range []struct{ env, name string }{{"EXT4GO_MUTEXPROFILE", "mutex"}, {"EXT4GO_BLOCKPROFILE", "block"}} {
		path := os.Getenv(p.env)
		if path == "" {
			continue
		}
		if p.name == "mutex" {
			runtime.SetMutexProfileFraction(1)
		} else {
			runtime.SetBlockProfileRate(1)
		}
		defer func() {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup(p.name).WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	if path := os.Getenv("EXT4GO_MEMPROFILE"); path != "" {
		runtime.MemProfileRate = 4096
		defer func() {
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	defer recordTo(os.Getenv("EXT4GO_CPUPROFILE"), pprof.StartCPUProfile, pprof.StopCPUProfile)()
	defer recordTo(os.Getenv("EXT4GO_TRACE"), trace.Start, trace.Stop)()
	return cmd()
}

// recordTo starts a recorder (the CPU profiler, the tracer) writing to a
// new file at path, if path is set, and returns what stops it and closes
// the file (a no-op when nothing started).
func recordTo(path string, start func(io.Writer) error, stop func()) (end func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if start(f) != nil {
		f.Close()
		return func() {}
	}
	return func() {
		stop()
		f.Close()
	}
}

func run(e *env, args []string) int {
	if len(args) == 0 {
		// No command: a usage error, on standard error.
		printUsage(e.stderr)
		return 1
	}
	if args[0] == "-h" || args[0] == "--help" {
		// Asked for: on standard output, as coreutils and git print it.
		printUsage(e.stdout)
		return 0
	}
	if args[0] == "--version" {
		fmt.Fprintln(e.stdout, versionString())
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(e.stderr, "ext4go: unknown command %q (see 'ext4go help')\n", args[0])
		return 1
	}
	err := c.run(e, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err == errReported:
		return 1
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "ext4go %s: %s\nusage: ext4go %s %s\n", c.name, ue.msg, c.name, c.usage)
		return 1
	default:
		fmt.Fprintf(e.stderr, "ext4go %s: %v\n", c.name, err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: ext4go COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := commands[n]
		usage := c.usage
		if n == "bench" {
			usage = "KIND [OPTIONS]  (KIND: " + strings.Join(benchKindNames(), ", ") + "; 'ext4go bench KIND --help' for its options)"
		}
		fmt.Fprintf(w, "  %-10s %s\n             %s\n", n, usage, c.summary)
	}
	fmt.Fprintln(w, "\n'ext4go help COMMAND' (or 'ext4go COMMAND --help') shows a command's options and examples.")
}

// collectLess makes the garbage collector run less often for the rest of a
// command whose live heap is a few MiB and whose loop makes garbage at a
// high rate (the bench loops): at the default GOGC=100 such a heap is
// collected hundreds of times a second. A soft limit of 1 GiB bounds it. A
// GOGC or GOMEMLIMIT in the environment wins. It returns the undo (tests
// run commands in one process).
//
// Why 800: fallocate2's one allocation per operation (the inode copy a
// change publishes, 240 bytes) makes 500 MB/s of garbage at P = 2 against
// a live heap of 1 MiB. At 400 that is a collection every 20 ms, and the
// spans refilled and write barriers taken cost the second worker enough
// that P2/P1 came out 1.69-1.86; at 800 (half the collections) 2.01-2.24,
// four runs each alternating, GOGC set in the environment.
//
// mkfs -d and get do not use it any more: their live heap is tens of MiB
// (data in flight), at 400 it grew to 160 MiB, and on this VM every fresh
// page of heap costs a fault: GOGC=100 took a warm mkfs -d of
// /usr/local/go from 1.51 s to 1.19 s and get of 100k files from 2.54 s
// to 2.41 s (scripts/bench-mkfs.sh, scripts/bench-get.sh).
func collectLess() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	oldPercent := debug.SetGCPercent(800)
	oldLimit := debug.SetMemoryLimit(1 << 30)
	return func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}
