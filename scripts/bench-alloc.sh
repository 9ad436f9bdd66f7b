#!/usr/bin/env bash
# The allocator's will-it-scale fallocate2 (and the other `ext4go bench
# alloc` runs), default against legacy, twice: on a quiet machine and with
# every CPU kept busy by other processes (one busy loop per CPU), where the
# scheduler preempts our threads, lock holders included, as a kernel
# spinlock holder never is. The busy loops are always stopped.
#   scripts/bench-alloc.sh [BENCH ALLOC OPTIONS...]
#   e.g. scripts/bench-alloc.sh -p 1,2,4,8,16 --count 3 --run fallocate2
#   EXT4GO=path   the ext4go binary (default: built from this tree)
#   LOADS="0 N"   busy loops for each pass (default: 0, then one per CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/ext4go-bench-alloc.XXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
bin=${EXT4GO:-}
if [ -z "$bin" ]; then
	bin=$work/ext4go
	go build -o "$bin" ./cmd/ext4go
fi
[ $# -gt 0 ] || set -- -p 1,2,4,8,16 --count 3
for load in ${LOADS:-0 $(nproc)}; do
	pids=()
	for _ in $(seq "$load"); do
		# A busy loop in a process of its own (not a goroutine: the
		# point is the kernel's scheduler taking our threads away).
		sh -c 'while :; do :; done' &
		pids+=($!)
	done
	echo "## $load busy loops on $(nproc) CPUs ($(uname -r))"
	"$bin" bench alloc "$@"
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	pids=()
done
