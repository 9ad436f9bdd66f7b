//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// identity is whom the privilege helper runs as.
type identity struct {
	name     string
	uid, gid uint32
	groups   []uint32
	// noCaps: uid 0 with an empty effective capability set (no
	// CAP_FSETID, CAP_SYS_ADMIN, CAP_DAC_OVERRIDE...).
	noCaps bool
	// userNS: root of a user namespace of its own, ids 0-65535 mapped
	// to the same outside: every capability there, none outside.
	userNS bool
}

var (
	rootUser   = identity{name: "root"}
	rootNoCaps = identity{name: "root without capabilities", noCaps: true}
	userNSRoot = identity{name: "root of a user namespace", userNS: true}
	// member is in the group (privGroup) of the files the tests make.
	member   = identity{name: "group member", uid: 1234, gid: 1234, groups: []uint32{privGroup}}
	stranger = identity{name: "stranger", uid: 2345, gid: 2345}
)

// privGroup owns the files whose privileges the tests try to keep.
const privGroup = 2000

// privOp is one system call, or open and call, of the privilege helper.
// Paths are relative to the directory the helper is given.
type privOp struct {
	Op    string // write, open, truncate, ftruncate, fallocate, copy_in, copy_out, copy_self, chown, chmod, setxattr, getxattr, listxattr, removexattr
	Path  string
	Other string // copy_in's source, copy_out's destination
	Flags int    // open flags (write, open); fallocate's mode; setxattr's flags
	Off   int64
	Len   int64 // bytes to write, copy or allocate; truncate's size
	Mode  uint32
	UID   int
	GID   int
	Name  string
	Value []byte
}

// privResult is what a privOp gave: the call that failed (open, or the
// op) and its errno, the count it returned (bytes, an xattr's size), the
// names listed.
type privResult struct {
	Failed string        `json:",omitempty"`
	Errno  syscall.Errno `json:",omitempty"`
	N      int64         `json:",omitempty"`
	Names  []string      `json:",omitempty"`
}

func (r privResult) String() string {
	s := "ok"
	if r.Errno != 0 {
		s = r.Failed + ": " + unix.ErrnoName(r.Errno)
	}
	if r.N != 0 {
		s += fmt.Sprintf(" n=%d", r.N)
	}
	if r.Names != nil {
		s += " [" + strings.Join(r.Names, " ") + "]"
	}
	return s
}

// helperBinary is a copy of this test binary that any user may run (the
// go tool builds it in a directory only root may enter).
var helperBinary struct {
	once sync.Once
	path string
	err  error
}

func privHelper(t *testing.T) string {
	t.Helper()
	helperBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "fusefs-priv-helper-")
		if err != nil {
			helperBinary.err = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			helperBinary.err = err
			return
		}
		self, err := os.ReadFile(os.Args[0])
		if err != nil {
			helperBinary.err = err
			return
		}
		helperBinary.path = filepath.Join(dir, "fusefs.test")
		helperBinary.err = os.WriteFile(helperBinary.path, self, 0o755)
	})
	if helperBinary.err != nil {
		t.Fatalf("privilege helper: %v", helperBinary.err)
	}
	return helperBinary.path
}

// TestMain removes the helper's copy of the binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if helperBinary.path != "" {
		os.RemoveAll(filepath.Dir(helperBinary.path))
	}
	os.Exit(code)
}

// runAs runs ops in dir as id, in a child process (TestHelperPrivOps),
// and returns their results. The child gets dir as an open descriptor
// and changes into it, so that it needs no search permission on the
// directories above (the test's temporary directory is root's alone), and
// so that no process this one forks touches the mount before its exec
// (see run).
func runAs(t *testing.T, dir string, id identity, ops []privOp) []privResult {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	in, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(privHelper(t), "-test.run=^TestHelperPrivOps$")
	cmd.Dir = filepath.Dir(cmd.Path)
	cmd.Env = append(os.Environ(), "FUSEFS_PRIV_HELPER=1")
	if id.noCaps {
		cmd.Env = append(cmd.Env, "FUSEFS_PRIV_HELPER_NOCAPS=1")
	}
	cmd.ExtraFiles = []*os.File{d} // fd 3
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if id.userNS {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 65536}}
	} else if id.uid != 0 || id.gid != 0 || id.groups != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("privilege helper as %s: %v\n%s", id.name, err, stderr.String())
	}
	_, js, found := bytes.Cut(out, []byte("RESULTS "))
	var res []privResult
	if !found {
		t.Fatalf("privilege helper as %s printed no results:\n%s\n%s", id.name, out, stderr.String())
	}
	if err := json.Unmarshal(js, &res); err != nil || len(res) != len(ops) {
		t.Fatalf("privilege helper as %s: %d results for %d ops, %v", id.name, len(res), len(ops), err)
	}
	return res
}

// TestHelperPrivOps is runAs's child; run by the tests that need it
// (FUSEFS_PRIV_HELPER set), it returns at once otherwise.
func TestHelperPrivOps(t *testing.T) {
	if os.Getenv("FUSEFS_PRIV_HELPER") == "" {
		return
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Capabilities are a thread's own: every call below is made by this
	// thread, so the server reads its capabilities from /proc/<tid>.
	runtime.LockOSThread()
	if os.Getenv("FUSEFS_PRIV_HELPER_NOCAPS") != "" {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			fail(err)
		}
		data[0].Effective, data[1].Effective = 0, 0
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			fail(err)
		}
	}
	if err := unix.Fchdir(3); err != nil {
		fail(err)
	}
	var ops []privOp
	b, err := io.ReadAll(os.Stdin)
	if err == nil {
		err = json.Unmarshal(b, &ops)
	}
	if err != nil {
		fail(err)
	}
	res := make([]privResult, len(ops))
	for i, op := range ops {
		res[i] = op.do()
	}
	out, err := json.Marshal(res)
	if err != nil {
		fail(err)
	}
	os.Stdout.Write(append([]byte("RESULTS "), out...))
	os.Exit(0)
}

// do makes the call, opening what it needs first.
func (op privOp) do() privResult {
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	var openErr *privResult
	open := func(path string, flags int) int {
		if openErr != nil {
			return -1
		}
		fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0)
		if err != nil {
			openErr = &privResult{Failed: "open " + path, Errno: errno(err)}
			return -1
		}
		fds = append(fds, fd)
		return fd
	}
	// call runs fn once the files it needs are open.
	call := func(fn func() (int, error)) (int, error) {
		if openErr != nil {
			return 0, nil
		}
		return fn()
	}
	var r privResult
	var n int
	var err error
	switch op.Op {
	case "write":
		fd := open(op.Path, op.Flags)
		data := bytes.Repeat([]byte("w"), int(op.Len))
		n, err = call(func() (int, error) {
			if op.Flags&unix.O_APPEND != 0 {
				return unix.Write(fd, data)
			}
			return unix.Pwrite(fd, data, op.Off)
		})
	case "open":
		open(op.Path, op.Flags)
	case "truncate":
		err = unix.Truncate(op.Path, op.Len)
	case "ftruncate":
		fd := open(op.Path, unix.O_WRONLY)
		_, err = call(func() (int, error) { return 0, unix.Ftruncate(fd, op.Len) })
	case "fallocate":
		fd := open(op.Path, unix.O_RDWR)
		_, err = call(func() (int, error) { return 0, unix.Fallocate(fd, uint32(op.Flags), op.Off, op.Len) })
	case "copy_in", "copy_out", "copy_self":
		var in, out int
		switch op.Op {
		case "copy_in":
			in, out = open(op.Other, unix.O_RDONLY), open(op.Path, unix.O_WRONLY)
		case "copy_out":
			in, out = open(op.Path, unix.O_RDONLY), open(op.Other, unix.O_WRONLY)
		default:
			in = open(op.Path, unix.O_RDWR)
			out = in
		}
		offIn, offOut := int64(0), op.Off
		n, err = call(func() (int, error) { return unix.CopyFileRange(in, &offIn, out, &offOut, int(op.Len), 0) })
	case "chown":
		err = unix.Lchown(op.Path, op.UID, op.GID)
	case "chmod":
		err = unix.Chmod(op.Path, op.Mode)
	case "setxattr":
		err = unix.Setxattr(op.Path, op.Name, op.Value, op.Flags)
	case "getxattr":
		n, err = unix.Getxattr(op.Path, op.Name, make([]byte, 4096))
	case "removexattr":
		err = unix.Removexattr(op.Path, op.Name)
	case "listxattr":
		buf := make([]byte, 4096)
		if n, err = unix.Listxattr(op.Path, buf); err == nil {
			r.Names = xattrNames(buf[:n])
			n = 0
		}
	default:
		return privResult{Failed: "unknown op " + op.Op, Errno: unix.ENOSYS}
	}
	switch {
	case openErr != nil:
		return *openErr
	case err != nil:
		return privResult{Failed: op.Op, Errno: errno(err)}
	}
	r.N = int64(n)
	return r
}

// xattrNames splits a listxattr buffer into sorted names.
func xattrNames(b []byte) []string {
	names := []string{}
	for _, s := range strings.Split(string(b), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// fileCapability is a VFS_CAP_REVISION_2 security.capability value
// (cap_net_raw+ep), the kind setcap writes.
func fileCapability() []byte {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1) // revision 2, effective
	binary.LittleEndian.PutUint32(b[4:], 1<<13)        // permitted: CAP_NET_RAW
	return b
}

// privFile is a file the tests try to keep privileged: 8 KiB of data,
// owned by root and privGroup, with mode and, with withCap, a file
// capability, and any other xattrs given.
func privFile(t *testing.T, path string, mode uint32, withCap bool, xattrs ...string) {
	t.Helper()
	if err := os.WriteFile(path, bytes.Repeat([]byte("p"), 8192), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 0, privGroup); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	if withCap {
		if err := unix.Setxattr(path, "security.capability", fileCapability(), 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range xattrs {
		if err := unix.Setxattr(path, x, []byte("v"), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// fileState is what a change may have taken from a file: its mode bits
// (permission and set-ID), owner, size and xattr names, as root sees them.
type fileState struct {
	Mode     uint32
	UID, GID uint32
	Size     int64
	Xattrs   []string
}

func (s fileState) String() string {
	return fmt.Sprintf("mode %04o owner %d:%d size %d xattrs %v", s.Mode, s.UID, s.GID, s.Size, s.Xattrs)
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(path, buf)
	if err != nil && !errors.Is(err, unix.ENOTSUP) {
		t.Fatal(err)
	}
	return fileState{Mode: st.Mode & 0o7777, UID: st.Uid, GID: st.Gid, Size: st.Size, Xattrs: xattrNames(buf[:max(n, 0)])}
}
