#!/usr/bin/env bash
# Judges the FUSE mount with the external suites in ../shared/suites
# (opt-in: they take minutes to tens of minutes, as root):
#
#   scripts/run-suites.sh pjdfstest   # POSIX semantics on a fresh image, e2fsck after
#   scripts/run-suites.sh xfstests    # the tests of tests-basic.txt (FSTYP=fuse)
#   scripts/run-suites.sh xfstests-quick  # generic tests of the "quick" group, in
#                                     # batches of 20 until XFSTESTS_BUDGET seconds
#                                     # (default 1500) are spent; XFSTESTS_FROM=N
#                                     # starts at the Nth (to resume)
#   scripts/run-suites.sh stress      # fsx and fsstress, e2fsck after
#   scripts/run-suites.sh all
#
# WRITEBACK=1 judges the mount with the kernel's writeback cache
# (-o writeback_cache, through the helper mount.fuse.ext4go-wb); URING=1
# judges it over FUSE-over-io_uring (-o uring, helper mount.fuse.ext4go-uring;
# the script sets the fuse module's enable_uring to Y and puts it back).
#
# It builds ext4go into /usr/local/bin, installs scripts/mount.fuse.ext4go
# as /sbin/mount.fuse.ext4go (and the -wb one), builds the suites once (their build.sh, which
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
install -m 755 scripts/mount.fuse.ext4go-wb /sbin/mount.fuse.ext4go-wb
install -m 755 scripts/mount.fuse.ext4go-uring /sbin/mount.fuse.ext4go-uring
HELPER=ext4go
[ "${WRITEBACK:-0}" = 1 ] && HELPER=ext4go-wb
if [ "${URING:-0}" = 1 ]; then
  HELPER=ext4go-uring
  uring_param=/sys/module/fuse/parameters/enable_uring
  uring_old=$(cat "$uring_param")
  trap 'echo "$uring_old" > "$uring_param"' EXIT
  echo Y > "$uring_param"
fi
if [ ! -x "$CACHE/pjdfstest/pjdfstest" ] || [ ! -x "$CACHE/xfstests/check" ]; then
  bash "$SUITES/build.sh" "$SUITES/src" "$CACHE"
fi
run_pjdfstest() {
  local dir img mnt
  dir=$(mktemp -d -t ext4go-pjd.XXXXXX)
  img=$dir/img mnt=$dir/mnt
  mkdir "$mnt"
  mke2fs -q -t ext4 -F "$img" 512M
  mount -t "fuse.$HELPER" "$img" "$mnt" -o allow_other,default_permissions,suid,dev
  CACHE=$CACHE bash "$SUITES/run-pjdfstest.sh" "$mnt" "$dir/pjdfstest.log" | tail -1 || true
  umount "$mnt"
  # The daemon closes the image once it has written everything back.
  flock -x -w 120 "$img" true
  e2fsck -fn "$img" >/dev/null 2>&1 && echo "e2fsck -fn: clean" || echo "e2fsck -fn: NOT clean"
}
# xfstests with FSTYP=fuse checks the mounts' type against "fuse": the
# helper is given subtype= (none) instead of ext4go's fuse.ext4go.
export FUSE_EXTRA_OPTS=${FUSE_EXTRA_OPTS:+$FUSE_EXTRA_OPTS,}subtype=
run_xfstests() { CACHE=$CACHE bash "$SUITES/run-xfstests.sh" "$HELPER" "$SUITES/tests-basic.txt" | tail -4; }
run_xfstests_quick() {
  local list budget start from n batch total_pass=0 total_fail=0 total_notrun=0 out
  list=$(mktemp -t ext4go-quick.XXXXXX)
  grep -lE '_begin_fstest .*\bquick\b' "$CACHE"/xfstests/tests/generic/[0-9]* | sed 's|.*/tests/||' | sort > "$list"
  budget=${XFSTESTS_BUDGET:-1500} from=${XFSTESTS_FROM:-1} n=$(wc -l <"$list")
  start=$SECONDS
  echo "xfstests -g quick: $n generic tests; from $from, for up to $budget s"
  while [ "$from" -le "$n" ] && [ $((SECONDS - start)) -lt "$budget" ]; do
    batch=$(mktemp -t ext4go-quick-batch.XXXXXX)
    sed -n "${from},$((from + 19))p" "$list" > "$batch"
    out=$(CACHE=$CACHE bash "$SUITES/run-xfstests.sh" "$HELPER" "$batch")
    grep -E '^generic/' <<<"$out" || true
    grep -E 'e2fsck' <<<"$out" || true
    read -r p f r < <(tail -1 <<<"$out" | sed -E 's/([0-9]+) passed, ([0-9]+) failed, ([0-9]+) notrun.*/\1 \2 \3/')
    total_pass=$((total_pass + ${p:-0})) total_fail=$((total_fail + ${f:-0})) total_notrun=$((total_notrun + ${r:-0}))
    rm -f "$batch"
    from=$((from + 20))
  done
  echo "quick: $total_pass passed, $total_fail failed, $total_notrun notrun; next XFSTESTS_FROM=$from of $n, $((SECONDS - start)) s"
  rm -f "$list"
}
run_stress() { CACHE=$CACHE bash "$SUITES/run-stress.sh" "$HELPER" | tail -4; }
case "$what" in
pjdfstest) run_pjdfstest ;;
xfstests) run_xfstests ;;
xfstests-quick) run_xfstests_quick ;;
stress) run_stress ;;
all) run_pjdfstest; run_xfstests; run_stress ;;
*) echo "run-suites: want pjdfstest, xfstests, xfstests-quick, stress or all" >&2; exit 2 ;;
esac
