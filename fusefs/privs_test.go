//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMountDataChangesDropSetID: a member of a root-owned program's group
// who changes its data through copy_file_range(2), fallocate, a punched
// hole or a zeroed range, through the mount, leaves it without its setuid
// bit, its setgid bit if group-executable, and its file capability (it
// could otherwise run what it wrote as root); a setgid file that is not
// group-executable keeps the bit for a member. Each case gives on the
// kernel's ext4 what it is asserted to give.
func TestMountDataChangesDropSetID(t *testing.T) {
	tw := newTwin(t, 32<<20, 0o755)
	cases := []struct {
		name string
		mode uint32
		op   privOp
		want uint32
	}{
		{"copy-suid", 0o4775, privOp{Op: "copy_in", Other: "src", Off: 100, Len: 1000}, 0o775},
		{"copy-sgid", 0o2775, privOp{Op: "copy_in", Other: "src", Off: 100, Len: 1000}, 0o775},
		{"copy-both", 0o6775, privOp{Op: "copy_in", Other: "src", Off: 8192, Len: 1000}, 0o775},
		{"copy-sgid-noexec", 0o2765, privOp{Op: "copy_in", Other: "src", Len: 1000}, 0o2765},
		{"alloc-suid", 0o4775, privOp{Op: "fallocate", Off: 8192, Len: 4096}, 0o775},
		{"keep-size-suid", 0o4775, privOp{Op: "fallocate", Flags: unix.FALLOC_FL_KEEP_SIZE, Off: 8192, Len: 4096}, 0o775},
		{"punch-suid", 0o6775, privOp{Op: "fallocate", Flags: unix.FALLOC_FL_PUNCH_HOLE | unix.FALLOC_FL_KEEP_SIZE, Len: 4096}, 0o775},
		{"zero-suid", 0o6775, privOp{Op: "fallocate", Flags: unix.FALLOC_FL_ZERO_RANGE, Len: 4096}, 0o775},
	}
	for _, root := range []string{tw.dir, tw.kmp} {
		privFile(t, filepath.Join(root, "src"), 0o644, false)
		var ops []privOp
		for _, c := range cases {
			privFile(t, filepath.Join(root, c.name), c.mode, true)
			op := c.op
			op.Path = c.name
			ops = append(ops, op)
		}
		res := runAs(t, root, member, ops)
		for i, c := range cases {
			if res[i].Errno != 0 {
				t.Errorf("%s: %s: %v", root, c.name, res[i])
			}
			st := stateOf(t, filepath.Join(root, c.name))
			if st.Mode != c.want || slices.Contains(st.Xattrs, "security.capability") {
				t.Errorf("%s: %s: %v; want mode %04o and no capability", root, c.name, st, c.want)
			}
		}
	}
}

// TestMountTrustedXattrsPrivileged: trusted.* attributes are a privileged
// caller's alone: an unprivileged one does not see them listed (kernel:
// ext4_xattr_trusted_list), reads none (ENODATA) and writes none (EPERM)
// (kernel: xattr_permission), on the mount as on the kernel's ext4; root
// lists and reads them.
func TestMountTrustedXattrsPrivileged(t *testing.T) {
	tw := newTwin(t, 32<<20, 0o755)
	ops := []privOp{
		{Op: "listxattr", Path: "f"},
		{Op: "getxattr", Path: "f", Name: "trusted.t"},
		{Op: "getxattr", Path: "f", Name: "user.u"},
		{Op: "setxattr", Path: "f", Name: "trusted.new", Value: []byte("v")},
		{Op: "removexattr", Path: "f", Name: "trusted.t"},
	}
	want := map[string][]string{
		member.name:   {"ok [user.u]", "getxattr: ENODATA", "ok n=1", "setxattr: EPERM", "removexattr: EPERM"},
		rootUser.name: {"ok [trusted.t user.u]", "ok n=1", "ok n=1", "ok", "ok"},
	}
	for _, root := range []string{tw.dir, tw.kmp} {
		for _, id := range []identity{member, rootUser} {
			name := filepath.Join(root, "f")
			privFile(t, name, 0o666, false, "trusted.t", "user.u")
			for i, r := range runAs(t, root, id, ops) {
				if got := r.String(); got != want[id.name][i] {
					t.Errorf("%s as %s: %s %s: %s, want %s", root, id.name, ops[i].Op, ops[i].Name, got, want[id.name][i])
				}
			}
		}
	}
}
