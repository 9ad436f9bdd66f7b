//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// TestMountPageCache: the kernel keeps a file's pages across opens and
// does not drop them when the mtime changes (keepCache, explicit data
// cache control), so every change of data must reach its page cache.
// Each step changes a file whose pages are cached, then reads it through
// a new open and compares with a model; after unmount the library reads
// the same bytes.
func TestMountPageCache(t *testing.T) {
	requireFUSE(t)
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	dir, fsys, srv := mount(t, image)
	name := filepath.Join(dir, "f")
	model := bytes.Repeat([]byte("A"), 64<<10)
	if err := os.WriteFile(name, model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src"), bytes.Repeat([]byte("B"), 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		got, err := os.ReadFile(name)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if !bytes.Equal(got, model) {
			t.Fatalf("after %s the mount reads %d bytes that differ from the model (%d bytes)", step, len(got), len(model))
		}
	}
	withFileFlags := func(step string, flags int, fn func(fd int) error) {
		t.Helper()
		check("before " + step) // the pages are cached
		fd, err := unix.Open(name, flags, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = fn(fd)
		unix.Close(fd)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		check(step)
	}
	withFile := func(step string, fn func(fd int) error) {
		t.Helper()
		withFileFlags(step, unix.O_RDWR, fn)
	}
	zero := func(off, n int) { clear(model[off : off+n]) }

	withFile("overwrite", func(fd int) error {
		_, err := unix.Pwrite(fd, []byte("xyz"), 100)
		copy(model[100:], "xyz")
		return err
	})
	withFile("zero range", func(fd int) error {
		zero(4096, 4096)
		return unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE, 4096, 4096)
	})
	withFile("zero range (partial blocks)", func(fd int) error {
		zero(9000, 3000)
		return unix.Fallocate(fd, unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 9000, 3000)
	})
	withFile("punch", func(fd int) error {
		zero(16384, 5000)
		return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 16384, 5000)
	})
	withFile("copy_file_range", func(fd int) error {
		src, err := unix.Open(filepath.Join(dir, "src"), unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(src)
		off := int64(32768 + 100)
		n, err := unix.CopyFileRange(src, nil, fd, &off, 8192, 0)
		copy(model[32768+100:], bytes.Repeat([]byte("B"), n))
		return err
	})
	withFile("truncate down", func(fd int) error {
		model = model[:50000]
		return unix.Ftruncate(fd, 50000)
	})
	withFile("truncate up", func(fd int) error {
		model = append(model, make([]byte, 20000)...)
		return unix.Ftruncate(fd, 70000)
	})
	withFile("write past the end", func(fd int) error {
		model = append(model, make([]byte, 10000)...)
		model = append(model, "tail"...)
		_, err := unix.Pwrite(fd, []byte("tail"), 80000)
		return err
	})
	// Write-only opens bypass the page cache (directWrite): the kernel
	// must drop what the other opens cached, mapped pages included.
	withFileFlags("write-only overwrite across pages", unix.O_WRONLY, func(fd int) error {
		w := bytes.Repeat([]byte("W"), 10000)
		copy(model[3000:], w)
		_, err := unix.Pwrite(fd, w, 3000)
		return err
	})
	withFileFlags("write-only append", unix.O_WRONLY|unix.O_APPEND, func(fd int) error {
		model = append(model, "appended"...)
		_, err := unix.Write(fd, []byte("appended"))
		return err
	})
	// The mappings are touched by a child process: a page fault on the
	// mount in the server's own process can wait for a request that the
	// server cannot serve while the garbage collector stops the world for
	// that faulting thread (it hung CI once).
	withFileFlags("write-only write under a mapping", unix.O_WRONLY, func(fd int) error {
		h, err := startMapHelper(name, "watch")
		if err != nil {
			return err
		}
		copy(model[12000:], "under the map")
		if _, err := unix.Pwrite(fd, []byte("under the map"), 12000); err != nil {
			h.Process.Kill()
			h.Wait()
			return err
		}
		return h.finish()
	})
	withFile("mmap write", func(fd int) error {
		h, err := startMapHelper(name, "write")
		if err != nil {
			return err
		}
		copy(model[5000:], "mapped")
		return h.finish()
	})
	unmount(t, srv, fsys)
	testutil.RequireFsckClean(t, image)
	ours, err := ext4go.Open(image, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()
	got, err := ours.ReadFile("f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, model) {
		t.Fatalf("after unmount ext4go reads %d bytes that differ from the model (%d)", len(got), len(model))
	}
}

// readaheadKB is the readahead of the FUSE mount on dir, in KiB.
func readaheadKB(t *testing.T, dir string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		t.Skipf("no readahead setting in sysfs: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMountReadahead: the mount reads ahead as far as its largest request
// (1 MiB) unless told otherwise, and -1 leaves the kernel's 128 KiB; a
// file read in sequence comes back whole.
func TestMountReadahead(t *testing.T) {
	requireFUSE(t)
	if os.Getuid() != 0 {
		t.Skip("setting readahead needs root (sysfs)")
	}
	for _, c := range []struct {
		ra, wantKB int
	}{{0, 1024}, {256 << 10, 256}, {-1, 128}} {
		img := filepath.Join(t.TempDir(), "img")
		testutil.Mke2fs(t, img, 64<<20, "-t", "ext4")
		fsys, err := ext4go.Open(img, &ext4go.Options{Writable: true})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "mnt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		srv, err := fusefs.Mount(fsys, dir, &fusefs.Options{UID: -1, GID: -1, MaxReadahead: c.ra})
		if err != nil {
			fsys.Close()
			t.Fatal(err)
		}
		got := readaheadKB(t, dir)
		data := make([]byte, 5<<20+123)
		for i := range data {
			data[i] = byte(i * 7 / 5)
		}
		err = os.WriteFile(filepath.Join(dir, "f"), data, 0o644)
		var back []byte
		if err == nil {
			back, err = os.ReadFile(filepath.Join(dir, "f"))
		}
		unmount(t, srv, fsys)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.wantKB {
			t.Errorf("MaxReadahead %d: read_ahead_kb %d, want %d", c.ra, got, c.wantKB)
		}
		if !bytes.Equal(back, data) {
			t.Errorf("MaxReadahead %d: the file read back differs", c.ra)
		}
		testutil.RequireFsckClean(t, img)
	}
}

// TestMountDirectWriteOnly: each write through a write-only open is one
// WRITE request and none asks for security.capability (directWrite), where
// with CachedWriteOnly the kernel's cached path sends its own; the bytes
// are right either way, through the mount and after it.
func TestMountDirectWriteOnly(t *testing.T) {
	requireFUSE(t)
	for _, cached := range []bool{false, true} {
		image := filepath.Join(t.TempDir(), "img")
		testutil.Mke2fs(t, image, 16<<20, "-t", "ext4")
		var log lockedBuffer
		dir, fsys, srv := mountWith(t, image, func(o *fusefs.Options) {
			o.Debug, o.Logger = true, stdlog.New(&log, "", 0)
			o.WritebackCache, o.CachedWriteOnly = false, cached
		})
		name := filepath.Join(dir, "f")
		fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		head := bytes.Repeat([]byte("h"), 1536)
		body := bytes.Repeat([]byte("b"), 10240) // tar's record, starting inside a page
		log.Reset()
		if _, err := unix.Pwrite(fd, head, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.Pwrite(fd, body, int64(len(head))); err != nil {
			t.Fatal(err)
		}
		writes, getxattrs := log.count(": WRITE "), log.count(": GETXATTR ")
		unix.Close(fd)
		if !cached && (writes != 2 || getxattrs != 0) {
			t.Errorf("two writes through a write-only open (the second 10 KiB from inside a page): %d WRITE and %d GETXATTR requests, want 2 and 0", writes, getxattrs)
		}
		if cached && writes < 1 {
			t.Errorf("CachedWriteOnly: %d WRITE requests", writes)
		}
		t.Logf("cached %v: %d WRITE, %d GETXATTR", cached, writes, getxattrs)
		want := append(head, body...)
		if got, err := os.ReadFile(name); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back through the mount: %d bytes, %v", len(got), err)
		}
		unmount(t, srv, fsys)
		testutil.RequireFsckClean(t, image)
		mp := testutil.Mount(t, image, true)
		if got, err := os.ReadFile(filepath.Join(mp, "f")); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read back through the kernel: %d bytes, %v", len(got), err)
		}
	}
}

// lockedBuffer is a log destination the server writes from many
// goroutines; count counts the request lines ("rx N: OP ...") of one op.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}

func (l *lockedBuffer) count(op string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.HasPrefix(line, "rx ") && strings.Contains(line, op) {
			n++
		}
	}
	return n
}

// mapHelper is a child process (this test binary, TestHelperMapping) that
// maps the file and works on the mapping, outside the server's process.
type mapHelper struct {
	*exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
}

// startMapHelper starts the helper on name and waits until it has mapped
// the file: "watch" maps 16 KiB read-only and touches byte 12000, then
// waits for a line on its stdin and checks that the mapping shows "under
// the map" there; "write" maps 8 KiB read-write, writes "mapped" at 5000,
// msyncs and unmaps.
func startMapHelper(name, mode string) (*mapHelper, error) {
	h := &mapHelper{Cmd: exec.Command(os.Args[0], "-test.run=^TestHelperMapping$")}
	h.Env = append(os.Environ(), "FUSEFS_MAP_HELPER="+mode, "FUSEFS_MAP_FILE="+name)
	h.Stderr = &h.stderr
	out, err := h.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if h.stdin, err = h.StdinPipe(); err != nil {
		return nil, err
	}
	if err := h.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "mapped\n" {
		h.Process.Kill()
		h.Wait()
		return nil, fmt.Errorf("map helper: %q, %v (%s)", line, err, h.stderr.String())
	}
	return h, nil
}

// finish tells the helper to go on and waits for it.
func (h *mapHelper) finish() error {
	h.stdin.Write([]byte("go\n"))
	h.stdin.Close()
	if err := h.Wait(); err != nil {
		return fmt.Errorf("map helper: %v: %s", err, h.stderr.String())
	}
	return nil
}

// TestHelperMapping is startMapHelper's child; run by the tests that need
// it (FUSEFS_MAP_HELPER set), it returns at once otherwise.
func TestHelperMapping(t *testing.T) {
	mode := os.Getenv("FUSEFS_MAP_HELPER")
	if mode == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flags, size, prot := unix.O_RDONLY, 16384, unix.PROT_READ
	if mode == "write" {
		flags, size, prot = unix.O_RDWR, 8192, unix.PROT_READ|unix.PROT_WRITE
	}
	fd, err := unix.Open(os.Getenv("FUSEFS_MAP_FILE"), flags, 0)
	if err != nil {
		fail(err)
	}
	m, err := unix.Mmap(fd, 0, size, prot, unix.MAP_SHARED)
	if err != nil {
		fail(err)
	}
	if mode == "watch" {
		_ = m[12000] // the page is mapped and cached
	}
	os.Stdout.WriteString("mapped\n")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fail(err)
	}
	switch mode {
	case "watch":
		if got := string(m[12000 : 12000+13]); got != "under the map" {
			fail(fmt.Errorf("the mapping still shows %q after the write", got))
		}
	case "write":
		copy(m[5000:], "mapped")
		if err := unix.Msync(m, unix.MS_SYNC); err != nil {
			fail(err)
		}
	}
	if err := unix.Munmap(m); err != nil {
		fail(err)
	}
	os.Exit(0)
}
