//go:build linux

package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// shmRoot is where SourceDir puts trees when it is a usable tmpfs.
const shmRoot = "/dev/shm"

// srcPrefix starts every SourceDir directory's name, followed by the pid.
const srcPrefix = "ext4go-src-"

var shm struct {
	once sync.Once
	ok   bool
}

// SourceDir returns a new empty directory for a generated source tree,
// removed when the test ends. It is on tmpfs (/dev/shm) when that is
// available and supports everything GenTree needs (user/trusted/security
// xattrs, POSIX ACLs, nanosecond times to 2446, SEEK_DATA): creating
// thousands of files there is far faster than on a disk filesystem. Else it
// is t.TempDir(). Directories left by killed test processes are removed on
// first use.
func SourceDir(t testing.TB) string {
	t.Helper()
	shm.once.Do(func() {
		shm.ok = probeShm()
		if shm.ok {
			sweepSources()
		}
	})
	if shm.ok {
		d, err := os.MkdirTemp(shmRoot, fmt.Sprintf("%s%d-", srcPrefix, os.Getpid()))
		if err == nil {
			t.Cleanup(func() {
				if err := os.RemoveAll(d); err != nil {
					t.Errorf("testutil: %v", err)
				}
			})
			return d
		}
	}
	return t.TempDir()
}

func probeShm() bool {
	var st unix.Statfs_t
	if unix.Statfs(shmRoot, &st) != nil || st.Type != unix.TMPFS_MAGIC {
		return false
	}
	d, err := os.MkdirTemp(shmRoot, fmt.Sprintf("%s%d-probe-", srcPrefix, os.Getpid()))
	if err != nil {
		return false
	}
	defer os.RemoveAll(d)
	p := filepath.Join(d, "f")
	if os.WriteFile(p, nil, 0o600) != nil {
		return false
	}
	for _, name := range []string{"user.probe", "trusted.probe", "security.probe"} {
		if unix.Lsetxattr(p, name, make([]byte, 3000), 0) != nil {
			return false
		}
	}
	return true
}

// sweepSources removes SourceDir directories of processes that are gone.
func sweepSources() {
	ents, err := os.ReadDir(shmRoot)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), srcPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		if pid, err := strconv.Atoi(pidStr); err == nil && pid > 0 && !processAlive(pid) {
			os.RemoveAll(filepath.Join(shmRoot, e.Name()))
		}
	}
}
