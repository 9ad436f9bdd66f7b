#!/bin/bash
# cross-build.sh: build and vet ext4go for every system and processor it
# supports: for each target, go build ./..., go build ./cmd/ext4go (the
# linked program), and go vet ./... (which type-checks the tests too, so
# test files that use one system's calls must carry its build tag). One
# line per target: "ok GOOS/GOARCH", or "FAIL GOOS/GOARCH" and the output.
# Exits non-zero when any target fails. Uses the build cache: a second run
# costs seconds per target.
#
# usage: scripts/cross-build.sh [GOOS/GOARCH...]   (default: all targets)
set -uo pipefail

cd "$(dirname "$0")/.."
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	targets=(
		linux/amd64 linux/arm64 linux/386 linux/arm linux/riscv64 linux/ppc64le linux/s390x
		darwin/amd64 darwin/arm64
		windows/amd64 windows/arm64
		freebsd/amd64
		wasip1/wasm
	)
fi
failed=0
for t in "${targets[@]}"; do
	os=${t%/*} arch=${t#*/}
	if out=$(export GOOS=$os GOARCH=$arch CGO_ENABLED=0 &&
		go build ./... 2>&1 &&
		go build -o /dev/null ./cmd/ext4go 2>&1 &&
		go vet ./... 2>&1); then
		echo "ok $t"
	else
		echo "FAIL $t"
		printf '%s\n' "$out" | sed 's/^/    /'
		failed=1
	fi
done
exit $failed
