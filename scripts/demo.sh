#!/usr/bin/env bash
# The main job: build an ext4 image from a directory and list it.
#   scripts/demo.sh SRC [IMAGE]
# IMAGE must not exist yet (nothing is ever replaced); without it the image
# is made in a new temporary directory, whose path is printed.
# Installs e2fsprogs (for the e2fsck check) when missing and running as root.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/demo.sh SRC [IMAGE]}
if [ $# -ge 2 ]; then
  img=$2
  if [ -e "$img" ] || [ -L "$img" ]; then
    echo "scripts/demo.sh: $img exists; give a path that does not (it is never replaced)" >&2
    exit 1
  fi
else
  img=$(mktemp -d "${TMPDIR:-/tmp}/ext4go-demo.XXXXXX")/demo.img
fi
if ! command -v e2fsck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null
fi
bin=$(mktemp -d "${TMPDIR:-/tmp}/ext4go-build.XXXXXX")
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/ext4go" ./cmd/ext4go
"$bin/ext4go" mkfs -d "$src" "$img"
if command -v e2fsck >/dev/null 2>&1; then
  e2fsck -fn "$img"
fi
"$bin/ext4go" info "$img" | head -20
"$bin/ext4go" ls -l -R "$img" /
echo "image: $img"
