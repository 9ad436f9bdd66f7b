//go:build (linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)) || darwin || freebsd

package fusefs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/ext4go/ext4go"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// The capabilities the server asks its callers about
// (linux/capability.h).
const (
	capFSetID   = 4  // keep set-ID bits when changing a file
	capSysAdmin = 21 // among much else, the trusted.* attributes
)

// callerCapable reports whether h's caller holds capability cp as the
// kernel's capable() asks: in its effective set, in the initial user
// namespace (the root of a namespace of its own has every capability in
// it and none outside). A request names its caller's thread, uid and gid,
// not its capabilities: they are read from /proc/<pid>/status. Where
// /proc cannot say (a caller in a pid namespace the server does not see
// comes with pid 0; a server that is not root may not read another user's
// namespace), uid 0 counts as capable, as FUSE servers without /proc
// judge privilege. What /proc shows is the thread's own credentials: a
// kernel service that acts for a thread with credentials of its own
// (overlayfs copying up, say) is judged by the thread's.
func callerCapable(h *fuse.InHeader, cp uint) bool {
	capEff, ok := procStatus(h.Pid, "CapEff:")
	if !ok {
		return h.Uid == 0
	}
	caps, err := strconv.ParseUint(capEff, 16, 64)
	if err != nil || caps&(1<<cp) == 0 {
		return false
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/user", h.Pid))
	if err != nil {
		return h.Uid == 0
	}
	return ns == initUserNS
}

// killSetID is what a request that changes a file's data says of its
// caller's CAP_FSETID, without which the change drops the setuid and
// setgid bits (kernel: setattr_should_drop_suidgid).
type killSetID uint8

// killFlag is the killSetID of a request's kill flag.
func killFlag(set bool) killSetID {
	if set {
		return kernelSaysKill
	}
	return kernelSaysKeep
}

// changingHandle returns handle fh for a request of h that changes its
// file's data, once the file's privileges are dropped as that change by
// h's caller drops them (removePrivs). Every such request on a handle
// (WRITE, FALLOCATE, COPY_FILE_RANGE's destination) gets its File here,
// so that none changes data and keeps them.
func (r *rawFS) changingHandle(fh uint64, h *fuse.InHeader, nodeID uint64, k killSetID) (*ext4go.File, fuse.Status) {
	f, st := r.handle(fh)
	if !st.Ok() {
		return nil, st
	}
	if err := r.removePrivs(f, h, nodeID, k); err != nil {
		return nil, status(err)
	}
	return f, fuse.OK
}

// removePrivs drops f's privileges before a change of its data by h's
// caller, as the kernel's file_remove_privs does (File.KillPriv): the file
// capability always, the setuid and setgid bits unless the caller has
// CAP_FSETID. With handle_killpriv_v2 the kernel leaves all of it to the
// server. If f's mode changed, the kernel is told its cached attributes of
// node nodeID (f's) are stale: the reply to the request carries none.
// Requests that change data without a handle (an O_TRUNC open, a
// truncating SETATTR) call it themselves; the others go through
// changingHandle.
func (r *rawFS) removePrivs(f *ext4go.File, h *fuse.InHeader, nodeID uint64, k killSetID) error {
	suidgid := k == kernelSaysKill
	if k == callerUnknown {
		// The caller is looked up only when there are bits to drop.
		if s, err := statOf(f); err == nil && s.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			suidgid = !callerCapable(h, capFSetID)
		}
	}
	changed, err := f.KillPriv(suidgid, inGroupOrCapable(h))
	if changed {
		r.invalidateAttr(nodeID) // before the reply: the next stat asks
	}
	return err
}

// callerIn returns whether h's caller is in a group: its gid, or one of
// its supplementary groups (read from /proc; a caller that cannot be read
// counts as in it, so that nothing is dropped on a guess).
func callerIn(h *fuse.InHeader) func(gid uint32) bool {
	return func(gid uint32) bool {
		if h.Gid == gid {
			return true
		}
		groups, ok := procStatus(h.Pid, "Groups:")
		if !ok {
			return true
		}
		for _, g := range strings.Fields(groups) {
			if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) == gid {
				return true
			}
		}
		return false
	}
}

// inGroupOrCapable returns whether h's caller is in a group or holds
// CAP_FSETID, either of which keeps the setgid bit of a file of that
// group that is not group-executable (kernel: in_group_or_capable).
func inGroupOrCapable(h *fuse.InHeader) func(gid uint32) bool {
	in := callerIn(h)
	return func(gid uint32) bool { return in(gid) || callerCapable(h, capFSetID) }
}

// procStatus returns the value of a line of /proc/PID/status ("Groups:",
// "CapEff:"); ok is false when it cannot be read.
func procStatus(pid uint32, key string) (value string, ok bool) {
	if pid == 0 {
		return "", false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, found := strings.CutPrefix(line, key); found {
			return strings.TrimSpace(rest), true
		}
	}
	return "", false
}
