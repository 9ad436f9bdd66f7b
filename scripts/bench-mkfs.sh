#!/usr/bin/env bash
# Image building, side by side: ext4go mkfs -d against mke2fs -t ext4 -d, on
# /usr/local/go and on a generated tree of 100k small files. Prints wall time,
# peak memory (RSS), the ratio, and the fragmentation of both results.
#   scripts/bench-mkfs.sh [WORKDIR]
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d /tmp/ext4go-bench-mkfs.XXXX)}
mkdir -p "$work"
go build -o "$work/ext4go" ./cmd/ext4go

gen="$work/tree100k"
if [ ! -d "$gen" ]; then
  echo "generating 100k files in $gen"
  python3 - "$gen" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(1)
for d in range(100):
    os.makedirs(f"{root}/d{d}", exist_ok=True)
    for f in range(1000):
        with open(f"{root}/d{d}/f{f}", "wb") as out:
            out.write(rnd.randbytes(rnd.randrange(0, 8192)))
PY
fi

measure() { # label cmd...
  local label=$1; shift
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
  /usr/bin/time -f "%e %M" -o "$work/time.$label" "$@" >/dev/null 2>"$work/err.$label" || { cat "$work/err.$label"; return 1; }
  read -r secs kb < "$work/time.$label"
  echo "$label $secs $kb"
}

report() { # image
  local img=$1
  e2fsck -fn "$img" 2>&1 | tail -1 | sed 's/^/  e2fsck: /'
  "$work/ext4go" frag "$img" / | tail -1 | sed 's/^/  frag: /'
  # groups holding data: groups whose free block count is below the group size
  dumpe2fs "$img" 2>/dev/null | awk '/^Blocks per group/{bpg=$4} /^Group [0-9]+:/{g=$2} / free blocks, /{split($0,a," free blocks"); n=a[1]; gsub(/.* /,"",n); if (n+0 < bpg-600) used++} END{print "  groups with data (more than metadata used): " used}'
}

for src in /usr/local/go "$gen"; do
  kb=$(du -sk --apparent-size "$src" | cut -f1)
  size=$(( kb * 2 + 262144 ))K
  entries=$(find "$src" | wc -l)
  inodes=$(( entries * 6 / 5 + 1024 ))
  echo "== source $src ($entries entries, $((kb/1024)) MiB), image size $size, $inodes inodes"
  rm -f "$work/a.img" "$work/b.img"
  truncate -s "$size" "$work/b.img"
  m=$(measure mke2fs mke2fs -q -F -t ext4 -N "$inodes" -d "$src" "$work/b.img")
  o=$(measure ext4go "$work/ext4go" mkfs -q -size "$size" -N "$inodes" -d "$src" "$work/a.img")
  echo "mke2fs -d: $(echo "$m" | awk '{printf "%.2f s, %.0f MiB peak RSS", $2, $3/1024}')"
  report "$work/b.img"
  echo "ext4go mkfs -d: $(echo "$o" | awk '{printf "%.2f s, %.0f MiB peak RSS", $2, $3/1024}')"
  report "$work/a.img"
  echo "ratio ext4go/mke2fs wall time: $(echo "$o $m" | awk '{printf "%.2f", $2/$5}')"
done
