#!/usr/bin/env bash
# Judges the FUSE mount with the external suites in ../shared/suites
# (opt-in: they take minutes to tens of minutes, as root):
#
#   scripts/run-suites.sh pjdfstest   # POSIX semantics on a fresh image, e2fsck after
#   scripts/run-suites.sh xfstests    # the tests of tests-basic.txt (FSTYP=fuse)
#   scripts/run-suites.sh stress      # fsx and fsstress, e2fsck after
#   scripts/run-suites.sh all
#
# It builds ext4go into /usr/local/bin, installs scripts/mount.fuse.ext4go
# as /sbin/mount.fuse.ext4go, builds the suites once (their build.sh, which
# apt-installs what they need) and prints each suite's summary line. The
# anchors (the kernel's ext4 and fuse2fs on this kind of machine) are in
# ../shared/suites/anchors.
set -euo pipefail
cd "$(dirname "$0")/.."
SUITES=${SUITES:-$(readlink -f ../shared/suites)}
CACHE=${CACHE:-/var/tmp/ext4-suites/cache}
what=${1:-all}
[ "$(id -u)" = 0 ] || { echo "run-suites: must run as root (FUSE mounts, loop devices)" >&2; exit 2; }
go build -o /usr/local/bin/ext4go ./cmd/ext4go
install -m 755 scripts/mount.fuse.ext4go /sbin/mount.fuse.ext4go
if [ ! -x "$CACHE/pjdfstest/pjdfstest" ] || [ ! -x "$CACHE/xfstests/check" ]; then
  bash "$SUITES/build.sh" "$SUITES/src" "$CACHE"
fi
run_pjdfstest() {
  local dir img mnt
  dir=$(mktemp -d -t ext4go-pjd.XXXXXX)
  img=$dir/img mnt=$dir/mnt
  mkdir "$mnt"
  mke2fs -q -t ext4 -F "$img" 512M
  mount -t fuse.ext4go "$img" "$mnt" -o allow_other,default_permissions,suid,dev
  CACHE=$CACHE bash "$SUITES/run-pjdfstest.sh" "$mnt" "$dir/pjdfstest.log" | tail -1 || true
  umount "$mnt"
  # The daemon closes the image once it has written everything back.
  flock -x -w 120 "$img" true
  e2fsck -fn "$img" >/dev/null 2>&1 && echo "e2fsck -fn: clean" || echo "e2fsck -fn: NOT clean"
}
run_xfstests() { CACHE=$CACHE bash "$SUITES/run-xfstests.sh" ext4go "$SUITES/tests-basic.txt" | tail -4; }
run_stress() { CACHE=$CACHE bash "$SUITES/run-stress.sh" ext4go | tail -4; }
case "$what" in
pjdfstest) run_pjdfstest ;;
xfstests) run_xfstests ;;
stress) run_stress ;;
all) run_pjdfstest; run_xfstests; run_stress ;;
*) echo "run-suites: want pjdfstest, xfstests, stress or all" >&2; exit 2 ;;
esac
