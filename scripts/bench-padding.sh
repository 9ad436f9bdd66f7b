#!/usr/bin/env bash
# Seed 003's measurement: the hot structures laid out on cache lines
# (padded, the normal build) against the same code with every padding
# array empty (-tags nopad), side by side in one run. Each round runs both
# builds once, alternating, on fresh images; the figures are per round.
#
#   scripts/bench-padding.sh [ROUNDS] [P-LIST] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
plist=${2:-1,2,4}
dur=${3:-3s}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/padded" ./cmd/ext4go
go build -tags nopad -o "$tmp/unpadded" ./cmd/ext4go
echo "# fallocate2 through the library and the allocator alone, ops/s; $(nproc) CPUs"
for r in $(seq "$rounds"); do
  for b in padded unpadded; do
    "$tmp/$b" bench fallocate2 -p "$plist" --duration "$dur" --size 2G --json |
      sed "s/^/{\"round\":$r,\"layout\":\"$b\",\"row\":/; s/\$/}/"
    "$tmp/$b" bench alloc -p "$plist" --json 2>/dev/null |
      sed "s/^/{\"round\":$r,\"layout\":\"$b\",\"row\":/; s/\$/}/" || true
  done
done | python3 -c '
import json, sys, statistics
rows = [json.loads(l) for l in sys.stdin if l.strip()]
by = {}
for r in rows:
    row = r["row"]
    if "p" not in row:
        continue  # a summary line, not a measurement
    key = (row.get("bench", "alloc"), row.get("config", ""), row["p"])
    ops = row.get("ops_per_sec") or row.get("ops_per_s") or 0
    by.setdefault(key, {}).setdefault(r["layout"], []).append(ops)
print("%-12s %-18s %3s %14s %14s %16s" % ("bench", "config", "p", "padded", "unpadded", "padded/unpadded"))
for key in sorted(by):
    d = by[key]
    if "padded" not in d or "unpadded" not in d:
        continue
    a, b = statistics.median(d["padded"]), statistics.median(d["unpadded"])
    print("%-12s %-18s %3d %14.0f %14.0f %16.3f" % (key[0], key[1], key[2], a, b, a / b if b else 0))
'
echo "# two goroutines each on its own of two neighbouring txn.Buffers (lock and pin) or cache shards (get and unpin), ns/op"
for b in padded unpadded; do
  tags=""; [ "$b" = unpadded ] && tags="-tags nopad"
  # shellcheck disable=SC2086
  go test $tags ./internal/txn -run '^$' -bench 'Neighbour(Buffers|Shards)' -count "$rounds" |
    awk -v l="$b" '/ns\/op/ {sub(/-[0-9]+$/, "", $1); sub(/^Benchmark/, "", $1); print l, $1, $3}'
done | python3 -c '
import sys, statistics
d = {}
for line in sys.stdin:
    l, name, v = line.split()
    d.setdefault(name, {}).setdefault(l, []).append(float(v))
for name in sorted(d):
    a, b = statistics.median(d[name]["padded"]), statistics.median(d[name]["unpadded"])
    print("%-30s %14.1f %14.1f %16.3f" % (name + " ns/op", a, b, a / b))
'
