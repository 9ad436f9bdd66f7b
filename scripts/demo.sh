#!/usr/bin/env bash
# The main job: build an ext4 image from a directory and list it.
#   scripts/demo.sh SRC IMAGE
# Installs e2fsprogs (for the e2fsck check) when missing and running as root.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/demo.sh SRC IMAGE}
img=${2:?usage: scripts/demo.sh SRC IMAGE}
if ! command -v e2fsck >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq e2fsprogs >/dev/null
fi
go build -o /tmp/ext4go-demo ./cmd/ext4go
rm -f "$img"
/tmp/ext4go-demo mkfs -d "$src" "$img"
if command -v e2fsck >/dev/null 2>&1; then
  e2fsck -fn "$img"
fi
/tmp/ext4go-demo info "$img" | head -20
/tmp/ext4go-demo ls -l -R "$img" /
