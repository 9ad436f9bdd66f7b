//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package fusefs_test

import (
	"os/exec"
	"testing"

	"github.com/ext4go/ext4go/internal/testutil"
)

// aclSteps are shell steps (run with umask 022 in the mount's root) that
// set, inherit, change and enforce POSIX ACLs; user 1234 and group 4321
// are strangers with ACL entries, user 2000 one without.
var aclSteps = []string{
	"mkdir d && setfacl -d -m u:1234:rwx,g:4321:r-x,o::- d",
	"touch d/f && getfacl -n d/f",
	"mkdir d/sub && getfacl -n d/sub",
	"mkfifo d/fifo && getfacl -n d/fifo",
	"ln -s target d/sym && stat -c %a d/sym",
	"mkdir d/sub/deeper && getfacl -n d/sub/deeper",
	"mkdir plain && touch plain/f && stat -c %a plain/f",
	"setfacl -m u:1234:r-- plain/f && stat -c %a plain/f && getfacl -n plain/f",
	"chmod 0700 plain/f && getfacl -n plain/f",
	"setfacl -m g::rwx,o::r-- plain/f && stat -c %a plain/f",
	"setfacl -b plain/f && stat -c %a plain/f && getfacl -n plain/f",
	"touch plain/g && setfacl -m u::rw-,g::r--,o::--- plain/g && stat -c %a plain/g && getfattr -m - -d plain/g",
	"setfacl -d -m u:1:r plain/g",
	"echo secret > secret && chmod 600 secret && setfacl -m u:1234:r secret",
	"setpriv --reuid 1234 --regid 1234 --clear-groups cat secret",
	"setpriv --reuid 2000 --regid 2000 --clear-groups cat secret",
	"setpriv --reuid 1234 --regid 1234 --clear-groups sh -c 'echo more >> secret'",
	"mkdir private && chmod 700 private && touch private/x && setfacl -m u:1234:rx private",
	"setpriv --reuid 1234 --regid 1234 --clear-groups ls private",
	"setpriv --reuid 1234 --regid 1234 --clear-groups touch private/y",
	"setfacl -m u:1234:rwx d && setpriv --reuid 1234 --regid 1234 --clear-groups touch d/by1234 && stat -c '%a %u' d/by1234 && getfacl -n d/by1234",
	"setpriv --reuid 2000 --regid 2000 --clear-groups touch d/by2000",
	"setfacl -k d && touch d/after && getfacl -n d/after",
}

// runSteps runs the steps in root and returns each one's output and exit
// status.
func runSteps(t *testing.T, root string, steps []string) []string {
	t.Helper()
	var out []string
	for _, s := range steps {
		// cd in sh, not cmd.Dir: see run in programs_test.go.
		// $0 stays "sh": it prefixes sh's error messages, which the
		// tests compare between mounts.
		cmd := exec.Command("sh", "-c", `cd "$1" && umask 022 && `+s, "sh", root)
		b, err := cmd.CombinedOutput()
		status := "ok"
		if err != nil {
			status = err.Error()
		}
		out = append(out, string(b)+"["+status+"]")
	}
	return out
}

// TestMountACL: POSIX ACLs on an ext4go mount behave as on the kernel's
// ext4: a directory's default ACL is inherited (replacing the umask), an
// access ACL keeps the mode in step both ways (setfacl, chmod), one the
// mode says all of is not stored, and the kernel enforces the entries
// for other users. Each step gives the output and status it gives on
// the kernel's loop mount; the trees, xattrs included, match; the image
// is e2fsck-clean and the kernel reads it as it shows its own.
func TestMountACL(t *testing.T) {
	requirePrograms(t, "setfacl", "getfacl", "getfattr", "setpriv")
	// Strangers must get into the roots to be checked at all.
	tw := newTwin(t, 32<<20, 0o755)
	tw.sameSteps(t, aclSteps)
	opts := testutil.MountCompareOptions()
	opts.Checks &^= testutil.CheckMtime
	opts.Checks |= testutil.CheckNlink | testutil.CheckXattrs | testutil.CheckOwner | testutil.CheckSpecialBits
	tw.finish(t, opts)
}
