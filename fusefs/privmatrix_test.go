//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ext4go/ext4go/fusefs"
	"github.com/ext4go/ext4go/internal/testutil"
)

// matrixChanges are the ways of changing a set-ID file's data, owner,
// mode or capability the permission matrix tries: each on a file of its
// own, made by root (root:privGroup, 8 KiB, a file capability).
var matrixChanges = []struct {
	name string
	op   privOp
}{
	{"write", privOp{Op: "write", Flags: unix.O_WRONLY, Len: 1}},
	{"write-rdwr", privOp{Op: "write", Flags: unix.O_RDWR, Off: 100, Len: 1}},
	{"append", privOp{Op: "write", Flags: unix.O_WRONLY | unix.O_APPEND, Len: 1}},
	{"write-empty", privOp{Op: "write", Flags: unix.O_WRONLY}},
	{"write-past-end", privOp{Op: "write", Flags: unix.O_WRONLY, Off: 1 << 20, Len: 1}},
	{"open-trunc", privOp{Op: "open", Flags: unix.O_WRONLY | unix.O_TRUNC}},
	{"open-rdwr", privOp{Op: "open", Flags: unix.O_RDWR}},
	{"truncate", privOp{Op: "truncate", Len: 100}},
	{"truncate-same", privOp{Op: "truncate", Len: 8192}},
	{"truncate-up", privOp{Op: "truncate", Len: 1 << 20}},
	{"ftruncate", privOp{Op: "ftruncate", Len: 100}},
	{"fallocate", privOp{Op: "fallocate", Off: 8192, Len: 4096}},
	{"fallocate-keep", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_KEEP_SIZE, Off: 8192, Len: 4096}},
	{"punch", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, Len: 4096}},
	{"punch-no-keep", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_PUNCH_HOLE, Len: 4096}},
	{"zero", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_ZERO_RANGE, Len: 4096}},
	{"zero-keep", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_ZERO_RANGE | unix.FALLOC_FL_KEEP_SIZE, Off: 4096, Len: 8192}},
	{"collapse", privOp{Op: "fallocate", Flags: unix.FALLOC_FL_COLLAPSE_RANGE, Len: 4096}},
	{"copy-in", privOp{Op: "copy_in", Other: "src", Off: 100, Len: 100}},
	{"copy-in-past-end", privOp{Op: "copy_in", Other: "src", Off: 16384, Len: 100}},
	{"copy-in-empty", privOp{Op: "copy_in", Other: "src"}},
	{"copy-out", privOp{Op: "copy_out", Len: 100}}, // into a file of its own (.sink)
	{"copy-self", privOp{Op: "copy_self", Off: 4096, Len: 100}},
	{"chown-same", privOp{Op: "chown", UID: 0, GID: privGroup}},
	{"chown-none", privOp{Op: "chown", UID: -1, GID: -1}},
	{"chgrp-own", privOp{Op: "chown", UID: -1, GID: 1234}},
	{"chmod-same", privOp{Op: "chmod"}}, // Mode: the file's own
	{"setcap", privOp{Op: "setxattr", Name: "security.capability", Value: fileCapability()}},
	{"removecap", privOp{Op: "removexattr", Name: "security.capability"}},
}

// matrixModes are the modes of the files changed: group-executable (the
// setgid bit means "run as the group") and not (it stays for a member),
// writable by the group only and by everyone. The long matrix
// (EXT4GO_TEST_PRIV_MATRIX=long) adds one bit alone of each kind, files
// only the owner may write, and the sticky bit.
func matrixModes() []uint32 {
	if os.Getenv("EXT4GO_TEST_PRIV_MATRIX") == "long" {
		return []uint32{0o6775, 0o6767, 0o4777, 0o2777, 0o2767, 0o4755, 0o2745, 0o7777, 0o0777}
	}
	return []uint32{0o6775, 0o6767}
}

// matrixXattrOps read and write trusted.* and user.* attributes of a file
// that has trusted.t, user.u and a file capability.
var matrixXattrOps = []privOp{
	{Op: "listxattr"},
	{Op: "getxattr", Name: "trusted.t"},
	{Op: "getxattr", Name: "user.u"},
	{Op: "getxattr", Name: "security.capability"},
	{Op: "setxattr", Name: "trusted.n", Value: []byte("v")},
	{Op: "setxattr", Name: "user.n", Value: []byte("v")},
	{Op: "removexattr", Name: "trusted.t"},
	{Op: "removexattr", Name: "user.u"},
}

// matrixMount is one of the mounts the matrix runs on.
type matrixMount struct {
	name string
	dir  string
	// callers are those let in: a mount without allow_other lets in its
	// owner's uid alone (kernel: fuse_allow_current_process).
	callers []identity
}

// matrixCase is one try: a caller's op on a file of its own.
type matrixCase struct {
	caller identity
	file   string
	mode   uint32 // of the file before, but for the xattr cases
	desc   string
	op     privOp
}

// matrixOutcome is what a case gave: the call's result and what was left
// of the file.
type matrixOutcome struct {
	result privResult
	state  fileState
}

func (o matrixOutcome) String() string { return o.result.String() + "; " + o.state.String() }

// intendedDifference returns why the outcome got of case c on an ext4go
// mount may differ from the kernel's, want, or "" if it may not. These
// are the differences meant:
//
//   - FALLOC_FL_COLLAPSE_RANGE fails with EOPNOTSUPP and changes nothing:
//     FUSE carries no such fallocate (fuse_file_fallocate refuses every
//     mode but keep size, punch hole and zero range before asking the
//     server).
//   - chown(path, -1, -1) leaves the setuid and setgid bits: the kernel's
//     chown_common asks to drop them whatever the ids, but FUSE, with the
//     server handling killpriv, takes the kill bits (and the mode change
//     they bring) out of the setattr (fuse_setattr) and sends an empty
//     SETATTR the server cannot tell from others. For a caller who does
//     not own the file, the kernel's ext4 refuses that mode change with
//     EPERM; through FUSE the chown succeeds, and the kernel removes the
//     file capability itself (setattr_prepare's security_inode_killpriv).
//   - Without default_permissions the server checks no permissions (the
//     kernel lets the mounting user alone in, who owns the image and the
//     server anyway): root without capabilities may give a file a group
//     it is not in, and chmod keeps a setgid bit for it (the kernel's
//     setattr_prepare, skipped for such a mount, drops it).
//   - The root of a user namespace loses the setgid bit of a file that is
//     not group-executable and whose group it is not in, where the kernel
//     keeps it: it holds CAP_FSETID over the files whose ids its
//     namespace maps (in_group_or_capable, capable_wrt_inode_uidgid),
//     while the server counts only capabilities in the initial namespace
//     (callerCapable). Dropping is the safe side.
func intendedDifference(mount string, c matrixCase, got, want matrixOutcome) string {
	unchanged := func(o matrixOutcome) bool {
		return o.state.Mode == c.mode && o.state.Size == 8192 && slices.Contains(o.state.Xattrs, "security.capability")
	}
	sameBut := func(mode uint32) bool {
		g := got
		g.state.Mode = mode
		return g.String() == want.String()
	}
	switch {
	case c.desc == fmt.Sprintf("%04o collapse", c.mode) &&
		got.result.Errno == unix.EOPNOTSUPP && unchanged(got):
		return "FUSE has no FALLOC_FL_COLLAPSE_RANGE"
	case strings.HasSuffix(c.desc, " chown-none") && got.result.Errno == 0 && got.state.Mode == c.mode:
		return "FUSE sends a chown that changes no id as an empty SETATTR"
	case mount == noDefaultPermissions && c.caller.name == rootNoCaps.name &&
		(strings.HasSuffix(c.desc, " chgrp-own") || strings.HasSuffix(c.desc, " chmod-same")):
		return "without default_permissions nobody checks permissions"
	case c.caller.name == userNSRoot.name && c.mode&0o2010 == 0o2000 &&
		want.state.Mode&0o2000 != 0 && sameBut(want.state.Mode):
		return "the server drops setgid for a user namespace's root"
	}
	return ""
}

// The ext4go mounts of the matrix.
const (
	withDefaultPermissions = "default_permissions"
	noDefaultPermissions   = "no default_permissions"
	// default_permissions with writeback_cache, or without it when the
	// tests run with it (EXT4GO_TEST_WRITEBACK).
	otherCaching = "default_permissions, the other caching"
)

// TestMountPermissionMatrix: as root, root without capabilities, the root
// of a user namespace, a member of the files' group and a stranger, every
// way of changing a setuid and setgid file (write, O_TRUNC, truncate,
// ftruncate, fallocate's modes, copy_file_range into, out of and within
// it, chown, chmod, setting and removing security.capability) and every
// read and write of trusted.* and user.* attributes gives, on an ext4go
// mount with default_permissions and allow_other, on one without both
// (root's callers only: nobody else is let in) and on one with the other
// caching (writeback_cache or not), the errno, mode, owner, size and
// xattrs it gives on the kernel's ext4 mount of the same image, except for
// the differences intendedDifference lists. It takes seconds; run it
// alone, as root, with
//
//	go test -run TestMountPermissionMatrix -v ./fusefs/
//
// (EXT4GO_TEST_PRIV_MATRIX=long for more modes).
func TestMountPermissionMatrix(t *testing.T) {
	requireFUSE(t)
	testutil.RequireMount(t)
	start := time.Now()
	image := filepath.Join(t.TempDir(), "img")
	testutil.Mke2fs(t, image, 64<<20, "-t", "ext4")
	b, err := os.ReadFile(image)
	if err != nil {
		t.Fatal(err)
	}
	copyOf := func(name string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	all := []identity{rootUser, rootNoCaps, userNSRoot, member, stranger}
	rootOnly := []identity{rootUser, rootNoCaps, userNSRoot}
	if err := userNamespaces(); err != nil {
		t.Logf("no user namespaces here (%v): not trying as %s", err, userNSRoot.name)
		all = slices.DeleteFunc(all, func(id identity) bool { return id.userNS })
		rootOnly = slices.DeleteFunc(rootOnly, func(id identity) bool { return id.userNS })
	}
	kernel := matrixMount{name: "kernel", dir: testutil.Mount(t, copyOf("kimg"), false), callers: all}
	dp, _, _ := mountWith(t, image, nil) // default_permissions, allow_other
	nodp, _, _ := mountWith(t, copyOf("nodp"), func(o *fusefs.Options) { o.DefaultPermissions, o.AllowOther = false, false })
	wb, _, _ := mountWith(t, copyOf("wb"), func(o *fusefs.Options) { o.WritebackCache = !writeback })
	mounts := []matrixMount{
		{name: withDefaultPermissions, dir: dp, callers: all},
		{name: noDefaultPermissions, dir: nodp, callers: rootOnly},
		// The kernel writes through its page cache, and drops the bits
		// itself before it (fuse_cache_write_iter).
		{name: otherCaching, dir: wb, callers: all},
	}

	var cases []matrixCase
	for _, id := range all {
		for _, mode := range matrixModes() {
			for _, c := range matrixChanges {
				file := fmt.Sprintf("%s-%04o-%s", short(id), mode, c.name)
				op := c.op
				switch op.Op {
				case "chmod":
					op.Mode = mode
				case "copy_out":
					op.Other = file + ".sink"
				}
				cases = append(cases, matrixCase{caller: id, file: file, mode: mode, desc: fmt.Sprintf("%04o %s", mode, c.name), op: op})
			}
		}
		for i, op := range matrixXattrOps {
			cases = append(cases, matrixCase{caller: id, file: fmt.Sprintf("%s-xattr-%d", short(id), i),
				desc: strings.TrimSpace(op.Op + " " + op.Name), op: op})
		}
	}
	outcomes := func(m matrixMount) map[string]matrixOutcome {
		setUpMatrix(t, m.dir, cases)
		got := map[string]matrixOutcome{}
		for _, id := range m.callers {
			var ops []privOp
			var mine []matrixCase
			for _, c := range cases {
				if c.caller.name == id.name {
					op := c.op
					op.Path = c.file
					ops = append(ops, op)
					mine = append(mine, c)
				}
			}
			for i, r := range runAs(t, m.dir, id, ops) {
				got[mine[i].file] = matrixOutcome{r, stateOf(t, filepath.Join(m.dir, mine[i].file))}
			}
		}
		return got
	}
	want := outcomes(kernel)
	tried, differences := 0, 0
	for _, m := range mounts {
		got := outcomes(m)
		for _, c := range cases {
			g, ok := got[c.file]
			if !ok {
				continue // a caller the mount does not let in
			}
			tried++
			w := want[c.file]
			if g.String() == w.String() {
				continue
			}
			differences++
			key := m.name + "/" + c.caller.name + "/" + c.desc
			if why := intendedDifference(m.name, c, g, w); why != "" {
				t.Logf("%s: %v, kernel %v (intended: %s)", key, g, w, why)
				continue
			}
			t.Errorf("%s:\n\text4go: %v\n\tkernel: %v", key, g, w)
		}
	}
	t.Logf("%d cases on %d ext4go mounts against the kernel's ext4: %d differ; %v", tried, len(mounts), differences, time.Since(start).Round(time.Millisecond))
}

// userNamespaces returns why a process cannot be started in a user
// namespace of its own, or nil if it can.
func userNamespaces() error {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	return cmd.Run()
}

// short is a caller's name in file names.
func short(id identity) string {
	switch id.name {
	case rootUser.name:
		return "root"
	case rootNoCaps.name:
		return "nocaps"
	case userNSRoot.name:
		return "nsroot"
	case member.name:
		return "member"
	}
	return "stranger"
}

// setUpMatrix makes the cases' files in dir, as root: src and sink for the
// copies, then for each case a privileged file (privFile) of the mode in
// its name, with trusted.t and user.u for the xattr cases.
func setUpMatrix(t *testing.T, dir string, cases []matrixCase) {
	t.Helper()
	privFile(t, filepath.Join(dir, "src"), 0o644, false)
	for _, c := range cases {
		path := filepath.Join(dir, c.file)
		if strings.Contains(c.file, "-xattr-") {
			privFile(t, path, 0o666, true, "trusted.t", "user.u")
			continue
		}
		privFile(t, path, c.mode, true)
		if c.op.Op == "copy_out" {
			sink := filepath.Join(dir, c.file+".sink")
			if err := os.WriteFile(sink, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(sink, 0o666); err != nil {
				t.Fatal(err)
			}
		}
	}
}
