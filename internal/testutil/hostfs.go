//go:build linux

package testutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostFS is os.DirFS without the UTF-8 rule: fs.ValidPath rejects names
// that are not valid UTF-8, but ext4 (and the "odd" preset) has them, and
// the want side of a comparison must reach every file. Paths are still
// slash-separated and unrooted, without "", "." or ".." elements or NUL.
type hostFS string

var (
	_ fs.ReadDirFS  = hostFS("")
	_ fs.ReadLinkFS = hostFS("")
	_ fs.StatFS     = hostFS("")
)

func (h hostFS) join(op, name string) (string, error) {
	if name == "." {
		return string(h), nil
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	for _, e := range strings.Split(name, "/") {
		if e == "" || e == "." || e == ".." {
			return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
		}
	}
	return string(h) + "/" + name, nil
}

func (h hostFS) Open(name string) (fs.File, error) {
	p, err := h.join("open", name)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

func (h hostFS) ReadDir(name string) ([]fs.DirEntry, error) {
	p, err := h.join("readdir", name)
	if err != nil {
		return nil, err
	}
	return os.ReadDir(p) // sorted by name
}

func (h hostFS) Stat(name string) (fs.FileInfo, error) {
	p, err := h.join("stat", name)
	if err != nil {
		return nil, err
	}
	return os.Stat(p)
}

func (h hostFS) Lstat(name string) (fs.FileInfo, error) {
	p, err := h.join("lstat", name)
	if err != nil {
		return nil, err
	}
	return os.Lstat(p)
}

func (h hostFS) ReadLink(name string) (string, error) {
	p, err := h.join("readlink", name)
	if err != nil {
		return "", err
	}
	return os.Readlink(p)
}

// HostMeta returns the metadata of the host file at path (not following a
// final symlink): what the kernel reports through lstat and llistxattr.
func HostMeta(path string) (Meta, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return Meta{}, err
	}
	m, ok := statMeta(fi)
	if !ok {
		return Meta{}, errors.New("testutil: no syscall.Stat_t for " + path)
	}
	if err := exactTimes(&m, path); err != nil {
		return Meta{}, err
	}
	m.Xattrs, err = hostXattrs(path)
	return m, err
}

// exactTimes reads the times of the host file at path (not following a
// final symlink) again with statx(2) into m. struct stat holds 32-bit
// seconds on 32-bit platforms (386, arm), where the kernel cuts times past
// 2038 to fit; and os.Lstat makes lstat(2) where the platform has it
// (s390x), which qemu-user answers for s390x without the nanoseconds.
// statx has them all everywhere.
func exactTimes(m *Meta, path string) error {
	var err error
	m.Atime, m.Mtime, err = HostTimes(path)
	return err
}

// HostTimes returns the access and modification times of the host file
// at path (not following a final symlink), whole on every platform (see
// exactTimes).
func HostTimes(path string) (atime, mtime time.Time, err error) {
	var sx unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_ATIME|unix.STATX_MTIME, &sx); err != nil {
		return time.Time{}, time.Time{}, &fs.PathError{Op: "statx", Path: path, Err: err}
	}
	return time.Unix(sx.Atime.Sec, int64(sx.Atime.Nsec)), time.Unix(sx.Mtime.Sec, int64(sx.Mtime.Nsec)), nil
}

// statMeta takes everything but xattrs from a host FileInfo (see
// exactTimes for its times).
func statMeta(fi fs.FileInfo) (Meta, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Meta{}, false
	}
	return Meta{
		Ino:   st.Ino,
		Nlink: uint64(st.Nlink),
		Uid:   st.Uid,
		Gid:   st.Gid,
		Major: unix.Major(st.Rdev),
		Minor: unix.Minor(st.Rdev),
		Mtime: time.Unix(st.Mtim.Unix()),
		Atime: time.Unix(st.Atim.Unix()),
	}, true
}

// hostXattrs lists and reads all xattrs of path (not following symlinks).
// The result is non-nil even when there are none.
func hostXattrs(path string) (map[string][]byte, error) {
	out := map[string][]byte{}
	var names []byte
	for size := 256; ; size *= 4 {
		buf := make([]byte, size)
		n, err := unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) && size < 1<<20 {
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return out, nil
		}
		if err != nil {
			return nil, &fs.PathError{Op: "llistxattr", Path: path, Err: err}
		}
		names = buf[:n]
		break
	}
	for _, name := range strings.Split(string(names), "\x00") {
		if name == "" {
			continue
		}
		for size := 256; ; size *= 4 {
			buf := make([]byte, size)
			n, err := unix.Lgetxattr(path, name, buf)
			if errors.Is(err, unix.ERANGE) && size < 1<<20 {
				continue
			}
			if errors.Is(err, unix.ENODATA) { // removed meanwhile
				break
			}
			if err != nil {
				return nil, &fs.PathError{Op: "lgetxattr " + name, Path: path, Err: err}
			}
			out[name] = buf[:n]
			break
		}
	}
	return out, nil
}

// HostXattrs returns all xattrs of host path (not following symlinks).
func HostXattrs(t testing.TB, path string) map[string][]byte {
	t.Helper()
	m, err := hostXattrs(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var statNanos struct {
	once   sync.Once
	drops  bool
	reason string
}

// StatDropsNanoseconds reports whether fstat(2) and lstat(2), as this
// process makes them, lose the nanoseconds of a file's times: qemu-user
// answers them so for s390x. Code that reads host times with them (the
// library's builder does, with fstat) then gets whole seconds, and a test
// comparing those with the source compares seconds only there.
func StatDropsNanoseconds() (bool, string) {
	statNanos.once.Do(func() {
		f, err := os.CreateTemp("", "ext4go-nanos-")
		if err != nil {
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		ts := []unix.Timespec{unix.NsecToTimespec(1600000000123456789), unix.NsecToTimespec(1600000000123456789)}
		if unix.UtimesNanoAt(unix.AT_FDCWD, f.Name(), ts, 0) != nil {
			return
		}
		var fst, lst unix.Stat_t
		if unix.Fstat(int(f.Fd()), &fst) != nil || unix.Lstat(f.Name(), &lst) != nil {
			return
		}
		if fst.Mtim.Nano() != ts[1].Nano() || lst.Mtim.Nano() != ts[1].Nano() {
			statNanos.drops = true
			statNanos.reason = fmt.Sprintf("fstat/lstat here report %d and %d ns for a file's mtime set to %d (qemu-user for s390x drops them)",
				fst.Mtim.Nano(), lst.Mtim.Nano(), ts[1].Nano())
		}
	})
	return statNanos.drops, statNanos.reason
}

// Lutimes sets the access and modification times of the host file at
// path, not following a final symlink, to the nanosecond, for any time
// ext4 stores (1901 to 2446; not through UnixNano, which overflows after
// 2262). Where the platform's timespec has 32-bit seconds (386, arm: Go
// makes the 32-bit system calls there) touch(1), built with 64-bit time,
// sets the times it cannot hold.
func Lutimes(path string, atime, mtime time.Time) error {
	a, errA := unix.TimeToTimespec(atime)
	m, errM := unix.TimeToTimespec(mtime)
	if errA == nil && errM == nil {
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, path, []unix.Timespec{a, m}, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &fs.PathError{Op: "utimensat", Path: path, Err: err}
		}
		return nil
	}
	for _, set := range []struct {
		flag string
		t    time.Time
	}{{"-a", atime}, {"-m", mtime}} {
		out, err := exec.Command("touch", "-h", set.flag, "-d", "@"+decimalSeconds(set.t), path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("touch -h %s -d @%s %s: %v: %s", set.flag, decimalSeconds(set.t), path, err, out)
		}
	}
	return nil
}

// decimalSeconds writes t as seconds since the epoch with nine decimals,
// as touch -d @SECONDS reads them: -1.5 is half a second before -1.
func decimalSeconds(t time.Time) string {
	sec, nsec := t.Unix(), t.Nanosecond()
	if sec < 0 && nsec > 0 {
		return fmt.Sprintf("-%d.%09d", -(sec + 1), 1e9-nsec)
	}
	return fmt.Sprintf("%d.%09d", sec, nsec)
}
