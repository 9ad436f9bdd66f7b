#!/usr/bin/env bash
# The project's test command (README: "Run the tests"). It installs what the
# tests need when it is missing, then runs vet, the formatting check and the
# whole test suite with the race detector. Long fuzzing and soak runs are
# opt-in (see README); a short fuzz smoke run is part of the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v mke2fs >/dev/null 2>&1 || need+=(e2fsprogs)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v losetup >/dev/null 2>&1 || need+=(mount)
command -v zsh >/dev/null 2>&1 || need+=(zsh)       # checks the zsh completion script
command -v sfdisk >/dev/null 2>&1 || need+=(fdisk)  # partitions a disk for the in-use test
# The FUSE mount's tests run real programs and compare with the kernel.
command -v fio >/dev/null 2>&1 || need+=(fio)
command -v git >/dev/null 2>&1 || need+=(git)
command -v setfacl >/dev/null 2>&1 || need+=(acl)
command -v setfattr >/dev/null 2>&1 || need+=(attr)
command -v setcap >/dev/null 2>&1 || need+=(libcap2-bin)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v rsvg-convert >/dev/null 2>&1 || need+=(librsvg2-bin)  # renders the map's SVG
command -v qemu-s390x >/dev/null 2>&1 || need+=(qemu-user)       # runs other platforms' builds (cross-test.sh)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing tools (${need[*]}): tests that need them will skip" >&2
  fi
fi

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change: $unformatted" >&2
  exit 1
fi
go vet ./...
# Every supported system and processor builds and vets (scripts/cross-build.sh).
./scripts/cross-build.sh
# The suite's output summarised (scripts/testsummary): package results,
# failed tests with their output, skipped tests with their reasons, and a
# closing "N passed, N failed, N skipped" line. The raw -json stream is
# kept in a temporary file it names.
log=$(mktemp -t ext4go-test.XXXXXX)
go build -o "$log.summary" ./scripts/testsummary
go test -race -json -timeout 40m "$@" ./... 2>&1 | tee "$log" | "$log.summary"
echo "(go test -json log: $log)"
# What -race changes: the allocation budgets of the hot paths, and the
# lock counting build (-tags lockstat) with its no-global-lock check.
go test -count=1 -run 'TestHotPathAllocs' .
go test -count=1 -tags lockstat -run 'TestLockstat' . ./internal/lockstat
# A short smoke run of every fuzz target (longer: scripts/fuzz-smoke.sh 5m).
./scripts/fuzz-smoke.sh "${EXT4GO_FUZZTIME:-3s}"
# The adversarial suite's short run, with its figures: other users on the
# mount against the kernel, hostile images, second writers.
HOSTILE=40 ./scripts/adversarial.sh
# The library built for other platforms (32-bit, big-endian, wasip1;
# emulated where this machine cannot run them) writes and reads the same
# filesystem as here, and the tests that need no mount pass there: the
# quick set (all of it: scripts/cross-test.sh --full). The cross-build
# ran above.
SKIP_BUILD=1 ./scripts/cross-test.sh --quick
