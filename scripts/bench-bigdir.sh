#!/usr/bin/env bash
# Times ls -f, ls -l and rm -rf of one directory of N empty files (default
# 200000) through the kernel's ext4 on a loop mount and through "ext4go
# mount", side by side, and samples the daemon's RSS: its peak (VmHWM) and
# the largest VmRSS seen every 0.1 s during each step, then its RSS after
# drop_caches (which makes the kernel FORGET the nodes it had looked up).
# Run as root from the repository:
#
#   scripts/bench-bigdir.sh [N]
#
# EXT4GO names the binary (default: built from this tree into the work
# directory); EXT4GO_OPTS adds mount options (e.g. no_readdirplus);
# EXT4GO_MOUNT_PROFILE=PREFIX profiles the daemon (PREFIX.heap.1 after ls -l).
set -euo pipefail
N=${1:-200000}
[ "$(id -u)" = 0 ] || { echo "bench-bigdir: must run as root" >&2; exit 2; }
work=$(mktemp -d -t ext4go-bigdir.XXXXXX)
pid=
sampler=
cleanup() {
  [ -z "$sampler" ] || kill "$sampler" 2>/dev/null || true
  if mountpoint -q "$work/mnt" 2>/dev/null; then umount "$work/mnt" || umount -l "$work/mnt" || true; fi
  [ -z "$pid" ] || wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
EXT4GO=${EXT4GO:-}
if [ -z "$EXT4GO" ]; then
  go build -o "$work/ext4go" ./cmd/ext4go
  EXT4GO=$work/ext4go
fi
mkdir "$work/mnt"
img=$work/img
mke2fs -q -t ext4 -N $((N + 10000)) -F "$img" 2G
mount -o loop "$img" "$work/mnt"
mkdir "$work/mnt/big"
python3 - "$work/mnt/big" "$N" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(int(sys.argv[2])):
    os.close(os.open("%s/file-%07d" % (d, i), os.O_WRONLY | os.O_CREAT, 0o644))
PY
umount "$work/mnt"
e2fsck -fn "$img" >/dev/null
cp --sparse=always "$img" "$work/img.orig"

now() { date +%s.%N; }
# sample PID: the largest VmRSS (KiB) seen until killed, written to $work/peak
sample() {
  local max=0 v
  trap 'echo $max > "$work/peak"; exit 0' TERM
  while :; do
    v=$(awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0)
    [ "${v:-0}" -gt "$max" ] && { max=$v; echo $max > "$work/peak"; }
    sleep 0.1
  done
}
declare -A secs rss
step() { # IMPL NAME COMMAND...
  local impl=$1 name=$2; shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches
  echo 0 > "$work/peak"
  if [ "$impl" = ext4go ]; then sample "$pid" & sampler=$!; fi
  local t0; t0=$(now)
  "$@" > /dev/null
  secs[$impl,$name]=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }')
  if [ -n "$sampler" ]; then
    kill "$sampler"; wait "$sampler" 2>/dev/null || true; sampler=
    rss[$name]=$(( $(cat "$work/peak") / 1024 ))
  fi
}

for impl in kernel ext4go; do
  cp --sparse=always "$work/img.orig" "$img"
  if [ "$impl" = kernel ]; then
    mount -o loop "$img" "$work/mnt"
  else
    "$EXT4GO" mount -f ${EXT4GO_OPTS:+-o "$EXT4GO_OPTS"} "$img" "$work/mnt" &
    pid=$!
    for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.1; done
  fi
  step "$impl" "ls -f" ls -f "$work/mnt/big"
  step "$impl" "ls -l" ls -l "$work/mnt/big"
  if [ "$impl" = ext4go ]; then
    # With EXT4GO_MOUNT_PROFILE set, a heap profile at the peak.
    if [ -n "${EXT4GO_MOUNT_PROFILE:-}" ]; then kill -USR1 "$pid"; sleep 2; fi
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 3
    after_drop=$(( $(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024 ))
  fi
  step "$impl" "rm -rf" rm -rf "$work/mnt/big"
  if [ "$impl" = ext4go ]; then
    hwm=$(( $(awk '/VmHWM/ {print $2}' "/proc/$pid/status") / 1024 ))
    sync; echo 3 > /proc/sys/vm/drop_caches; sleep 3
    end_rss=$(( $(awk '/VmRSS/ {print $2}' "/proc/$pid/status") / 1024 ))
  fi
  umount "$work/mnt"
  if [ -n "$pid" ]; then wait "$pid" || true; pid=; fi
  e2fsck -fn "$img" >/dev/null
done

printf '%-8s %9s %9s %7s %14s\n' step kernel ext4go ratio "ext4go RSS MiB"
for s in "ls -f" "ls -l" "rm -rf"; do
  k=${secs[kernel,$s]} e=${secs[ext4go,$s]}
  printf '%-8s %9s %9s %7s %14s\n' "$s" "$k" "$e" "$(awk -v e="$e" -v k="$k" 'BEGIN { if (k > 0) printf "%.1fx", e / k; else print "-" }')" "${rss[$s]}"
done
echo "ext4go peak RSS (VmHWM): $hwm MiB; after ls -l and drop_caches: $after_drop MiB; after rm -rf and drop_caches: $end_rss MiB"
