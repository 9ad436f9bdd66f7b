package fusefs_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestUringMatchesKernel: the scripted workload of every call, served
// through the io_uring transport, gives the kernel's errnos and tree, the
// requests went through the rings, and after the unmount e2fsck is clean
// and the kernel reads the image as it shows its own. It also checks that
// go-fuse still keeps its /dev/fuse descriptor where the transport finds
// it (go-fuse exports no accessor).
func TestUringMatchesKernel(t *testing.T) {
	requireFUSE(t)
	testutil.EnableFUSEUring(t)
	prev := uring
	uring = true
	t.Cleanup(func() { uring = prev })
	tw := newTwin(t, 64<<20, 0)
	ops := script(2)
	var ours []error
	for _, op := range ops {
		ours = append(ours, op.op(tw.dir))
	}
	for i, op := range ops {
		kerr := op.op(tw.kmp)
		if errno(ours[i]) != errno(kerr) {
			t.Errorf("%s: ext4go mount: %v; kernel: %v", op.desc, ours[i], kerr)
		}
	}
	if n := tw.srv.UringRequests(); n < int64(len(ops)) {
		t.Errorf("%d requests went through the rings for %d steps", n, len(ops))
	}
	opts := testutil.MountCompareOptions()
	opts.Checks &^= testutil.CheckMtime
	opts.Checks |= testutil.CheckNlink | testutil.CheckRdev | testutil.CheckXattrs | testutil.CheckOwner | testutil.CheckSpecialBits
	tw.finish(t, opts)
}

// TestUringTarDiff: a tree unpacked by tar through the rings reads back
// the same (diff -r), also through the kernel after the unmount, and
// e2fsck is clean; files are written by processes on every CPU.
func TestUringTarDiff(t *testing.T) {
	requireFUSE(t)
	testutil.RequireMount(t)
	testutil.EnableFUSEUring(t)
	out, err := exec.Command("go", "env", "GOROOT").Output()
	src := filepath.Join(strings.TrimSpace(string(out)), "src", "net")
	if _, serr := os.Stat(src); err != nil || serr != nil {
		t.Skipf("no Go source tree to unpack: %v", errors.Join(err, serr))
	}
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 256<<20, "-t", "ext4")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := fusefs.Mount(fsys, dir, &fusefs.Options{FsName: image, AllowOther: true, UID: -1, GID: -1, Uring: true})
	if err != nil {
		fsys.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if srv.Unmount() == nil {
			srv.Wait()
		}
		fsys.Close()
	})
	// Two unpackers at once, one in each half of the machine's CPUs.
	errs := make(chan error, 2)
	for i := range 2 {
		go func() {
			d := filepath.Join(dir, string(rune('a'+i)))
			cmd := exec.Command("sh", "-c", `mkdir "$1" && tar cf - -C "$2" . | taskset -c "$3" tar xf - -C "$1"`, "sh", d, src, strconv.Itoa(i%runtime.NumCPU()))
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = errors.New(string(out) + err.Error())
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a", "b"} {
		if out, err := exec.Command("diff", "-r", src, filepath.Join(dir, d)).CombinedOutput(); err != nil {
			t.Fatalf("diff -r through the mount: %v\n%s", err, out)
		}
	}
	if srv.UringRequests() == 0 {
		t.Error("no request went through the rings")
	}
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
	mp := testutil.Mount(t, image, true)
	for _, d := range []string{"a", "b"} {
		if out, err := exec.Command("diff", "-r", src, filepath.Join(mp, d)).CombinedOutput(); err != nil {
			t.Fatalf("diff -r through the kernel: %v\n%s", err, out)
		}
	}
}

// TestUringUnavailable: asking for the transport where the kernel does
// not offer it fails before anything is mounted, with ErrNoUring.
func TestUringUnavailable(t *testing.T) {
	requireFUSE(t)
	testutil.DisableFUSEUring(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	dir := t.TempDir()
	srv, err := fusefs.Mount(fsys, dir, &fusefs.Options{UID: -1, GID: -1, Uring: true})
	if err == nil {
		srv.Unmount()
		srv.Wait()
		t.Fatal("Mount with Uring succeeded where the kernel does not offer it")
	}
	if !errors.Is(err, fusefs.ErrNoUring) {
		t.Errorf("Mount: %v, want ErrNoUring", err)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), " "+dir+" ") {
		t.Errorf("%s is mounted after the failed Mount", dir)
	}
}
