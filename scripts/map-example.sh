#!/usr/bin/env bash
# Makes docs/map-example.svg, the README's picture of `ext4go map`: a
# 64 MiB filesystem of 1 KiB blocks (8 groups) aged by ext4go itself
# (files grown a piece at a time side by side, so their blocks
# interleave, a third of them deleted, round after round). With a second
# argument, that path's blocks are highlighted.
# Usage: scripts/map-example.sh [OUT.svg [PATH]]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-docs/map-example.svg}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/ext4go" ./cmd/ext4go
cd "$tmp"
export SOURCE_DATE_EPOCH=1700000000
./ext4go mkfs -q --size 64M -b 1024 -U 6f1c8a52-3a3e-4a7e-9a43-2f6de2b1c0aa -E hash_seed=0b7e3c1d-5d0e-4b3f-8f9a-1c2d3e4f5a6b aged.img
RANDOM=12 # the same sizes every time
script=$tmp/age.batch
for round in 0 1 2 3 4 5; do
  dir=/$(echo home var srv | cut -d' ' -f$((round % 3 + 1)))/r$round
  echo "mkdir -p $dir" >"$script"
  for piece in 0 1 2 3 4 5 6 7 8 9; do
    for f in 0 1 2 3 4 5; do
      echo "fallocate -o $((piece * 96))K -l $((RANDOM % 96 + 1))K $dir/f$f" >>"$script"
    done
  done
  for f in 0 1 2 3 4 5; do
    if [ $((RANDOM % 3)) = 0 ]; then echo "rm $dir/f$f" >>"$script"; fi
  done
  ./ext4go batch aged.img "$script"
done
./ext4go map aged.img ${2:+"$2"} -o "$out"
echo "wrote $out ($(wc -c <"$out") bytes)"
