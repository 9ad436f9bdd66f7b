#!/usr/bin/env bash
# The adversarial suite: other users, hostile images and second writers,
# each bounded in time, with one figure line per part.
#
#   scripts/adversarial.sh            # quick (CI: about 2 minutes)
#   scripts/adversarial.sh --long     # more modes and 1000 hostile images
#   HOSTILE=N SEED=S scripts/adversarial.sh   # N hostile images, sequence S
#
# 1. Other users (fusefs TestMountPermissionMatrix, TestMountDataChangesDropSetID,
#    TestMountTrustedXattrsPrivileged): an unprivileged user against an
#    ext4go mount, with and without default_permissions, and the same
#    calls against the kernel's ext4 on a loop mount; every way of changing
#    a setuid file's data (write, truncate, fallocate, punch, zero range,
#    copy_file_range, chown) must drop its bits as the kernel does.
# 2. Hostile images (TestHostileImages): seeded corruption of one metadata
#    kind per image, read and changed through the library; fails on a
#    panic, a hang, unbounded heap, an untyped error, a write by a failed
#    change or a read-only open, a changed bystander file, e2fsck
#    regressions. The 218 images of e2fsprogs' tests are the corpus tests'
#    (TestSharedImages, FuzzOpenWalk).
# 3. Second writers (cmd/ext4go TestTwoWritersEveryPairing): while the
#    library or an ext4go mount holds an image through its file or a loop
#    device, every other way of writing it (library, put, mount; file, the
#    same or another loop device) is refused and changes nothing.
#
# Needs root, loop devices and /dev/fuse for parts 1 and 3 (they skip,
# saying why, without them).
set -u
cd "$(dirname "$0")/.."
long=0
[ "${1:-}" = --long ] && long=1
hostile=${HOSTILE:-$([ $long = 1 ] && echo 1000 || echo 120)}
seed=${SEED:-1}
failed=0
log=$(mktemp -t ext4go-adversarial.XXXXXX)

part() { # part NAME TIMEOUT ENV... -- GO-TEST-ARGS...
  local name=$1 timeout=$2 start rc
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  start=$(date +%s)
  env "${envs[@]}" go test -count=1 -v -timeout "$timeout" "$@" >"$log.$name" 2>&1
  rc=$?
  local secs=$(( $(date +%s) - start ))
  if [ $rc -eq 0 ]; then
    echo "PASS $name (${secs} s)"
  else
    echo "FAIL $name (${secs} s; log $log.$name)"
    grep -E -- '--- FAIL|panic:|Error' "$log.$name" | head -n 20 | sed 's/^/    /'
    failed=1
  fi
}

matrix_env=()
[ $long = 1 ] && matrix_env=(EXT4GO_TEST_PRIV_MATRIX=long)
part users 20m "${matrix_env[@]}" -- \
  -run 'TestMountPermissionMatrix|TestMountDataChangesDropSetID|TestMountTrustedXattrsPrivileged' ./fusefs
grep -a -E 'cases|differ' "$log.users" | grep -v '^=== ' | head -n 6 | sed 's/^ */    /'
grep -a -A1 -E -- '--- SKIP' "$log.users" | head -n 4 | sed 's/^ */    /'

part hostile-images 60m EXT4GO_HOSTILE="$hostile" EXT4GO_HOSTILE_SEED="$seed" -- -run 'TestHostileImages$' .
grep -a -A4 'hostile images: seed' "$log.hostile-images" | sed 's/^ */    /'

part second-writers 10m -- -run 'TestTwoWritersEveryPairing' ./cmd/ext4go
grep -a -E 'pairings tried' "$log.second-writers" | sed 's/^ *[a-z_]*\.go:[0-9]*: /    /'
grep -a -A1 -E -- '--- SKIP' "$log.second-writers" | head -n 2 | sed 's/^ */    /'

if [ $failed = 0 ]; then
  echo "adversarial: every part passed"
else
  echo "adversarial: some parts failed"
fi
exit $failed
