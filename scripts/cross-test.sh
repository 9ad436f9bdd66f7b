#!/usr/bin/env bash
# ext4go on other platforms: the same filesystem from every build, and the
# library's tests on 32-bit, big-endian and WebAssembly builds.
#
#   scripts/cross-test.sh            # the quick set (CI: a few minutes)
#   scripts/cross-test.sh --full     # everything (opt-in: about an hour)
#   --probe-only, --tests-only       # one of the two parts below
#
# 1. scripts/portprobe, a program on the public API only, is built for
#    linux/amd64, 386, arm, arm64, s390x and wasip1 and run on each: 386
#    natively when the kernel runs 32-bit x86 programs, else like arm,
#    arm64 and s390x under qemu-user; wasip1 under wazero. Each run makes
#    two 5 GiB images, one written through the journal and one through
#    OpenForBuild, and prints the tree it reads back. Every manifest must
#    equal amd64's; every build image must be byte-identical to amd64's
#    (the journal images differ in what the clock and the random
#    generator put in them: times, inode generations and the checksums
#    seeded by them, the journal's commits); e2fsck -fn must find nothing;
#    each platform must read amd64's journal image as amd64 does, and
#    amd64 each platform's; and where this machine can loop-mount (root,
#    loop devices) the kernel's read-only view of every image must equal
#    the manifest.
#    Then the CLI built for linux/amd64, 386 and s390x (and arm, arm64
#    with --full) makes an image from a host tree with mkfs -d and get
#    copies it back out: the copy must equal the tree in everything
#    mkfs -d keeps (scripts/crosstree/crosstree.py) and e2fsck -fn must
#    find the image clean.
# 2. The tests that need no mount (EXT4GO_TEST_NOMOUNT=1) run for linux/386
#    (natively or emulated), linux/arm64 and linux/s390x under qemu-user
#    (and linux/arm with --full), and for wasip1 under wazero. The quick
#    set: the short tests of the internal packages in quick_internal and
#    extent but the slowest under emulation (slow_internal and slow_extent
#    below: models, and comparisons over many images against mke2fs and
#    e2fsck), the root package's image-file tests named in quick_root, and
#    for wasip1 the packages of the on-disk structures. --full runs every package's whole
#    suite (for wasip1 every package whose tests build there). The
#    platforms run side by side (CROSS_JOBS at a time, default 3): under
#    emulation much of a test's time is spent waiting for e2fsprogs.
#
# Before that, scripts/cross-build.sh (cross-build and go vet of every
# target) runs when it exists, unless SKIP_BUILD=1.
#
# It installs what it needs when missing and it can (root, apt-get):
# qemu-user; wazero, with go install into a cache directory (not a module
# dependency); and for 386 without a qemu-i386 that runs Go (bookworm's
# 7.2 crashes Go's 386 runtime, whose threads' TLS it keeps in one GDT)
# the qemu-user of the next Debian release, unpacked into the cache, not
# installed. What cannot be had is a SKIP line with the reason.
#
# Each check prints one line: PASS, FAIL or SKIP, the platform, what ran
# and how long it took; a failure is followed by the end of its output.
# The last line counts them. Exits 1 if any failed. KEEP=1 keeps the work
# directory (images, manifests, logs).
set -uo pipefail
cd "$(dirname "$0")/.."

full=0 do_probe=1 do_tests=1
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    --quick) full=0 ;;
    --probe-only) do_tests=0 ;;
    --tests-only) do_probe=0 ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: $0 [--quick|--full] [--probe-only|--tests-only]" >&2; exit 2 ;;
  esac
done
jobs=${CROSS_JOBS:-3}

cache=${EXT4GO_CROSS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ext4go-cross}
mkdir -p "$cache"
work=$(mktemp -d -t ext4go-cross.XXXXXX)
mnt=""
loopdev=""
next_list=/etc/apt/sources.list.d/ext4go-cross-next.list # only while fetching
cleanup() {
  if [ -n "$mnt" ] && mountpoint -q "$mnt" 2>/dev/null; then umount "$mnt" || umount -l "$mnt"; fi
  if [ -n "$loopdev" ]; then losetup -d "$loopdev" 2>/dev/null; fi
  # Never leave the next release's packages to apt-get.
  if [ -e "$next_list" ]; then rm -f "$next_list" && apt-get update -qq >/dev/null 2>&1; fi
  if [ "${KEEP:-}" = 1 ]; then
    echo "work directory kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Results go to a file as well, so that checks run in subshells count.
results=$work/results
: >"$results"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }
pass() { echo "PASS $1 ($2 s)" | tee -a "$results"; }
skip() { echo "SKIP $1: $2" | tee -a "$results"; }
fail() { # fail WHAT SECONDS [LOG]: the end of the log follows
  echo "FAIL $1 ($2 s)" | tee -a "$results"
  if [ -n "${3:-}" ] && [ -s "$3" ]; then tail -n 60 "$3" | sed 's/^/    /'; fi
}
# progress shows what runs now on a terminal only; logs get the results.
progress() { if [ -t 1 ]; then printf '\r\033[K... %s' "$1"; fi; }
endprogress() { if [ -t 1 ]; then printf '\r\033[K'; fi; }

# --- tools -------------------------------------------------------------

have_root_apt() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

if ! command -v qemu-s390x >/dev/null 2>&1 && have_root_apt; then
  echo "installing: qemu-user"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user; } >"$work/apt.log" 2>&1 ||
    echo "apt-get install qemu-user failed: $(tail -n 1 "$work/apt.log")"
fi

# hello starts threads and goroutines: whether an emulator runs Go's
# runtime for a GOARCH.
mkdir -p "$work/hello"
cat >"$work/hello/main.go" <<'EOF'
package main

import (
	"fmt"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	sum := make([]int, 8)
	for i := range sum {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200000 {
				sum[i] += j % (i + 1)
			}
		}()
	}
	wg.Wait()
	fmt.Println("ok", len(sum))
}
EOF
runs_go() { # runs_go GOARCH [RUNNER...]: hello runs 3 times in a row
  local arch=$1
  shift
  [ -x "$work/hello/$arch" ] || (cd "$work/hello" && GOOS=linux GOARCH=$arch go build -o "$arch" main.go) || return 1
  for _ in 1 2 3; do
    "$@" "$work/hello/$arch" 2>/dev/null | grep -q '^ok 8$' || return 1
  done
}

# runner[ARCH] is the command that runs a linux/ARCH program ("" runs it
# natively); why[ARCH] says why none can.
declare -A runner why
runner[amd64]=""
for arch in arm arm64 s390x; do
  q=qemu-$arch
  [ "$arch" = arm64 ] && q=qemu-aarch64
  if ! command -v "$q" >/dev/null 2>&1; then
    why[$arch]="$q is not installed (Debian: qemu-user)"
  elif runs_go "$arch" "$q"; then
    runner[$arch]=$q
  else
    why[$arch]="$q does not run Go's $arch runtime"
  fi
done

# 386: natively if the kernel runs 32-bit x86 programs, else qemu-i386 when
# it runs Go's 386 runtime, else the next Debian release's.
fetch_next_qemu() {
  local dir="$cache/qemu-user-next" list=$next_list codename=trixie
  if [ -x "$dir/usr/bin/qemu-i386" ]; then return 0; fi
  have_root_apt && command -v dpkg >/dev/null 2>&1 || return 1
  echo "fetching the qemu-user of Debian $codename for qemu-i386 (unpacked into $dir, not installed)"
  echo "deb http://deb.debian.org/debian $codename main" >"$list"
  local ok=0
  if apt-get update -qq >"$work/apt-next.log" 2>&1 &&
    (cd "$work" && apt-get download -qq "qemu-user/$codename") >>"$work/apt-next.log" 2>&1; then
    rm -rf "$dir.tmp" && dpkg -x "$work"/qemu-user_*.deb "$dir.tmp" && rm -rf "$dir" && mv "$dir.tmp" "$dir" && ok=1
  fi
  rm -f "$list" "$work"/qemu-user_*.deb
  apt-get update -qq >>"$work/apt-next.log" 2>&1
  [ "$ok" = 1 ] && [ -x "$dir/usr/bin/qemu-i386" ]
}
if runs_go 386; then
  runner[386]=""
elif command -v qemu-i386 >/dev/null 2>&1 && runs_go 386 qemu-i386; then
  runner[386]=qemu-i386
elif fetch_next_qemu && runs_go 386 "$cache/qemu-user-next/usr/bin/qemu-i386"; then
  runner[386]=$cache/qemu-user-next/usr/bin/qemu-i386
else
  why[386]="this kernel runs no 32-bit x86 programs (ia32_emulation off) and no qemu-i386 here runs Go's 386 runtime"
fi

# wazero for wasip1, from the module proxy into the cache (not go.mod).
wazero_version=v1.12.0
wazero=""
if command -v wazero >/dev/null 2>&1; then
  wazero=$(command -v wazero)
elif [ -x "$cache/bin/wazero-$wazero_version" ]; then
  wazero=$cache/bin/wazero-$wazero_version
elif (cd "$work" && GOBIN="$work/gobin" GOFLAGS=-mod=mod go install "github.com/tetratelabs/wazero/cmd/wazero@$wazero_version") >"$work/wazero.log" 2>&1; then
  mkdir -p "$cache/bin" && mv "$work/gobin/wazero" "$cache/bin/wazero-$wazero_version"
  wazero=$cache/bin/wazero-$wazero_version
else
  why[wasip1]="go install of wazero $wazero_version failed: $(tail -n 1 "$work/wazero.log")"
fi
# go test runs wasip1 binaries through Go's own script, which calls the
# runtime GOWASIRUNTIME names from PATH.
if [ -n "$wazero" ]; then
  mkdir -p "$work/bin"
  ln -sf "$wazero" "$work/bin/wazero"
  export PATH="$work/bin:$PATH" GOWASIRUNTIME=wazero
fi
wasm_exec=$(go env GOROOT)/lib/wasm/go_wasip1_wasm_exec

# can_run TARGET: whether this machine can run TARGET's programs (else
# why_not says why).
can_run() {
  local os=${1%/*} arch=${1#*/}
  if [ "$os" = wasip1 ]; then
    [ -n "$wazero" ] || { why_not=${why[wasip1]}; return 1; }
  elif [ "${runner[$arch]+set}" != set ]; then
    why_not=${why[$arch]}
    return 1
  fi
}
runner_name() { # the emulator's name, "native" or "wazero"
  local os=${1%/*} arch=${1#*/}
  if [ "$os" = wasip1 ]; then echo wazero; elif [ -n "${runner[$arch]}" ]; then basename "${runner[$arch]}"; else echo native; fi
}
short() { [ "${1%/*}" = wasip1 ] && echo wasip1 || echo "${1#*/}"; } # a target's file name

# --- cross-build and vet ------------------------------------------------

if [ "${SKIP_BUILD:-}" = 1 ]; then
  skip "cross-build and vet of every target" "SKIP_BUILD=1"
elif [ -x scripts/cross-build.sh ]; then
  # Its line per target shows as it comes.
  t=$(now)
  if scripts/cross-build.sh 2>&1 | tee "$work/cross-build.log" | sed 's/^/    /'; then
    pass "cross-build and vet of every target (scripts/cross-build.sh)" "$(since "$t")"
  else
    fail "cross-build and vet of every target (scripts/cross-build.sh)" "$(since "$t")"
  fi
else
  skip "cross-build and vet of every target" "scripts/cross-build.sh is not in this tree"
fi

# --- portprobe ------------------------------------------------------------

probe_targets=(linux/amd64 linux/386 linux/arm linux/arm64 linux/s390x wasip1/wasm)

probe_cmd() { # the command line that runs TARGET's portprobe
  local t=$1 arch=${1#*/}
  if [ "${t%/*}" = wasip1 ]; then
    # The work directory mounted at its own path: the same paths inside.
    echo "$wazero run -cachedir $cache/wazero -mount $work:$work $work/portprobe-wasip1"
  else
    echo "${runner[$arch]} $work/portprobe-$arch"
  fi
}

# probe_run TARGET: the emulated part, which may run beside the others:
# both images and manifests, and its reading of amd64's journal image.
probe_run() {
  local t=$1 n cmd start
  n=$(short "$t")
  cmd=$(probe_cmd "$t")
  start=$(now)
  for mode in journal build; do
    $cmd -mode "$mode" "$work/$mode-$n.img" >"$work/$mode-$n.manifest" 2>>"$work/probe-$n.log" ||
      echo "the $mode image could not be made" >>"$work/probe-$n.problems"
  done
  if [ "$t" != linux/amd64 ]; then
    $cmd -read "$work/journal-amd64.img" >"$work/read-amd64-by-$n.manifest" 2>>"$work/probe-$n.log" ||
      echo "it could not read amd64's journal image" >>"$work/probe-$n.problems"
  fi
  since "$start" >"$work/probe-$n.secs"
}

# kernel_manifest IMAGE OUT: the kernel's read-only view of IMAGE through a
# loop device, walked by amd64's portprobe.
kernel_manifest() {
  mnt=$work/mnt
  mkdir -p "$mnt"
  loopdev=$(losetup --find --show --read-only "$1") || { loopdev=""; return 1; }
  if ! mount -t ext4 -o ro "$loopdev" "$mnt"; then
    losetup -d "$loopdev"
    loopdev=""
    return 1
  fi
  "$work/portprobe-amd64" -walk "$mnt" >"$2"
  local rc=$?
  umount "$mnt" || umount -l "$mnt"
  losetup -d "$loopdev"
  loopdev=""
  return $rc
}

# probe_check TARGET: the checks on the host, one at a time (the kernel's
# mounts), and the target's line with the time of its run and checks.
probe_check() {
  local t=$1 took n start log problems=() notes=()
  n=$(short "$t")
  took=$(cat "$work/probe-$n.secs" 2>/dev/null || echo 0)
  start=$(now)
  log=$work/probe-$n.log
  if [ -s "$work/probe-$n.problems" ]; then mapfile -t problems <"$work/probe-$n.problems"; fi
  for mode in journal build; do
    img=$work/$mode-$n.img
    [ -s "$work/$mode-$n.manifest" ] || continue
    if [ "$t" != linux/amd64 ] && ! cmp -s "$work/$mode-$n.manifest" "$work/$mode-amd64.manifest"; then
      problems+=("the $mode manifest differs from amd64's")
      diff "$work/$mode-amd64.manifest" "$work/$mode-$n.manifest" | head -n 20 >>"$log"
    fi
    if ! e2fsck -fn "$img" >"$work/fsck-$mode-$n.log" 2>&1; then
      problems+=("e2fsck -fn finds problems in the $mode image")
      tail -n 20 "$work/fsck-$mode-$n.log" >>"$log"
    fi
    if [ -n "$kernel_ok" ]; then
      if ! kernel_manifest "$img" "$work/kernel-$mode-$n.manifest" 2>>"$log"; then
        problems+=("the kernel could not mount and walk the $mode image")
      elif ! cmp -s "$work/kernel-$mode-$n.manifest" "$work/$mode-$n.manifest"; then
        problems+=("the kernel reads the $mode image differently")
        diff "$work/$mode-$n.manifest" "$work/kernel-$mode-$n.manifest" | head -n 20 >>"$log"
      fi
    fi
  done
  if [ "$t" != linux/amd64 ]; then
    notes+=("manifests equal amd64's")
    if [ -s "$work/build-$n.img" ] && [ -s "$work/build-amd64.img" ]; then
      # By their digests: cmp would read the 5 GiB of each.
      if [ "$("$work/portprobe-amd64" -digest "$work/build-$n.img")" = "$("$work/portprobe-amd64" -digest "$work/build-amd64.img")" ]; then
        notes+=("build image byte-identical to amd64's")
      else
        problems+=("the build image differs from amd64's in $(cmp -l "$work/build-$n.img" "$work/build-amd64.img" | wc -l) bytes")
      fi
    fi
    if [ -s "$work/read-amd64-by-$n.manifest" ] && ! cmp -s "$work/read-amd64-by-$n.manifest" "$work/journal-amd64.manifest"; then
      problems+=("it reads amd64's image differently")
    fi
    if [ -s "$work/journal-$n.img" ]; then
      if ! "$work/portprobe-amd64" -read "$work/journal-$n.img" >"$work/read-$n-by-amd64.manifest" 2>>"$log" ||
        ! cmp -s "$work/read-$n-by-amd64.manifest" "$work/journal-amd64.manifest"; then
        problems+=("amd64 reads its image differently")
      fi
    fi
    notes+=("each reads the other's image")
  fi
  notes+=("e2fsck -fn clean")
  [ -n "$kernel_ok" ] && notes+=("kernel reads the same")
  took=$(awk -v a="$took" -v b="$(since "$start")" 'BEGIN { print a + b }')
  local what
  what="$t portprobe ($(runner_name "$t"))"
  if [ ${#problems[@]} -eq 0 ]; then
    pass "$what: $(IFS=,; echo "${notes[*]}" | sed 's/,/, /g')" "$took"
  else
    fail "$what: $(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g')" "$took" "$log"
  fi
  # amd64's images stay for the others; the rest are done with.
  [ "$t" != linux/amd64 ] && rm -f "$work"/*-"$n".img
}

probe_section() {
  kernel_ok="" kernel_why=""
  if [ "$(id -u)" != 0 ]; then
    kernel_why="not root"
  elif [ ! -e /dev/loop-control ]; then
    kernel_why="no /dev/loop-control"
  elif ! command -v losetup >/dev/null 2>&1; then
    kernel_why="losetup is not installed"
  else
    kernel_ok=1
  fi
  local ready=() t os arch n
  for t in "${probe_targets[@]}"; do
    os=${t%/*} arch=${t#*/}
    n=$(short "$t")
    if ! can_run "$t"; then
      skip "$t portprobe" "$why_not"
      continue
    fi
    if ! GOOS=$os GOARCH=$arch go build -o "$work/portprobe-$n" ./scripts/portprobe >"$work/build-$n.log" 2>&1; then
      # Whether the library builds for a target is cross-build.sh's to
      # judge; here only the probe's own failures count.
      if GOOS=$os GOARCH=$arch go build -o /dev/null . >/dev/null 2>&1; then
        fail "$t portprobe: build" 0 "$work/build-$n.log"
      else
        skip "$t portprobe" "the library does not build for $t: $(grep -m1 -v '^#' "$work/build-$n.log")"
      fi
      continue
    fi
    ready+=("$t")
  done
  [ ${#ready[@]} -gt 0 ] && [ "${ready[0]}" = linux/amd64 ] || {
    skip "portprobe on other platforms" "no amd64 portprobe to compare with"
    return
  }
  # amd64 first: the others compare with it and read its image. Then the
  # others side by side, each checked once its run is done.
  progress "linux/amd64 portprobe"
  probe_run linux/amd64
  endprogress
  probe_check linux/amd64
  local others=("${ready[@]:1}") pids=() running=()
  for t in "${others[@]}"; do
    probe_run "$t" &
    pids+=($!)
    running+=($!)
    if [ ${#running[@]} -ge "$jobs" ]; then
      wait "${running[0]}"
      running=("${running[@]:1}")
    fi
  done
  local i
  for i in "${!others[@]}"; do
    progress "portprobe on ${others[*]:i}"
    wait "${pids[$i]}" 2>/dev/null
    endprogress
    probe_check "${others[$i]}"
  done
  [ -z "$kernel_ok" ] && skip "kernel readback of the images" "$kernel_why"
  rm -f "$work"/*.img
}

# --- the test suites --------------------------------------------------------

# The quick set (see the top).
slow_internal=(TestEditorModel TestEditorImage TestEditorLevels TestEditorWeakHash TestImageHtree TestSynthLookup
  TestRecoverMatchesE2fsck TestDebugfsJournals TestSharedJournalImages TestCrashPoints
  TestUnzeroedDeviceMatchesMke2fs TestMatchesMke2fs TestOptionsMatchMke2fs TestSharedImages TestMkfsImages
  TestIncrementalEqualsRebuild TestMke2fsBlocks)
# The extent package runs on its own: its TestAgainstImages is among the
# slow ones, the inode and blockmap packages' of the name are quick.
slow_extent=(TestCorpus TestAgainstImages TestEditorModel TestEditorOnImage TestEditorDeep)
quick_root=(TestWriteBasic TestChownHighIDs TestFSTest TestReadTrees TestBlockGroupsMatchDumpe2fs TestBuildFromTar
  TestBuildKeepsHoles TestJournalLifecycle TestOrphanFile TestEAInodeCreate TestEAInodeShared
  TestENOSPCGrowingDirectory TestOpenDevice TestDelallocOneExtent TestRefuseUnclean FuzzOpenWalk FuzzOpenWrite)
# The quick set's internal packages: the on-disk structures, the
# allocators, the journal and mkfs; the others are the tests' own tools,
# lock counters and padding, checked on every platform by --full.
quick_internal=(blockmap csum dir ialloc inode jbd2 journal mballoc mkfs orphan super txn xattr)
quick_wasm=(csum extent dir inode super xattr jbd2)
names_regexp() { local IFS='|'; echo "^($*)\$"; }

# run_tests TARGET WHAT ARGS...: go test for TARGET with its runner.
run_tests() {
  local t=$1 what=$2 os=${1%/*} arch=${1#*/} exec_args=() log start
  shift 2
  if [ "$os" = wasip1 ]; then
    exec_args=(-exec "$wasm_exec")
  elif [ -n "${runner[$arch]}" ]; then
    exec_args=(-exec "${runner[$arch]}")
  fi
  log=$(mktemp "$work/test-$(short "$t")-XXXX.log")
  start=$(now)
  if EXT4GO_TEST_NOMOUNT=1 GOOS=$os GOARCH=$arch go test -count=1 "${exec_args[@]}" "$@" >"$log" 2>&1; then
    pass "$t $what ($(runner_name "$t"))" "$(since "$start")"
  else
    fail "$t $what ($(runner_name "$t"))" "$(since "$start")" "$log"
  fi
}

# buildable OS ARCH PKG...: the packages whose tests build for OS/ARCH.
buildable() {
  local os=$1 arch=$2
  shift 2
  for p in "$@"; do
    if GOOS=$os GOARCH=$arch go test -c -o /dev/null "$p" >/dev/null 2>&1; then echo "$p"; fi
  done
}

# target_tests TARGET: its runs, one after the other.
target_tests() {
  local t=$1 internal
  internal=$(go list ./internal/...)
  if [ "${t%/*}" = wasip1 ]; then
    # No exec and no mounts there: the library's own code. Packages whose
    # tests need what wasip1 lacks do not build for it.
    local candidates pkgs names
    if [ "$full" = 1 ]; then
      candidates="$internal github.com/ext4go/ext4go"
    else
      candidates=$(printf 'github.com/ext4go/ext4go/internal/%s\n' "${quick_wasm[@]}")
    fi
    pkgs=$(buildable wasip1 wasm $candidates)
    if [ -z "$pkgs" ]; then
      skip "$t tests" "no package's tests build for wasip1"
      return
    fi
    names=$(echo $pkgs | sed 's|github.com/ext4go/ext4go/internal/||g; s|github.com/ext4go/ext4go|root|g')
    if [ "$full" = 1 ]; then
      run_tests "$t" "packages $names" -timeout 60m $pkgs
    else
      run_tests "$t" "packages $names (-short, quick set)" -short -timeout 20m \
        -skip "$(names_regexp "${slow_internal[@]}" "${slow_extent[@]}")" $pkgs
    fi
    return
  fi
  if [ "$full" = 1 ]; then
    run_tests "$t" "internal packages" -timeout 60m $internal
    run_tests "$t" "root package" -timeout 90m .
  else
    run_tests "$t" "internal packages: ${quick_internal[*]} (-short, quick set)" -short -timeout 20m \
      -skip "$(names_regexp "${slow_internal[@]}")" $(printf './internal/%s ' "${quick_internal[@]}")
    run_tests "$t" "internal/extent (-short, quick set)" -short -timeout 20m \
      -skip "$(names_regexp "${slow_extent[@]}")" ./internal/extent
    run_tests "$t" "root package image-file tests (-short, quick set)" -short -timeout 20m \
      -run "$(names_regexp "${quick_root[@]}")" .
  fi
}

tests_section() {
  local targets=(linux/386 linux/arm64 linux/s390x wasip1/wasm) t order=() pids=() running=() i
  [ "$full" = 1 ] && targets=(linux/386 linux/arm linux/arm64 linux/s390x wasip1/wasm)
  for t in "${targets[@]}"; do
    if ! can_run "$t"; then
      skip "$t tests" "$why_not"
      continue
    fi
    target_tests "$t" >"$work/tests-$(short "$t").out" 2>&1 &
    pids+=($!)
    running+=($!)
    order+=("$t")
    if [ ${#running[@]} -ge "$jobs" ]; then
      wait "${running[0]}"
      running=("${running[@]:1}")
    fi
  done
  # Each platform's lines once it is done, in the order above.
  for i in "${!order[@]}"; do
    progress "tests of ${order[*]:i}"
    wait "${pids[$i]}" 2>/dev/null
    endprogress
    cat "$work/tests-$(short "${order[$i]}").out"
  done
}

# --- the CLI round trip ----------------------------------------------------

# cli_run TARGET: the CLI built for TARGET makes an image from a host tree
# with mkfs -d and copies it back out with get; the copy must equal the
# tree (scripts/crosstree/crosstree.py: types, modes, owners, sizes, times
# to the nanosecond, hard links, symlinks, devices, sparse files, user.*
# xattrs, data), and e2fsck -fn must find the image clean.
cli_run() {
  local t=$1 n arch=${1#*/} run start log problems=()
  n=$(short "$t")
  run=${runner[$arch]}
  log=$work/cli-$n.log
  start=$(now)
  if ! GOOS=linux GOARCH=$arch go build -o "$work/ext4go-$n" ./cmd/ext4go >"$log" 2>&1; then
    fail "$t CLI mkfs -d and get: build" "$(since "$start")" "$log"
    return
  fi
  rm -rf "$work/cli-$n"
  if ! python3 scripts/crosstree/crosstree.py make "$work/cli-$n/src" >>"$log" 2>&1; then
    skip "$t CLI mkfs -d and get" "the host tree could not be made (python3, root for devices and owners: $(tail -n 1 "$log"))"
    return
  fi
  if ! $run "$work/ext4go-$n" mkfs -q -d "$work/cli-$n/src" "$work/cli-$n/img" >>"$log" 2>&1; then
    problems+=("mkfs -d failed")
  elif ! e2fsck -fn "$work/cli-$n/img" >>"$log" 2>&1; then
    problems+=("e2fsck -fn finds problems in the image")
  elif ! $run "$work/ext4go-$n" get "$work/cli-$n/img" / "$work/cli-$n/out" >>"$log" 2>&1; then
    problems+=("get failed")
  else
    python3 scripts/crosstree/crosstree.py manifest "$work/cli-$n/src" >"$work/cli-$n/src.manifest"
    python3 scripts/crosstree/crosstree.py manifest "$work/cli-$n/out" >"$work/cli-$n/out.manifest"
    if ! diff "$work/cli-$n/src.manifest" "$work/cli-$n/out.manifest" >>"$log"; then
      problems+=("the tree get gave back differs from the one mkfs -d read")
    fi
  fi
  if [ ${#problems[@]} -eq 0 ]; then
    pass "$t CLI ($(runner_name "$t")): mkfs -d of a host tree, e2fsck -fn clean, get gives the tree back unchanged ($(wc -l <"$work/cli-$n/src.manifest") entries)" "$(since "$start")"
  else
    fail "$t CLI ($(runner_name "$t")): $(IFS=';'; echo "${problems[*]}" | sed 's/;/; /g')" "$(since "$start")" "$log"
  fi
  rm -rf "$work/cli-$n"
}

cli_section() {
  local targets=(linux/amd64 linux/386 linux/s390x) t
  [ "$full" = 1 ] && targets=(linux/amd64 linux/386 linux/arm linux/arm64 linux/s390x)
  if ! command -v python3 >/dev/null 2>&1; then
    skip "CLI mkfs -d and get round trip" "python3 is not installed"
    return
  fi
  for t in "${targets[@]}"; do
    if ! can_run "$t"; then
      skip "$t CLI mkfs -d and get" "$why_not"
      continue
    fi
    progress "$t CLI mkfs -d and get"
    cli_run "$t"
    endprogress
  done
}

[ "$do_probe" = 1 ] && probe_section
[ "$do_probe" = 1 ] && cli_section
[ "$do_tests" = 1 ] && tests_section

n_pass=$(grep -c '^PASS' "$results")
n_fail=$(grep -c '^FAIL' "$results")
n_skip=$(grep -c '^SKIP' "$results")
if [ "$n_fail" -eq 0 ]; then
  echo "cross-test: every check that ran passed ($n_pass checks; $n_skip skipped)"
  exit 0
fi
echo "cross-test: $n_fail of $((n_pass + n_fail)) checks failed ($n_skip skipped)"
exit 1
