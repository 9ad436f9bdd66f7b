//go:build linux

package ext4go_test

// Journals ext4go left, read by the kernel: a child process
// runs a seeded workload through the library with syncs and is killed
// (SIGKILL) at a random point. The kernel then mounts the image, replaying
// ext4go's journal: everything synced before the kill and not touched
// since is there with exactly its content, ext4go's own replay of the same
// image shows the same tree as the kernel's, and e2fsck -fn is clean after
// either replay.

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestKillHelper is the child of TestKillKernelReplay.
func TestKillHelper(t *testing.T) {
	image := os.Getenv("EXT4GO_KILL_IMAGE")
	if image == "" {
		t.Skip("helper process of TestKillKernelReplay")
	}
	seed, _ := strconv.ParseUint(os.Getenv("EXT4GO_KILL_SEED"), 10, 64)
	lazy := os.Getenv("EXT4GO_KILL_LAZYTIME") == "1"
	opts := &ext4go.Options{Writable: true, CommitInterval: 20 * time.Millisecond}
	if lazy {
		// Lazy times, some expiring while the workload runs.
		opts.Lazytime, opts.Atime, opts.LazytimeExpire = true, ext4go.AtimeStrict, 30*time.Millisecond
	}
	fsys, err := ext4go.Open(image, opts)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	plan, _ := crashPlan(seed, 8)
	for p, ops := range plan {
		if lazy {
			// Time-only changes after every file written: a read
			// and a rewrite of bytes as they are.
			var with []crashOp
			for _, op := range ops {
				with = append(with, op)
				if op.kind == "write" || op.kind == "append" {
					with = append(with, crashOp{kind: "read", name: op.name}, crashOp{kind: "rewrite", name: op.name})
				}
			}
			ops = with
			plan[p] = ops
		}
		// A pause after every step lets the kill land anywhere, and
		// the 20 ms commit interval commit in the middle of phases.
		for i := range ops {
			kind := ops[i].kind
			ops[i].kind = "pause:" + kind
		}
	}
	fmt.Println("open")
	err = runCrashPlan(fsys, plan, func(p int) { fmt.Println("synced", p) })
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("done")
	time.Sleep(time.Minute) // killed before Close
}

func TestKillKernelReplay(t *testing.T) {
	testutil.RequireMount(t)
	seeds := 6
	if testing.Short() {
		seeds = 3
	}
	configs := [][]string{
		{"-t", "ext4"},
		{"-t", "ext4", "-b", "1024", "-O", "^metadata_csum,^64bit"},
		{"-t", "ext3"},
	}
	for s := range seeds {
		args := configs[s%len(configs)]
		t.Run(fmt.Sprintf("seed%d-%s", s, strings.Join(args, "")), func(t *testing.T) {
			killRun(t, uint64(s)+20, args, false)
		})
	}
	// With Options.Lazytime: the kill loses only times.
	for s := range 2 {
		args := configs[s%len(configs)]
		t.Run(fmt.Sprintf("lazytime-seed%d-%s", s, strings.Join(args, "")), func(t *testing.T) {
			killRun(t, uint64(s)+42, args, true) // seeds that kill after a sync
		})
	}
}

func killRun(t *testing.T, seed uint64, mkfs []string, lazytime bool) {
	dir := t.TempDir()
	image := filepath.Join(dir, "img")
	testutil.Mke2fs(t, image, 32<<20, mkfs...)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillHelper$")
	cmd.Env = append(os.Environ(), "EXT4GO_KILL_IMAGE="+image, fmt.Sprintf("EXT4GO_KILL_SEED=%d", seed))
	if lazytime {
		cmd.Env = append(cmd.Env, "EXT4GO_KILL_LAZYTIME=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	plan, states := crashPlan(seed, 8)
	killAfter := rng.IntN(len(plan)) // syncs seen before the kill
	synced := 0
	lines := bufio.NewScanner(out)
	killed := false
	kill := func() {
		if !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		switch {
		case len(f) == 2 && f[0] == "synced":
			synced, _ = strconv.Atoi(f[1])
		case len(f) > 0 && f[0] == "error":
			kill()
			t.Fatalf("helper: %s", lines.Text())
		case len(f) > 0 && f[0] == "done":
			kill()
		}
		if synced >= killAfter && !killed {
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			kill()
		}
	}
	cmd.Wait()
	t.Logf("killed after %d of %d phases synced", synced, len(plan))
	want := map[string]crashFile{}
	if synced > 0 {
		want = states[synced-1]
	}
	stable := func(name string, f crashFile) bool {
		if synced < len(states) {
			next, ok := states[synced][name]
			return ok && next.touched <= synced && bytes.Equal(next.data, f.data)
		}
		return true
	}

	if probe, err := ext4go.Open(image, nil); err != nil {
		t.Fatal(err)
	} else {
		r := probe.Replay()
		j, err := probe.Journal()
		probe.Close()
		if r == nil || r.Transactions == 0 {
			t.Fatalf("the killed writer left no journal to replay (%+v)", r)
		}
		if err != nil || j.Start == 0 || j.Transactions != r.Transactions || j.ReplayError != nil {
			t.Errorf("Journal() = %+v, %v; the replay was %+v", j, err, *r)
		}
		t.Logf("journal left: %+v", *r)
	}
	// The kernel replays ext4go's journal.
	kimg := filepath.Join(dir, "kernel")
	copyFile(t, image, kimg)
	mp := testutil.Mount(t, kimg, false)
	for name, f := range want {
		if !stable(name, f) {
			continue
		}
		got, err := os.ReadFile(filepath.Join(mp, name))
		if err != nil || !bytes.Equal(got, f.data) {
			t.Errorf("kernel: synced file %s: %d bytes (want %d), %v", name, len(got), len(f.data), err)
		}
	}
	// ext4go's replay (in memory) shows the kernel's tree.
	ours, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatalf("ext4go replay: %v", err)
	}
	opts := testutil.MountCompareOptions()
	opts.Meta = meta
	testutil.CompareFS(t, ours, mp, opts)
	ours.Close()
	testutil.Unmount(t, mp)
	testutil.RequireFsckClean(t, kimg)

	// ext4go's replay written home.
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatalf("ext4go writable replay: %v", err)
	}
	if err := fsys.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.RequireFsckClean(t, image)
}
