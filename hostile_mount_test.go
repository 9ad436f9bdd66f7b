//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package ext4go_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go"
	"github.com/ext4go/ext4go/fusefs"
)

// The hostile-image harness's mount phase: the corrupted image (as it was
// before the library's changes) is opened writable (read-only when that is
// refused) and mounted through fusefs; the kernel then walks it (lstat,
// readdir, read, readlink, listxattr), creates, renames and removes files
// and removes the victim, as a user's commands would. The case fails on a
// hang (a request the server never answers: the connection is aborted), a
// server panic (the process dies), an error that is not an errno, a mount
// refused on an image the library opened, or an image e2fsck found clean
// and finds unclean after.

const (
	hostileMountEntries = 5000             // the walk's bound
	hostileMountRead    = 1 << 20          // bytes read of each file at most
	hostileMountTimeout = 60 * time.Second // the whole phase
)

// hostileMountEnabled: FUSE is there (and not turned off by
// EXT4GO_HOSTILE_MOUNT=0).
var hostileMountEnabled = sync.OnceValues(func() (bool, string) {
	if os.Getenv("EXT4GO_HOSTILE_MOUNT") == "0" {
		return false, "EXT4GO_HOSTILE_MOUNT=0"
	}
	if os.Geteuid() != 0 {
		return false, "not root"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return false, "no /dev/fuse"
	}
	return true, ""
})

// hostileMount runs the mount phase on image (a copy of the corrupted
// image) and reports its outcome; failures go to fail.
func hostileMount(t *testing.T, image, victim string, fsckBefore int, fail func(class, format string, args ...any)) (outcome string) {
	fsys, err := ext4go.Open(image, &ext4go.Options{Writable: true})
	readOnly := false
	if err != nil {
		readOnly = true
		if fsys, err = ext4go.Open(image, nil); err != nil {
			return "refused"
		}
	}
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuffer
	srv, err := fusefs.Mount(fsys, dir, &fusefs.Options{UID: -1, GID: -1, ReadOnly: readOnly,
		DefaultPermissions: true, Logger: log.New(&logBuf, "", 0)})
	if err != nil {
		fsys.Close()
		fail("mount refused", "the library opened the image but fusefs.Mount failed: %v", err)
		return "refused"
	}
	var st unix.Stat_t
	conn := -1
	if unix.Stat(dir, &st) == nil {
		conn = int(unix.Minor(st.Dev))
	}
	done := make(chan []string, 1)
	go func() { done <- hostileMountOps(dir, victim, readOnly) }()
	var problems []string
	select {
	case problems = <-done:
	case <-time.After(hostileMountTimeout):
		fail("mount hang", "the kernel's calls through the mount did not end in %v; aborting the connection", hostileMountTimeout)
		if conn >= 0 {
			os.WriteFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/abort", conn), []byte("1"), 0)
		}
		<-done
	}
	if err := srv.Unmount(); err != nil {
		unix.Unmount(dir, unix.MNT_DETACH)
	}
	srv.Wait()
	if err := fsys.Close(); err != nil && !errors.Is(err, ext4go.ErrCorrupt) && !errors.Is(err, ext4go.ErrBusy) {
		t.Logf("mount phase: close: %v", err)
	}
	for _, p := range problems {
		fail("mount: untyped error", "%s", p)
	}
	if strings.Contains(logBuf.String(), "panic") {
		fail("mount: server panic", "%s", logBuf.String())
	}
	if readOnly {
		return "read-only"
	}
	after, out, err := hostileFsck(image)
	if err != nil {
		t.Fatalf("e2fsck after the mount: %v", err)
	}
	if fsckBefore == 0 && after != 0 {
		fail("mount: e2fsck clean before, unclean after", "e2fsck -fn exits %d after the mount's changes:\n%s", after, out)
	}
	return "writable"
}

// hostileMountOps walks the mount and changes it; it returns the errors
// that were no errno (every error through the kernel must be one).
func hostileMountOps(dir, victim string, readOnly bool) (problems []string) {
	check := func(op string, err error) {
		if err == nil || errors.Is(err, fs.SkipDir) {
			return
		}
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			problems = append(problems, fmt.Sprintf("%s: %T: %v", op, err, err))
		}
	}
	n := 0
	buf := make([]byte, 64<<10)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		check("walk "+p, err)
		if n++; n > hostileMountEntries {
			return fs.SkipAll
		}
		if err != nil {
			return nil
		}
		fi, err := os.Lstat(p)
		check("lstat "+p, err)
		if err != nil {
			return nil
		}
		_, err = unix.Llistxattr(p, buf)
		if !errors.Is(err, unix.ERANGE) {
			check("listxattr "+p, err)
		}
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			check("open "+p, err)
			if err == nil {
				_, err = io.CopyBuffer(io.Discard, io.LimitReader(f, hostileMountRead), buf)
				check("read "+p, err)
				f.Close()
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			_, err := os.Readlink(p)
			check("readlink "+p, err)
		}
		return nil
	})
	if readOnly {
		return problems
	}
	data := bytes.Repeat([]byte("hostile "), 1280)
	check("create", os.WriteFile(filepath.Join(dir, "hostile-new"), data, 0o644))
	check("mkdir", os.Mkdir(filepath.Join(dir, "hostile-dir"), 0o755))
	check("rename", os.Rename(filepath.Join(dir, "hostile-new"), filepath.Join(dir, "hostile-dir", "new")))
	if victim != "" {
		v := filepath.Join(dir, victim)
		if fi, err := os.Lstat(v); err == nil && fi.Mode().IsRegular() {
			f, err := os.OpenFile(v, os.O_WRONLY|os.O_APPEND, 0)
			check("open victim for append", err)
			if err == nil {
				_, err = f.Write(data[:100])
				check("append to victim", err)
				check("fsync victim", f.Sync())
				f.Close()
			}
		}
		if fi, err := os.Lstat(v); err == nil && !fi.IsDir() {
			check("remove victim", os.Remove(v))
		}
	}
	check("remove", os.Remove(filepath.Join(dir, "hostile-dir", "new")))
	check("rmdir", os.Remove(filepath.Join(dir, "hostile-dir")))
	return problems
}

// syncBuffer is a bytes.Buffer for a logger written by many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
