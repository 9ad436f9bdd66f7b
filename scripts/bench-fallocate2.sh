#!/usr/bin/env bash
# fallocate2 side by side: ext4go's journalled library on a
# fresh image against the kernel's journalled ext4 on a fresh loop mount of
# an image of the same size, and optionally an older ext4go binary (-b, e.g.
# built before a change). Rounds alternate between them so that other load
# hits all alike; the figures are the median ops/s of the rounds, with the
# ratios to the kernel and P/P1 for each, and P/P1 round by round.
#   scripts/bench-fallocate2.sh [-r ROUNDS] [-p 1,2,4,8,16] [-d DURATION] [-s SIZE] [-b OLD-EXT4GO]
# Needs root for the loop mount; the mount is always undone.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 plist=1,2,4,8,16 dur=2s size=2G old=
while getopts r:p:d:s:b: opt; do
  case $opt in
  r) rounds=$OPTARG ;;
  p) plist=$OPTARG ;;
  d) dur=$OPTARG ;;
  s) size=$OPTARG ;;
  b) old=$OPTARG ;;
  *) exit 2 ;;
  esac
done
work=$(mktemp -d /tmp/ext4go-bench-falloc.XXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  rm -rf "$work"
}
trap cleanup EXIT
go build -o "$work/ext4go" ./cmd/ext4go
echo "# fallocate2, P = $plist, $dur per P, $rounds rounds, $size images, $(nproc) CPUs, $(uname -r)" >&2
for r in $(seq "$rounds"); do
  "$work/ext4go" bench fallocate2 -p "$plist" --duration "$dur" --size "$size" --json
  if [ -n "$old" ]; then
    "$old" bench fallocate2 -p "$plist" --duration "$dur" --size "$size" --json | sed 's/"config":"ext4go"/"config":"ext4go-old"/'
  fi
  rm -f "$work/k.img"
  truncate -s "$size" "$work/k.img"
  mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$work/k.img"
  # Each side starts with no writeback of the other's image going on.
  sync
  mount -o loop "$work/k.img" "$mnt"
  "$work/ext4go" bench fallocate2 -p "$plist" --duration "$dur" --dir "$mnt" --json
  umount "$mnt"
  sync
done | python3 -c '
import json, sys, statistics
by = {}
for line in sys.stdin:
    row = json.loads(line)
    by.setdefault((row["config"], row["p"]), []).append(row["ops_per_sec"])
configs = [c for c in ("kernel", "ext4go", "ext4go-old") if any(k[0] == c for k in by)]
ps = sorted({k[1] for k in by})
med = {k: statistics.median(v) for k, v in by.items()}
head = "| P | " + " | ".join(f"{c} ops/s" for c in configs) + " | " + " | ".join(f"{c}/kernel" for c in configs if c != "kernel") + " | " + " | ".join(f"{c} P/P1" for c in configs) + " |"
print(head)
print("|" + "---|" * (head.count("|") - 1))
for p in ps:
    cells = [f"{med.get((c, p), 0):,.0f}" for c in configs]
    k = med.get(("kernel", p), 0)
    cells += [f"{med.get((c, p), 0) / k:.2f}" if k else "-" for c in configs if c != "kernel"]
    cells += [f"{med.get((c, p), 0) / med[(c, ps[0])]:.2f}" if med.get((c, ps[0])) else "-" for c in configs]
    print(f"| {p} | " + " | ".join(cells) + " |")
# Scaling round by round (each round runs every P back to back, so drift
# between rounds cancels): the median and range of P/P1.
print()
for c in configs:
    for p in ps[1:]:
        r = sorted(a / b for a, b in zip(by[(c, p)], by[(c, ps[0])]))
        print(f"{c} P{p}/P{ps[0]} by round: median {statistics.median(r):.2f}, " + " ".join(f"{x:.2f}" for x in r))
'
