//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// buildCLI builds the ext4go command for tests that need it as a process
// of its own (the mount daemon re-executes itself).
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ext4go")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func requireFUSE(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("no /dev/fuse: %v", err)
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("no fusermount3 (package fuse3)")
	}
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mounts")
	return bytes.Contains(b, []byte(" "+dir+" "))
}

// waitClosed waits until the image can be opened for writing again: the
// daemon has closed it.
func waitClosed(t *testing.T, image string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
		if err == nil {
			fsys.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image is still held after the unmount: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mountFixture builds the command and makes a fresh image of size and an
// empty directory for a mount test; run runs the built command.
func mountFixture(t *testing.T, size string) (bin, img, dir string, run func(args ...string) (string, error)) {
	t.Helper()
	requireFUSE(t)
	bin = buildCLI(t)
	img = filepath.Join(t.TempDir(), "disk.img")
	mustCLI(t, "mkfs", "-q", "--size", size, img)
	dir = filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run = func(args ...string) (string, error) {
		out, err := exec.Command(bin, args...).CombinedOutput()
		return string(out), err
	}
	return bin, img, dir, run
}

// TestMountCommand: "ext4go mount" returns once the mount is live and
// leaves a daemon serving it; fusermount3 -u ends the daemon, which
// closes the image clean; the files written through the mount are there.
// Errors before the mount is live are the command's own (exit 1, a
// message): a missing directory, an unknown option, not an image, an
// image another writer has open. In the foreground (-f), SIGTERM
// unmounts and closes.
func TestMountCommand(t *testing.T) {
	bin, img, dir, run := mountFixture(t, "64M")
	if out, err := run("mount", "-o", "default_permissions,relatime", img, dir); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if mounted(dir) {
			exec.Command("fusermount3", "-u", dir).Run()
		}
	})
	if !mounted(dir) {
		t.Fatal("the command returned before the mount was live")
	}
	if err := os.WriteFile(filepath.Join(dir, "hello"), []byte("through the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "a/b/c"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("fusermount3", "-u", dir).CombinedOutput(); err != nil {
		t.Fatalf("fusermount3 -u: %v\n%s", err, out)
	}
	waitClosed(t, img)
	testutil.RequireFsckClean(t, img)
	if out := mustCLI(t, "cat", img, "/hello"); out != "through the mount" {
		t.Errorf("cat /hello: %q", out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"mount", img, filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"mount", "-o", "bogus", img, dir}, `unknown mount option "bogus"`},
		{[]string{"mount", "-o", "commit=x", img, dir}, "commit"},
		{[]string{"mount", "/etc/hostname", dir}, "not an ext4 filesystem"},
	} {
		out, err := run(c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: %v, %q (want exit 1 and %q)", c.args, err, out, c.want)
		}
		if mounted(dir) {
			t.Fatalf("%v mounted", c.args)
		}
	}
	// An image open for writing elsewhere.
	holder, err := ext4go.Open(img, &ext4go.Options{Writable: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run("mount", img, dir)
	holder.Close()
	if err == nil || !strings.Contains(out, "in use") || mounted(dir) {
		t.Errorf("mount of an image open elsewhere: %v, %q", err, out)
	}

	// Foreground, ended by SIGTERM.
	cmd := exec.Command(bin, "mount", "-f", img, dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !mounted(dir) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the foreground mount did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "second"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("foreground mount after SIGTERM: %v", err)
	}
	if mounted(dir) {
		t.Fatal("still mounted after SIGTERM")
	}
	testutil.RequireFsckClean(t, img)
	if out := mustCLI(t, "cat", img, "/second"); out != "2" {
		t.Errorf("cat /second: %q", out)
	}
}

// TestMountKill: the mount daemon killed (SIGKILL) in the middle of a
// workload that fsyncs loses nothing fsync'd: the kernel's mount of the
// image replays the journal and has every fsync'd file with its content,
// e2fsck is clean after it, and ext4go's own replay gives the kernel's
// tree. It runs over /dev/fuse and over io_uring (-o uring; there the
// kernel must also let go of ring entries whose thread died mid-request).
func TestMountKill(t *testing.T) {
	requireFUSE(t)
	testutil.RequireMount(t)
	bin := buildCLI(t)
	t.Run("devfuse", func(t *testing.T) { testMountKill(t, bin, "commit=60") })
	t.Run("uring", func(t *testing.T) {
		testutil.EnableFUSEUring(t)
		testMountKill(t, bin, "commit=60,uring")
	})
}

func testMountKill(t *testing.T, bin, options string) {
	for seed := range 3 {
		img := filepath.Join(t.TempDir(), "disk.img")
		mustCLI(t, "mkfs", "-q", "--size", "128M", img)
		dir := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "mount", "-f", "-o", options, img, dir)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !mounted(dir) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("the mount did not come up")
			}
			time.Sleep(20 * time.Millisecond)
		}
		// The workload runs until the kill lands, at a time of the
		// seed's choosing; a file counts as synced once its fsync
		// returned.
		var mu sync.Mutex
		synced := map[string][]byte{}
		n := 0
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("f%04d", i)
				data := bytes.Repeat([]byte{byte(i), byte(seed)}, 500*(i%9+1))
				f, err := os.Create(filepath.Join(dir, name))
				if err != nil {
					return
				}
				_, err = f.Write(data)
				if err == nil && i%3 != 2 { // every third file is never synced
					if f.Sync() == nil {
						mu.Lock()
						synced[name] = data
						mu.Unlock()
					}
				}
				f.Close()
				if i%5 == 4 {
					os.Rename(filepath.Join(dir, name), filepath.Join(dir, name+".moved")) // not synced
				}
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(100+seed*150) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		close(stop)
		exec.Command("fusermount3", "-u", "-z", dir).Run()
		<-done
		// Sync after rename was not asked for: only files fsync'd and
		// not renamed after must be there by their name.
		b, err := os.ReadFile(img)
		if err != nil {
			t.Fatal(err)
		}
		kimg := filepath.Join(t.TempDir(), "kernel.img")
		if err := os.WriteFile(kimg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		kmp := testutil.Mount(t, kimg, false)
		for name, data := range synced {
			got, err := os.ReadFile(filepath.Join(kmp, name))
			if errors.Is(err, os.ErrNotExist) {
				got, err = os.ReadFile(filepath.Join(kmp, name+".moved"))
			}
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("seed %d: fsync'd %s after the kill: %d bytes, %v", seed, name, len(got), err)
			}
		}
		// ext4go's replay of the image shows the kernel's tree.
		ours, err := ext4go.Open(img, nil)
		if err != nil {
			t.Fatalf("read-only open after the kill: %v", err)
		}
		opts := testutil.MountCompareOptions()
		opts.Meta = meta
		testutil.CompareFS(t, ours, kmp, opts)
		ours.Close()
		testutil.Unmount(t, kmp)
		testutil.RequireFsckClean(t, kimg)
		// And its writable open (the next mount) leaves it clean.
		w, err := ext4go.Open(img, &ext4go.Options{Writable: true})
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
		testutil.RequireFsckClean(t, img)
		t.Logf("seed %d: killed after %d files, %d fsync'd", seed, n, len(synced))
	}
}

// TestUmountCommand: "ext4go umount DIR" returns only once the daemon has
// closed the image, so that e2fsck right after it finds the image clean
// (after umount(8) alone it may still be committing); it refuses a
// directory that is not mounted, and with fsname= it needs -i IMAGE.
func TestUmountCommand(t *testing.T) {
	_, img, dir, run := mountFixture(t, "256M")
	t.Cleanup(func() {
		if mounted(dir) {
			exec.Command("fusermount3", "-u", dir).Run()
		}
	})
	if out, err := run("umount", dir); err == nil || !strings.Contains(out, "not mounted") {
		t.Errorf("umount of a directory not mounted: %v, %q", err, out)
	}
	// Another filesystem's mount is refused before anything is unmounted.
	if other := t.TempDir(); syscall.Mount("tmpfs", other, "tmpfs", 0, "size=1m") == nil {
		t.Cleanup(func() { syscall.Unmount(other, syscall.MNT_DETACH) })
		if out, err := run("umount", other); err == nil || !strings.Contains(out, "not ext4go's") || !mounted(other) {
			t.Errorf("umount of a tmpfs: %v, %q", err, out)
		}
	}
	for round, opts := range []string{"relatime", "fsname=elsewhere"} {
		if out, err := run("mount", "-o", opts, img, dir); err != nil {
			t.Fatalf("mount -o %s: %v\n%s", opts, err, out)
		}
		// Enough files that closing the image takes a while.
		for i := range 1500 {
			p := filepath.Join(dir, fmt.Sprintf("f%d-%d", round, i))
			if err := os.WriteFile(p, bytes.Repeat([]byte{byte(i)}, 5000), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		args := []string{"umount", dir}
		if round == 1 {
			if out, err := run("umount", dir); err == nil || !strings.Contains(out, "-i IMAGE") {
				t.Errorf("umount of a mount with fsname=: %v, %q", err, out)
			}
			if !mounted(dir) {
				t.Fatal("a refused umount unmounted")
			}
			args = []string{"umount", "-i", img, dir}
		}
		if out, err := run(args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if mounted(dir) {
			t.Fatal("still mounted after ext4go umount")
		}
		// At once: no waitClosed.
		testutil.RequireFsckClean(t, img)
		if out := mustCLI(t, "cat", img, fmt.Sprintf("/f%d-1499", round)); out != string(bytes.Repeat([]byte{byte(1499 % 256)}, 5000)) {
			t.Errorf("round %d: the last file has %d bytes", round, len(out))
		}
	}
}

// TestParseMountOptions: the FUSE options map to fusefs.Options (a later
// option wins over an earlier one), and an unknown one is an error.
func TestParseMountOptions(t *testing.T) {
	for _, c := range []struct {
		opts string
		want func(fusefs.Options) bool
	}{
		{"uring", func(o fusefs.Options) bool { return o.Uring }},
		{"uring,no_uring", func(o fusefs.Options) bool { return !o.Uring }},
		{"uring", func(o fusefs.Options) bool { return !o.UringIdle }},
		{"uring,uring_idle", func(o fusefs.Options) bool { return o.Uring && o.UringIdle }},
		{"uring_idle,no_uring_idle", func(o fusefs.Options) bool { return !o.UringIdle }},
		{"cached_write_only", func(o fusefs.Options) bool { return o.CachedWriteOnly }},
		{"writeback_cache,no_writeback_cache", func(o fusefs.Options) bool { return !o.WritebackCache }},
		{"no_readdirplus", func(o fusefs.Options) bool { return o.NoReaddirPlus }},
		{"max_readahead=65536,uid=7,gid=8", func(o fusefs.Options) bool { return o.MaxReadahead == 65536 && o.UID == 7 && o.GID == 8 }},
		{"rw", func(o fusefs.Options) bool {
			return !o.Uring && !o.CachedWriteOnly && !o.WritebackCache && o.UID == -1 && o.GID == -1
		}},
	} {
		c2, err := parseMountOptions(strings.Split(c.opts, ","))
		if err != nil {
			t.Errorf("-o %s: %v", c.opts, err)
			continue
		}
		if !c.want(c2.fuse) {
			t.Errorf("-o %s: %+v", c.opts, c2.fuse)
		}
	}
	if _, err := parseMountOptions([]string{"uring_please"}); err == nil || !strings.Contains(err.Error(), "uring_please") {
		t.Errorf("-o uring_please: %v, want an error naming it", err)
	}
}
