#!/usr/bin/env bash
# Extraction, side by side: ext4go get IMAGE / DEST against debugfs -R
# 'rdump / DEST' IMAGE, on an image of 100k small files (100 directories of
# 1000 files of 0..8 KiB, built once with ext4go mkfs -d, which keeps the
# nanoseconds of times that mke2fs -d drops). Runs alternate between the
# tools, REPS times each, warm (the image in the page cache); before each
# run the previous copy is removed and everything synced, so that neither
# tool pays for the other's writeback. The copies go to OUT (default
# /dev/shm, a tmpfs: creating 100k files on a disk filesystem costs the
# kernel far more than either tool spends, and varies with the other work
# on the machine). Prints the median wall,
# user and sys seconds, and the ratios to debugfs; then checks that the
# last copy of each tool matches the source tree (content, modes, mtimes).
#   scripts/bench-get.sh [-r REPS] [-o OUT] [-b OLD-EXT4GO]
# -b adds a column for another ext4go binary (e.g. one built before a change).
# WORK holds the binaries, tree and image, and is kept (a later run reuses
# the tree); by default a new /tmp directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=5 old= outdir=/dev/shm
while getopts r:o:b: opt; do
  case $opt in
  r) reps=$OPTARG ;;
  o) outdir=$OPTARG ;;
  b) old=$OPTARG ;;
  *) exit 2 ;;
  esac
done
if [ -n "${WORK:-}" ]; then
  work=$WORK # kept, with its generated tree, for the next run
else
  work=$(mktemp -d /tmp/ext4go-bench-get.XXXX)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
go build -o "$work/ext4go" ./cmd/ext4go

tree=$work/tree100k img=$work/tree100k.img
if [ ! -d "$tree" ]; then
  echo "generating 100k files in $tree" >&2
  python3 - "$tree" <<'PY'
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
if [ ! -f "$img" ]; then
  "$work/ext4go" mkfs -q -size 2G -d "$tree" "$img"
fi
cat "$img" >/dev/null

# run TOOL: one timed extraction into $work/out.TOOL, appending
# "wall user sys kb" to $work/t.TOOL.
run() {
  local tool=$1 out=$outdir/ext4go-bench-get.$1
  rm -rf "$out"
  mkdir "$out"
  case $tool in
  debugfs) set -- debugfs -R "rdump / $out" "$img" ;;
  ext4go) set -- "$work/ext4go" get "$img" / "$out" ;;
  old) set -- "$old" get "$img" / "$out" ;;
  esac
  sync
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  cat "$work/time" >>"$work/t.$tool"
}

median() { sort -n | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }

tools="debugfs ext4go"
[ -n "$old" ] && tools="debugfs old ext4go"
rm -f "$work"/t.*
echo "== $img: $(find "$tree" | wc -l) entries, $(du -sm --apparent-size "$tree" | cut -f1) MiB; $reps runs each, alternating, warm"
for ((i = 0; i < reps; i++)); do
  for t in $tools; do run "$t"; done
done
printf '%-10s %5s %7s %7s %7s %8s %8s %8s %8s\n' tool wall user sys cpu "MiB RSS" "wall/d" "user/d" "cpu/d"
dw=$(col 1 "$work/t.debugfs") du=$(col 2 "$work/t.debugfs") dc=$(awk '{print $2+$3}' "$work/t.debugfs" | median)
for t in $tools; do
  f=$work/t.$t
  w=$(col 1 "$f") u=$(col 2 "$f") s=$(col 3 "$f") c=$(awk '{print $2+$3}' "$f" | median) m=$(col 4 "$f")
  name=$t; [ "$t" = old ] && name="ext4go(-b)"
  awk -v t="$name" -v w="$w" -v u="$u" -v s="$s" -v c="$c" -v m="$m" -v dw="$dw" -v du="$du" -v dc="$dc" \
    'BEGIN{printf "%-10s %5.2f %7.2f %7.2f %7.2f %8.0f %8.2f %8.2f %8.2f\n", t, w, u, s, c, m/1024, w/dw, u/du, c/dc}'
done
# The copies against the source: content, then mode and mtime (to the
# nanosecond) of every entry below the root.
meta() { (cd "$1" && find . -mindepth 1 -path ./lost+found -prune -o -printf '%p %m %T@\n' | sort); }
meta "$tree" >"$work/meta.src"
for t in $tools; do
  out=$outdir/ext4go-bench-get.$t
  content=same; diff -r -x lost+found "$tree" "$out" >/dev/null || content=DIFFERENT
  bad=$(meta "$out" | diff - "$work/meta.src" | grep -c '^>' || true)
  echo "  $t copy: content $content; $bad entries with another mode or mtime than the source"
done
for t in $tools; do rm -rf "$outdir/ext4go-bench-get.$t"; done
