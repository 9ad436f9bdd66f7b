#!/usr/bin/env bash
# Image building, side by side: ext4go mkfs -d against mke2fs -t ext4 -d, on
# the same image size (both then pick the same features, block size and
# inode count). Runs alternate between the tools, REPS times each, warm
# (source in the page cache) and cold (caches dropped before every run),
# so that load from other work on the machine hits both alike. Prints the
# median wall, user and sys seconds, peak RSS, and the ratios to mke2fs.
#   scripts/bench-mkfs.sh [-r REPS] [-s SIZE] [-m warm,cold] [-b OLD-EXT4GO] [SOURCE...]
# SOURCE defaults to /usr/local/go; "tree100k" generates 100k small files.
# -b adds a column for another ext4go binary (e.g. one built before a change).
# WORK holds the binaries and images, and is kept; by default a new /tmp
# directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=5 size=1G modes=warm,cold old=
while getopts r:s:m:b: opt; do
  case $opt in
  r) reps=$OPTARG ;;
  s) size=$OPTARG ;;
  m) modes=$OPTARG ;;
  b) old=$OPTARG ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- /usr/local/go
if [ -n "${WORK:-}" ]; then
  work=$WORK # kept: its images can be looked at after
else
  work=$(mktemp -d /tmp/ext4go-bench-mkfs.XXXX)
  trap 'rm -rf "$work"' EXIT # three images of SIZE each run
fi
mkdir -p "$work"
go build -o "$work/ext4go" ./cmd/ext4go

gen_tree100k() { # dir
  [ -d "$1" ] && return
  echo "generating 100k files in $1" >&2
  python3 - "$1" <<'PY'
import os, random, sys
root = sys.argv[1]
rnd = random.Random(1)
for d in range(100):
    os.makedirs(f"{root}/d{d}", exist_ok=True)
    for f in range(1000):
        with open(f"{root}/d{d}/f{f}", "wb") as out:
            out.write(rnd.randbytes(rnd.randrange(0, 8192)))
PY
}

# run TOOL MODE SRC: one timed build, appending "wall user sys kb" to
# $work/t.TOOL.MODE.
run() {
  local tool=$1 mode=$2 src=$3 img=$work/$1.img
  rm -f "$img"
  case $tool in
  mke2fs) truncate -s "$size" "$img"; set -- mke2fs -q -F -t ext4 -d "$src" "$img" ;;
  ext4go) set -- "$work/ext4go" mkfs -q -size "$size" -d "$src" "$img" ;;
  old) set -- "$old" mkfs -q -size "$size" -d "$src" "$img" ;;
  esac
  if [ "$mode" = cold ]; then sync; echo 3 >/proc/sys/vm/drop_caches; else sync; fi
  /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
  cat "$work/time" >>"$work/t.$tool.$mode"
}

median() { sort -n | awk '{v[NR]=$1} END{print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
col() { awk -v c="$1" '{print $c}' "$2" | median; }

tools="mke2fs ext4go"
[ -n "$old" ] && tools="mke2fs old ext4go"
for src in "$@"; do
  if [ "$src" = tree100k ]; then src=$work/tree100k; gen_tree100k "$src"; fi
  entries=$(find "$src" | wc -l)
  echo "== $src: $entries entries, $(du -sm --apparent-size "$src" | cut -f1) MiB; image $size; $reps runs each, alternating"
  for mode in ${modes//,/ }; do
    rm -f "$work"/t.*."$mode"
    [ "$mode" = warm ] && { find "$src" -type f -print0 | xargs -0 cat >/dev/null; run mke2fs warm "$src"; rm -f "$work/t.mke2fs.warm"; }
    for ((i = 0; i < reps; i++)); do
      for t in $tools; do run "$t" "$mode" "$src"; done
    done
    printf '%-7s %-10s %5s %7s %7s %7s %8s %8s %8s\n' "$mode" tool wall user sys cpu "MiB RSS" "wall/m" "cpu/m"
    mw=$(col 1 "$work/t.mke2fs.$mode") mc=$(awk '{print $2+$3}' "$work/t.mke2fs.$mode" | median)
    for t in $tools; do
      f=$work/t.$t.$mode
      w=$(col 1 "$f") u=$(col 2 "$f") s=$(col 3 "$f") c=$(awk '{print $2+$3}' "$f" | median) m=$(col 4 "$f")
      name=$t; [ "$t" = old ] && name="ext4go(-b)"
      awk -v mode="$mode" -v t="$name" -v w="$w" -v u="$u" -v s="$s" -v c="$c" -v m="$m" -v mw="$mw" -v mc="$mc" \
        'BEGIN{printf "%-7s %-10s %5.2f %7.2f %7.2f %7.2f %8.0f %8.2f %8.2f\n", mode, t, w, u, s, c, m/1024, w/mw, c/mc}'
    done
  done
  for t in $tools; do
    echo "  $t image: $(e2fsck -fn "$work/$t.img" 2>&1 | tail -1)"
  done
done
