#!/usr/bin/env bash
# The main job: build an ext4 image from a directory and list it.
#   scripts/demo.sh SRC IMAGE [SIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/demo.sh SRC IMAGE [SIZE]}
img=${2:?usage: scripts/demo.sh SRC IMAGE [SIZE]}
size=${3:-}
if ! command -v mke2fs >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null
fi
go build -o /tmp/ext4go-demo ./cmd/ext4go
if [ -z "$size" ]; then
  kb=$(du -sk --apparent-size "$src" | cut -f1)
  size=$(( (kb * 2 + 16384) ))K
fi
rm -f "$img"
truncate -s "$size" "$img"
mke2fs -q -F -t ext4 "$img" >/dev/null
/tmp/ext4go-demo put "$img" "$src" /
e2fsck -fn "$img"
/tmp/ext4go-demo ls -l -R "$img" /
